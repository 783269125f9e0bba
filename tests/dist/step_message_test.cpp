#include "dist/step_message.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

TEST(StepMessage, StepRoundTripsWithCopiesTablesAndRows) {
  std::vector<std::vector<BlockId>> a = {{3, 4, 5}, {9}};
  std::vector<std::vector<BlockId>> b = {{7}, {kNoBlock, 8}};
  Batch batch;
  batch.add(std::vector<int32_t>{11, 12, 13}, 0, a, false);
  batch.add(std::vector<int32_t>{21, 22}, 40, b, true, 2);
  batch.seqs.back().pool = Pooling::kRank;
  batch.seqs.back().segment_b = 7;
  batch.top_candidates = 40;
  const std::vector<KvCopy> copies = {{1, 2, 16}, {5, 6, 3}};
  const std::vector<uint8_t> bytes = encode_step(copies, batch);

  StepPlan plan;
  ASSERT_TRUE(decode_step(bytes, plan).is_ok());
  ASSERT_EQ(plan.copies.size(), 2u);
  EXPECT_EQ(plan.copies[1].src, 5);
  EXPECT_EQ(plan.copies[1].dst, 6);
  EXPECT_EQ(plan.copies[1].rows, 3);
  EXPECT_EQ(plan.batch.tokens, batch.tokens);
  EXPECT_EQ(plan.batch.top_candidates, 40);
  ASSERT_EQ(plan.batch.seqs.size(), 2u);
  const BatchSeq& s = plan.batch.seqs[1];
  EXPECT_EQ(s.n_tokens, 2);
  EXPECT_EQ(s.pos0, 40);
  EXPECT_TRUE(s.logits);
  EXPECT_EQ(s.logit_rows, 2);
  EXPECT_EQ(s.pool, Pooling::kRank);
  EXPECT_EQ(s.segment_b, 7);
  EXPECT_EQ(plan.batch.seqs[0].segment_b, 0);
  ASSERT_EQ(s.tables.size(), 2u);
  EXPECT_EQ(s.tables[1], b[1]);
  EXPECT_EQ(plan.batch.seqs[0].tables[0], a[0]);
}

TEST(StepMessage, EveryTruncationIsRefused) {
  std::vector<std::vector<BlockId>> t = {{1, 2}};
  Batch batch;
  batch.add(std::vector<int32_t>{5, 6, 7}, 3, t, true);
  const std::vector<uint8_t> bytes = encode_step({}, batch);
  StepPlan plan;
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_step(std::span<const uint8_t>(bytes.data(), n), plan).is_ok()) << n;
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decode_step(longer, plan).is_ok());
}

TEST(StepMessage, SetupRoundTripsAndRefusesUnknownKvTypes) {
  KvShape shape{6, 2, 64, 16, KvType::kI8, {0, 32, 0, 32, 0, 32}};
  const std::vector<uint8_t> bytes = encode_setup(shape, 1234);
  KvShape got;
  int32_t blocks = 0;
  ASSERT_TRUE(decode_setup(bytes, got, blocks).is_ok());
  EXPECT_EQ(blocks, 1234);
  EXPECT_EQ(got.n_layer, 6);
  EXPECT_EQ(got.type, KvType::kI8);
  EXPECT_EQ(got.windows, shape.windows);
  std::vector<uint8_t> bad = bytes;
  bad[4 * 8] = 77;  // the type field
  EXPECT_FALSE(decode_setup(bad, got, blocks).is_ok());
}

}  // namespace
}  // namespace pagoda
