// The bookkeeping of paged KV memory, with no model and no storage: a fixed number of
// blocks, each holding the keys/values of block_size consecutive positions of one
// sequence. Blocks are reference counted (a prompt's blocks are shared by the n samples
// of a request and by requests whose prompts start alike) and a full block can carry the
// hash of its content (xxHash of the parent block's hash and the block's token ids), so
// a later request with the same prefix finds it again: automatic prefix caching, as in
// vLLM.
//
// Free blocks sit in one queue in the order they were freed. Allocation takes the head,
// the least recently freed block; if that block still held cached content, the content
// is evicted then (LRU eviction). A cached block that a lookup revives leaves the queue
// wherever it was. Releasing a sequence's blocks in reverse order (tail first) makes its
// last blocks, the least likely to be shared, the first to go.
//
// Copy-on-write: a writer that must append into a block others also hold calls
// make_unique(), which hands it a fresh block (the caller copies the filled slots).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace pagoda {

using BlockId = int32_t;
using BlockHash = uint64_t;
// A table entry whose block was released early: a sliding-window layer group's block
// that left the window (kv_layout.h).
inline constexpr BlockId kNoBlock = -1;

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  // Blocks allocate() can hand out now: unreferenced ones, with or without cached content.
  int32_t num_free() const { return free_count_; }
  // Of those, the ones still holding cached content.
  int32_t num_cached_free() const { return cached_free_; }
  int32_t num_used() const { return num_blocks() - free_count_; }

  // n fresh blocks, each with ref count 1 and no hash, appended to `out`; evicts the
  // cached content of the blocks it takes. Takes nothing and returns false when fewer
  // than n blocks are free.
  bool allocate(int32_t n, std::vector<BlockId>& out);

  // One more holder of block b (a sequence sharing it). A free cached block leaves the
  // free queue.
  void retain(BlockId b);
  // One holder fewer; at zero the block joins the tail of the free queue, keeping its
  // cached content (if any) until an allocation takes it.
  void release(BlockId b);
  // Releases the blocks of a table from its end to its start (see above), skipping
  // kNoBlock entries.
  void release_all(std::span<const BlockId> table);
  int32_t ref_count(BlockId b) const { return blocks_[b].ref; }

  // Prefix caching. The hash of a full block's tokens chained to its parent's hash (0 for
  // the first block of a sequence).
  static BlockHash hash_tokens(BlockHash parent, std::span<const int32_t> tokens);
  // The content hash of the same tokens in layer group g (kv_layout.h): the groups hold
  // different layers, so their blocks must not be found for one another. Group 0 keeps
  // the token hash.
  static BlockHash group_hash(BlockHash h, int32_t g);
  // Marks a full block (held by the caller) as holding the content `h`. If another block
  // already holds `h`, the map keeps that one and b stays uncached.
  void set_hash(BlockId b, BlockHash h);
  std::optional<BlockHash> hash_of(BlockId b) const;
  // The block holding content `h`, if any (held or free). Counts a query and, when
  // found, a hit. The caller retains the block to use it.
  std::optional<BlockId> lookup(BlockHash h);
  // Prefix cache statistics, counted per block looked up.
  int64_t queries() const { return queries_; }
  int64_t hits() const { return hits_; }
  // Drops every cached hash (free cached blocks become plain free blocks).
  void reset_prefix_cache();

  // Copy-on-write: if b has other holders, allocates a fresh block, releases the
  // caller's hold on b and returns the new block (the caller copies the content); if the
  // caller is b's only holder, returns b. nullopt when a copy is needed but no block is
  // free (b is untouched).
  std::optional<BlockId> make_unique(BlockId b);

 private:
  struct Block {
    int32_t ref = 0;
    BlockId prev = -1, next = -1;  // links in the free queue
    bool in_free = false;
    bool has_hash = false;
    BlockHash hash = 0;
  };
  // The head of the free queue, now held once (its cached content evicted).
  BlockId take_free();
  void push_free(BlockId b);
  void unlink_free(BlockId b);
  void drop_hash(BlockId b);

  int32_t block_size_;
  std::vector<Block> blocks_;
  BlockId head_ = -1, tail_ = -1;
  int32_t free_count_ = 0;
  int32_t cached_free_ = 0;
  std::unordered_map<BlockHash, BlockId> cached_;
  int64_t queries_ = 0;
  int64_t hits_ = 0;
};

}  // namespace pagoda
