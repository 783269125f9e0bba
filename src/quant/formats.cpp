// Dispatch from a DType to its row functions. One table row per format keeps "what can
// this type do" in a single place; a null entry means the operation is not supported.
#include "quant/formats.h"

#include <cassert>

#include "quant/rows.h"

namespace pagoda {
namespace {

using DequantizeFn = void (*)(const void*, float*, int64_t);
using QuantizeFn = void (*)(const float*, void*, int64_t);
using DotFn = float (*)(int64_t, const void*, const void*);

struct FormatOps {
  DType type;
  DType dot_type;
  DequantizeFn dequantize;
  QuantizeFn quantize;
  DotFn dot;
};

constexpr FormatOps kOps[] = {
    {DType::F32, DType::F32, quant::dequantize_row_f32, quant::quantize_row_f32, quant::vec_dot_f32},
    {DType::F16, DType::F16, quant::dequantize_row_f16, quant::quantize_row_f16, quant::vec_dot_f16},
    {DType::BF16, DType::BF16, quant::dequantize_row_bf16, quant::quantize_row_bf16, quant::vec_dot_bf16},
    {DType::Q4_0, DType::Q8_0, quant::dequantize_row_q4_0, quant::quantize_row_q4_0, quant::vec_dot_q4_0_q8_0},
    {DType::Q4_1, DType::Q8_0, quant::dequantize_row_q4_1, quant::quantize_row_q4_1, quant::vec_dot_q4_1_q8_0},
    {DType::Q5_0, DType::Q8_0, quant::dequantize_row_q5_0, quant::quantize_row_q5_0, quant::vec_dot_q5_0_q8_0},
    {DType::Q5_1, DType::Q8_0, quant::dequantize_row_q5_1, quant::quantize_row_q5_1, quant::vec_dot_q5_1_q8_0},
    {DType::Q8_0, DType::Q8_0, quant::dequantize_row_q8_0, quant::quantize_row_q8_0, quant::vec_dot_q8_0_q8_0},
    {DType::Q2_K, DType::Q8_K, quant::dequantize_row_q2_K, quant::quantize_row_q2_K, quant::vec_dot_q2_K_q8_K},
    {DType::Q3_K, DType::Q8_K, quant::dequantize_row_q3_K, quant::quantize_row_q3_K, quant::vec_dot_q3_K_q8_K},
    {DType::Q4_K, DType::Q8_K, quant::dequantize_row_q4_K, quant::quantize_row_q4_K, quant::vec_dot_q4_K_q8_K},
    {DType::Q5_K, DType::Q8_K, quant::dequantize_row_q5_K, quant::quantize_row_q5_K, quant::vec_dot_q5_K_q8_K},
    {DType::Q6_K, DType::Q8_K, quant::dequantize_row_q6_K, quant::quantize_row_q6_K, quant::vec_dot_q6_K_q8_K},
    {DType::Q8_K, DType::Q8_K, quant::dequantize_row_q8_K, quant::quantize_row_q8_K, quant::vec_dot_q8_K_q8_K},
};

const FormatOps* find(DType t) {
  for (const auto& ops : kOps)
    if (ops.type == t) return &ops;
  return nullptr;
}

[[maybe_unused]] bool whole_blocks(DType t, int64_t n) {
  return n >= 0 && n % dtype_info(t).block_size == 0;
}

}  // namespace

bool can_dequantize(DType t) {
  const FormatOps* ops = find(t);
  return ops != nullptr && ops->dequantize != nullptr;
}

bool can_quantize(DType t) {
  const FormatOps* ops = find(t);
  return ops != nullptr && ops->quantize != nullptr;
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  assert(can_dequantize(t) && whole_blocks(t, n));
  find(t)->dequantize(src, dst, n);
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  assert(can_quantize(t) && whole_blocks(t, n));
  find(t)->quantize(src, dst, n);
}

void quantize_activation_row(DType t, const float* src, void* dst, int64_t n) {
  assert(can_quantize(t) && whole_blocks(t, n));
  if (t == DType::Q8_0) quant::quantize_row_q8_0_activation(src, dst, n);
  else find(t)->quantize(src, dst, n);
}

// Types without arithmetic here (Q8_1, integer tensors) report F32 so a caller asking
// before checking can_dequantize still gets a usable activation format.
DType vec_dot_type(DType t) {
  const FormatOps* ops = find(t);
  return ops != nullptr ? ops->dot_type : DType::F32;
}

float vec_dot(DType t, int64_t n, const void* w, const void* x) {
  assert(can_dequantize(t) && whole_blocks(t, n));
  return find(t)->dot(n, w, x);
}

}  // namespace pagoda
