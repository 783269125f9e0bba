#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace pagoda {

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) {
  nodes_.emplace_back();
  for (size_t id = 0; id < vocab.types.size() && id < vocab.pieces.size(); ++id) {
    const TokenType t = vocab.types[id];
    const bool always = t == TokenType::kUserDefined;
    const bool special = t == TokenType::kControl || t == TokenType::kUnknown;
    const std::string& text = vocab.pieces[id];
    if ((!always && !special) || text.empty()) continue;
    uint32_t node = 0;
    for (unsigned char b : text) {
      uint32_t c = child(node, b);
      if (c == 0) {
        c = static_cast<uint32_t>(nodes_.size());
        auto& next = nodes_[node].next;
        next.insert(std::lower_bound(next.begin(), next.end(), std::make_pair(b, 0u)),
                    {b, c});
        nodes_.emplace_back();
      }
      node = c;
    }
    // Duplicate texts keep the lowest id, the one a reader of the vocabulary finds first.
    int32_t& slot = always ? nodes_[node].always : nodes_[node].special;
    if (slot < 0) slot = static_cast<int32_t>(id);
    any_always_ = any_always_ || always;
  }
}

uint32_t SpecialTokenMatcher::child(uint32_t node, uint8_t b) const {
  const auto& next = nodes_[node].next;
  auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(b, 0u));
  return (it != next.end() && it->first == b) ? it->second : 0;
}

std::vector<Fragment> SpecialTokenMatcher::split(std::string_view text, bool parse_special) const {
  std::vector<Fragment> out;
  const uint32_t n = static_cast<uint32_t>(text.size());
  if (!parse_special && !any_always_) {
    if (n > 0) out.push_back({-1, 0, n});
    return out;
  }
  uint32_t text_start = 0;
  for (uint32_t i = 0; i < n;) {
    int32_t best = -1;
    uint32_t best_len = 0;
    uint32_t node = 0;
    for (uint32_t k = i; k < n; ++k) {
      node = child(node, static_cast<uint8_t>(text[k]));
      if (node == 0) break;
      const Node& nd = nodes_[node];
      const int32_t id = nd.always >= 0 ? nd.always : (parse_special ? nd.special : -1);
      if (id >= 0) {
        best = id;
        best_len = k + 1 - i;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    if (i > text_start) out.push_back({-1, text_start, i});
    out.push_back({best, i, i + best_len});
    i += best_len;
    text_start = i;
  }
  if (n > text_start) out.push_back({-1, text_start, n});
  return out;
}

}  // namespace pagoda
