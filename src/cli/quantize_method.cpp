#include "cli/quantize_method.h"

namespace pagoda {

Result<std::unique_ptr<QuantStrategy>> make_quant_strategy(const QuantMethodOptions& options, const GgufFile&) {
  if (options.method == "rtn") return std::unique_ptr<QuantStrategy>(std::make_unique<RtnStrategy>());
  if (options.method == "awq" || options.method == "gptq")
    return error("--method {} is not available yet; use --method rtn (round to nearest, the default)",
                 options.method);
  return error("unknown --method '{}'; choose rtn, awq or gptq", options.method);
}

}  // namespace pagoda
