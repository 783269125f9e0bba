// How one weight matrix becomes its quantized bytes. `pagoda quantize` decides the target
// type of each tensor (type_policy.h) and hands the tensor's float rows to a strategy;
// round-to-nearest (RTN, llama.cpp's reference quantizers) is the default, and methods
// that need calibration statistics (AWQ, GPTQ) plug in as further strategies holding
// their statistics themselves, looked up by tensor name.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace pagoda {

// One tensor to encode: `rows` rows of `cols` floats (row-major, ne[0] = cols is the
// contiguous dimension, as in GGUF; a 3-D expert tensor comes as ne[1] * ne[2] rows).
struct QuantJob {
  std::string_view name;  // the GGUF tensor name, e.g. "blk.3.ffn_down.weight"
  const float* weights = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  DType type = DType::F32;  // the target; can_quantize(type), cols a multiple of its block
  void* dst = nullptr;      // rows * row_bytes(type, cols) bytes, block-aligned
};

class QuantStrategy {
 public:
  virtual ~QuantStrategy() = default;
  virtual std::string_view name() const = 0;
  // Fills job.dst completely, or fails with a message naming the tensor. Called once per
  // tensor, from one thread; may use the pool.
  virtual Status quantize(const QuantJob& job, ThreadPool& pool) = 0;
  // Float values to write instead of the source's for tensor `name` (AWQ folds its scales
  // into norms and matrices), or null. Also asked for the tensors that are not quantized.
  virtual const std::vector<float>* replacement(std::string_view name) const { return nullptr; }
};

// Round to nearest, row by row: the bytes of llama.cpp's quantize_row_*_ref.
class RtnStrategy final : public QuantStrategy {
 public:
  std::string_view name() const override { return "rtn"; }
  Status quantize(const QuantJob& job, ThreadPool& pool) override;
};

}  // namespace pagoda
