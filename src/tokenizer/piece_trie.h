// A byte trie over a set of token pieces, flat in a few arrays (no per-node allocation),
// for finding every piece that starts at one position in a single walk: the Unigram
// tokenizer's Viterbi lattice and its user-defined-token matcher. Immutable once built.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda {

class PieceTrie {
 public:
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kNone = UINT32_MAX;

  PieceTrie();
  // (text, id) pairs; the views need only live during construction. Empty texts are
  // skipped. A text given twice keeps the id given last, as llama.cpp's trie does.
  explicit PieceTrie(std::vector<std::pair<std::string_view, int32_t>> entries);

  // The node reached from `node` by `byte`, or kNone.
  uint32_t child(uint32_t node, uint8_t byte) const {
    if (node == kRoot) return root_[byte];
    const Node& n = nodes_[node];
    const uint8_t* first = labels_.data() + n.first_edge;
    const uint8_t* last = first + n.n_edges;
    // Most nodes have a child or two: a scan beats the binary search there.
    const uint8_t* it = first;
    if (n.n_edges <= 8) {
      while (it != last && *it != byte) ++it;
    } else {
      it = std::lower_bound(first, last, byte);
    }
    return (it != last && *it == byte) ? targets_[static_cast<size_t>(it - labels_.data())] : kNone;
  }
  // The id of the piece that ends at `node`, or -1.
  int32_t value(uint32_t node) const { return nodes_[node].value; }
  bool empty() const { return nodes_.size() == 1; }

  // Bytes of the longest prefix of `s` that is a path from the root, whether or not a
  // piece ends there (what llama.cpp's naive_trie::get_longest_prefix returns).
  size_t longest_path(std::string_view s) const;

 private:
  struct Node {
    uint32_t first_edge = 0, n_edges = 0;  // children: labels_/targets_[first_edge, +n_edges)
    int32_t value = -1;
  };
  std::vector<Node> nodes_;
  std::vector<uint8_t> labels_;    // sorted within each node
  std::vector<uint32_t> targets_;
  std::array<uint32_t, 256> root_;  // the root's children, one lookup
};

}  // namespace pagoda
