// How the layers of a model share KV blocks. When every layer attends to all earlier
// positions, one block table per sequence serves them all and a block holds every
// layer's rows for its positions. A model that mixes sliding-window and full-attention
// layers (Gemma 3: five layers with a 512-position window for each global one) would
// waste most of such blocks at long context, since a windowed layer never reads a
// position again once it has left the window. So the layers are split into groups of one
// kind (one window) and of equal size; each group has its own block table per sequence,
// a block holds one group's layers, and a windowed group's blocks are released as they
// fall out of the window. This is vLLM's hybrid KV cache manager; equal group sizes keep
// one pool of interchangeable blocks, so no memory split between kinds must be guessed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

class KvLayout {
 public:
  // Every layer in one group, without a window: one table, nothing released early.
  explicit KvLayout(int32_t n_layer = 0);
  // windows[l]: layer l's sliding window in positions (0: full attention). Layers of one
  // window are cut, in order, into groups of the greatest common divisor of the kinds'
  // layer counts.
  static KvLayout from_windows(std::span<const int32_t> windows);

  int32_t n_layer() const { return static_cast<int32_t>(group_of_.size()); }
  int32_t n_groups() const { return static_cast<int32_t>(windows_.size()); }
  // Layers whose rows one block holds.
  int32_t layers_per_block() const { return layers_per_block_; }
  int32_t group_of(int32_t layer) const { return group_of_[layer]; }
  // The layer's place among its group's layers, which is its place within a block.
  int32_t slot_of(int32_t layer) const { return slot_of_[layer]; }
  // Group g's window (0: full attention).
  int32_t window(int32_t g) const { return windows_[g]; }
  bool has_windows() const;

  // The first block of group g a sequence must still hold to compute tokens from
  // position pos on: earlier ones are out of the window of every such token.
  int32_t first_live_block(int32_t g, int32_t pos, int32_t block_size) const;
  // The most blocks one sequence of `len` positions holds over all groups while it is
  // computed in pieces of at most `chunk` tokens.
  int64_t max_blocks_for(int64_t len, int32_t block_size, int32_t chunk) const;
  // The longest sequence, at most `cap` positions, whose max_blocks_for fits in `blocks`.
  int64_t longest_fitting(int64_t blocks, int32_t block_size, int32_t chunk, int64_t cap) const;

 private:
  std::vector<int32_t> windows_;   // per group
  std::vector<int32_t> group_of_;  // per layer
  std::vector<int32_t> slot_of_;   // per layer
  int32_t layers_per_block_ = 0;
};

}  // namespace pagoda
