// `pagoda convert HF_DIR OUT.gguf [--type T]`: a Hugging Face model folder to GGUF
// (src/convert/convert.h), with a progress line per tensor on stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "base/human_size.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "convert/convert.h"
#include "convert/output_type.h"

namespace pagoda {
namespace {

struct ConvertArgs {
  ConvertOptions options;
  int32_t threads = 0;
  bool quiet = false;
};

int run_convert(const ConvertArgs& a) {
  Timer timer;
  const int threads = a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency());
  ThreadPool pool(threads);
  auto summary = convert_hf_model(a.options, pool, [&](const std::string& line) {
    if (!a.quiet || line.starts_with("note:")) fmt::print(stderr, "{}\n", line);
  });
  if (!summary) {
    fmt::print(stderr, "error: {}\n", summary.status().message());
    return 1;
  }
  fmt::print("converted {} -> {}: {}, {} tensors, {} -> {}, {:.2f} s\n", a.options.hf_dir, a.options.output,
             summary->arch, summary->tensors, human_size(static_cast<double>(summary->in_bytes)),
             human_size(static_cast<double>(summary->out_bytes)), timer.seconds());
  return 0;
}

}  // namespace

Subcommand add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* sub = add_subcommand(app, "convert",
                                 "Convert a Hugging Face model folder (safetensors) to GGUF, as llama.cpp's converter "
                                 "writes it");
  sub->add_option("hf_dir", args->options.hf_dir,
                  "Model folder: config.json, *.safetensors, tokenizer.json (tokenizer_config.json, "
                  "sentence-transformers pooling config if present)")
      ->required();
  sub->add_option("output", args->options.output, "GGUF file to write (replaced atomically when done)")->required();
  sub->add_option("--type", args->options.type,
                  "Format of the weight matrices: auto (F16, BF16 for a BF16 checkpoint), " + convert_type_names() +
                      "; vectors and norms stay F32");
  sub->add_option("--name", args->options.name, "general.name (default: the folder's name)");
  add_threads_option(*sub, args->threads);
  sub->add_flag("-q,--quiet", args->quiet, "No progress lines");
  return {"convert", sub, [args] { return run_convert(*args); }};
}

}  // namespace pagoda
