// F32 / F16 / BF16 rows. Conversions are bit-exact with numpy's astype, NaN payloads
// included, because gguf-py (numpy) is the oracle the tests compare against and a model
// converted by either tool must load to the same bits.
#include "quant/scalar_math.h"

#include <cstring>

#include "quant/rows.h"

namespace pagoda::quant {
namespace {

// base/fp16.h's arithmetic path quiets signalling NaNs; numpy moves the payload bits
// unchanged, so Inf/NaN take an integer path. Both paths are computed and one selected,
// which keeps the loop free of branches so it vectorizes.
inline float half_to_float(uint16_t h) {
  const uint32_t special =
      (static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7f800000u | (static_cast<uint32_t>(h & 0x03ffu) << 13);
  const uint32_t normal = fp32_to_bits(fp16_to_fp32(h));
  return fp32_from_bits((h & 0x7c00u) == 0x7c00u ? special : normal);
}

// NaN keeps its top payload bits (and stays a NaN when they are all zero), as numpy does;
// branch-free for the same reason as above.
inline uint16_t float_to_half(float f) {
  const uint32_t u = fp32_to_bits(f);
  uint32_t nan = 0x7c00u + ((u & 0x007fffffu) >> 13);
  nan += nan == 0x7c00u ? 1u : 0u;
  nan |= (u >> 16) & 0x8000u;
  const uint32_t regular = fp32_to_fp16(f);
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : regular);
}

}  // namespace

void dequantize_row_f32(const void* __restrict src, float* __restrict dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_row_f16(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(h[i]);
}

void dequantize_row_bf16(const void* __restrict src, float* __restrict dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}

void quantize_row_f32(const float* __restrict src, void* __restrict dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void quantize_row_f16(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = float_to_half(src[i]);
}

void quantize_row_bf16(const float* __restrict src, void* __restrict dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
}

// The F16/BF16 products are exact in float (11- or 8-bit significands) and F32 products
// round once, as in ggml; the sums run in double, as ggml's scalar path does (ggml_float),
// so long rows (n in the tens of thousands) do not drift. kLanes independent partial sums,
// added in a fixed order at the end, keep the result deterministic while letting the
// compiler vectorize; only the order of the double additions differs from ggml's serial
// loop, which is far below float resolution.
namespace {

constexpr int kLanes = 8;

template <typename Load>
float dot_in_double(int64_t n, Load load) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(load(i + l));
  for (; i < n; ++i) lane[0] += static_cast<double>(load(i));
  double sum = 0.0;
  for (double v : lane) sum += v;
  return static_cast<float>(sum);
}

}  // namespace

float vec_dot_f32(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  return dot_in_double(n, [&](int64_t i) { return a[i] * b[i]; });
}

float vec_dot_f16(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  return dot_in_double(n, [&](int64_t i) { return fp16_to_fp32(a[i]) * fp16_to_fp32(b[i]); });
}

float vec_dot_bf16(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const uint16_t*>(x);
  return dot_in_double(n, [&](int64_t i) { return bf16_to_fp32(a[i]) * bf16_to_fp32(b[i]); });
}

}  // namespace pagoda::quant
