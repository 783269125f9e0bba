// Checks KvStorage against the contract in src/kv/kv_storage.h: bad shapes and budgets
// that cannot be reserved come back as error Results rather than crashes; the size
// arithmetic (bytes per block, blocks per budget) is exact; every row written through
// k_row/v_row is read back at the address the attention kernel computes from layer(l)
// (k or v + block * block_stride + slot * row_stride), with no two layers, blocks, slots
// or K/V sides sharing memory; and copy_block copies exactly the requested rows of every
// layer and nothing else.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "kv/kv_storage.h"

namespace pagoda {
namespace {

KvShape shape_of(int32_t n_layer, int32_t kv_dim, int32_t block_size) {
  KvShape s;
  s.n_layer = n_layer;
  s.kv_dim = kv_dim;
  s.block_size = block_size;
  return s;
}

std::unique_ptr<KvStorage> make(const KvShape& shape, int32_t num_blocks) {
  Result<std::unique_ptr<KvStorage>> r = KvStorage::create(shape, num_blocks);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : nullptr;
}

void expect_rejected(const KvShape& shape, int32_t num_blocks) {
  const Result<std::unique_ptr<KvStorage>> r = KvStorage::create(shape, num_blocks);
  EXPECT_FALSE(r.is_ok()) << "layers " << shape.n_layer << ", width " << shape.kv_dim << ", block size "
                          << shape.block_size << ", blocks " << num_blocks;
  if (!r.is_ok()) {
    EXPECT_FALSE(r.status().message().empty());
  }
}

// Calls f(l, kv, b, slot, i) for every element; kv is 0 for K, 1 for V.
void for_each_element(const KvStorage& s, const std::function<void(int32_t, int, int32_t, int32_t, int32_t)>& f) {
  const KvShape& sh = s.shape();
  for (int32_t l = 0; l < sh.n_layer; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int32_t b = 0; b < s.num_blocks(); ++b)
        for (int32_t slot = 0; slot < sh.block_size; ++slot)
          for (int32_t i = 0; i < sh.kv_dim; ++i) f(l, kv, b, slot, i);
}

// A value unique to each element (the tests keep fewer than 65536 elements), scrambled
// so that it does not follow any plausible memory layout.
uint16_t tag(const KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot, int32_t i) {
  const KvShape& sh = s.shape();
  const uint32_t idx = (((static_cast<uint32_t>(l) * 2 + kv) * s.num_blocks() + b) * sh.block_size + slot) * sh.kv_dim + i;
  return static_cast<uint16_t>(idx * 40503u + 7u);
}

uint16_t* row(KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot) {
  return kv == 0 ? s.k_row(l, b, slot) : s.v_row(l, b, slot);
}

// The element as the attention kernel addresses it.
uint16_t read_via_layer(const KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot, int32_t i) {
  const PagedKv p = s.layer(l);
  const uint16_t* base = kv == 0 ? p.k : p.v;
  return base[b * p.block_stride + slot * p.row_stride + i];
}

void fill(KvStorage& s) {
  for_each_element(s, [&](int32_t l, int kv, int32_t b, int32_t slot, int32_t i) {
    row(s, l, kv, b, slot)[i] = tag(s, l, kv, b, slot, i);
  });
}

// ---------------------------------------------------------------------------------------
// Creation

TEST(KvStorage, CreateRejectsBlockSizesThatAreNotPowersOfTwo) {
  for (int32_t bs : {0, -16, 3, 12, 48, 1000, 2048}) expect_rejected(shape_of(2, 64, bs), 8);
}

TEST(KvStorage, CreateRejectsShapesWithoutLayersOrWidth) {
  expect_rejected(shape_of(0, 64, 16), 8);
  expect_rejected(shape_of(-1, 64, 16), 8);
  expect_rejected(shape_of(2, 0, 16), 8);
  expect_rejected(shape_of(2, -64, 16), 8);
}

TEST(KvStorage, CreateRejectsABudgetOfNoBlocks) {
  expect_rejected(shape_of(2, 64, 16), 0);
  expect_rejected(shape_of(2, 64, 16), -3);
}

TEST(KvStorage, CreateFailsCleanlyWhenTheMemoryCannotBeReserved) {
  // 2^42 bytes a block, 2^16 blocks: 2^58 bytes, beyond any address space.
  expect_rejected(shape_of(64, 1 << 24, 1024), 1 << 16);
}

TEST(KvStorage, CreateRejectsASizeThatOverflows) {
  // 2^42 bytes a block times 2^22 + 1 blocks is 2^64 + 2^42: wrapped, it would reserve a
  // mere 4 TiB and leave most blocks pointing outside the mapping.
  expect_rejected(shape_of(64, 1 << 24, 1024), (1 << 22) + 1);
  // Here a single block's size overflows.
  expect_rejected(shape_of(std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::max(), 1024), 1);
}

TEST(KvStorage, CreateReportsItsShapeAndSize) {
  const KvShape shape = shape_of(3, 40, 16);
  const auto s = make(shape, 7);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->shape().n_layer, 3);
  EXPECT_EQ(s->shape().kv_dim, 40);
  EXPECT_EQ(s->shape().block_size, 16);
  EXPECT_EQ(s->num_blocks(), 7);
  EXPECT_EQ(s->block_shift(), 4);
  EXPECT_EQ(s->bytes(), 7 * KvStorage::bytes_per_block(shape));
}

TEST(KvStorage, BlockShiftIsTheLog2OfTheBlockSize) {
  int32_t shift = 0;
  for (int32_t bs = 1; bs <= 1024; bs *= 2, ++shift) {
    const auto s = make(shape_of(1, 8, bs), 2);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->block_shift(), shift) << "block size " << bs;
    EXPECT_EQ(s->layer(0).block_shift, shift) << "block size " << bs;
  }
}

// ---------------------------------------------------------------------------------------
// Size arithmetic

TEST(KvStorage, BytesPerBlockCountsKAndVInEveryLayer) {
  // K and V, 3 layers, 16 rows of 64 FP16 values.
  EXPECT_EQ(KvStorage::bytes_per_block(shape_of(3, 64, 16)), 2u * 3 * 16 * 64 * 2);
  EXPECT_EQ(KvStorage::bytes_per_block(shape_of(1, 1, 1)), 4u);
  // 32 layers, 8 KV heads of 128, 16 positions: a typical 8B model.
  EXPECT_EQ(KvStorage::bytes_per_block(shape_of(32, 1024, 16)), 2u * 1024 * 1024);
}

TEST(KvStorage, BlocksForBytesRoundsDown) {
  const KvShape shape = shape_of(3, 64, 16);
  const size_t per = KvStorage::bytes_per_block(shape);
  EXPECT_EQ(KvStorage::blocks_for_bytes(shape, 0), 0);
  EXPECT_EQ(KvStorage::blocks_for_bytes(shape, per - 1), 0);
  EXPECT_EQ(KvStorage::blocks_for_bytes(shape, per), 1);
  EXPECT_EQ(KvStorage::blocks_for_bytes(shape, 5 * per), 5);
  EXPECT_EQ(KvStorage::blocks_for_bytes(shape, 6 * per - 1), 5);
}

TEST(KvStorage, BlocksForBytesOfAHugeBudgetStaysPositive) {
  // A budget far beyond 2^31 blocks must not wrap into a negative count.
  const int32_t n = KvStorage::blocks_for_bytes(shape_of(1, 1, 1), std::numeric_limits<size_t>::max());
  EXPECT_GT(n, 0);
}

TEST(KvStorage, BlocksForBytesAgreesWithCreate) {
  const KvShape shape = shape_of(2, 32, 8);
  const size_t budget = 1 << 20;
  const int32_t n = KvStorage::blocks_for_bytes(shape, budget);
  const auto s = make(shape, n);
  ASSERT_NE(s, nullptr);
  EXPECT_LE(s->bytes(), budget);
  EXPECT_GT(s->bytes() + KvStorage::bytes_per_block(shape), budget);
}

// ---------------------------------------------------------------------------------------
// Layout

TEST(KvStorage, LayerStridesMatchTheShape) {
  const auto s = make(shape_of(3, 24, 8), 5);
  ASSERT_NE(s, nullptr);
  for (int32_t l = 0; l < 3; ++l) {
    const PagedKv p = s->layer(l);
    EXPECT_EQ(p.row_stride, 24);
    EXPECT_EQ(p.block_stride, 8 * 24);
    EXPECT_EQ(p.block_shift, 3);
    EXPECT_EQ(p.k, s->k_row(l, 0, 0));
    EXPECT_EQ(p.v, s->v_row(l, 0, 0));
  }
}

TEST(KvStorage, RowsWrittenThroughKRowAndVRowAreReadBackThroughLayer) {
  // 3 * 2 * 5 * 4 * 8 = 960 elements, each tagged with a distinct value: any two
  // (layer, K/V, block, slot, element) sharing memory would overwrite one tag.
  const auto s = make(shape_of(3, 8, 4), 5);
  ASSERT_NE(s, nullptr);
  fill(*s);
  int mismatches = 0;
  for_each_element(*s, [&](int32_t l, int kv, int32_t b, int32_t slot, int32_t i) {
    const uint16_t want = tag(*s, l, kv, b, slot, i);
    if (read_via_layer(*s, l, kv, b, slot, i) != want && ++mismatches <= 5)
      ADD_FAILURE() << "layer " << l << (kv ? " V" : " K") << " block " << b << " slot " << slot << " elem " << i;
    if (row(*s, l, kv, b, slot)[i] != want && ++mismatches <= 5)
      ADD_FAILURE() << "row() moved: layer " << l << (kv ? " V" : " K") << " block " << b << " slot " << slot;
  });
  EXPECT_EQ(mismatches, 0);
}

TEST(KvStorage, LayersAndKAndVOccupyDisjointRangesInsideTheReservation) {
  const int32_t nb = 6;
  const auto s = make(shape_of(4, 16, 8), nb);
  ASSERT_NE(s, nullptr);
  struct Range {
    const uint16_t* lo;
    const uint16_t* hi;
  };
  std::vector<Range> ranges;
  for (int32_t l = 0; l < 4; ++l) {
    const PagedKv p = s->layer(l);
    ranges.push_back({p.k, p.k + nb * p.block_stride});
    ranges.push_back({p.v, p.v + nb * p.block_stride});
  }
  const auto* lo = reinterpret_cast<const char*>(s->layer(0).k);
  for (const Range& r : ranges) {
    EXPECT_GE(reinterpret_cast<const char*>(r.lo), lo);
    EXPECT_LE(reinterpret_cast<const char*>(r.hi), lo + s->bytes());
  }
  for (size_t a = 0; a < ranges.size(); ++a)
    for (size_t b = a + 1; b < ranges.size(); ++b)
      EXPECT_TRUE(ranges[a].hi <= ranges[b].lo || ranges[b].hi <= ranges[a].lo) << "ranges " << a << " and " << b;
}

TEST(KvStorage, LastRowOfLastBlockIsWritable) {
  // Touches the very end of the reservation: an undersized mapping would fault here.
  const auto s = make(shape_of(2, 64, 16), 9);
  ASSERT_NE(s, nullptr);
  s->v_row(1, 8, 15)[63] = 0xBEEF;
  s->k_row(1, 8, 15)[63] = 0xCAFE;
  EXPECT_EQ(read_via_layer(*s, 1, 1, 8, 15, 63), 0xBEEF);
  EXPECT_EQ(read_via_layer(*s, 1, 0, 8, 15, 63), 0xCAFE);
}

// ---------------------------------------------------------------------------------------
// Copy-on-write

// Every element's value, in for_each_element order.
std::vector<uint16_t> snapshot(const KvStorage& s) {
  std::vector<uint16_t> out;
  for_each_element(s, [&](int32_t l, int kv, int32_t b, int32_t slot, int32_t i) {
    out.push_back(read_via_layer(s, l, kv, b, slot, i));
  });
  return out;
}

// What copy_block(src, dst, n_rows) should leave, computed from the fill tags.
std::vector<uint16_t> expected_after_copy(const KvStorage& s, int32_t src, int32_t dst, int32_t n_rows) {
  std::vector<uint16_t> out;
  for_each_element(s, [&](int32_t l, int kv, int32_t b, int32_t slot, int32_t i) {
    const bool copied = b == dst && slot < n_rows;
    out.push_back(tag(s, l, kv, copied ? src : b, slot, i));
  });
  return out;
}

TEST(KvStorage, CopyBlockCopiesTheFirstRowsInEveryLayer) {
  const auto s = make(shape_of(3, 8, 4), 5);
  ASSERT_NE(s, nullptr);
  fill(*s);
  s->copy_block(3, 1, 2);
  EXPECT_EQ(snapshot(*s), expected_after_copy(*s, 3, 1, 2));
}

TEST(KvStorage, CopyBlockOfAFullBlockCopiesEveryRow) {
  const auto s = make(shape_of(2, 8, 4), 4);
  ASSERT_NE(s, nullptr);
  fill(*s);
  s->copy_block(0, 3, 4);
  EXPECT_EQ(snapshot(*s), expected_after_copy(*s, 0, 3, 4));
}

TEST(KvStorage, CopyBlockOfNoRowsChangesNothing) {
  const auto s = make(shape_of(2, 8, 4), 4);
  ASSERT_NE(s, nullptr);
  fill(*s);
  const std::vector<uint16_t> before = snapshot(*s);
  s->copy_block(2, 1, 0);
  EXPECT_EQ(snapshot(*s), before);
}

}  // namespace
}  // namespace pagoda
