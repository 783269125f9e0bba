#include "constrain/utf8_guard.h"

#include <cmath>
#include <limits>

namespace pagoda {

namespace {

// States: 0 boundary; 1, 2, 3: that many continuation bytes (80..BF) still due; 4: after
// E0 (next A0..BF); 5: after ED (next 80..9F, no surrogates); 6: after F0 (next 90..BF);
// 7: after F4 (next 80..8F, nothing past U+10FFFF); 8: ill-formed (absorbing).
uint8_t step(uint8_t s, uint8_t b) {
  auto in = [b](int lo, int hi) { return b >= lo && b <= hi; };
  switch (s) {
    case 0:
      if (b < 0x80) return 0;
      if (in(0xC2, 0xDF)) return 1;
      if (b == 0xE0) return 4;
      if (in(0xE1, 0xEC) || in(0xEE, 0xEF)) return 2;
      if (b == 0xED) return 5;
      if (b == 0xF0) return 6;
      if (in(0xF1, 0xF3)) return 3;
      if (b == 0xF4) return 7;
      return 8;
    case 1: return in(0x80, 0xBF) ? 0 : 8;
    case 2: return in(0x80, 0xBF) ? 1 : 8;
    case 3: return in(0x80, 0xBF) ? 2 : 8;
    case 4: return in(0xA0, 0xBF) ? 1 : 8;
    case 5: return in(0x80, 0x9F) ? 1 : 8;
    case 6: return in(0x90, 0xBF) ? 2 : 8;
    case 7: return in(0x80, 0x8F) ? 2 : 8;
    default: return 8;
  }
}

constexpr float kRefused = -std::numeric_limits<float>::infinity();

}  // namespace

uint8_t Utf8Guard::run(uint8_t state, std::string_view bytes) {
  for (unsigned char b : bytes) {
    state = step(state, b);
    if (state == kInvalid) break;
  }
  return state;
}

Utf8Guard::Utf8Guard(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  for (size_t id = 0; id < bytes_.size(); ++id)
    if (run(kBoundary, bytes_[id]) == kInvalid) bad_at_boundary_.push_back(static_cast<int32_t>(id));
}

void Utf8Guard::mask(uint8_t state, std::span<float> logits) const {
  const size_t n = std::min(logits.size(), bytes_.size());
  if (state == kBoundary) {
    for (int32_t id : bad_at_boundary_)
      if (static_cast<size_t>(id) < n) logits[id] = kRefused;
    return;
  }
  for (size_t id = 0; id < n; ++id)
    if (logits[id] != kRefused && (bytes_[id].empty() || run(state, bytes_[id]) == kInvalid)) logits[id] = kRefused;
}

uint8_t Utf8Guard::after(uint8_t state, int32_t token) const {
  if (token < 0 || static_cast<size_t>(token) >= bytes_.size()) return state;
  const uint8_t next = run(state, bytes_[token]);
  return next == kInvalid ? kBoundary : next;
}

}  // namespace pagoda
