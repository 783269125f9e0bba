// The --method of `pagoda quantize` and the strategy it builds (src/quant/quant_strategy.h).
// Methods that need calibration statistics get the source model and the --calib file
// here, so they can gather what they need before the first tensor is written.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "quant/quant_strategy.h"

namespace pagoda {

struct QuantMethodOptions {
  std::string method = "rtn";  // rtn | awq | gptq
  std::string calib_path;      // --calib: calibration text (unused by rtn)
};

// The strategy for the options, or an error a user can act on (an unknown method, a
// method not available yet, a calibration file that is missing).
Result<std::unique_ptr<QuantStrategy>> make_quant_strategy(const QuantMethodOptions& options, const GgufFile& source);

}  // namespace pagoda
