// `pagoda distill-dump -m TEACHER -f CORPUS [--top-k 32] -o FILE [-c 512] [--chunks N]`:
// a teacher's next-token distributions over a text, kept as each scored position's top-k
// log-probabilities and the rest's mass (eval/perplexity.h, write_distill_dump), for
// logit distillation and for `pagoda perplexity --kl-base FILE`, which scores a student
// against the dump without loading the teacher. The chunks are perplexity's, so the
// student runs with the same -c and --chunks.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/model_loader.h"
#include "eval/perplexity.h"

namespace pagoda {
namespace {

struct DumpArgs {
  std::string model;
  std::string text;
  std::string out;
  int32_t top_k = 32;
  int32_t ctx = 512;
  int32_t chunks = -1;
  int32_t threads = 0;
  bool json = false;
};

int run_distill_dump(const DumpArgs& a) {
  auto text = read_perplexity_text(a.text);
  if (!text) return report_error(text.status());
  auto loaded = load_model_with_tokenizer(a.model, a.threads, /*require_tokenizer=*/true);
  if (!loaded) return report_error(loaded.status());
  PerplexityOptions o;
  o.ctx = a.ctx;
  o.chunks = a.chunks;
  o.text_name = a.text;
  o.progress = [](const std::string& line) { fmt::print(stderr, "{}\n", line); };
  auto r = write_distill_dump(*loaded->model, *loaded->tokenizer, *text, loaded->file->path(), a.out, a.top_k, o);
  if (!r) return report_error(r.status());
  const double share = static_cast<double>(r->file_bytes) / static_cast<double>(r->full_logits_bytes);
  if (a.json) {
    const nlohmann::json j = {{"model", a.model},      {"text", a.text},           {"out", a.out},
                              {"top_k", a.top_k},      {"n_ctx", r->n_ctx},        {"n_chunks", r->n_chunks},
                              {"rows", r->rows},       {"bytes", r->file_bytes},   {"full_logits_bytes", r->full_logits_bytes},
                              {"seconds", r->seconds}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("wrote {}: {} positions ({} chunks of {}), top {} each, {:.2f} MiB ({:.3f}% of their FP32 logits), "
             "{:.1f} s\n",
             a.out, r->rows, r->n_chunks, r->n_ctx, a.top_k, r->file_bytes / 1048576.0, 100.0 * share, r->seconds);
  return 0;
}

}  // namespace

Subcommand add_distill_dump_command(CLI::App& app) {
  auto args = std::make_shared<DumpArgs>();
  CLI::App* sub = add_subcommand(app, "distill-dump",
                                 "A teacher's top-k next-token log-probabilities over a text, for distillation and "
                                 "`perplexity --kl-base`");
  add_model_option(*sub, args->model);
  sub->add_option("-f,--file", args->text, "Text file (UTF-8), cut into chunks as `pagoda perplexity` does")->required();
  sub->add_option("-o,--output", args->out, "The dump file to write")->required();
  sub->add_option("--top-k", args->top_k, "Most likely tokens kept per position (the rest as one mass)")
      ->check(CLI::Range(1, 1 << 20));
  add_context_option(*sub, args->ctx, "Tokens per chunk; the second half of each is scored");
  sub->add_option("--chunks", args->chunks, "Chunks to dump (default: all the text holds)");
  add_threads_option(*sub, args->threads);
  sub->add_flag("--json", args->json, "Print one JSON object (progress stays on stderr)");
  return {"distill-dump", sub, [args] { return run_distill_dump(*args); }};
}

}  // namespace pagoda
