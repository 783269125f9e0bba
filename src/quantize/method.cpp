#include "quantize/method.h"

#include <fmt/format.h>

#include "quantize/calibrated.h"
#include "quant/sparse24.h"

namespace pagoda {
namespace {

// AWQ and GPTQ as a QuantStrategy: matrices GPTQ handles go through it, AWQ's rewritten
// floats replace the source's, and everything else is rounded to nearest.
class CalibratedStrategy final : public QuantStrategy {
 public:
  CalibratedStrategy(std::string name, std::unique_ptr<CalibratedQuantizer> q) : name_(std::move(name)), q_(std::move(q)) {}
  std::string_view name() const override { return name_; }
  const std::vector<float>* replacement(std::string_view name) const override {
    return q_->replacement(std::string(name));
  }
  Status quantize(const QuantJob& job, ThreadPool& pool) override {
    auto done = q_->quantize(std::string(job.name), job.weights, job.rows, job.cols, job.type, job.dst);
    if (!done) return done.status();
    if (*done) return Status::ok();
    return rtn_.quantize(job, pool);
  }

 private:
  std::string name_;
  std::unique_ptr<CalibratedQuantizer> q_;
  RtnStrategy rtn_;
};

}  // namespace

Result<std::unique_ptr<QuantStrategy>> make_quant_strategy(const QuantMethodOptions& options, const GgufFile& source,
                                                           const TypePolicy& policy, ThreadPool& pool) {
  Prune prune;
  if (options.prune == "magnitude") prune = Prune::kMagnitude;
  else if (options.prune == "wanda") prune = Prune::kWanda;
  else if (options.prune == "sparsegpt") prune = Prune::kSparseGpt;
  else return error("unknown --prune '{}'; choose magnitude, wanda or sparsegpt", options.prune);
  const bool sparse = is_sparse24(policy.target());
  if (prune != Prune::kMagnitude && !sparse)
    return error("--prune {} applies to 2:4 sparse formats: add --sparsity 2:4 (or --type Q8_0_S24 / Q4_0_S24)",
                 options.prune);
  if (sparse && options.method != "rtn")
    return error("--method {} does not apply to 2:4 sparse formats; --prune sparsegpt is GPTQ's counterpart for "
                 "them (pruning with the Hessian, compensating the kept weights)",
                 options.method);
  if (options.method == "rtn" && prune == Prune::kMagnitude)
    return std::unique_ptr<QuantStrategy>(std::make_unique<RtnStrategy>());
  QuantMethod method;
  if (options.method == "rtn") method = QuantMethod::kRtn;
  else if (options.method == "awq") method = QuantMethod::kAwq;
  else if (options.method == "gptq") method = QuantMethod::kGptq;
  else if (options.method == "awq+gptq") method = QuantMethod::kAwqGptq;
  else return error("unknown --method '{}'; choose rtn, awq, gptq or awq+gptq", options.method);
  if (policy.target() == DType::I8 && method != QuantMethod::kAwq)
    return error("--method {} does not apply to W8A8 (GPTQ needs a block format's grid); use --method awq or rtn",
                 options.method);
  const std::string& what = method == QuantMethod::kRtn ? "--prune " + options.prune : "--method " + options.method;
  if (options.calib_path.empty())
    return error("{} needs calibration text: --calib FILE (plain text, a few thousand tokens or more)", what);
  if (options.calib_tokens < 1 || options.calib_ctx < 16)
    return error("--calib-tokens must be positive and --calib-ctx at least 16");
  CalibrationOptions co;
  co.text_path = options.calib_path;
  co.max_tokens = options.calib_tokens;
  co.ctx = options.calib_ctx;
  const TensorTypeFn type_of = [&policy](const GgufTensor& t) { return policy.choose(t.name, t.shape, t.type).type; };
  auto q = CalibratedQuantizer::create(method, prune, source, type_of, co, pool);
  if (!q) return q.status();
  for (const std::string& line : (*q)->report()) fmt::print(stderr, "{}\n", line);
  const std::string name = method == QuantMethod::kRtn ? options.prune : options.method;
  return std::unique_ptr<QuantStrategy>(std::make_unique<CalibratedStrategy>(name, std::move(q.value())));
}

}  // namespace pagoda
