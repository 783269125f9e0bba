// Which format each converted tensor is written in, by llama.cpp's converter rules:
// vectors (biases, norms) and anything named *_norm.weight stay F32, as do the position
// and token-type embeddings and any tensor not named *.weight; every other matrix gets
// the requested type, and a matrix whose rows the type's blocks do not divide falls back
// (a K-quant to its 32-value sibling, else F16, as `pagoda quantize` does; Q8_0 to F16
// as llama.cpp's converter does). Pure.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tensor/dtype.h"

namespace pagoda {

struct OutputTypeChoice {
  DType type = DType::F32;
  std::string note;  // non-empty when the matrix fell back from the requested type
};

// shape is GGUF's: shape[0] is the row length.
OutputTypeChoice convert_output_type(std::string_view gguf_name, std::span<const int64_t> shape, DType target);

// --type: "auto" (F16, or BF16 when the checkpoint's weights are BF16, as llama.cpp's
// converter picks) or any format `pagoda quantize` writes except the W8A8 and 2:4 ones.
Result<DType> parse_convert_type(std::string_view name, DType checkpoint_type);
std::string convert_type_names();

}  // namespace pagoda
