// Checks BlockPool against the contract in src/kv/block_pool.h with exact block ids: the
// order in which blocks are handed out (fresh ids first, then least recently freed),
// all-or-nothing allocation, reference counting, the prefix cache (chained content
// hashes, lookups and their statistics, LRU eviction of free cached blocks, revival by
// retain, first-holder-wins on duplicate content) and copy-on-write. A randomized test
// then drives thousands of mixed operations against a small reference model of the pool
// and compares every block's state after each one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "kv/block_pool.h"

namespace pagoda {
namespace {

using Ids = std::vector<BlockId>;

// Allocation whose failure would make the rest of a test meaningless.
Ids take(BlockPool& pool, int32_t n) {
  Ids out;
  EXPECT_TRUE(pool.allocate(n, out)) << "allocate(" << n << ") with " << pool.num_free() << " free";
  return out;
}

BlockHash content(int32_t seed, BlockHash parent = 0) {
  const int32_t tokens[4] = {seed, seed + 1, seed + 2, seed + 3};
  return BlockPool::hash_tokens(parent, tokens);
}

// ---------------------------------------------------------------------------------------
// Allocation and release order

TEST(BlockPool, FreshPoolHandsOutBlocksInIdOrder) {
  BlockPool pool(8, 16);
  EXPECT_EQ(pool.num_blocks(), 8);
  EXPECT_EQ(pool.block_size(), 16);
  EXPECT_EQ(pool.num_free(), 8);
  EXPECT_EQ(pool.num_used(), 0);
  EXPECT_EQ(pool.num_cached_free(), 0);

  EXPECT_EQ(take(pool, 3), (Ids{0, 1, 2}));
  EXPECT_EQ(take(pool, 1), (Ids{3}));
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_used(), 4);
  for (BlockId b = 0; b < 4; ++b) EXPECT_EQ(pool.ref_count(b), 1) << b;
  for (BlockId b = 4; b < 8; ++b) EXPECT_EQ(pool.ref_count(b), 0) << b;
}

TEST(BlockPool, AllocateAppendsToTheCallersTable) {
  // A sequence grows its block table in place, so earlier entries must survive.
  BlockPool pool(4, 16);
  Ids table = {42};
  ASSERT_TRUE(pool.allocate(2, table));
  EXPECT_EQ(table, (Ids{42, 0, 1}));
}

TEST(BlockPool, AllocateZeroSucceedsAndTakesNothing) {
  BlockPool pool(2, 16);
  Ids out;
  EXPECT_TRUE(pool.allocate(0, out));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockPool, AllocateFailsAtomicallyWhenTooFewBlocksAreFree) {
  BlockPool pool(4, 16);
  EXPECT_EQ(take(pool, 3), (Ids{0, 1, 2}));

  Ids out = {7};
  EXPECT_FALSE(pool.allocate(2, out));
  EXPECT_EQ(out, (Ids{7}));  // nothing appended
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.num_used(), 3);
  EXPECT_EQ(pool.ref_count(3), 0);

  EXPECT_FALSE(pool.allocate(5, out));  // more than the whole pool
  EXPECT_EQ(take(pool, 1), (Ids{3}));   // the one free block is still the next one
  EXPECT_FALSE(pool.allocate(1, out));
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.num_used(), 4);
}

TEST(BlockPool, FailedAllocationEvictsNoCachedContent) {
  // A request that does not fit must not destroy the cache for the ones that do.
  BlockPool pool(3, 16);
  Ids ids = take(pool, 3);
  pool.set_hash(0, content(1));
  pool.set_hash(1, content(2));
  pool.release(0);
  pool.release(1);
  Ids out;
  EXPECT_FALSE(pool.allocate(3, out));
  EXPECT_EQ(pool.num_cached_free(), 2);
  EXPECT_EQ(pool.lookup(content(1)), 0);
  EXPECT_EQ(pool.lookup(content(2)), 1);
}

TEST(BlockPool, ReleasedBlockJoinsTheTailOfTheFreeQueue) {
  BlockPool pool(6, 16);
  EXPECT_EQ(take(pool, 3), (Ids{0, 1, 2}));
  pool.release(1);
  EXPECT_EQ(pool.ref_count(1), 0);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_used(), 2);
  // Never-used blocks 3..5 were freed (at construction) before block 1.
  EXPECT_EQ(take(pool, 4), (Ids{3, 4, 5, 1}));
}

TEST(BlockPool, AllocationTakesTheLeastRecentlyFreedFirst) {
  BlockPool pool(4, 16);
  EXPECT_EQ(take(pool, 4), (Ids{0, 1, 2, 3}));
  pool.release(2);
  pool.release(0);
  pool.release(3);
  EXPECT_EQ(take(pool, 1), (Ids{2}));
  pool.release(1);
  EXPECT_EQ(take(pool, 3), (Ids{0, 3, 1}));
}

TEST(BlockPool, BlockIsFreedOnlyWhenItsLastHolderReleasesIt) {
  BlockPool pool(2, 16);
  EXPECT_EQ(take(pool, 1), (Ids{0}));
  pool.retain(0);
  pool.retain(0);
  EXPECT_EQ(pool.ref_count(0), 3);
  EXPECT_EQ(pool.num_used(), 1);
  pool.release(0);
  pool.release(0);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(0);
  EXPECT_EQ(pool.ref_count(0), 0);
  EXPECT_EQ(pool.num_free(), 2);
  // 0 went behind the never-used block 1.
  EXPECT_EQ(take(pool, 2), (Ids{1, 0}));
}

TEST(BlockPool, ReleaseAllFreesTailFirst) {
  BlockPool pool(4, 16);
  const Ids table = take(pool, 4);
  pool.release_all(table);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(take(pool, 4), (Ids{3, 2, 1, 0}));
}

TEST(BlockPool, ReleaseAllEvictsASequencesLastBlockBeforeItsFirst) {
  // The first blocks of a prompt are the ones other requests share, so they should
  // outlive the tail in the cache.
  BlockPool pool(4, 16);
  const Ids table = take(pool, 4);
  BlockHash h[4];
  BlockHash parent = 0;
  for (int i = 0; i < 4; ++i) {
    h[i] = parent = content(10 * i, parent);
    pool.set_hash(table[i], h[i]);
  }
  pool.release_all(table);
  EXPECT_EQ(pool.num_cached_free(), 4);

  EXPECT_EQ(take(pool, 1), (Ids{3}));
  EXPECT_EQ(pool.lookup(h[3]), std::nullopt);
  EXPECT_EQ(pool.lookup(h[2]), 2);
  EXPECT_EQ(take(pool, 2), (Ids{2, 1}));
  EXPECT_EQ(pool.lookup(h[0]), 0);
  EXPECT_EQ(pool.lookup(h[1]), std::nullopt);
  EXPECT_EQ(pool.num_cached_free(), 1);
}

TEST(BlockPool, ReleaseAllOfSharedTableOnlyDropsOneReference) {
  BlockPool pool(3, 16);
  const Ids table = take(pool, 2);
  for (BlockId b : table) pool.retain(b);
  pool.release_all(table);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.num_free(), 1);
}

// ---------------------------------------------------------------------------------------
// Content hashes

TEST(BlockPool, HashTokensIsDeterministic) {
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  EXPECT_EQ(BlockPool::hash_tokens(0, tokens), BlockPool::hash_tokens(0, tokens));
  const std::vector<int32_t> copy = tokens;  // same values, different storage
  EXPECT_EQ(BlockPool::hash_tokens(77, tokens), BlockPool::hash_tokens(77, copy));
}

TEST(BlockPool, HashTokensIsChainedToTheParent) {
  // The same tokens after a different prefix are different KV content.
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const BlockHash a = BlockPool::hash_tokens(0, tokens);
  const BlockHash b = BlockPool::hash_tokens(1, tokens);
  const BlockHash c = BlockPool::hash_tokens(a, tokens);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, c);
}

TEST(BlockPool, HashTokensDiffersForDifferentTokens) {
  const std::vector<int32_t> base = {1, 2, 3, 4};
  const std::vector<int32_t> changed = {1, 2, 3, 5};
  const std::vector<int32_t> swapped = {2, 1, 3, 4};
  const std::vector<int32_t> longer = {1, 2, 3, 4, 0};
  const BlockHash h = BlockPool::hash_tokens(0, base);
  EXPECT_NE(h, BlockPool::hash_tokens(0, changed));
  EXPECT_NE(h, BlockPool::hash_tokens(0, swapped));
  EXPECT_NE(h, BlockPool::hash_tokens(0, longer));
}

TEST(BlockPool, HashTokensHasNoCollisionsOverManySmallBlocks) {
  std::vector<BlockHash> seen;
  for (int32_t a = 0; a < 32; ++a)
    for (int32_t b = 0; b < 32; ++b) {
      const int32_t tokens[2] = {a, b};
      seen.push_back(BlockPool::hash_tokens(0, tokens));
      seen.push_back(BlockPool::hash_tokens(seen.front(), tokens));
    }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());
}

// A layer group's hash of a block must collide neither with another group's nor with the
// token hash of any block, whatever the block size (hashing {h, g} as 16 bytes equalled
// the token hash of the 2-token block [g, 0] after h).
TEST(BlockPool, GroupHashesStayApartFromEachOtherAndFromTokenHashes) {
  std::vector<BlockHash> seen;
  for (BlockHash h : {BlockHash{0}, BlockHash{1}, BlockPool::hash_tokens(0, std::vector<int32_t>{5, 6})}) {
    for (int32_t g = 0; g < 40; ++g) seen.push_back(BlockPool::group_hash(h, g));
    for (int32_t a = 0; a < 40; ++a)
      for (int32_t b : {0, 1, 7}) {
        const int32_t one[1] = {a};
        const int32_t two[2] = {a, b};
        seen.push_back(BlockPool::hash_tokens(h, one));
        seen.push_back(BlockPool::hash_tokens(h, two));
      }
  }
  EXPECT_EQ(BlockPool::group_hash(42, 0), 42u) << "group 0 keeps the token hash";
  std::sort(seen.begin(), seen.end());
  // Group 0 is the token hash itself, and one-token blocks repeat across b: drop exact
  // repeats of the same computation by counting distinct values against distinct inputs.
  const size_t distinct = static_cast<size_t>(std::unique(seen.begin(), seen.end()) - seen.begin());
  EXPECT_EQ(distinct, 3u * (40 + 40 + 40 * 3)) << "a group hash equals another group's or a token hash";
}

// ---------------------------------------------------------------------------------------
// Prefix cache

TEST(BlockPool, FreshBlockHasNoHash) {
  BlockPool pool(2, 16);
  take(pool, 1);
  EXPECT_EQ(pool.hash_of(0), std::nullopt);
  EXPECT_EQ(pool.hash_of(1), std::nullopt);
}

TEST(BlockPool, SetHashMakesTheBlockFindable) {
  BlockPool pool(4, 16);
  take(pool, 3);
  const BlockHash h = content(5);
  pool.set_hash(1, h);
  EXPECT_EQ(pool.hash_of(1), h);
  EXPECT_EQ(pool.lookup(h), 1);
  // A held block is not free, so it does not count as cached-free.
  EXPECT_EQ(pool.num_cached_free(), 0);
  EXPECT_EQ(pool.ref_count(1), 1);  // lookup does not retain
}

TEST(BlockPool, LookupCountsQueriesAndHits) {
  BlockPool pool(4, 16);
  take(pool, 1);
  const BlockHash h = content(1);
  pool.set_hash(0, h);
  EXPECT_EQ(pool.queries(), 0);
  EXPECT_EQ(pool.hits(), 0);
  EXPECT_EQ(pool.lookup(content(2)), std::nullopt);
  EXPECT_EQ(pool.queries(), 1);
  EXPECT_EQ(pool.hits(), 0);
  EXPECT_EQ(pool.lookup(h), 0);
  EXPECT_EQ(pool.lookup(h), 0);
  EXPECT_EQ(pool.queries(), 3);
  EXPECT_EQ(pool.hits(), 2);
}

TEST(BlockPool, FreeCachedBlockStaysFindableUntilAllocationTakesIt) {
  BlockPool pool(3, 16);
  EXPECT_EQ(take(pool, 3), (Ids{0, 1, 2}));
  const BlockHash h = content(3);
  pool.set_hash(0, h);
  pool.release(0);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.num_cached_free(), 1);
  EXPECT_EQ(pool.lookup(h), 0);
  EXPECT_EQ(pool.hash_of(0), h);

  EXPECT_EQ(take(pool, 1), (Ids{0}));  // evicts the content
  EXPECT_EQ(pool.lookup(h), std::nullopt);
  EXPECT_EQ(pool.hash_of(0), std::nullopt);
  EXPECT_EQ(pool.num_cached_free(), 0);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.queries(), 2);
  EXPECT_EQ(pool.hits(), 1);
}

TEST(BlockPool, EvictionTakesTheLeastRecentlyFreedCachedBlock) {
  BlockPool pool(3, 16);
  take(pool, 3);
  for (BlockId b = 0; b < 3; ++b) pool.set_hash(b, content(b));
  pool.release(1);
  pool.release(2);
  pool.release(0);
  EXPECT_EQ(pool.num_cached_free(), 3);
  EXPECT_EQ(take(pool, 1), (Ids{1}));
  EXPECT_EQ(pool.num_cached_free(), 2);
  EXPECT_EQ(pool.lookup(content(1)), std::nullopt);
  EXPECT_EQ(pool.lookup(content(2)), 2);
  EXPECT_EQ(pool.lookup(content(0)), 0);
  EXPECT_EQ(take(pool, 1), (Ids{2}));
  EXPECT_EQ(pool.lookup(content(0)), 0);
  EXPECT_EQ(pool.num_cached_free(), 1);
}

TEST(BlockPool, UncachedFreeBlocksCountAsFreeButNotCached) {
  BlockPool pool(4, 16);
  take(pool, 4);
  pool.set_hash(0, content(0));
  pool.set_hash(2, content(2));
  for (BlockId b = 0; b < 4; ++b) pool.release(b);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_cached_free(), 2);
  EXPECT_EQ(pool.num_used(), 0);
}

TEST(BlockPool, RetainRevivesAFreeCachedBlock) {
  BlockPool pool(4, 16);
  take(pool, 4);
  pool.set_hash(1, content(1));
  pool.set_hash(2, content(2));
  for (BlockId b = 0; b < 4; ++b) pool.release(b);  // queue: 0 1 2 3
  ASSERT_EQ(pool.num_cached_free(), 2);

  const std::optional<BlockId> hit = pool.lookup(content(2));
  ASSERT_EQ(hit, 2);
  pool.retain(*hit);
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.num_used(), 1);
  EXPECT_EQ(pool.num_cached_free(), 1);
  EXPECT_EQ(pool.hash_of(2), content(2));

  // Block 2 left the queue from its middle; allocation skips it.
  EXPECT_EQ(take(pool, 3), (Ids{0, 1, 3}));
  Ids out;
  EXPECT_FALSE(pool.allocate(1, out));
  EXPECT_EQ(pool.lookup(content(2)), 2);  // held content is never evicted
  EXPECT_EQ(pool.lookup(content(1)), std::nullopt);
}

TEST(BlockPool, RevivedBlockReleasedAgainGoesToTheTail) {
  BlockPool pool(3, 16);
  take(pool, 3);
  pool.set_hash(0, content(0));
  for (BlockId b = 0; b < 3; ++b) pool.release(b);  // queue: 0 1 2
  pool.retain(0);
  pool.release(0);  // queue: 1 2 0
  EXPECT_EQ(pool.num_cached_free(), 1);
  EXPECT_EQ(take(pool, 2), (Ids{1, 2}));
  EXPECT_EQ(pool.lookup(content(0)), 0);
  EXPECT_EQ(take(pool, 1), (Ids{0}));
}

TEST(BlockPool, RetainOfAHeldCachedBlockAddsAHolder) {
  BlockPool pool(2, 16);
  take(pool, 1);
  pool.set_hash(0, content(0));
  pool.retain(*pool.lookup(content(0)));
  EXPECT_EQ(pool.ref_count(0), 2);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.num_cached_free(), 0);
}

TEST(BlockPool, SetHashOfDuplicateContentKeepsTheFirstHolder) {
  BlockPool pool(3, 16);
  take(pool, 2);
  const BlockHash h = content(9);
  pool.set_hash(0, h);
  pool.set_hash(1, h);
  EXPECT_EQ(pool.hash_of(0), h);
  EXPECT_EQ(pool.hash_of(1), std::nullopt);
  EXPECT_EQ(pool.lookup(h), 0);

  // Freeing and evicting the duplicate must not drop the first holder's entry.
  pool.release(1);
  EXPECT_EQ(pool.num_cached_free(), 0);
  EXPECT_EQ(take(pool, 2), (Ids{2, 1}));
  EXPECT_EQ(pool.lookup(h), 0);
}

TEST(BlockPool, ContentCanBeCachedAgainAfterEviction) {
  BlockPool pool(2, 16);
  take(pool, 2);
  const BlockHash h = content(4);
  pool.set_hash(0, h);
  pool.release(0);
  EXPECT_EQ(take(pool, 1), (Ids{0}));  // evicts h
  pool.set_hash(1, h);
  EXPECT_EQ(pool.hash_of(1), h);
  EXPECT_EQ(pool.lookup(h), 1);
}

TEST(BlockPool, SetHashDoesNotRehashACachedBlock) {
  BlockPool pool(2, 16);
  take(pool, 1);
  pool.set_hash(0, content(1));
  pool.set_hash(0, content(2));
  EXPECT_EQ(pool.hash_of(0), content(1));
  EXPECT_EQ(pool.lookup(content(1)), 0);
  EXPECT_EQ(pool.lookup(content(2)), std::nullopt);
}

TEST(BlockPool, ResetPrefixCacheForgetsEveryHash) {
  BlockPool pool(4, 16);
  take(pool, 4);
  for (BlockId b = 0; b < 4; ++b) pool.set_hash(b, content(b));
  pool.release(3);
  pool.release(1);  // queue: 3 1; blocks 0 and 2 stay held
  ASSERT_EQ(pool.num_cached_free(), 2);

  pool.reset_prefix_cache();
  EXPECT_EQ(pool.num_cached_free(), 0);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.num_used(), 2);
  for (BlockId b = 0; b < 4; ++b) {
    EXPECT_EQ(pool.hash_of(b), std::nullopt) << b;
    EXPECT_EQ(pool.lookup(content(b)), std::nullopt) << b;
  }
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.ref_count(2), 1);

  // The free queue keeps its order, and the hashes can be set afresh.
  pool.set_hash(0, content(3));
  EXPECT_EQ(pool.lookup(content(3)), 0);
  EXPECT_EQ(take(pool, 2), (Ids{3, 1}));
}

// ---------------------------------------------------------------------------------------
// Copy-on-write

TEST(BlockPool, MakeUniqueGivesTheSoleHolderItsOwnBlock) {
  BlockPool pool(3, 16);
  take(pool, 2);
  pool.set_hash(1, content(1));
  EXPECT_EQ(pool.make_unique(1), 1);
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.hash_of(1), content(1));
}

TEST(BlockPool, MakeUniqueCopiesASharedBlock) {
  BlockPool pool(4, 16);
  take(pool, 2);
  pool.set_hash(0, content(0));
  pool.retain(0);
  pool.retain(0);
  ASSERT_EQ(pool.ref_count(0), 3);

  EXPECT_EQ(pool.make_unique(0), 2);
  EXPECT_EQ(pool.ref_count(0), 2);  // the caller's hold moved to block 2
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_EQ(pool.hash_of(2), std::nullopt);  // the copy will be written to
  EXPECT_EQ(pool.lookup(content(0)), 0);     // the shared content stays cached
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.num_used(), 3);

  EXPECT_EQ(pool.make_unique(0), 3);
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.make_unique(0), 0);  // now the last holder
  EXPECT_EQ(pool.num_free(), 0);
}

TEST(BlockPool, MakeUniqueTakesTheLeastRecentlyFreedBlock) {
  BlockPool pool(4, 16);
  take(pool, 4);
  pool.set_hash(3, content(3));
  pool.release(3);
  pool.release(2);  // queue: 3 2
  pool.retain(0);
  EXPECT_EQ(pool.make_unique(0), 3);
  EXPECT_EQ(pool.lookup(content(3)), std::nullopt);  // evicted
  EXPECT_EQ(pool.num_cached_free(), 0);
}

TEST(BlockPool, MakeUniqueWithNoFreeBlockLeavesEverythingUntouched) {
  BlockPool pool(2, 16);
  take(pool, 2);
  pool.set_hash(0, content(0));
  pool.retain(0);
  EXPECT_EQ(pool.make_unique(0), std::nullopt);
  EXPECT_EQ(pool.ref_count(0), 2);
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.hash_of(0), content(0));
  // Once a block frees up, the same call succeeds.
  pool.release(1);
  EXPECT_EQ(pool.make_unique(0), 1);
  EXPECT_EQ(pool.ref_count(0), 1);
}

// ---------------------------------------------------------------------------------------
// Randomized invariants

// The pool as the header describes it, written for clarity rather than speed.
struct Model {
  explicit Model(int32_t n) : ref(n, 0), hash(n) {
    for (BlockId b = 0; b < n; ++b) free.push_back(b);
  }

  bool allocate(int32_t n, Ids& out) {
    if (n > static_cast<int32_t>(free.size())) return false;
    for (int32_t i = 0; i < n; ++i) {
      const BlockId b = free.front();
      free.pop_front();
      if (hash[b]) cached.erase(*hash[b]);
      hash[b].reset();
      ref[b] = 1;
      out.push_back(b);
    }
    return true;
  }
  void retain(BlockId b) {
    if (ref[b]++ == 0) free.remove(b);
  }
  void release(BlockId b) {
    if (--ref[b] == 0) free.push_back(b);
  }
  void set_hash(BlockId b, BlockHash h) {
    if (hash[b] || cached.count(h)) return;
    hash[b] = h;
    cached[h] = b;
  }
  std::optional<BlockId> lookup(BlockHash h) {
    ++queries;
    auto it = cached.find(h);
    if (it == cached.end()) return std::nullopt;
    ++hits;
    return it->second;
  }
  void reset() {
    cached.clear();
    for (auto& h : hash) h.reset();
  }
  std::optional<BlockId> make_unique(BlockId b) {
    if (ref[b] <= 1) return b;
    Ids fresh;
    if (!allocate(1, fresh)) return std::nullopt;
    release(b);
    return fresh[0];
  }
  int32_t cached_free() const {
    return static_cast<int32_t>(std::count_if(free.begin(), free.end(), [&](BlockId b) { return hash[b].has_value(); }));
  }

  std::vector<int32_t> ref;
  std::vector<std::optional<BlockHash>> hash;
  std::list<BlockId> free;
  std::map<BlockHash, BlockId> cached;
  int64_t queries = 0, hits = 0;
};

TEST(BlockPool, RandomOperationsMatchAReferenceModel) {
  constexpr int32_t kBlocks = 16;
  constexpr int kOps = 5000;
  BlockPool pool(kBlocks, 4);
  Model model(kBlocks);
  // Few distinct contents, so duplicates, hits and evictions all happen often.
  std::vector<BlockHash> contents;
  for (int32_t i = 0; i < 12; ++i) contents.push_back(content(i));
  // Block tables of live sequences; each entry is one reference.
  std::vector<Ids> seqs;
  std::mt19937 rng(1234);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };

  for (int op = 0; op < kOps; ++op) {
    SCOPED_TRACE(testing::Message() << "op " << op);
    const int kind = static_cast<int>(pick(9));
    if (kind == 0 || kind == 1 || seqs.empty()) {  // new sequence or growth
      const int32_t n = static_cast<int32_t>(pick(5));
      const bool grow = kind == 1 && !seqs.empty();
      Ids& table = grow ? seqs[pick(seqs.size())] : seqs.emplace_back();
      Ids expected = table;
      const bool ok = pool.allocate(n, table);
      ASSERT_EQ(ok, model.allocate(n, expected));
      ASSERT_EQ(table, expected);
      if (!grow && table.empty()) seqs.pop_back();
    } else if (kind == 2) {  // a sequence ends
      const size_t s = pick(seqs.size());
      pool.release_all(seqs[s]);
      for (size_t i = seqs[s].size(); i-- > 0;) model.release(seqs[s][i]);
      seqs.erase(seqs.begin() + static_cast<ptrdiff_t>(s));
    } else if (kind == 3) {  // a sequence drops its last block
      const size_t s = pick(seqs.size());
      pool.release(seqs[s].back());
      model.release(seqs[s].back());
      seqs[s].pop_back();
      if (seqs[s].empty()) seqs.erase(seqs.begin() + static_cast<ptrdiff_t>(s));
    } else if (kind == 4) {  // a block fills up
      Ids& table = seqs[pick(seqs.size())];
      const BlockId b = table[pick(table.size())];
      const BlockHash h = contents[pick(contents.size())];
      pool.set_hash(b, h);
      model.set_hash(b, h);
    } else if (kind == 5 || kind == 6) {  // a prompt looks for a cached block
      const BlockHash h = contents[pick(contents.size())];
      const std::optional<BlockId> got = pool.lookup(h);
      ASSERT_EQ(got, model.lookup(h));
      if (got && pick(2) == 0) {
        pool.retain(*got);
        model.retain(*got);
        seqs.push_back({*got});
      }
    } else if (kind == 7) {  // a sequence writes into a block that may be shared
      Ids& table = seqs[pick(seqs.size())];
      BlockId& b = table[pick(table.size())];
      const std::optional<BlockId> got = pool.make_unique(b);
      ASSERT_EQ(got, model.make_unique(b));
      if (got) b = *got;
    } else if (pick(50) == 0) {
      pool.reset_prefix_cache();
      model.reset();
    } else {  // another sampler shares a whole table
      const Ids table = seqs[pick(seqs.size())];
      for (BlockId b : table) {
        pool.retain(b);
        model.retain(b);
      }
      seqs.push_back(table);
    }

    ASSERT_EQ(pool.num_free(), static_cast<int32_t>(model.free.size()));
    ASSERT_EQ(pool.num_used(), kBlocks - static_cast<int32_t>(model.free.size()));
    ASSERT_EQ(pool.num_cached_free(), model.cached_free());
    ASSERT_EQ(pool.queries(), model.queries);
    ASSERT_EQ(pool.hits(), model.hits);
    for (BlockId b = 0; b < kBlocks; ++b) {
      ASSERT_EQ(pool.ref_count(b), model.ref[b]) << "block " << b;
      ASSERT_EQ(pool.hash_of(b), model.hash[b]) << "block " << b;
    }
  }
  // The run must have exercised the interesting paths, or it proves little.
  EXPECT_GT(model.hits, 100);
  EXPECT_LT(model.hits, model.queries);

  // Draining every sequence returns the pool to all-free, and the queue order then
  // matches the model exactly.
  for (const Ids& table : seqs) {
    pool.release_all(table);
    for (size_t i = table.size(); i-- > 0;) model.release(table[i]);
  }
  EXPECT_EQ(pool.num_free(), kBlocks);
  Ids got, expected;
  ASSERT_TRUE(pool.allocate(kBlocks, got));
  ASSERT_TRUE(model.allocate(kBlocks, expected));
  EXPECT_EQ(got, expected);
  EXPECT_EQ(pool.num_cached_free(), 0);
}

}  // namespace
}  // namespace pagoda
