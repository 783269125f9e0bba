// The scheduler's bookkeeping for sliding-window layer groups (kv/kv_layout.h), with no
// model: sequences are driven through schedule() and commit() by hand, one token
// appended per decode. A windowed group's table releases exactly the blocks no later
// token can see (the count of held blocks is checked after every step against the
// formula), a prefix hit in a windowed group needs only the window before its end, and a
// hit whose window blocks were evicted is cut back instead of reading freed memory.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/scheduler.h"

namespace pagoda {
namespace {

constexpr int32_t kBs = 4;
constexpr int32_t kWindow = 8;

struct Rig {
  std::unique_ptr<KvStorage> storage;
  std::unique_ptr<BlockPool> pool;
  std::unique_ptr<Scheduler> sched;
  std::vector<std::unique_ptr<Sequence>> seqs;

  // Default: layer 0 windowed, layer 1 full.
  explicit Rig(int32_t blocks, int32_t bs = kBs, std::vector<int32_t> windows = {kWindow, 0}) {
    const int32_t n_layer = static_cast<int32_t>(windows.size());
    KvShape shape{n_layer, 1, 4, bs, KvType::kF16, std::move(windows)};
    storage = std::move(KvStorage::create(shape, blocks).value());
    pool = std::make_unique<BlockPool>(blocks, bs);
    SchedulerConfig c;
    c.max_num_batched_tokens = 64;
    sched = std::make_unique<Scheduler>(c, *pool, *storage);
  }
  Sequence* add(std::vector<int32_t> prompt) {
    auto s = std::make_unique<Sequence>();
    s->id = static_cast<int64_t>(seqs.size());
    s->arrival_order = s->id;
    s->prompt_len = static_cast<int32_t>(prompt.size());
    s->tokens = std::move(prompt);
    sched->add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  // One step: schedule, commit, and give every sequence whose tokens all ran a new token.
  void step(int32_t next_token) {
    const std::vector<ScheduledSeq> work = sched->schedule();
    ASSERT_FALSE(work.empty());
    sched->commit(work);
    for (const ScheduledSeq& w : work)
      if (w.seq->num_computed == w.seq->len()) w.seq->tokens.push_back(next_token);
  }
};

std::vector<int32_t> tokens(int32_t n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[i] = first + i;
  return t;
}

int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

TEST(SchedulerWindow, WindowedGroupHoldsOnlyTheBlocksItsWindowStillSees) {
  Rig r(64);
  const KvLayout& layout = r.storage->layout();
  ASSERT_EQ(layout.n_groups(), 2);
  const int32_t win = layout.group_of(0), full = layout.group_of(1);
  Sequence* s = r.add(tokens(10));
  r.step(7);  // the prompt, whole
  for (int32_t i = 0; i < 50; ++i) {
    const int32_t pos = s->num_computed;  // the token the next step computes
    r.step(7);
    // Held now: every block up to pos in the full group; in the windowed one, from the
    // first block holding pos - window + 1.
    const int32_t upto = ceil_div(pos + 1, kBs);
    const int32_t first = pos < kWindow ? 0 : (pos - kWindow + 1) / kBs;
    EXPECT_EQ(r.pool->num_used(), upto + (upto - first)) << "at position " << pos;
    const std::vector<BlockId>& wt = s->tables[win];
    ASSERT_EQ(static_cast<int32_t>(wt.size()), upto);
    for (int32_t b = 0; b < upto; ++b) EXPECT_EQ(wt[b] == kNoBlock, b < first) << "position " << pos << " block " << b;
    for (BlockId b : s->tables[full]) EXPECT_NE(b, kNoBlock);
  }
  r.sched->finish(s);
  EXPECT_EQ(r.pool->num_used(), 0);
}

// A runs its 40-token prompt and decodes to 60 tokens, then finishes; its blocks stay in
// the prefix cache (its windowed blocks 0..12 were released while it decoded, 13 and 14
// when it finished).
Sequence* run_a(Rig& r) {
  Sequence* a = r.add(tokens(40));
  r.step(500);
  while (a->len() < 61) r.step(500 + a->len());
  EXPECT_EQ(a->num_computed, 60);
  r.sched->finish(a);
  EXPECT_EQ(r.pool->num_used(), 0);
  return a;
}

// Runs A in a pool of 64, then evicts the first `evicted` windowed blocks A released
// (they follow the 34 blocks A never used in the free queue) by taking and returning
// blocks; returns a prompt of A's first n tokens and one more.
std::vector<int32_t> a_prefix_after_eviction(Rig& r, int32_t evicted, size_t n) {
  const std::vector<int32_t> a_tokens = run_a(r)->tokens;
  std::vector<BlockId> taken;
  EXPECT_TRUE(r.pool->allocate(64 - 30 + evicted, taken));
  r.pool->release_all(taken);
  std::vector<int32_t> prompt(a_tokens.begin(), a_tokens.begin() + static_cast<std::ptrdiff_t>(n));
  prompt.push_back(9);
  return prompt;
}

TEST(SchedulerWindow, PrefixHitNeedsOnlyTheWindowBeforeItsEnd) {
  Rig r(64);
  // Windowed blocks 0..12 evicted. B shares A's 60 computed tokens: 15 full blocks hit,
  // the windowed group needs only blocks 13 and 14 (positions from 60 - 8 + 1 = 53 on).
  Sequence* b = r.add(a_prefix_after_eviction(r, 13, 60));
  r.step(1);
  EXPECT_EQ(r.sched->stats().prefix_hit_tokens, 60);
  const int32_t win = r.storage->layout().group_of(0);
  for (int32_t i = 0; i < 13; ++i) EXPECT_EQ(b->tables[win][i], kNoBlock) << i;
  EXPECT_NE(b->tables[win][13], kNoBlock);
  r.sched->finish(b);
  EXPECT_EQ(r.pool->num_used(), 0);
}

TEST(SchedulerWindow, PrefixHitIsCutBackWhereTheWindowWasEvicted) {
  Rig r(64);
  // Windowed blocks 0..10 evicted. C shares A's first 44 tokens: the full group still
  // has all 11 blocks, but the window before position 44 needs windowed blocks 9 and 10,
  // and no shorter prefix has its window cached either.
  Sequence* c = r.add(a_prefix_after_eviction(r, 11, 44));
  r.step(1);
  EXPECT_EQ(r.sched->stats().prefix_hit_tokens, 0);
  EXPECT_EQ(c->num_computed, 45);
  for (const std::vector<BlockId>& t : c->tables)
    for (BlockId b : t) EXPECT_NE(b, kNoBlock);
  r.sched->finish(c);
  EXPECT_EQ(r.pool->num_used(), 0);
}

// Each group's blocks are cached under a hash of their own. At block size 2 a group's
// hash of block i once equalled the token hash of block i + 1 when that block held the
// tokens [g, 0], so the second request below got group 2's block as group 0's.
TEST(SchedulerWindow, AHitFindsEachGroupsOwnBlocksAtBlockSizeTwo) {
  Rig r(64, 2, {0, 2, 0});  // groups 0 and 1 full, group 2 windowed
  const std::vector<int32_t> prompt = {1, 3, 2, 0, 1, 3, 1};
  Sequence* a = r.add(prompt);
  r.step(5);
  const std::vector<std::vector<BlockId>> a_tables = a->tables;
  r.sched->finish(a);
  Sequence* b = r.add(prompt);
  r.step(5);
  EXPECT_EQ(r.sched->stats().prefix_hit_tokens, 6);
  for (int32_t g = 0; g < 3; ++g)
    for (int32_t i = 0; i < 3; ++i)
      if (b->tables[g][i] != kNoBlock) {
        EXPECT_EQ(b->tables[g][i], a_tables[g][i]) << "group " << g << " block " << i;
      }
  r.sched->finish(b);
  EXPECT_EQ(r.pool->num_used(), 0);
}

TEST(SchedulerWindow, PreemptedSequenceComesBackThroughItsOwnWindowBlocks) {
  // Two sequences in a pool that cannot hold both at length 40: one is preempted and,
  // readmitted, finds its full blocks and its window in the prefix cache.
  Rig r(24);
  Sequence* a = r.add(tokens(12, 100));
  Sequence* b = r.add(tokens(12, 300));
  bool a_done = false, b_done = false;
  for (int i = 0; i < 300 && !(a_done && b_done); ++i) {
    r.step(5);
    if (!a_done && a->len() >= 40) r.sched->finish(a), a_done = true;
    if (!b_done && b->len() >= 40) r.sched->finish(b), b_done = true;
  }
  EXPECT_TRUE(a_done && b_done);
  EXPECT_GT(r.sched->stats().preemptions, 0);
  EXPECT_GT(r.sched->stats().prefix_hit_tokens, 0);
  EXPECT_EQ(r.pool->num_used(), 0);
}

}  // namespace
}  // namespace pagoda
