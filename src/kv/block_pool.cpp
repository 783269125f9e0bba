#include "kv/block_pool.h"

#include <cassert>

// XXH3_state_t is an incomplete type unless static linking is declared; we keep it on the
// stack rather than heap-allocating one per hash.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace pagoda {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), blocks_(static_cast<size_t>(num_blocks)) {
  // Block ids in order, so a fresh pool hands out 0, 1, 2, ...
  for (BlockId b = 0; b < num_blocks; ++b) push_free(b);
}

void BlockPool::push_free(BlockId b) {
  Block& blk = blocks_[b];
  assert(!blk.in_free);
  blk.in_free = true;
  blk.prev = tail_;
  blk.next = -1;
  if (tail_ >= 0) blocks_[tail_].next = b;
  else head_ = b;
  tail_ = b;
  ++free_count_;
  if (blk.has_hash) ++cached_free_;
}

void BlockPool::unlink_free(BlockId b) {
  Block& blk = blocks_[b];
  assert(blk.in_free);
  if (blk.prev >= 0) blocks_[blk.prev].next = blk.next;
  else head_ = blk.next;
  if (blk.next >= 0) blocks_[blk.next].prev = blk.prev;
  else tail_ = blk.prev;
  blk.prev = blk.next = -1;
  blk.in_free = false;
  --free_count_;
  if (blk.has_hash) --cached_free_;
}

void BlockPool::drop_hash(BlockId b) {
  Block& blk = blocks_[b];
  if (!blk.has_hash) return;
  auto it = cached_.find(blk.hash);
  if (it != cached_.end() && it->second == b) cached_.erase(it);
  if (blk.in_free) --cached_free_;
  blk.has_hash = false;
  blk.hash = 0;
}

BlockId BlockPool::take_free() {
  const BlockId b = head_;
  unlink_free(b);
  drop_hash(b);  // evicts the least recently freed cached content
  blocks_[b].ref = 1;
  return b;
}

bool BlockPool::allocate(int32_t n, std::vector<BlockId>& out) {
  if (n < 0 || n > free_count_) return false;
  for (int32_t i = 0; i < n; ++i) out.push_back(take_free());
  return true;
}

void BlockPool::retain(BlockId b) {
  Block& blk = blocks_[b];
  if (blk.ref == 0) unlink_free(b);
  ++blk.ref;
}

void BlockPool::release(BlockId b) {
  Block& blk = blocks_[b];
  assert(blk.ref > 0);
  if (--blk.ref == 0) push_free(b);
}

void BlockPool::release_all(std::span<const BlockId> table) {
  for (size_t i = table.size(); i-- > 0;)
    if (table[i] != kNoBlock) release(table[i]);
}

BlockHash BlockPool::group_hash(BlockHash h, int32_t g) {
  if (g == 0) return h;
  // Token hashes cover at least 12 bytes (parent hash and one token) with seed 0; the
  // group's seed over the 8 bytes of h alone cannot reproduce one of them by layout (as
  // hashing {h, g} did: the same bytes as a 2-token block [g, 0] after h).
  return XXH3_64bits_withSeed(&h, sizeof(h), 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(g));
}

BlockHash BlockPool::hash_tokens(BlockHash parent, std::span<const int32_t> tokens) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, &parent, sizeof(parent));
  XXH3_64bits_update(&state, tokens.data(), tokens.size_bytes());
  return XXH3_64bits_digest(&state);
}

void BlockPool::set_hash(BlockId b, BlockHash h) {
  Block& blk = blocks_[b];
  if (blk.has_hash) return;
  auto [it, inserted] = cached_.emplace(h, b);
  if (!inserted) return;
  blk.has_hash = true;
  blk.hash = h;
  if (blk.in_free) ++cached_free_;
}

std::optional<BlockHash> BlockPool::hash_of(BlockId b) const {
  if (!blocks_[b].has_hash) return std::nullopt;
  return blocks_[b].hash;
}

std::optional<BlockId> BlockPool::lookup(BlockHash h) {
  ++queries_;
  auto it = cached_.find(h);
  if (it == cached_.end()) return std::nullopt;
  ++hits_;
  return it->second;
}

void BlockPool::reset_prefix_cache() {
  for (BlockId b = 0; b < num_blocks(); ++b) drop_hash(b);
  cached_.clear();
}

std::optional<BlockId> BlockPool::make_unique(BlockId b) {
  if (blocks_[b].ref <= 1) return b;
  if (free_count_ == 0) return std::nullopt;
  const BlockId fresh = take_free();
  release(b);
  return fresh;
}

}  // namespace pagoda
