// The --method of `pagoda quantize` and the strategy it builds (src/quant/quant_strategy.h):
// rtn (round to nearest), awq or gptq (src/quantize/calibrated.h), and --prune for the
// 2:4 sparse targets. The calibrated
// methods run the source model over the --calib text here, before the first tensor is
// written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "quant/quant_strategy.h"
#include "quant/type_policy.h"

namespace pagoda {

struct QuantMethodOptions {
  std::string method = "rtn";  // rtn | awq | gptq
  std::string calib_path;      // --calib: calibration text (awq, gptq)
  int32_t calib_tokens = 4096; // --calib-tokens
  int32_t calib_ctx = 512;     // --calib-ctx: tokens per calibration chunk
  std::string prune = "magnitude";  // --prune: magnitude | wanda | sparsegpt (2:4 sparse targets)
};

// The strategy for the options, or an error a user can act on (an unknown method, a
// calibrated method without --calib, a calibration that fails).
Result<std::unique_ptr<QuantStrategy>> make_quant_strategy(const QuantMethodOptions& options, const GgufFile& source,
                                                           const TypePolicy& policy, ThreadPool& pool);

}  // namespace pagoda
