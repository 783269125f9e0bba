#include "tokenizer/byte_unicode.h"

#include <array>

namespace pagoda {
namespace {

// Printable Latin-1 bytes keep their own code point; the other 68 bytes (controls,
// space, DEL, NBSP, soft hyphen, ...) are moved to U+0100.. in byte order, so every
// byte becomes a visible, non-space character. The largest code point is U+0143.
constexpr bool keeps_itself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr uint32_t kMaxCodepoint = 0x144;

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, kMaxCodepoint> to_byte{};
};

constexpr Tables make_tables() {
  Tables t;
  for (auto& x : t.to_byte) x = -1;
  uint32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    t.to_cp[b] = keeps_itself(b) ? static_cast<uint32_t>(b) : next++;
    t.to_byte[t.to_cp[b]] = static_cast<int16_t>(b);
  }
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(kTables.to_cp[0x20] == 0x120, "space maps to U+0120 (Ġ)");
static_assert(kTables.to_cp[0x0A] == 0x10A, "newline maps to U+010A (Ċ)");

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return kTables.to_cp[b]; }

int codepoint_to_byte(uint32_t cp) { return cp < kMaxCodepoint ? kTables.to_byte[cp] : -1; }

}  // namespace pagoda
