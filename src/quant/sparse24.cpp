// The 2:4 sparse formats' selection, codes and scalar row functions (sparse24.h).
// Quantizing keeps the two largest magnitudes of each group (a pruned row's nonzeros,
// so `pagoda quantize --prune` decides through the values it hands over) and encodes the
// 32 kept values exactly as the dense format's reference quantizer encodes a block of
// them. The dots sum each 32-position half in integers and scale it as the dense dot
// scales a block, so they equal the dense dot of the expanded row bit for bit.
#include "quant/scalar_math.h"

#include <cmath>
#include <cstring>

#include "quant/rows.h"
#include "quant/sparse24.h"

namespace pagoda {
namespace {

// Index into kS24Pairs of the pair (a, b), a < b.
int pair_index(int a, int b) {
  for (int c = 0; c < 6; ++c)
    if (kS24Pairs[c][0] == a && kS24Pairs[c][1] == b) return c;
  return -1;
}

uint64_t load_codes(const uint8_t codes[6]) {
  uint64_t v = 0;
  std::memcpy(&v, codes, 6);
  return v;
}

// Keep flags of a block from its values: the nonzero-preferring magnitude rule.
void keep_by_magnitude(const float* x, uint8_t keep[kS24Block]) {
  float score[kS24Block];
  for (int i = 0; i < kS24Block; ++i) score[i] = std::fabs(x[i]);
  s24_select(score, kS24Block, keep);
}

// The 32 kept values of a block, in position order, and its codes.
void gather_kept(const float* x, float kept[kS24Kept], uint8_t codes[6]) {
  uint8_t keep[kS24Block];
  keep_by_magnitude(x, keep);
  s24_encode(keep, codes);
  int k = 0;
  for (int i = 0; i < kS24Block; ++i)
    if (keep[i]) kept[k++] = x[i];
}

}  // namespace

void s24_positions(const uint8_t codes[6], uint8_t pos[kS24Kept]) {
  const uint64_t v = load_codes(codes);
  for (int j = 0; j < 8; ++j) {
    const int p = s24_code_positions(static_cast<int>((v >> (6 * j)) & 63));
    for (int s = 0; s < 4; ++s) pos[4 * j + s] = static_cast<uint8_t>(8 * j + 4 * (s / 2) + ((p >> (2 * s)) & 3));
  }
}

bool s24_encode(const uint8_t keep[kS24Block], uint8_t codes[6]) {
  uint64_t v = 0;
  for (int g = 0; g < kS24Block / 4; ++g) {
    int at[2], n = 0;
    for (int p = 0; p < 4; ++p)
      if (keep[4 * g + p]) {
        if (n == 2) return false;
        at[n++] = p;
      }
    if (n != 2) return false;
    const uint64_t c = static_cast<uint64_t>(pair_index(at[0], at[1]));
    v += (g % 2 == 0 ? c : 6 * c) << (6 * (g / 2));
  }
  std::memcpy(codes, &v, 6);
  return true;
}

void s24_select(const float* score, int64_t n, uint8_t* keep) {
  for (int64_t g = 0; g < n; g += 4) {
    // Rank each position by how many of the group beat it (ties: the lower one wins).
    for (int p = 0; p < 4; ++p) {
      const float s = std::isnan(score[g + p]) ? -INFINITY : score[g + p];
      int beaten = 0;
      for (int o = 0; o < 4; ++o) {
        if (o == p) continue;
        const float t = std::isnan(score[g + o]) ? -INFINITY : score[g + o];
        beaten += t > s || (t == s && o < p);
      }
      keep[g + p] = beaten < 2;
    }
  }
}

void s24_apply(const uint8_t* keep, float* w, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!keep[i]) w[i] = 0.0f;
}

void expand_row_q8_0_s24(const void* src, void* dst_q8_0, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0S24*>(src);
  auto* out = static_cast<BlockQ8_0*>(dst_q8_0);
  uint8_t pos[kS24Kept];
  for (int64_t i = 0; i < n / kS24Block; ++i) {
    s24_positions(b[i].codes, pos);
    BlockQ8_0* o = out + 2 * i;
    std::memset(o, 0, 2 * sizeof(BlockQ8_0));
    o[0].d = o[1].d = b[i].d;
    for (int k = 0; k < kS24Kept; ++k) o[pos[k] / kQK].qs[pos[k] % kQK] = b[i].qs[k];
  }
}

void expand_row_q4_0_s24(const void* src, void* dst_q4_0, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0S24*>(src);
  auto* out = static_cast<BlockQ4_0*>(dst_q4_0);
  uint8_t pos[kS24Kept];
  for (int64_t i = 0; i < n / kS24Block; ++i) {
    s24_positions(b[i].codes, pos);
    BlockQ4_0* o = out + 2 * i;
    o[0].d = o[1].d = b[i].d;
    std::memset(o[0].qs, 0x88, sizeof o[0].qs);  // level 8 is zero
    std::memset(o[1].qs, 0x88, sizeof o[1].qs);
    for (int k = 0; k < kS24Kept; ++k) {
      const int q = k < 16 ? b[i].qs[k] & 15 : b[i].qs[k - 16] >> 4;
      const int at = pos[k] % kQK;
      uint8_t& byte = o[pos[k] / kQK].qs[at % 16];
      byte = at < 16 ? static_cast<uint8_t>((byte & 0xf0) | q) : static_cast<uint8_t>((byte & 0x0f) | (q << 4));
    }
  }
}

namespace quant {
namespace {

// What differs between the two formats: the block, a kept value's integer level, how the
// dense reference scales a block's integer sum (Q8_0: sumi * (dw * dx); Q4_0: sumi * dw *
// dx, rounded in that order), and the dense quantizer over the kept values.
struct Q8 {
  using Block = BlockQ8_0S24;
  static int level(const Block& b, int k) { return b.qs[k]; }
  static float scaled(int sumi, float dw, float dx) { return static_cast<float>(sumi) * (dw * dx); }
  static void encode(const float* kept, Block& b) {
    BlockQ8_0 q;
    quantize_row_q8_0(kept, &q, kS24Kept);
    b.d = q.d;
    std::memcpy(b.qs, q.qs, sizeof q.qs);
  }
};

struct Q4 {
  using Block = BlockQ4_0S24;
  static int level(const Block& b, int k) { return (k < 16 ? b.qs[k] & 15 : b.qs[k - 16] >> 4) - 8; }
  static float scaled(int sumi, float dw, float dx) { return static_cast<float>(sumi) * dw * dx; }
  static void encode(const float* kept, Block& b) {
    BlockQ4_0 q;
    quantize_row_q4_0(kept, &q, kS24Kept);
    b.d = q.d;
    std::memcpy(b.qs, q.qs, sizeof q.qs);
  }
};

template <typename F>
void dequantize(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* b = static_cast<const typename F::Block*>(src);
  uint8_t pos[kS24Kept];
  for (int64_t i = 0; i < n / kS24Block; ++i, dst += kS24Block) {
    s24_positions(b[i].codes, pos);
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kS24Block; ++j) dst[j] = 0.0f;
    for (int k = 0; k < kS24Kept; ++k) dst[pos[k]] = static_cast<float>(F::level(b[i], k)) * d;
  }
}

template <typename F>
void quantize(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* b = static_cast<typename F::Block*>(dst);
  float kept[kS24Kept];
  for (int64_t i = 0; i < n / kS24Block; ++i, src += kS24Block) {
    gather_kept(src, kept, b[i].codes);
    F::encode(kept, b[i]);
  }
}

// Kept values 16h..16h+15 sit in the first (h = 0) or second 32 positions of the block:
// one activation block each.
template <typename F>
float dot(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const typename F::Block*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  uint8_t pos[kS24Kept];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kS24Block; ++i) {
    s24_positions(a[i].codes, pos);
    for (int h = 0; h < 2; ++h) {
      const BlockQ8_0& xb = b[2 * i + h];
      int sumi = 0;
      for (int k = 16 * h; k < 16 * h + 16; ++k) sumi += F::level(a[i], k) * xb.qs[pos[k] - kQK * h];
      sum += F::scaled(sumi, fp16_to_fp32(a[i].d), fp16_to_fp32(xb.d));
    }
  }
  return sum;
}

}  // namespace

void dequantize_row_q8_0_s24(const void* src, float* dst, int64_t n) { dequantize<Q8>(src, dst, n); }
void dequantize_row_q4_0_s24(const void* src, float* dst, int64_t n) { dequantize<Q4>(src, dst, n); }
void quantize_row_q8_0_s24(const float* src, void* dst, int64_t n) { quantize<Q8>(src, dst, n); }
void quantize_row_q4_0_s24(const float* src, void* dst, int64_t n) { quantize<Q4>(src, dst, n); }
float vec_dot_q8_0_s24_q8_0(int64_t n, const void* w, const void* x) { return dot<Q8>(n, w, x); }
float vec_dot_q4_0_s24_q8_0(int64_t n, const void* w, const void* x) { return dot<Q4>(n, w, x); }

}  // namespace quant
}  // namespace pagoda
