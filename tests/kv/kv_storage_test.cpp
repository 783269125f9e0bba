// Checks KvStorage against the contract in src/kv/kv_storage.h, for both row types
// (KvType::kF16 and kI8, kernels/attention/attention.h): bad shapes and budgets that cannot be
// reserved come back as error Results rather than crashes; the size arithmetic (row
// bytes, bytes per block, blocks per budget) is exact; every byte written through
// k_row/v_row is read back at the byte address the attention kernel computes from
// layer(l) (k or v + block * block_stride + slot * row_stride), with no two layers,
// blocks, slots or K/V sides sharing memory; copy_block copies exactly the requested
// rows of every layer and nothing else; store() converts a row to FP16 exactly, or to
// int8 per head (a float scale d = max|x| / 127, then q = round(x / d)), writing only the
// two rows it names; and parse_kv_type accepts the flag spellings and rejects others.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kv/kv_storage.h"

namespace pagoda {
namespace {

constexpr KvType kTypes[] = {KvType::kF16, KvType::kI8};

KvShape shape_of(int32_t n_layer, int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                 KvType type = KvType::kF16) {
  KvShape s;
  s.n_layer = n_layer;
  s.n_kv_heads = n_kv_heads;
  s.head_dim = head_dim;
  s.block_size = block_size;
  s.type = type;
  return s;
}

std::unique_ptr<KvStorage> make(const KvShape& shape, int32_t num_blocks) {
  Result<std::unique_ptr<KvStorage>> r = KvStorage::create(shape, num_blocks);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : nullptr;
}

void expect_rejected(const KvShape& shape, int32_t num_blocks) {
  const Result<std::unique_ptr<KvStorage>> r = KvStorage::create(shape, num_blocks);
  EXPECT_FALSE(r.is_ok()) << kv_type_name(shape.type) << ", layers " << shape.n_layer << ", " << shape.n_kv_heads
                          << " heads of " << shape.head_dim << ", block size " << shape.block_size << ", blocks "
                          << num_blocks;
  if (!r.is_ok()) {
    EXPECT_FALSE(r.status().message().empty());
  }
}

// ---------------------------------------------------------------------------------------
// Byte-level access. The layout tests tag every 4-byte word of every row with a distinct
// 32-bit value, so the shapes they use have rows of a multiple of 4 bytes.

int32_t words_per_row(const KvStorage& s) {
  const int64_t rb = s.shape().row_bytes();
  EXPECT_EQ(rb % 4, 0) << "test shapes need rows of whole 4-byte words";
  return static_cast<int32_t>(rb / 4);
}

// Calls f(l, kv, b, slot, w) for every 4-byte word w of every row; kv is 0 for K, 1 for V.
void for_each_word(const KvStorage& s, const std::function<void(int32_t, int, int32_t, int32_t, int32_t)>& f) {
  const KvShape& sh = s.shape();
  const int32_t nw = words_per_row(s);
  for (int32_t l = 0; l < sh.n_layer; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int32_t b = 0; b < s.num_blocks(); ++b)
        for (int32_t slot = 0; slot < sh.block_size; ++slot)
          for (int32_t w = 0; w < nw; ++w) f(l, kv, b, slot, w);
}

// A value unique to each word, scrambled (an odd multiplier is a bijection mod 2^32) so
// that it does not follow any plausible memory layout.
uint32_t tag(const KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot, int32_t w) {
  const KvShape& sh = s.shape();
  const uint32_t idx =
      (((static_cast<uint32_t>(l) * 2 + kv) * s.num_blocks() + b) * sh.block_size + slot) * words_per_row(s) + w;
  return idx * 2654435761u + 7u;
}

uint8_t* row(KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot) {
  return kv == 0 ? s.k_row(l, b, slot) : s.v_row(l, b, slot);
}

// The start of a row as the attention kernel addresses it: byte strides from layer(l).
const uint8_t* row_via_layer(const KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot) {
  const PagedKv p = s.layer(l);
  const auto* base = static_cast<const uint8_t*>(kv == 0 ? p.k : p.v);
  return base + b * p.block_stride + slot * p.row_stride;
}

uint32_t load32(const uint8_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}
void store32(uint8_t* p, uint32_t x) { std::memcpy(p, &x, 4); }

uint32_t read_via_layer(const KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot, int32_t w) {
  return load32(row_via_layer(s, l, kv, b, slot) + 4 * static_cast<size_t>(w));
}

void fill(KvStorage& s) {
  for_each_word(s, [&](int32_t l, int kv, int32_t b, int32_t slot, int32_t w) {
    store32(row(s, l, kv, b, slot) + 4 * w, tag(s, l, kv, b, slot, w));
  });
}

// Every word's value read through layer(l), in for_each_word order.
std::vector<uint32_t> snapshot(const KvStorage& s) {
  std::vector<uint32_t> out;
  for_each_word(s, [&](int32_t l, int kv, int32_t b, int32_t slot, int32_t w) {
    out.push_back(read_via_layer(s, l, kv, b, slot, w));
  });
  return out;
}

// ---------------------------------------------------------------------------------------
// Creation

TEST(KvStorage, CreateRejectsBlockSizesThatAreNotPowersOfTwo) {
  for (KvType t : kTypes)
    for (int32_t bs : {0, -16, 3, 12, 48, 1000, 2048}) expect_rejected(shape_of(2, 4, 16, bs, t), 8);
}

TEST(KvStorage, CreateRejectsShapesWithoutLayersOrWidth) {
  for (KvType t : kTypes) {
    expect_rejected(shape_of(0, 4, 16, 16, t), 8);
    expect_rejected(shape_of(-1, 4, 16, 16, t), 8);
    expect_rejected(shape_of(2, 0, 16, 16, t), 8);
    expect_rejected(shape_of(2, -4, 16, 16, t), 8);
    expect_rejected(shape_of(2, 4, 0, 16, t), 8);
    expect_rejected(shape_of(2, 4, -16, 16, t), 8);
  }
}

TEST(KvStorage, CreateRejectsABudgetOfNoBlocks) {
  for (KvType t : kTypes) {
    expect_rejected(shape_of(2, 4, 16, 16, t), 0);
    expect_rejected(shape_of(2, 4, 16, 16, t), -3);
  }
}

// 64 layers of 1024 positions with rows of 2^25 bytes: 2^42 bytes a block in either type.
KvShape huge_shape(KvType t) {
  // F16: 2^16 heads of 256 values, 2 bytes each. I8: 2^17 heads of 4 + 252 bytes.
  return t == KvType::kF16 ? shape_of(64, 1 << 16, 256, 1024, t) : shape_of(64, 1 << 17, 252, 1024, t);
}

TEST(KvStorage, CreateFailsCleanlyWhenTheMemoryCannotBeReserved) {
  for (KvType t : kTypes) {
    ASSERT_EQ(huge_shape(t).row_bytes(), int64_t{1} << 25);
    ASSERT_EQ(KvStorage::bytes_per_block(huge_shape(t)), size_t{1} << 42);
    // 2^16 blocks: 2^58 bytes, beyond any address space.
    expect_rejected(huge_shape(t), 1 << 16);
  }
}

TEST(KvStorage, CreateRejectsASizeThatOverflows) {
  for (KvType t : kTypes) {
    // 2^42 bytes a block times 2^22 + 1 blocks is 2^64 + 2^42: wrapped, it would reserve
    // a mere 4 TiB and leave most blocks pointing outside the mapping.
    expect_rejected(huge_shape(t), (1 << 22) + 1);
  }
  // Here a single block's size overflows. (head_dim stays 4 below INT32_MAX for int8, whose
  // row of n_kv_heads * (4 + head_dim) bytes would otherwise overflow in int32 arithmetic.)
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  expect_rejected(shape_of(kMax, kMax, kMax, 1024, KvType::kF16), 1);
  expect_rejected(shape_of(kMax, kMax, kMax - 4, 1024, KvType::kI8), 1);
}

TEST(KvStorage, CreateReportsItsShapeAndSize) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    const KvShape shape = shape_of(3, 5, 8, 16, t);
    const auto s = make(shape, 7);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->shape().n_layer, 3);
    EXPECT_EQ(s->shape().n_kv_heads, 5);
    EXPECT_EQ(s->shape().head_dim, 8);
    EXPECT_EQ(s->shape().kv_dim(), 40);
    EXPECT_EQ(s->shape().block_size, 16);
    EXPECT_EQ(s->shape().type, t);
    EXPECT_EQ(s->num_blocks(), 7);
    EXPECT_EQ(s->block_shift(), 4);
    EXPECT_EQ(s->bytes(), 7 * KvStorage::bytes_per_block(shape));
  }
}

TEST(KvStorage, BlockShiftIsTheLog2OfTheBlockSize) {
  for (KvType t : kTypes) {
    int32_t shift = 0;
    for (int32_t bs = 1; bs <= 1024; bs *= 2, ++shift) {
      const auto s = make(shape_of(1, 2, 4, bs, t), 2);
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->block_shift(), shift) << kv_type_name(t) << ", block size " << bs;
      EXPECT_EQ(s->layer(0).block_shift, shift) << kv_type_name(t) << ", block size " << bs;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Size arithmetic

TEST(KvStorage, RowBytes) {
  // F16: 2 bytes a value. I8: per head a 4-byte scale and head_dim bytes.
  EXPECT_EQ(shape_of(1, 4, 16, 16, KvType::kF16).row_bytes(), 2 * 4 * 16);
  EXPECT_EQ(shape_of(1, 4, 16, 16, KvType::kI8).row_bytes(), 4 * (4 + 16));
  EXPECT_EQ(shape_of(1, 8, 128, 16, KvType::kI8).row_bytes(), 8 * (4 + 128));
  EXPECT_EQ(shape_of(1, 1, 1, 1, KvType::kI8).row_bytes(), 5);
  EXPECT_EQ(shape_of(1, 3, 7, 1, KvType::kI8).row_bytes(), 3 * 11);
  EXPECT_EQ(kv_row_bytes(KvType::kI8, 8, 128), 8 * 132);
  EXPECT_EQ(kv_row_bytes(KvType::kF16, 8, 128), 2 * 1024);
}

TEST(KvStorage, BytesPerBlockCountsKAndVInEveryLayer) {
  // K and V, 3 layers, 16 rows of 4 heads of 16.
  EXPECT_EQ(KvStorage::bytes_per_block(shape_of(3, 4, 16, 16, KvType::kF16)), 2u * 3 * 16 * 64 * 2);
  EXPECT_EQ(KvStorage::bytes_per_block(shape_of(3, 4, 16, 16, KvType::kI8)), 2u * 3 * 16 * 4 * (4 + 16));
  EXPECT_EQ(KvStorage::bytes_per_block(shape_of(1, 1, 1, 1, KvType::kF16)), 4u);
  EXPECT_EQ(KvStorage::bytes_per_block(shape_of(1, 1, 1, 1, KvType::kI8)), 10u);
  // 32 layers, 8 KV heads of 128, 16 positions: a typical 8B model.
  EXPECT_EQ(KvStorage::bytes_per_block(shape_of(32, 8, 128, 16, KvType::kF16)), 2u * 1024 * 1024);
  EXPECT_EQ(KvStorage::bytes_per_block(shape_of(32, 8, 128, 16, KvType::kI8)), 2u * 32 * 16 * 8 * 132);
}

TEST(KvStorage, Int8RoughlyHalvesTheBytesPerBlockAtHeadDim128) {
  for (int32_t heads : {1, 8, 32}) {
    const double f16 = static_cast<double>(KvStorage::bytes_per_block(shape_of(32, heads, 128, 16, KvType::kF16)));
    const double i8 = static_cast<double>(KvStorage::bytes_per_block(shape_of(32, heads, 128, 16, KvType::kI8)));
    // (4 + 128) / 256: half, plus the scales.
    EXPECT_DOUBLE_EQ(i8 / f16, 132.0 / 256.0) << heads << " heads";
    EXPECT_GT(i8 / f16, 0.5);
    EXPECT_LT(i8 / f16, 0.53);
  }
}

TEST(KvStorage, BlocksForBytesRoundsDown) {
  for (KvType t : kTypes) {
    const KvShape shape = shape_of(3, 4, 16, 16, t);
    const size_t per = KvStorage::bytes_per_block(shape);
    EXPECT_EQ(KvStorage::blocks_for_bytes(shape, 0), 0);
    EXPECT_EQ(KvStorage::blocks_for_bytes(shape, per - 1), 0);
    EXPECT_EQ(KvStorage::blocks_for_bytes(shape, per), 1);
    EXPECT_EQ(KvStorage::blocks_for_bytes(shape, 5 * per), 5);
    EXPECT_EQ(KvStorage::blocks_for_bytes(shape, 6 * per - 1), 5);
  }
}

TEST(KvStorage, BlocksForBytesOfAHugeBudgetStaysPositive) {
  // A budget far beyond 2^31 blocks must not wrap into a negative count.
  for (KvType t : kTypes) {
    const int32_t n = KvStorage::blocks_for_bytes(shape_of(1, 1, 1, 1, t), std::numeric_limits<size_t>::max());
    EXPECT_GT(n, 0) << kv_type_name(t);
  }
}

TEST(KvStorage, BlocksForBytesAgreesWithCreate) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    const KvShape shape = shape_of(2, 4, 8, 8, t);
    const size_t budget = 1 << 20;
    const int32_t n = KvStorage::blocks_for_bytes(shape, budget);
    const auto s = make(shape, n);
    ASSERT_NE(s, nullptr);
    EXPECT_LE(s->bytes(), budget);
    EXPECT_GT(s->bytes() + KvStorage::bytes_per_block(shape), budget);
  }
}

// ---------------------------------------------------------------------------------------
// Layout

TEST(KvStorage, LayerStridesAreInBytesAndMatchTheShape) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    // 3 heads of 8: F16 rows of 48 bytes, int8 rows of 3 * 12 = 36 bytes.
    const auto s = make(shape_of(3, 3, 8, 8, t), 5);
    ASSERT_NE(s, nullptr);
    const int64_t rb = t == KvType::kF16 ? 48 : 36;
    EXPECT_EQ(s->shape().row_bytes(), rb);
    for (int32_t l = 0; l < 3; ++l) {
      const PagedKv p = s->layer(l);
      EXPECT_EQ(p.row_stride, rb);
      EXPECT_EQ(p.block_stride, 8 * rb);
      EXPECT_EQ(p.block_shift, 3);
      EXPECT_EQ(p.type, t);
      EXPECT_EQ(p.k, s->k_row(l, 0, 0));
      EXPECT_EQ(p.v, s->v_row(l, 0, 0));
      EXPECT_EQ(s->k_row(l, 2, 3), static_cast<const uint8_t*>(p.k) + 2 * 8 * rb + 3 * rb);
      EXPECT_EQ(s->v_row(l, 4, 7), static_cast<const uint8_t*>(p.v) + 4 * 8 * rb + 7 * rb);
    }
  }
}

TEST(KvStorage, RowsWrittenThroughKRowAndVRowAreReadBackThroughLayer) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    // 2 heads of 4: 16 bytes a row in F16, 2 * 8 in int8, so 4 words. 3 * 2 * 5 * 4 * 4
    // = 480 words, each tagged with a distinct value: any two (layer, K/V, block, slot,
    // word) sharing memory would overwrite one tag.
    const auto s = make(shape_of(3, 2, 4, 4, t), 5);
    ASSERT_NE(s, nullptr);
    fill(*s);
    int mismatches = 0;
    for_each_word(*s, [&](int32_t l, int kv, int32_t b, int32_t slot, int32_t w) {
      const uint32_t want = tag(*s, l, kv, b, slot, w);
      if (read_via_layer(*s, l, kv, b, slot, w) != want && ++mismatches <= 5)
        ADD_FAILURE() << "layer " << l << (kv ? " V" : " K") << " block " << b << " slot " << slot << " word " << w;
      if (load32(row(*s, l, kv, b, slot) + 4 * w) != want && ++mismatches <= 5)
        ADD_FAILURE() << "row() moved: layer " << l << (kv ? " V" : " K") << " block " << b << " slot " << slot;
    });
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(KvStorage, LayersAndKAndVOccupyDisjointRangesInsideTheReservation) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    const int32_t nb = 6;
    const auto s = make(shape_of(4, 2, 8, 8, t), nb);
    ASSERT_NE(s, nullptr);
    struct Range {
      const uint8_t* lo;
      const uint8_t* hi;
    };
    std::vector<Range> ranges;
    for (int32_t l = 0; l < 4; ++l) {
      const PagedKv p = s->layer(l);
      EXPECT_EQ(p.block_stride, s->shape().block_size * s->shape().row_bytes());
      const auto* k = static_cast<const uint8_t*>(p.k);
      const auto* v = static_cast<const uint8_t*>(p.v);
      ranges.push_back({k, k + nb * p.block_stride});
      ranges.push_back({v, v + nb * p.block_stride});
    }
    const auto* lo = static_cast<const uint8_t*>(s->layer(0).k);
    for (const Range& r : ranges) {
      EXPECT_GE(r.lo, lo);
      EXPECT_LE(r.hi, lo + s->bytes());
    }
    for (size_t a = 0; a < ranges.size(); ++a)
      for (size_t b = a + 1; b < ranges.size(); ++b)
        EXPECT_TRUE(ranges[a].hi <= ranges[b].lo || ranges[b].hi <= ranges[a].lo) << "ranges " << a << " and " << b;
  }
}

TEST(KvStorage, LastRowOfLastBlockIsWritable) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    // Touches the very end of the reservation: an undersized mapping would fault here.
    const auto s = make(shape_of(2, 4, 16, 16, t), 9);
    ASSERT_NE(s, nullptr);
    const int64_t rb = s->shape().row_bytes();
    s->v_row(1, 8, 15)[rb - 1] = 0xBE;
    s->k_row(1, 8, 15)[rb - 1] = 0xCA;
    EXPECT_EQ(row_via_layer(*s, 1, 1, 8, 15)[rb - 1], 0xBE);
    EXPECT_EQ(row_via_layer(*s, 1, 0, 8, 15)[rb - 1], 0xCA);
    // And it is the last byte of the reservation.
    EXPECT_EQ(s->v_row(1, 8, 15) + rb, static_cast<const uint8_t*>(s->layer(0).k) + s->bytes());
  }
}

// ---------------------------------------------------------------------------------------
// Copy-on-write

// What copy_block(src, dst, n_rows) should leave, computed from the fill tags.
std::vector<uint32_t> expected_after_copy(const KvStorage& s, int32_t src, int32_t dst, int32_t n_rows) {
  std::vector<uint32_t> out;
  for_each_word(s, [&](int32_t l, int kv, int32_t b, int32_t slot, int32_t w) {
    const bool copied = b == dst && slot < n_rows;
    out.push_back(tag(s, l, kv, copied ? src : b, slot, w));
  });
  return out;
}

TEST(KvStorage, CopyBlockCopiesTheFirstRowsInEveryLayer) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    const auto s = make(shape_of(3, 2, 4, 4, t), 5);
    ASSERT_NE(s, nullptr);
    fill(*s);
    s->copy_block(3, 1, 2);
    EXPECT_EQ(snapshot(*s), expected_after_copy(*s, 3, 1, 2));
  }
}

TEST(KvStorage, CopyBlockOfAFullBlockCopiesEveryRow) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    const auto s = make(shape_of(2, 2, 4, 4, t), 4);
    ASSERT_NE(s, nullptr);
    fill(*s);
    s->copy_block(0, 3, 4);
    EXPECT_EQ(snapshot(*s), expected_after_copy(*s, 0, 3, 4));
  }
}

TEST(KvStorage, CopyBlockOfNoRowsChangesNothing) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    const auto s = make(shape_of(2, 2, 4, 4, t), 4);
    ASSERT_NE(s, nullptr);
    fill(*s);
    const std::vector<uint32_t> before = snapshot(*s);
    s->copy_block(2, 1, 0);
    EXPECT_EQ(snapshot(*s), before);
  }
}

// ---------------------------------------------------------------------------------------
// store(): conversion to the storage type

std::vector<float> random_row(std::mt19937& rng, int32_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// The FP16 values of a row as read through layer(l).
std::vector<uint16_t> f16_row(const KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot) {
  std::vector<uint16_t> h(s.shape().kv_dim());
  std::memcpy(h.data(), row_via_layer(s, l, kv, b, slot), h.size() * 2);
  return h;
}

// One int8 head row: its scale and values.
struct I8Head {
  float d;
  std::vector<int8_t> q;
};
I8Head i8_head(const KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot, int32_t h) {
  const int32_t hd = s.shape().head_dim;
  const uint8_t* p = row_via_layer(s, l, kv, b, slot) + static_cast<size_t>(h) * (4 + hd);
  I8Head out;
  std::memcpy(&out.d, p, 4);
  out.q.resize(hd);
  std::memcpy(out.q.data(), p + 4, hd);
  return out;
}

// Checks one stored int8 row against the floats it came from.
void expect_i8_row(const KvStorage& s, int32_t l, int kv, int32_t b, int32_t slot, const std::vector<float>& x) {
  const int32_t hd = s.shape().head_dim;
  for (int32_t h = 0; h < s.shape().n_kv_heads; ++h) {
    SCOPED_TRACE(testing::Message() << "layer " << l << (kv ? " V" : " K") << " block " << b << " slot " << slot
                                    << " head " << h);
    const float* xh = x.data() + static_cast<size_t>(h) * hd;
    float amax = 0.0f;
    int32_t imax = 0;
    for (int32_t i = 0; i < hd; ++i)
      if (std::fabs(xh[i]) > amax) amax = std::fabs(xh[i]), imax = i;
    const I8Head got = i8_head(s, l, kv, b, slot, h);
    EXPECT_FLOAT_EQ(got.d, amax / 127.0f);
    if (amax == 0.0f) {
      EXPECT_EQ(got.d, 0.0f);
      for (int32_t i = 0; i < hd; ++i) EXPECT_EQ(got.q[i], 0) << "elem " << i;
      continue;
    }
    int bad = 0;
    for (int32_t i = 0; i < hd; ++i) {
      EXPECT_GE(got.q[i], -127);
      const float deq = got.d * static_cast<float>(got.q[i]);
      // Half a step, plus float rounding in x / d and d * q.
      if (std::fabs(deq - xh[i]) > got.d * 0.5f * (1.0f + 1e-5f) + 1e-6f * amax && ++bad <= 5)
        ADD_FAILURE() << "elem " << i << ": x " << xh[i] << ", d " << got.d << ", q " << int{got.q[i]} << " gives "
                      << deq;
    }
    // The largest magnitude maps to +-127 and comes back exact up to float rounding.
    EXPECT_EQ(got.q[imax], xh[imax] > 0 ? 127 : -127);
    EXPECT_NEAR(got.d * got.q[imax], xh[imax], 4 * std::numeric_limits<float>::epsilon() * amax);
  }
}

TEST(KvStorage, RowBytesOfInt8AreAScaleAndHeadDimBytesPerHead) {
  const auto s = make(shape_of(1, 3, 16, 4, KvType::kI8), 2);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->shape().row_bytes(), 3 * (4 + 16));
  EXPECT_EQ(s->layer(0).row_stride, 3 * (4 + 16));
  // Head h's scale sits at byte h * (4 + head_dim): store a row whose head h is all
  // equal to h + 1, so the scale is (h + 1) / 127 and every q is 127.
  std::vector<float> x(48);
  for (int32_t h = 0; h < 3; ++h)
    for (int32_t i = 0; i < 16; ++i) x[h * 16 + i] = static_cast<float>(h + 1);
  s->store(0, 1, 2, x.data(), x.data());
  for (int32_t h = 0; h < 3; ++h) {
    const uint8_t* p = s->k_row(0, 1, 2) + h * 20;
    float d;
    std::memcpy(&d, p, 4);
    EXPECT_EQ(d, static_cast<float>(h + 1) / 127.0f) << "head " << h;
    for (int32_t i = 0; i < 16; ++i) EXPECT_EQ(static_cast<int8_t>(p[4 + i]), 127) << "head " << h << " elem " << i;
  }
}

TEST(KvStorage, StoreF16KeepsFp16OfEachValueExactly) {
  const auto s = make(shape_of(3, 2, 32, 4, KvType::kF16), 5);
  ASSERT_NE(s, nullptr);
  std::mt19937 rng(1);
  struct Where {
    int32_t l, b, slot;
  };
  const Where places[] = {{0, 0, 0}, {1, 3, 2}, {2, 4, 3}, {2, 0, 1}};
  std::vector<std::vector<float>> ks, vs;
  for (size_t n = 0; n < std::size(places); ++n) {
    ks.push_back(random_row(rng, 64, 3.0f));
    vs.push_back(random_row(rng, 64, 0.01f));
  }
  // Values FP16 must round, saturate or flush: halfway cases, the largest finite value,
  // subnormals, a signed zero and values beyond the range.
  const float edges[] = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f, 65520.0f, 1e5f, -1e5f,
                         6e-8f,             1e-6f,             -3e-5f,   -0.0f,    0.0f, 0.1f};
  for (size_t i = 0; i < std::size(edges); ++i) ks[0][i] = edges[i];
  for (size_t n = 0; n < std::size(places); ++n)
    s->store(places[n].l, places[n].b, places[n].slot, ks[n].data(), vs[n].data());
  for (size_t n = 0; n < std::size(places); ++n) {
    const Where& w = places[n];
    const std::vector<uint16_t> k = f16_row(*s, w.l, 0, w.b, w.slot);
    const std::vector<uint16_t> v = f16_row(*s, w.l, 1, w.b, w.slot);
    for (int32_t i = 0; i < 64; ++i) {
      EXPECT_EQ(k[i], fp32_to_fp16(ks[n][i])) << "place " << n << " K elem " << i << " = " << ks[n][i];
      EXPECT_EQ(v[i], fp32_to_fp16(vs[n][i])) << "place " << n << " V elem " << i << " = " << vs[n][i];
    }
  }
  // Spot checks of the conversion itself, so a broken fp32_to_fp16 cannot hide here.
  const std::vector<uint16_t> k0 = f16_row(*s, 0, 0, 0, 0);
  EXPECT_EQ(k0[0], 0x3C00);   // 1 + 2^-11 ties to even: 1
  EXPECT_EQ(k0[1], 0x3C02);   // 1 + 3 * 2^-11 ties to even: 1 + 2^-9
  EXPECT_EQ(k0[2], 0x7BFF);   // 65504
  EXPECT_EQ(k0[3], 0x7C00);   // 65520 rounds to inf
  EXPECT_EQ(k0[9], 0x8000);   // -0
  EXPECT_EQ(fp16_to_fp32(k0[11]), fp16_to_fp32(fp32_to_fp16(0.1f)));
}

TEST(KvStorage, StoreInt8WritesAScaleThenRoundedValuesPerHead) {
  const int32_t heads = 4, hd = 32;
  const auto s = make(shape_of(2, heads, hd, 4, KvType::kI8), 3);
  ASSERT_NE(s, nullptr);
  std::mt19937 rng(2);
  // Heads of very different magnitudes, so a scale shared across heads would fail.
  std::vector<float> k = random_row(rng, heads * hd, 1.0f);
  std::vector<float> v = random_row(rng, heads * hd, 1.0f);
  const float mag[] = {1.0f, 100.0f, 1e-3f, 7.5f};
  for (int32_t h = 0; h < heads; ++h)
    for (int32_t i = 0; i < hd; ++i) k[h * hd + i] *= mag[h], v[h * hd + i] *= mag[(h + 1) % heads];
  // Head 3 of V: the largest magnitude is negative.
  v[3 * hd + 5] = -50.0f;
  s->store(1, 2, 3, k.data(), v.data());
  expect_i8_row(*s, 1, 0, 2, 3, k);
  expect_i8_row(*s, 1, 1, 2, 3, v);
  EXPECT_EQ(i8_head(*s, 1, 1, 2, 3, 3).q[5], -127);
}

TEST(KvStorage, StoreInt8RoundsToTheNearestStep) {
  const auto s = make(shape_of(1, 1, 8, 1, KvType::kI8), 1);
  ASSERT_NE(s, nullptr);
  // d = 127 / 127 = 1: q is x rounded to the nearest integer.
  const float x[8] = {127.0f, 0.4f, 0.6f, -0.6f, -1.4f, 63.7f, -127.0f, 0.0f};
  s->store(0, 0, 0, x, x);
  const I8Head got = i8_head(*s, 0, 0, 0, 0, 0);
  EXPECT_EQ(got.d, 1.0f);
  const int8_t want[8] = {127, 0, 1, -1, -1, 64, -127, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got.q[i], want[i]) << "elem " << i << " = " << x[i];
}

TEST(KvStorage, StoreInt8OfAnAllZeroHeadGivesScaleZeroAndZeros) {
  const int32_t heads = 3, hd = 16;
  const auto s = make(shape_of(1, heads, hd, 2, KvType::kI8), 2);
  ASSERT_NE(s, nullptr);
  // Fill the memory with junk first, so zeros must be written rather than found.
  for (int32_t b = 0; b < 2; ++b)
    for (int32_t slot = 0; slot < 2; ++slot) {
      std::memset(s->k_row(0, b, slot), 0x5A, s->shape().row_bytes());
      std::memset(s->v_row(0, b, slot), 0x5A, s->shape().row_bytes());
    }
  std::mt19937 rng(3);
  std::vector<float> k = random_row(rng, heads * hd, 2.0f);
  std::vector<float> v(heads * hd, 0.0f);  // every head zero
  std::fill(k.begin() + hd, k.begin() + 2 * hd, 0.0f);  // head 1 zero
  k[hd + 3] = -0.0f;                                    // a signed zero is zero too
  s->store(0, 1, 0, k.data(), v.data());
  for (int32_t h = 0; h < heads; ++h) {
    const I8Head vh = i8_head(*s, 0, 1, 1, 0, h);
    EXPECT_EQ(vh.d, 0.0f) << "V head " << h;
    EXPECT_FALSE(std::signbit(vh.d)) << "V head " << h;
    for (int32_t i = 0; i < hd; ++i) EXPECT_EQ(vh.q[i], 0) << "V head " << h << " elem " << i;
  }
  const I8Head k1 = i8_head(*s, 0, 0, 1, 0, 1);
  EXPECT_EQ(k1.d, 0.0f);
  for (int32_t i = 0; i < hd; ++i) EXPECT_EQ(k1.q[i], 0) << "K head 1 elem " << i;
  expect_i8_row(*s, 0, 0, 1, 0, k);
}

TEST(KvStorage, StoreWritesOnlyTheTwoRowsItNames) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    // 2 heads of 4: rows of 16 bytes in F16, 16 in int8.
    const auto s = make(shape_of(3, 2, 4, 4, t), 5);
    ASSERT_NE(s, nullptr);
    fill(*s);
    const std::vector<uint32_t> before = snapshot(*s);
    const float k[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    const float v[8] = {0.5f, 0.25f, -0.125f, 2, -1, 4, 8, -16};
    s->store(1, 3, 2, k, v);
    const std::vector<uint32_t> after = snapshot(*s);
    size_t idx = 0, changed_elsewhere = 0;
    for_each_word(*s, [&](int32_t l, int, int32_t b, int32_t slot, int32_t) {
      const bool target = l == 1 && b == 3 && slot == 2;
      if (!target && after[idx] != before[idx]) ++changed_elsewhere;
      ++idx;
    });
    EXPECT_EQ(changed_elsewhere, 0u);
    if (t == KvType::kF16) {
      const std::vector<uint16_t> kh = f16_row(*s, 1, 0, 3, 2), vh = f16_row(*s, 1, 1, 3, 2);
      for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(fp16_to_fp32(kh[i]), k[i]);
        EXPECT_EQ(fp16_to_fp32(vh[i]), v[i]);
      }
    } else {
      expect_i8_row(*s, 1, 0, 3, 2, std::vector<float>(k, k + 8));
      expect_i8_row(*s, 1, 1, 3, 2, std::vector<float>(v, v + 8));
    }
  }
}

TEST(KvStorage, StoredRowsSurviveCopyBlock) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    const auto s = make(shape_of(2, 2, 8, 4, t), 3);
    ASSERT_NE(s, nullptr);
    std::mt19937 rng(4);
    for (int32_t l = 0; l < 2; ++l)
      for (int32_t slot = 0; slot < 4; ++slot) {
        const std::vector<float> k = random_row(rng, 16, 1.0f), v = random_row(rng, 16, 1.0f);
        s->store(l, 0, slot, k.data(), v.data());
      }
    s->copy_block(0, 2, 3);
    const size_t rb = static_cast<size_t>(s->shape().row_bytes());
    for (int32_t l = 0; l < 2; ++l)
      for (int kv = 0; kv < 2; ++kv)
        for (int32_t slot = 0; slot < 3; ++slot)
          EXPECT_EQ(std::memcmp(row_via_layer(*s, l, kv, 2, slot), row_via_layer(*s, l, kv, 0, slot), rb), 0)
              << "layer " << l << (kv ? " V" : " K") << " slot " << slot;
  }
}

// ---------------------------------------------------------------------------------------
// Parsing the --kv-cache-dtype flag

TEST(KvType, ParseAcceptsTheFlagSpellings) {
  for (const char* name : {"f16", "fp16"}) {
    const Result<KvType> r = parse_kv_type(name);
    ASSERT_TRUE(r.is_ok()) << name << ": " << r.status().message();
    EXPECT_EQ(*r, KvType::kF16) << name;
  }
  for (const char* name : {"int8", "q8", "i8"}) {
    const Result<KvType> r = parse_kv_type(name);
    ASSERT_TRUE(r.is_ok()) << name << ": " << r.status().message();
    EXPECT_EQ(*r, KvType::kI8) << name;
  }
}

TEST(KvType, ParseRejectsUnknownTypesWithAMessage) {
  for (const char* name : {"fp8", "", "int4", "F16x"}) {
    const Result<KvType> r = parse_kv_type(name);
    EXPECT_FALSE(r.is_ok()) << "'" << name << "' accepted";
    if (!r.is_ok()) {
      EXPECT_FALSE(r.status().message().empty()) << name;
    }
  }
  const Result<KvType> r = parse_kv_type("fp8");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("fp8"), std::string::npos) << r.status().message();
}

TEST(KvType, NamesParseBack) {
  for (KvType t : kTypes) {
    const Result<KvType> r = parse_kv_type(kv_type_name(t));
    ASSERT_TRUE(r.is_ok()) << kv_type_name(t);
    EXPECT_EQ(*r, t);
  }
  EXPECT_STREQ(kv_type_name(KvType::kF16), "f16");
  EXPECT_STREQ(kv_type_name(KvType::kI8), "int8");
}

}  // namespace
}  // namespace pagoda

// ---------------------------------------------------------------------------------------
// Layer groups (kv_layout.h): a block holds the layers of one group.

namespace pagoda {
namespace {

// Layers 0 and 2 windowed, 1 and 3 full: two groups of two layers.
KvShape grouped_shape(KvType t) {
  KvShape s = shape_of(4, 2, 4, 4, t);
  s.windows = {8, 0, 8, 0};
  return s;
}

TEST(KvStorage, ABlockOfAGroupedLayoutHoldsOneGroupsLayers) {
  for (KvType t : kTypes) {
    SCOPED_TRACE(kv_type_name(t));
    const KvShape sh = grouped_shape(t);
    EXPECT_EQ(KvStorage::bytes_per_block(sh), 2u * 2u * 4u * static_cast<size_t>(sh.row_bytes()));
    const auto s = make(sh, 6);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->layout().n_groups(), 2);
    EXPECT_EQ(s->bytes(), 6 * KvStorage::bytes_per_block(sh));
    // Same group: different rows. Same slot of different groups: the same rows, since a
    // block belongs to one group's table at a time.
    EXPECT_NE(s->k_row(0, 1, 2), s->k_row(2, 1, 2));
    EXPECT_NE(s->v_row(1, 1, 2), s->v_row(3, 1, 2));
    EXPECT_EQ(s->k_row(0, 1, 2), s->k_row(1, 1, 2));
    EXPECT_EQ(s->v_row(2, 5, 3), s->v_row(3, 5, 3));
    for (int32_t l = 0; l < 4; ++l) {
      const PagedKv p = s->layer(l);
      EXPECT_EQ(p.k, s->k_row(l, 0, 0));
      EXPECT_EQ(s->v_row(l, 4, 1), static_cast<const uint8_t*>(p.v) + 4 * p.block_stride + p.row_stride);
    }
  }
}

TEST(KvStorage, CopyBlockCopiesEveryLayerOfTheGroup) {
  const auto s = make(grouped_shape(KvType::kF16), 6);
  ASSERT_NE(s, nullptr);
  const int64_t rb = s->shape().row_bytes();
  for (int32_t l : {0, 2})
    for (int32_t slot = 0; slot < 4; ++slot) {
      std::memset(s->k_row(l, 1, slot), 10 * l + slot + 1, static_cast<size_t>(rb));
      std::memset(s->v_row(l, 1, slot), 10 * l + slot + 5, static_cast<size_t>(rb));
    }
  s->copy_block(1, 4, 3);
  for (int32_t l : {0, 2})
    for (int32_t slot = 0; slot < 3; ++slot) {
      EXPECT_EQ(std::memcmp(s->k_row(l, 4, slot), s->k_row(l, 1, slot), static_cast<size_t>(rb)), 0) << l << " " << slot;
      EXPECT_EQ(std::memcmp(s->v_row(l, 4, slot), s->v_row(l, 1, slot), static_cast<size_t>(rb)), 0) << l << " " << slot;
    }
  EXPECT_EQ(s->k_row(2, 4, 3)[0], 0) << "the row past n_rows was copied";
}

TEST(KvStorage, CreateRejectsWindowsThatDoNotMatchTheLayers) {
  KvShape sh = shape_of(4, 2, 4, 4);
  sh.windows = {8, 0, 8};
  expect_rejected(sh, 4);
  EXPECT_EQ(KvStorage::bytes_per_block(sh), 0u);
}

}  // namespace
namespace {
// Whether the page holding p is resident.
bool resident(const void* p) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* at = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(p) / static_cast<uintptr_t>(page) *
                                        static_cast<uintptr_t>(page));
  unsigned char v = 0;
  return mincore(at, static_cast<size_t>(page), &v) == 0 && (v & 1) != 0;
}
}  // namespace

TEST(KvStorage, PrefaultOfALayerRangeTouchesOnlyThoseLayers) {
  // A pipeline stage's process holds only its layers' KV: prefaulting the others would
  // make them resident for nothing.
  auto s = KvStorage::create(KvShape{4, 2, 64, 16, KvType::kF16, {}}, 256);
  ASSERT_TRUE(s.is_ok());
  KvStorage& kv = **s;
  kv.prefault(1, 3);
  for (int32_t l = 0; l < 4; ++l) {
    const bool want = l == 1 || l == 2;
    EXPECT_EQ(resident(kv.layer(l).k), want) << l;
    EXPECT_EQ(resident(kv.layer(l).v), want) << l;
  }
  kv.prefault();
  EXPECT_TRUE(resident(kv.layer(0).k));
  EXPECT_TRUE(resident(kv.layer(3).v));
}

}  // namespace pagoda
