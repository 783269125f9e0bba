// Dispatch from a DType to its row functions: the rows of tensor/formats.inc that have
// arithmetic. A type without a row here has no operations.
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
#define PAGODA_FORMAT(NAME, ID, BLOCK, BYTES, FILE_TYPE, DOT_TYPE, DEQUANTIZE, QUANTIZE, DOT) \
  {DType::NAME, DType::DOT_TYPE, quant::DEQUANTIZE, quant::QUANTIZE, quant::DOT},
#include "tensor/formats.inc"
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
