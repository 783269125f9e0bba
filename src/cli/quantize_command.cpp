// `pagoda quantize IN OUT --type T`: writes a copy of a GGUF model with its weight
// matrices in another format, one tensor at a time (memory stays near the largest
// tensor), the rows of each split over the threads. Which tensor gets which type follows
// llama-quantize --pure (src/quant/type_policy.h), so llama.cpp reads the result and its
// own quantizer gives the same bytes.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>

#include "base/timer.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "base/human_size.h"
#include "cli/model_loader.h"
#include "cli/pull_progress.h"
#include "quantize/method.h"
#include "quantize/plan.h"
#include "quantize/progress.h"
#include "gguf/gguf_writer.h"
#include "quant/quantize_matrix.h"
#include "quant/sparse24.h"
#include "quant/type_policy.h"
#include "quant/w8a8.h"

namespace pagoda {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // ggml's GGML_QNT_VERSION

struct QuantizeArgs {
  std::string input;
  std::string output;
  std::string type;
  std::vector<std::string> keep;
  std::string sparsity;
  QuantMethodOptions method;
  int32_t threads = 0;
  bool allow_requantize = false;
};

// How a failure inside the writer's fill callback reaches write(), which removes the
// unfinished file and reports the message.
class TensorFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The output bytes of one tensor into dst (p.out_bytes long).
// A W8A8 tensor leaves its row scales in w8a8_scales for the scale tensor written next.
Status produce_tensor(const TensorPlan& p, QuantStrategy& strategy, ThreadPool& pool, std::vector<float>& scratch,
                      std::vector<float>& w8a8_scales, uint8_t* dst) {
  const GgufTensor& t = *p.source;
  const std::vector<float>* replaced = strategy.replacement(t.name);
  if (!p.convert && replaced == nullptr) {
    std::memcpy(dst, t.data, t.nbytes);
    return Status::ok();
  }
  if (!p.convert) {  // a tensor kept in its type whose values the method changed (AWQ's norms)
    quantize_matrix(t.type, replaced->data(), p.rows, p.cols, dst, pool);
    return Status::ok();
  }
  const float* w = replaced != nullptr ? replaced->data() : reinterpret_cast<const float*>(t.data);
  if (replaced == nullptr && (t.type != DType::F32 || reinterpret_cast<uintptr_t>(t.data) % alignof(float) != 0)) {
    scratch.resize(static_cast<size_t>(p.rows * p.cols));
    dequantize_matrix(t.type, t.data, p.rows, p.cols, scratch.data(), pool);
    w = scratch.data();
  }
  if (int64_t bad = first_non_finite_row(w, p.rows, p.cols, pool); bad >= 0)
    return error("row {} holds a NaN or an infinity; the source model is damaged", bad);
  if (p.type == DType::I8) {  // W8A8: the quants here, the row scales in the next tensor
    w8a8_scales.resize(static_cast<size_t>(p.rows));
    pool.parallel_for(p.rows, 16, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r)
        w8a8_scales[static_cast<size_t>(r)] =
            quantize_row_w8a8(w + r * p.cols, reinterpret_cast<int8_t*>(dst) + r * p.cols, p.cols);
    });
    return Status::ok();
  }
  return strategy.quantize(QuantJob{t.name, w, p.rows, p.cols, p.type, dst}, pool);
}

std::string tensor_counts(const QuantizePlan& plan) {
  std::map<std::string, int> converted, kept;
  for (const TensorPlan& p : plan.tensors) ++(p.convert ? converted : kept)[std::string(quantize_type_name(p.type))];
  std::string out;
  for (const auto& [name, n] : converted) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, name);
  for (const auto& [name, n] : kept) out += fmt::format("{}{} {} kept", out.empty() ? "" : ", ", n, name);
  return out;
}

int run_quantize(const QuantizeArgs& a) {
  Timer timer;
  auto type = parse_quantize_type(a.type);
  if (!type) return report_error(error("--type: {}", type.status().message()));
  if (!a.sparsity.empty()) {
    if (a.sparsity != "2:4")
      return report_error(error("--sparsity '{}': only 2:4 (two of every four weights kept) is offered", a.sparsity));
    auto sparse = sparse_counterpart(*type);
    if (!sparse) return report_error(sparse.status());
    type = *sparse;
  }
  std::vector<KeepRule> keep;
  for (const std::string& spec : a.keep) {
    auto rule = parse_keep_rule(spec);
    if (!rule) return report_error(rule.status());
    keep.push_back(std::move(rule.value()));
  }
  if (is_sparse24(*type)) keep.push_back(sparse_keeps_dense_rule(*type));
  std::error_code ec;
  if (std::filesystem::equivalent(a.input, a.output, ec))
    return report_error(error("the output {} is the input file; write to another path", a.output));
  if (std::filesystem::is_directory(a.output, ec))
    return report_error(error("the output {} is a directory; give a file name", a.output));

  auto path = resolve_model_arg(a.input);
  if (!path) return report_error(path.status());
  auto file = GgufFile::open(*path);
  if (!file) return report_error(file.status());
  const TypePolicy policy(*type, std::move(keep));
  auto plan_or = plan_quantization(*file, policy, a.allow_requantize);
  if (!plan_or) return report_error(plan_or.status());
  const QuantizePlan& plan = *plan_or;
  const int threads = a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency());
  ThreadPool pool(threads);
  auto strategy = make_quant_strategy(a.method, *file, policy, pool);
  if (!strategy) return report_error(strategy.status());

  GgufWriter writer(file->alignment());
  for (const auto& [key, value] : file->metadata())
    if (!key.starts_with("split.")) writer.set(key, value);  // one file out, as llama-quantize writes
  writer.set_u32("general.quantization_version", kQuantizationVersion);
  writer.set_u32("general.file_type", llama_file_type(*type));
  if (*type == DType::I8) writer.set_string(std::string(kW8A8FormatKey), std::string(kW8A8FormatName));

  for (const std::string& note : plan_notes(plan, policy)) fmt::print(stderr, "{}\n", note);
  QuantizeProgress progress(plan, QuantizeProgress::stderr_is_tty());
  std::vector<float> scratch;  // float rows of a non-F32 source, reused: one tensor at a time
  std::vector<float> w8a8_scales;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorPlan& p = plan.tensors[i];
    writer.add_tensor(p.source->name, p.source->shape, p.type, [&, i](uint8_t* dst) {
      const TensorPlan& tp = plan.tensors[i];
      progress.start(i);
      Timer t;
      Status st = produce_tensor(tp, **strategy, pool, scratch, w8a8_scales, dst);
      file->drop_pages(*tp.source);  // read once: keep the resident set near one tensor
      if (!st) {
        progress.finish();
        throw TensorFailed(st.message());
      }
      progress.done(i, t.seconds());
    });
    if (p.type == DType::I8)
      writer.add_tensor(p.source->name + std::string(kW8A8ScaleSuffix), {p.rows}, DType::F32,
                        [&](uint8_t* dst) { std::memcpy(dst, w8a8_scales.data(), w8a8_scales.size() * sizeof(float)); });
  }
  Status st = writer.write(a.output);
  progress.finish();
  if (!st) return report_error(st);

  const auto bpw = [&](size_t bytes) { return plan.params ? 8.0 * static_cast<double>(bytes) / plan.params : 0.0; };
  fmt::print("quantized {} -> {}: {} ({}), {} tensors: {}\n", a.input, a.output, quantize_type_name(*type),
             (*strategy)->name(), plan.tensors.size(), tensor_counts(plan));
  fmt::print("size {} -> {}, {:.2f} -> {:.2f} bits/weight, {:.2f} s ({} threads)\n",
             human_size(static_cast<double>(plan.in_bytes)), human_size(static_cast<double>(plan.out_bytes)),
             bpw(plan.in_bytes), bpw(plan.out_bytes), timer.seconds(), threads);
  return 0;
}

}  // namespace

Subcommand add_quantize_command(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* sub = add_subcommand(app, "quantize", "Write a copy of a GGUF model with its weight matrices quantized");
  sub->add_option("input", args->input, "Source GGUF file (F32, F16 or BF16 weights)")->required();
  sub->add_option("output", args->output, "GGUF file to write (replaced atomically when done)")->required();
  sub->add_option("--type", args->type,
                  "Format of the weight matrices: " + quantize_type_names() +
                      " (W8A8: Pagoda's int8 x int8 format, which llama.cpp cannot load)")
      ->required();
  sub->add_option("--keep", args->keep,
                  "TYPE=REGEX: weight matrices whose name REGEX matches (anywhere: anchor with ^ and $) get TYPE "
                  "instead; repeatable, the first matching rule wins. E.g. --keep q8_0='^output\\.weight|token_embd'")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--sparsity", args->sparsity,
                  "2:4: keep two of every four weights of each layer matrix, in the sparse counterpart of --type "
                  "(Q8_0 -> Q8_0_S24, Q4_0 -> Q4_0_S24: Pagoda formats llama.cpp cannot load); the token "
                  "embedding and output matrix stay dense unless a --keep rule says otherwise");
  sub->add_option("--prune", args->method.prune,
                  "Which two of four a 2:4 format keeps: magnitude (default), wanda (|w| x activation norm) or "
                  "sparsegpt (Hessian-based, compensating the kept weights); wanda and sparsegpt need --calib");
  sub->add_option("--method", args->method.method,
                  "rtn (round to nearest, default), awq (activation-aware channel scales), gptq (Hessian-based "
                  "error feedback) or awq+gptq (both); all but rtn need --calib");
  sub->add_option("--calib", args->method.calib_path, "Calibration text (plain UTF-8) for awq and gptq");
  sub->add_option("--calib-tokens", args->method.calib_tokens, "Calibration tokens to run (default 4096)");
  sub->add_option("--calib-ctx", args->method.calib_ctx, "Tokens per calibration chunk (default 512)");
  add_threads_option(*sub, args->threads);
  sub->add_flag("--allow-requantize", args->allow_requantize,
                "Allow sources whose tensors are already quantized (loses more precision)");
  return {"quantize", sub, [args] { return run_quantize(*args); }};
}

}  // namespace pagoda
