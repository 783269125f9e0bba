#include "kernels/matmul/packed_weights.h"

#include <cstdlib>
#include <cstring>

#include "kernels/matmul/packed_layout.h"
#include "kernels/matmul/packed_pack.h"
#include "base/cpu_features.h"
#include "kernels/simd/simd_target.h"
#include "quant/blocks.h"
#include "quant/k_unpack.h"

namespace pagoda {

namespace simd {
void register_packed_avx512(DType t, PackedKernels& k);
void register_packed_k4_avx512(PackedKernels& k);
void register_packed_k6_avx512(PackedKernels& k);
void register_packed_k4_amx(PackedKernels& k);
void register_packed_k6_amx(PackedKernels& k);
}  // namespace simd

namespace {

// Calls fill(dst, scales, r, row, b) for every row that exists in panels [p0, p1), for
// each block b of its panel (dst: the block's bytes in the panel; scales: its 32 bytes of
// FP16 scales, for the layouts that keep them in pairs), all zeroed first.
template <typename L, typename Fill>
void for_each_panel_block(int64_t rows, int64_t nb, int64_t p0, int64_t p1, uint8_t* out, Fill fill) {
  const size_t panel_bytes = packed::panel_bytes<L>(nb);
  for (int64_t p = p0; p < p1; ++p) {
    uint8_t* panel = out + static_cast<size_t>(p) * panel_bytes;
    std::memset(panel, 0, panel_bytes);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t r = 0; r < kPanelRows && p * kPanelRows + r < rows; ++r)
        fill(panel + packed::block_at<L>(b), panel + packed::scales_at<L>(b), r, p * kPanelRows + r, b);
  }
}

template <typename B>
void pack_typed(const uint8_t* w, size_t ws, int64_t rows, int64_t cols, int64_t p0, int64_t p1, uint8_t* out) {
  using L = packed::Layout<B>;
  for_each_panel_block<L>(rows, cols / kQK, p0, p1, out, [&](uint8_t* dst, uint8_t*, int64_t r, int64_t row, int64_t b) {
    const B& blk = reinterpret_cast<const B*>(w + static_cast<size_t>(row) * ws)[b];
    const auto* qs = reinterpret_cast<const uint8_t*>(blk.qs);
    // Register j, lane r: quant bytes 4j..4j+3 of the row.
    for (int j = 0; j < L::kRegs; ++j)
      for (int k = 0; k < 4; ++k) dst[64 * j + 4 * r + k] = static_cast<uint8_t>(qs[4 * j + k] ^ L::kFlip);
    if constexpr (L::kHighBits) std::memcpy(dst + L::kQhAt + 4 * r, blk.qh, 4);
    std::memcpy(dst + L::kScaleAt + 2 * r, &blk.d, 2);
  });
}

void pack_q4_K(const uint8_t* w, size_t ws, int64_t rows, int64_t cols, int64_t p0, int64_t p1, uint8_t* out) {
  using L = packed::K4Layout;
  for_each_panel_block<L>(rows, cols / kQK_K, p0, p1, out, [&](uint8_t* dst, uint8_t*, int64_t r, int64_t row, int64_t b) {
    const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(w + static_cast<size_t>(row) * ws)[b];
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 8; ++k)
        for (int i = 0; i < 4; ++i) dst[(8 * c + k) * 64 + 4 * r + i] = blk.qs[32 * c + 4 * k + i];
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      quant::unpack_k4_scale_min(j, blk.scales, &sc, &m);
      dst[L::kScalesAt + 16 * j + r] = sc;
      dst[L::kMinsAt + 32 * (j / 2) + 2 * r + (j % 2)] = m;
    }
    std::memcpy(dst + L::kDAt + 2 * r, &blk.d, 2);
    std::memcpy(dst + L::kDminAt + 2 * r, &blk.dmin, 2);
  });
}

void pack_q6_K(const uint8_t* w, size_t ws, int64_t rows, int64_t cols, int64_t p0, int64_t p1, uint8_t* out) {
  using L = packed::K6Layout;
  for_each_panel_block<L>(rows, cols / kQK_K, p0, p1, out, [&](uint8_t* dst, uint8_t* d, int64_t r, int64_t row, int64_t b) {
    const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(w + static_cast<size_t>(row) * ws)[b];
    for (int j = 0; j < 16; ++j) dst[L::kScalesAt + 16 * j + r] = static_cast<uint8_t>(blk.scales[j]);
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 8; ++k) {
        for (int s = 0; s < 2; ++s) std::memcpy(dst + L::ql_at(n, s, k) + 4 * r, blk.ql + 64 * n + 32 * s + 4 * k, 4);
        std::memcpy(dst + L::qh_at(n, k) + 4 * r, blk.qh + 32 * n + 4 * k, 4);
      }
    std::memcpy(d + 2 * r, &blk.d, 2);
  });
}

const PackedKernels* lookup(DType t, bool respect_env) {
  static const PackedKernels q4 = [] {
    PackedKernels k;
    simd::register_packed_avx512(DType::Q4_0, k);
    return k;
  }();
  static const PackedKernels q5 = [] {
    PackedKernels k;
    simd::register_packed_avx512(DType::Q5_0, k);
    return k;
  }();
  static const PackedKernels q8 = [] {
    PackedKernels k;
    simd::register_packed_avx512(DType::Q8_0, k);
    return k;
  }();
  static const PackedKernels q4k = [] {
    PackedKernels k;
    simd::register_packed_k4_avx512(k);
    return k;
  }();
  static const PackedKernels q6k = [] {
    PackedKernels k;
    simd::register_packed_k6_avx512(k);
    return k;
  }();
  if (respect_env) {
    static const bool off = [] {
      const char* e = std::getenv("PAGODA_REPACK");
      if (e == nullptr) return false;
      for (const char* no : {"0", "off", "false", "no"})
        if (std::strcmp(e, no) == 0) return true;
      return false;
    }();
    if (off || best_simd_target() != SimdTarget::kAvx512) return nullptr;
  }
  const PackedKernels* k = t == DType::Q4_0   ? &q4
                           : t == DType::Q5_0 ? &q5
                           : t == DType::Q8_0 ? &q8
                           : t == DType::Q4_K ? &q4k
                           : t == DType::Q6_K ? &q6k
                                              : nullptr;
  return k != nullptr && k->gemv != nullptr ? k : nullptr;
}

// The AMX tiles (with the VNNI GEMV), for the types that have one. Q4_0 and Q8_0 have
// none: with a scale per 32 quants, a tile's dots are one tdpbsud per block and token
// group, and the per-block tile loads, stores and per-token scaling cost more than the
// dpbusd they replace (docs/kernels.md, "AMX").
const PackedKernels* lookup_amx(DType t) {
  static const PackedKernels q4k = [] {
    PackedKernels k;
    simd::register_packed_k4_avx512(k);
    simd::register_packed_k4_amx(k);
    return k;
  }();
  static const PackedKernels q6k = [] {
    PackedKernels k;
    simd::register_packed_k6_avx512(k);
    simd::register_packed_k6_amx(k);
    return k;
  }();
  return t == DType::Q4_K ? &q4k : t == DType::Q6_K ? &q6k : nullptr;
}

}  // namespace

const PackedKernels* packed_kernels(DType t) {
  const PackedKernels* k = lookup(t, true);
  return k != nullptr ? packed_kernels_best(t) : nullptr;
}

const PackedKernels* packed_kernels_avx512(DType t) {
  // Looked up on every matmul of a packed matrix: the CPU check is made once.
  static const bool runs = [] {
    for (SimdTarget s : runnable_simd_targets())
      if (s == SimdTarget::kAvx512) return true;
    return false;
  }();
  return runs ? lookup(t, false) : nullptr;
}

const PackedKernels* packed_kernels_amx(DType t) {
  return cpu_features().amx_int8 ? lookup_amx(t) : nullptr;
}

const PackedKernels* packed_kernels_best(DType t) {
  const PackedKernels* amx = packed_kernels_amx(t);
  return amx != nullptr ? amx : packed_kernels_avx512(t);
}

bool has_packed_layout(DType t) {
  return t == DType::Q4_0 || t == DType::Q5_0 || t == DType::Q8_0 || t == DType::Q4_K || t == DType::Q6_K;
}

size_t packed_panel_bytes(DType t, int64_t cols) {
  const int64_t nb = cols / dtype_info(t).block_size;
  switch (t) {
    case DType::Q4_0: return packed::panel_bytes<packed::Layout<BlockQ4_0>>(nb);
    case DType::Q5_0: return packed::panel_bytes<packed::Layout<BlockQ5_0>>(nb);
    case DType::Q8_0: return packed::panel_bytes<packed::Layout<BlockQ8_0>>(nb);
    case DType::Q4_K: return packed::panel_bytes<packed::K4Layout>(nb);
    case DType::Q6_K: return packed::panel_bytes<packed::K6Layout>(nb);
    default: return 0;
  }
}

size_t packed_bytes(DType t, int64_t rows, int64_t cols) {
  return static_cast<size_t>((rows + kPanelRows - 1) / kPanelRows) * packed_panel_bytes(t, cols);
}

void pack_panels(DType t, const uint8_t* w, size_t w_stride, int64_t rows, int64_t cols, int64_t p0, int64_t p1,
                 uint8_t* out) {
  if (packed_kernels_avx512(t) != nullptr && simd::pack_legacy_avx512(t, w, w_stride, rows, cols, p0, p1, out)) return;
  if (t == DType::Q4_0) pack_typed<BlockQ4_0>(w, w_stride, rows, cols, p0, p1, out);
  if (t == DType::Q5_0) pack_typed<BlockQ5_0>(w, w_stride, rows, cols, p0, p1, out);
  if (t == DType::Q8_0) pack_typed<BlockQ8_0>(w, w_stride, rows, cols, p0, p1, out);
  if (t == DType::Q4_K) pack_q4_K(w, w_stride, rows, cols, p0, p1, out);
  if (t == DType::Q6_K) pack_q6_K(w, w_stride, rows, cols, p0, p1, out);
}

}  // namespace pagoda
