// What `pagoda quantize` will write, decided before the first byte: each tensor's output
// type (by the TypePolicy), whether its bytes are converted or copied as they are, and
// the sizes. Building the plan checks everything that can be checked without reading the
// weights (sources it cannot convert, requantizing without --allow-requantize, split
// files), so an error never leaves a half-written file behind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "quant/type_policy.h"

namespace pagoda {

struct TensorPlan {
  const GgufTensor* source = nullptr;
  TensorTypeChoice choice;
  DType type = DType::F32;  // the output type (choice.type)
  bool convert = false;     // false: the source bytes are copied unchanged
  int64_t rows = 0;         // all dimensions past the first
  int64_t cols = 0;         // shape[0]
  size_t out_bytes = 0;
};

struct QuantizePlan {
  std::vector<TensorPlan> tensors;
  size_t in_bytes = 0;   // tensor data only
  size_t out_bytes = 0;
  int64_t params = 0;
};

Result<QuantizePlan> plan_quantization(const GgufFile& file, const TypePolicy& policy, bool allow_requantize);

// Lines telling the user what the plan does beyond the plain target: tensors that fell
// back to a wider format (grouped by cause) and --keep rules that matched nothing.
std::vector<std::string> plan_notes(const QuantizePlan& plan, const TypePolicy& policy);

}  // namespace pagoda
