#include "tokenizer/precompiled_charsmap.h"

#include <cstring>

namespace pagoda {
namespace {

uint32_t read_le32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
}

// Darts-clone unit fields.
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFFu); }
bool unit_has_leaf(uint32_t u) { return ((u >> 8) & 1u) != 0; }
uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

}  // namespace

Result<PrecompiledCharsmap> PrecompiledCharsmap::parse(std::string_view blob) {
  if (blob.size() < 4) return error("precompiled charsmap is too small ({} bytes) for its size header", blob.size());
  const uint32_t trie_bytes = read_le32(blob.data());
  if (uint64_t{trie_bytes} + 4 >= blob.size()) {
    return error("precompiled charsmap's trie ({} bytes) does not fit in its {} bytes with replacements",
                 trie_bytes, blob.size());
  }
  PrecompiledCharsmap m;
  m.units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < m.units_.size(); ++i) m.units_[i] = read_le32(blob.data() + 4 + 4 * i);
  m.replacements_.assign(blob.substr(4 + size_t{trie_bytes}));
  return m;
}

PrecompiledCharsmap::Match PrecompiledCharsmap::longest_match(std::string_view input) const {
  if (units_.empty()) return {};
  const size_t n_units = units_.size();
  size_t best_len = 0;
  uint32_t best_value = 0;
  uint32_t node = unit_offset(units_[0]);
  for (size_t i = 0; i < input.size(); ++i) {
    const auto c = static_cast<unsigned char>(input[i]);
    if (c == 0) break;
    node ^= c;
    if (node >= n_units) break;
    const uint32_t u = units_[node];
    if (unit_label(u) != c) break;
    node ^= unit_offset(u);
    if (unit_has_leaf(u)) {
      if (node >= n_units) break;
      best_len = i + 1;
      best_value = unit_value(units_[node]);
    }
  }
  if (best_len == 0 || best_value >= replacements_.size()) return {};
  const size_t end = replacements_.find('\0', best_value);
  if (end == std::string::npos) return {};
  return {std::string_view(replacements_).substr(best_value, end - best_value), best_len};
}

}  // namespace pagoda
