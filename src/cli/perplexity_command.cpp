// `pagoda perplexity -m MODEL -f TEXT [-c 512] [--chunks N] [--kl-base BASE.gguf] [--json]`:
// perplexity over a text file, and with --kl-base the KL divergence and top-1 agreement
// against a base model (usually the unquantized original of MODEL). The computation and
// its llama-perplexity conventions are eval/perplexity.h's; this file loads the model,
// prints progress on stderr and the results on stdout (text or JSON).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>

#include "base/timer.h"
#include "base/system_memory.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/model_loader.h"
#include "eval/perplexity.h"

namespace pagoda {
namespace {

constexpr auto fail = report_error;

struct PplArgs {
  std::string model;
  std::string text;
  std::string kl_base;
  int32_t ctx = 512;
  int32_t chunks = -1;
  int32_t threads = 0;
  bool json = false;
};

nlohmann::json to_json(const PplArgs& a, const PerplexityResult& r, double total_seconds, double rss_mib) {
  nlohmann::json j = {
      {"model", a.model},
      {"text", a.text},
      {"n_ctx", r.n_ctx},
      {"n_chunks", r.n_chunks},
      {"text_tokens", r.text_tokens},
      {"scored_tokens", r.scored_tokens},
      {"threads", r.threads},
      {"ppl", r.ppl.value},
      {"ppl_error", r.ppl.error},
      {"nll_mean", r.nll_mean},
      {"chunk_ppl", r.chunk_ppl},
      {"seconds", r.seconds},
      {"total_seconds", total_seconds},
      {"peak_rss_mib", rss_mib}};
  if (r.kl) {
    const KlResult& kl = *r.kl;
    j["kl"] = {
        {"base", a.kl_base},
        {"cache", kl.cache_reused ? "reused" : "computed"},
        {"cache_file", kl.cache_file},
        {"base_seconds", kl.base_seconds},
        {"base_ppl", kl.base_ppl.value},
        {"base_ppl_error", kl.base_ppl.error},
        {"ppl_ratio", kl.ppl_ratio},
        {"kld_mean", kl.kld.value},
        {"kld_error", kl.kld.error},
        {"kld_median", kl.kld_median},
        {"kld_p99", kl.kld_p99},
        {"kld_max", kl.kld_max},
        {"top1_percent", 100.0 * kl.top1.value},
        {"top1_error_percent", 100.0 * kl.top1.error}};
  }
  return j;
}

void print_text(const PplArgs& a, const PerplexityResult& r, double rss_mib) {
  fmt::print("perplexity of {} on {}: {} chunks of {}, {} tokens scored, {:.1f} s, peak RSS {:.0f} MiB\n", a.model,
             a.text, r.n_chunks, r.n_ctx, r.scored_tokens, r.seconds, rss_mib);
  fmt::print("PPL = {:.4f} +/- {:.5f}\n", r.ppl.value, r.ppl.error);
  if (!r.kl) return;
  const KlResult& k = *r.kl;
  fmt::print("base PPL = {:.4f} +/- {:.5f} ({}; KL base {} {})\n", k.base_ppl.value, k.base_ppl.error, a.kl_base,
             k.cache_reused ? "reused" : "computed", k.cache_file);
  fmt::print("PPL(model)/PPL(base) = {:.6f}\n", k.ppl_ratio);
  fmt::print("KLD = {:.6f} +/- {:.6f} (median {:.6f}, 99% {:.6f}, max {:.6f})\n", k.kld.value, k.kld.error,
             k.kld_median, k.kld_p99, k.kld_max);
  fmt::print("top-1 agreement = {:.3f}% +/- {:.3f}%\n", 100.0 * k.top1.value, 100.0 * k.top1.error);
}

int run_perplexity(const PplArgs& a) {
  Timer total;
  auto text = read_perplexity_text(a.text);
  if (!text) return fail(text.status());
  auto loaded = load_model_with_tokenizer(a.model, a.threads, /*require_tokenizer=*/true);
  if (!loaded) return fail(loaded.status());
  PerplexityOptions o;
  o.ctx = a.ctx;
  o.chunks = a.chunks;
  o.kl_base = a.kl_base;
  o.text_name = a.text;
  // Progress goes to stderr, so stdout holds only the results (or the JSON).
  o.progress = [](const std::string& line) { fmt::print(stderr, "{}\n", line); };
  auto r = compute_perplexity(*loaded->model, *loaded->tokenizer, *text, o);
  if (!r) return fail(r.status());
  const double rss_mib = peak_resident_bytes() / 1048576.0;
  if (a.json) {
    fmt::print("{}\n", to_json(a, *r, total.seconds(), rss_mib).dump(2));
    return 0;
  }
  print_text(a, *r, rss_mib);
  return 0;
}

}  // namespace

Subcommand add_perplexity_command(CLI::App& app) {
  auto args = std::make_shared<PplArgs>();
  CLI::App* sub = add_subcommand(app, "perplexity", "Perplexity over a text file, and KL divergence against a base model");
  add_model_option(*sub, args->model);
  sub->add_option("-f,--file", args->text, "Text file to evaluate (UTF-8)")->required();
  add_context_option(*sub, args->ctx, "Tokens per chunk; the second half of each is scored");
  sub->add_option("--chunks", args->chunks, "Chunks to evaluate (default: all the text holds)");
  add_threads_option(*sub, args->threads);
  sub->add_option("--kl-base", args->kl_base,
                  "Base model (e.g. the unquantized original) for KL divergence and top-1 agreement; its "
                  "log-probabilities are cached and reused");
  sub->add_flag("--json", args->json, "Print one JSON object with every number (progress stays on stderr)");
  return {"perplexity", sub, [args] { return run_perplexity(*args); }};
}

}  // namespace pagoda
