// Internal: the SIMD bodies of the float formats (F32, F16, BF16; see dot_kernels.h),
// written once over the vector layer (vec_avx2.h) and included by float_avx2.cpp and
// float_avx512.cpp after their V header, with the target's register block shape and
// prefetch distance. Everything has internal linkage.
//
// Numerics: products of F16 or BF16 values are exact in float; the sums run in float
// lanes (FMA) and are added across lanes at the end, so they differ from the scalar
// references (double sums) by float rounding of the sum only, as ggml's SIMD path does.
// Activation conversion (quantize_x) is bit-exact with the scalar one, NaN included.
//
// dot (decode, a GEMV bound by memory bandwidth): the weight row streams once into four
// independent accumulators, with every line kPrefetchBytes ahead requested (0: none).
//
// tile (prefill, compute bound): register blocks of kRm rows x kRn tokens, each weight
// and activation vector loaded (and converted) once per block and step and used kRn or
// kRm times. The rows of a block stay in L1 while the block walks over the tokens. Edges
// run the same block at a smaller size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/matmul/dot_kernels.h"
#include "quant/formats.h"

namespace pagoda::simd {
namespace {

// Element formats as float lanes.
template <class V>
struct ElemF32 {
  using T = float;
  static typename V::F load(const T* p) { return V::load(p); }
  static typename V::F load_tail(const T* p, int64_t r) { return V::load_tail(p, r); }
};
template <class V>
struct ElemF16 {
  using T = uint16_t;
  static typename V::F load(const T* p) { return V::load_h(p); }
  static typename V::F load_tail(const T* p, int64_t r) { return V::load_h_tail(p, r); }
};
template <class V>
struct ElemBF16 {
  using T = uint16_t;
  static typename V::F load(const T* p) { return V::load_bf16(p); }
  static typename V::F load_tail(const T* p, int64_t r) { return V::load_bf16_tail(p, r); }
};

template <class V, int kRm, int kRn, int64_t kPrefetchBytes>
struct FloatBody {
  using F = typename V::F;
  static constexpr int L = V::kLanes;

  template <class E>
  static float dot(int64_t n, const void* wv, const void* xv) {
    const auto* w = static_cast<const typename E::T*>(wv);
    const auto* x = static_cast<const typename E::T*>(xv);
    F a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
    int64_t i = 0;
    for (; i + 4 * L <= n; i += 4 * L) {
      if constexpr (kPrefetchBytes > 0) {
        // Every line of the weights kPrefetchBytes on (into the next rows once past this
        // one's end): decode reads matrices far larger than the caches row after row.
        // (Integer arithmetic: the address may lie past the matrix, where a prefetch is
        // harmless but a pointer would not be.)
        constexpr int64_t kStepBytes = 4 * L * sizeof(typename E::T);
        const auto* ahead = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(w + i) + kPrefetchBytes);
#pragma GCC unroll 4
        for (int64_t o = 0; o < kStepBytes; o += 64) _mm_prefetch(ahead + o, _MM_HINT_T0);
      }
      a0 = V::fma(E::load(w + i), E::load(x + i), a0);
      a1 = V::fma(E::load(w + i + L), E::load(x + i + L), a1);
      a2 = V::fma(E::load(w + i + 2 * L), E::load(x + i + 2 * L), a2);
      a3 = V::fma(E::load(w + i + 3 * L), E::load(x + i + 3 * L), a3);
    }
    for (; i + L <= n; i += L) a0 = V::fma(E::load(w + i), E::load(x + i), a0);
    if (i < n) a1 = V::fma(E::load_tail(w + i, n - i), E::load_tail(x + i, n - i), a1);
    return V::hsum(V::add(V::add(a0, a1), V::add(a2, a3)));
  }

  // Stores the sums of acc[r][t] to y[t * ys + r], every one through the transposing sum
  // (its lanes added in the same tree whatever the block's shape), so a (row, token)
  // result does not depend on the block it fell in: how a matrix's rows are split over
  // threads, or how many tokens a call brings, changes no bits. When kLanes is a multiple
  // of RM, the accumulators of kLanes / RM tokens share one (lanes k * RM + r are token
  // t + k's rows; missing tokens are zeros); otherwise each token's RM rows take one.
  template <int RM, int RN>
  __attribute__((always_inline)) static void store_sums(F (&acc)[RM][RN], float* y, size_t ys) {
    if constexpr (L % RM == 0) {
      constexpr int G = L / RM;
      for (int t = 0; t < RN; t += G) {
        F a[L];
        for (int k = 0; k < G; ++k)
          for (int r = 0; r < RM; ++r) a[k * RM + r] = t + k < RN ? acc[r][t + k] : V::zero();
        alignas(64) float s[L];
        V::store(s, V::reduce(a));
        for (int k = 0; k < G && t + k < RN; ++k) std::memcpy(y + (t + k) * ys, s + k * RM, RM * sizeof(float));
      }
    } else {
      for (int t = 0; t < RN; ++t) {
        F a[L];
        for (int k = 0; k < L; ++k) a[k] = k < RM ? acc[k][t] : V::zero();
        alignas(64) float sums[L];
        V::store(sums, V::reduce(a));
        std::memcpy(y + t * ys, sums, RM * sizeof(float));
      }
    }
  }

  // One register block: y[t * ys + r] = dot(w + r * ws, x + t * xs) for r < RM, t < RN.
  template <class E, int RM, int RN>
  static void block(int64_t n, const typename E::T* w, size_t ws, const typename E::T* x, size_t xs, float* y,
                    size_t ys) {
    F acc[RM][RN];
    for (int r = 0; r < RM; ++r)
      for (int t = 0; t < RN; ++t) acc[r][t] = V::zero();
    int64_t i = 0;
    for (; i + L <= n; i += L) {
      F wv[RM];
      for (int r = 0; r < RM; ++r) wv[r] = E::load(w + r * ws + i);
      for (int t = 0; t < RN; ++t) {
        const F xv = E::load(x + t * xs + i);
        for (int r = 0; r < RM; ++r) acc[r][t] = V::fma(wv[r], xv, acc[r][t]);
      }
    }
    if (i < n) {
      F wv[RM];
      for (int r = 0; r < RM; ++r) wv[r] = E::load_tail(w + r * ws + i, n - i);
      for (int t = 0; t < RN; ++t) {
        const F xv = E::load_tail(x + t * xs + i, n - i);
        for (int r = 0; r < RM; ++r) acc[r][t] = V::fma(wv[r], xv, acc[r][t]);
      }
    }
    store_sums<RM, RN>(acc, y, ys);
  }

  template <class T>
  using BlockFn = void (*)(int64_t, const T*, size_t, const T*, size_t, float*, size_t);

  // Block kernels K<RM, RN>::run for every RM <= kRm, RN <= kRn.
  template <class T, template <int, int> class K>
  struct BlockTable {
    BlockFn<T> fn[kRm][kRn];
    constexpr BlockTable() : fn{} { fill_rows<1>(); }
    template <int RM>
    constexpr void fill_rows() {
      fill_row<RM, 1>();
      if constexpr (RM < kRm) fill_rows<RM + 1>();
    }
    template <int RM, int RN>
    constexpr void fill_row() {
      fn[RM - 1][RN - 1] = &K<RM, RN>::run;
      if constexpr (RN < kRn) fill_row<RM, RN + 1>();
    }
  };

  template <class T, template <int, int> class K>
  static void tile_with(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
                        int64_t tokens, float* y, size_t y_stride) {
    static constexpr BlockTable<T, K> kTable;
    const size_t ws = w_stride / sizeof(T), xs = x_stride / sizeof(T);
    const auto* wt = reinterpret_cast<const T*>(w);
    const auto* xt = reinterpret_cast<const T*>(x);
    for (int64_t r = 0; r < rows; r += kRm) {
      const int64_t rm = rows - r < kRm ? rows - r : kRm;
      for (int64_t t = 0; t < tokens; t += kRn) {
        const int64_t rn = tokens - t < kRn ? tokens - t : kRn;
        kTable.fn[rm - 1][rn - 1](n, wt + r * ws, ws, xt + t * xs, xs, y + t * y_stride + r, y_stride);
      }
    }
  }

  template <class E>
  struct Plain {
    template <int RM, int RN>
    struct K {
      static void run(int64_t n, const typename E::T* w, size_t ws, const typename E::T* x, size_t xs, float* y,
                      size_t ys) {
        block<E, RM, RN>(n, w, ws, x, xs, y, ys);
      }
    };
  };

  template <class E>
  static void tile(int64_t n, const uint8_t* w, size_t w_stride, int64_t rows, const uint8_t* x, size_t x_stride,
                   int64_t tokens, float* y, size_t y_stride) {
    tile_with<typename E::T, Plain<E>::template K>(n, w, w_stride, rows, x, x_stride, tokens, y, y_stride);
  }

  // ---------------------------------------------------------------- activations

  static void quantize_x_f32(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  }

  // vcvtps2ph rounds to nearest even like fp32_to_fp16 but quiets a signalling NaN, where
  // the scalar conversion keeps numpy's payload bits: a chunk holding a NaN goes scalar.
  static void quantize_x_f16(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; i += L) {
      const bool whole = n - i >= L;
      const F v = whole ? V::load(src + i) : V::load_tail(src + i, n - i);
      if (V::any_nan(v)) quantize_activation_row(DType::F16, src + i, out + i, whole ? L : n - i);
      else if (whole) V::store_h(out + i, v);
      else V::store_h_tail(out + i, v, n - i);
    }
  }

  static void quantize_x_bf16(const float* src, void* dst, int64_t n) {
    auto* out = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; i += L) {
      if (n - i >= L) V::store_bf16(out + i, V::load(src + i));
      else V::store_bf16_tail(out + i, V::load_tail(src + i, n - i), n - i);
    }
  }

  static void fill(DType t, DotKernels& k) {
    switch (t) {
      case DType::F32:
        k.dot = dot<ElemF32<V>>;
        k.tile = tile<ElemF32<V>>;
        k.quantize_x = quantize_x_f32;
        break;
      case DType::F16:
        k.dot = dot<ElemF16<V>>;
        k.tile = tile<ElemF16<V>>;
        k.quantize_x = quantize_x_f16;
        break;
      case DType::BF16:
        k.dot = dot<ElemBF16<V>>;
        k.tile = tile<ElemBF16<V>>;
        k.quantize_x = quantize_x_bf16;
        break;
      default: break;
    }
  }
};

}  // namespace
}  // namespace pagoda::simd
