#include "tokenizer/piece_trie.h"

#include <algorithm>

namespace pagoda {

PieceTrie::PieceTrie() : nodes_(1) { root_.fill(kNone); }

PieceTrie::PieceTrie(std::vector<std::pair<std::string_view, int32_t>> entries) : PieceTrie() {
  std::erase_if(entries, [](const auto& e) { return e.first.empty(); });
  // Stable: equal texts keep their given order, so the last of a run is the one given last.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Breadth first: every node's children are created together, so their edges are
  // contiguous. Each item is a node and the run of entries below it; they share the
  // node's `depth` bytes.
  struct Item {
    uint32_t node, lo, hi, depth;
  };
  std::vector<Item> queue;
  queue.push_back({kRoot, 0, static_cast<uint32_t>(entries.size()), 0});
  for (size_t q = 0; q < queue.size(); ++q) {
    auto [node, lo, hi, depth] = queue[q];
    while (lo < hi && entries[lo].first.size() == depth) nodes_[node].value = entries[lo++].second;
    const auto first_edge = static_cast<uint32_t>(labels_.size());
    while (lo < hi) {
      const auto byte = static_cast<uint8_t>(entries[lo].first[depth]);
      uint32_t end = lo + 1;
      while (end < hi && static_cast<uint8_t>(entries[end].first[depth]) == byte) ++end;
      const auto child = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
      labels_.push_back(byte);
      targets_.push_back(child);
      if (node == kRoot) root_[byte] = child;
      queue.push_back({child, lo, end, depth + 1});
      lo = end;
    }
    nodes_[node].first_edge = first_edge;
    nodes_[node].n_edges = static_cast<uint32_t>(labels_.size()) - first_edge;
  }
}

size_t PieceTrie::longest_path(std::string_view s) const {
  uint32_t node = kRoot;
  size_t n = 0;
  for (; n < s.size(); ++n) {
    node = child(node, static_cast<uint8_t>(s[n]));
    if (node == kNone) break;
  }
  return n;
}

}  // namespace pagoda
