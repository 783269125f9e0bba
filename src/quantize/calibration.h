// Calibration for `pagoda quantize --method awq|gptq`: runs the source model over a text
// and records, for each layer and each input its linear maps share (model.h's
// LinearInput), what the calibrated methods need: GPTQ the Hessian H = sum of x x^T,
// AWQ the mean |x| per channel and a sample of token rows to measure quantized outputs
// on. The statistics come from the unquantized model in one pass (layers are not
// re-run on their quantized predecessors' outputs).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "model/model.h"

namespace pagoda {

struct CalibrationOptions {
  std::string text_path;
  int32_t ctx = 512;            // tokens per chunk, each starting a fresh context
  int32_t max_tokens = 4096;    // calibration tokens in all
  int32_t sample_rows = 512;    // token rows kept per input for AWQ's search
  bool hessian = false;         // GPTQ
  bool samples = false;         // AWQ
};

struct InputStats {
  int64_t cols = 0;
  int64_t tokens = 0;
  std::vector<float> hessian;     // cols x cols, sum over tokens of x x^T
  std::vector<double> abs_sum;    // per channel, sum of |x|
  std::vector<double> sq_sum;     // per channel, sum of x^2 (Wanda's activation norms)
  std::vector<float> sample;      // sample_rows x cols, evenly spaced tokens
  int64_t sample_count = 0;
  std::vector<float> mean_abs() const;
};

struct CalibrationStats {
  std::vector<std::array<InputStats, kNumLinearInputs>> layers;
  // An MoE model's experts, [layer][expert]: the rows routed to each (kFfn: its gate/up's
  // input, kFfnDown: its down's); empty for a dense model.
  std::vector<std::vector<std::array<InputStats, kNumLinearInputs>>> experts;
  int64_t tokens = 0;
  double seconds = 0;
};

// Loads the model from `file` (F32/F16/BF16 weights), tokenizes the text and runs it in
// chunks. Fails on a text too short for one chunk, a model that does not load, or GPTQ
// Hessians (one per input, and per expert of an MoE model) that do not fit in memory.
Result<CalibrationStats> collect_calibration(const GgufFile& file, const CalibrationOptions& options, ThreadPool& pool);

}  // namespace pagoda
