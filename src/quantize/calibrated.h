// The calibrated quantization methods of `pagoda quantize` (--method awq|gptq), on top of the calibration
// statistics (quantize_calibration.h) and the math in src/quant (awq.h, gptq.h).
// AWQ rewrites float tensors before they are quantized: each layer matrix's input
// channels are multiplied by searched scales and the producing tensor (an RMSNorm's
// weight, or the rows of the up or V projection) is divided by them, which leaves the
// unquantized model's function unchanged. GPTQ replaces round to nearest for the layer
// matrices. Both write standard block formats.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <span>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "quantize/calibration.h"
#include "gguf/gguf_file.h"
#include "quant/gptq.h"
#include "tensor/dtype.h"

namespace pagoda {

// kAwqGptq: AWQ's scales first, then GPTQ on the scaled matrices, whose inputs (and so
// Hessians) are divided by the same scales: H'_ij = H_ij / (s_i s_j).
enum class QuantMethod { kRtn, kAwq, kGptq, kAwqGptq };

// How layer matrices written in a 2:4 sparse format (quant/sparse24.h) choose the two
// weights of four they keep: magnitude (the format's own quantizer: the larger |w|),
// Wanda (|w| x the input channel's activation norm, Sun et al., 2023), or SparseGPT
// (sparsegpt_quantize_2_4: the Hessian's cost, the kept weights compensating and rounded in one pass).
enum class Prune { kMagnitude, kWanda, kSparseGpt };

// The format a tensor is written in (the quantize command's type policy).
using TensorTypeFn = std::function<DType(const GgufTensor& tensor)>;

class CalibratedQuantizer {
 public:
  // Runs the calibration and (AWQ) the scale search for every layer; the search
  // quantizes each matrix to the format type_of gives it.
  static Result<std::unique_ptr<CalibratedQuantizer>> create(QuantMethod method, Prune prune, const GgufFile& source,
                                                             const TensorTypeFn& type_of,
                                                             const CalibrationOptions& options, ThreadPool& pool);

  // AWQ: the float values to use instead of the file's tensor `name`, or null.
  const std::vector<float>* replacement(const std::string& name) const;
  // GPTQ: quantizes the layer matrix `name` (rows x cols floats at w) to t into dst; for
  // a 2:4 sparse t, prunes it as `prune` says first. False when the method leaves the
  // tensor to round to nearest (not a layer matrix, a format without a block grid, or a
  // row length it does not divide; magnitude pruning is the sparse format's own).
  Result<bool> quantize(const std::string& name, const float* w, int64_t rows, int64_t cols, DType t, void* dst);
  // One line per layer group: what the search chose and the calibration loss it saved.
  const std::vector<std::string>& report() const { return report_; }

 private:
  CalibratedQuantizer(QuantMethod method, Prune prune, ThreadPool& pool) : method_(method), prune_(prune), pool_(pool) {}
  // A matrix of an AWQ group: rows x the input's cols floats (into replaced_), and the
  // format it will be written in.
  struct AwqMatrix {
    float* data;
    int64_t rows;
    DType type;
  };
  Status run_awq(const GgufFile& source, const TensorTypeFn& type_of);
  std::vector<float> search_group(const InputStats& in, const std::vector<AwqMatrix>& mats, std::span<float> fold,
                                  bool fold_rows, std::span<float> bias, double* saved);
  // One line per MoE layer: how many calibration tokens its experts saw.
  void report_experts();
  // GPTQ of rows x in.cols floats at w with in's Hessian; key: (layer, input, expert or -1),
  // whose factor the matrices sharing the input reuse.
  Status gptq(InputStats& in, const std::tuple<int32_t, int32_t, int32_t>& key, const std::string& name, const float* w,
              int64_t rows, DType t, void* dst);

  // Wanda or SparseGPT on rows x in.cols floats at w, then the sparse format's quantizer.
  Status prune_sparse(InputStats& in, const std::tuple<int32_t, int32_t, int32_t>& key, const std::string& name,
                      const float* w, int64_t rows, DType t, void* dst);
  // The factor of in's Hessian under `key`, made once and shared by the matrices reading it.
  Result<const GptqFactor*> factor(InputStats& in, const std::tuple<int32_t, int32_t, int32_t>& key,
                                   const std::string& name);

  QuantMethod method_;
  Prune prune_;
  ThreadPool& pool_;
  CalibrationStats stats_;
  std::map<std::string, std::vector<float>> replaced_;
  std::map<std::tuple<int32_t, int32_t, int32_t>, GptqFactor> factors_;
  // Per (layer, input, expert or -1), when not all 1: GPTQ divides that input's Hessian by them.
  std::map<std::tuple<int32_t, int32_t, int32_t>, std::vector<float>> awq_scales_;
  float last_alpha_ = 0.0f;  // the alpha search_group chose last
  std::vector<std::string> report_;
  std::vector<float> work_;  // GPTQ's copy of the matrix being quantized
};

// Which layer and shared input a tensor name belongs to ("blk.3.ffn_up.weight" -> 3,
// kFfn; a shared expert's like the dense FFN's); false for tensors outside the layers'
// linear maps.
bool layer_matrix_input(const std::string& name, int32_t* layer, LinearInput* input);
// The same for an MoE layer's 3-D expert tensors ("blk.3.ffn_down_exps.weight" -> 3, kFfnDown).
bool expert_matrix_input(const std::string& name, int32_t* layer, LinearInput* input);

// Float rows of a 2-D F32/F16/BF16 (or any dequantizable) tensor.
std::vector<float> tensor_as_float(const GgufTensor& t);

}  // namespace pagoda
