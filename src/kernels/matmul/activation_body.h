// Internal: the conversion of activation rows to Q8_0 (for the legacy formats) and Q8_K
// (for the K-quants), written once over the vector layer (vec_avx2.h) and included by
// the legacy and kquant target files after their V header. Both are bit-exact with the
// scalar references (quant::quantize_row_q8_0_activation, quant::quantize_row_q8_K):
// the same float operations per value, nearest_int's clamp to +-kRoundLimit and
// magic-number rounding, the int8 cast keeping the low byte. Everything has internal
// linkage.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/matmul/legacy_layout.h"
#include "quant/blocks.h"

namespace pagoda::simd {
namespace {

template <class V>
struct Activations {
  using F = typename V::F;
  static constexpr int L = V::kLanes;

  // amax ignores NaN like the scalar loop's `a > amax` (V::max returns its second operand
  // when either is NaN); min(lim, q) / max(-lim, q) keep a NaN q, as the scalar ternaries.
  static void q8_0(const float* src, void* dst, int64_t n) {
    static_assert(kQK % L == 0);
    constexpr int kVecs = kQK / L;
    auto* out = static_cast<BlockQ8_0*>(dst);
    const F lim = V::set1(legacy::kRoundLimit), nlim = V::set1(-legacy::kRoundLimit);
    const F magic = V::set1(legacy::kRoundMagic);
    for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
      F v[kVecs];
      F m = V::zero();
      for (int k = 0; k < kVecs; ++k) {
        v[k] = V::load(src + L * k);
        m = V::max(V::abs(v[k]), m);
      }
      const float amax = V::hmax(m);
      out[i].d = _cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT);
      const F id = V::set1(amax != 0.0f ? 127.0f / amax : 0.0f);
      for (int k = 0; k < kVecs; ++k) {
        const F c = V::max(nlim, V::min(lim, V::mul(v[k], id)));
        V::store_bytes(out[i].qs + L * k, V::bits_of(V::add(c, magic)));
      }
    }
  }

  // The scale comes from the first value of largest |x| (sign kept), and values are
  // clamped to 127 before the int8 cast.
  static void q8_K(const float* src, void* dst, int64_t n) {
    constexpr int kVecs = kQK_K / L;
    auto* y = static_cast<BlockQ8_K*>(dst);
    for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
      BlockQ8_K& b = y[i];
      F vmax = V::zero();
      for (int j = 0; j < kVecs; ++j) vmax = V::max(V::abs(V::load(src + L * j)), vmax);
      const float amax = V::hmax(vmax);
      if (amax == 0.0f) {
        std::memset(&b, 0, sizeof(b));
        continue;
      }
      float max = 0.0f;
      const F va = V::set1(amax);
      for (int j = 0; j < kVecs; ++j) {
        const uint32_t hit = V::bits(V::eq(V::abs(V::load(src + L * j)), va));
        if (hit != 0) {
          max = src[L * j + __builtin_ctz(hit)];
          break;
        }
      }
      const float iscale = -127.0f / max;
      const F vs = V::set1(iscale);
      const F lim = V::set1(legacy::kRoundLimit), nlim = V::set1(-legacy::kRoundLimit);
      const F magic = V::set1(legacy::kRoundMagic);
      for (int j = 0; j < kVecs; ++j) {
        F v = V::mul(vs, V::load(src + L * j));
        v = V::max(nlim, V::min(lim, v));
        const typename V::I bits = V::bits_of(V::add(v, magic));
        const typename V::I q = V::i_sub(V::i_and(bits, V::set1_i(0x007fffff)), V::set1_i(0x00400000));
        V::store_bytes(b.qs + L * j, V::i_min(q, V::set1_i(127)));
      }
      // Group sums of the int8 quants (exact in float: at most 16 * 128).
      for (int g = 0; g < kQK_K / 16; ++g) {
        F s = V::load_i8(b.qs + 16 * g);
        for (int k = L; k < 16; k += L) s = V::add(s, V::load_i8(b.qs + 16 * g + k));
        b.bsums[g] = static_cast<int16_t>(V::hsum(s));
      }
      b.d = 1.0f / iscale;
    }
  }
};

}  // namespace
}  // namespace pagoda::simd
