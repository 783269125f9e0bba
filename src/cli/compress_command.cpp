// `pagoda compress -m SCORER --ratio 0.5 -f IN`: LLMLingua-style prompt compression
// (compress/compressor.h). The file (or -p) is the context; --instruction and --question
// are kept whole around it. Prints the compressed prompt on stdout and the token counts
// (in the scorer's tokens) and the time on stderr, or all of it as one JSON object.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/model_loader.h"
#include "compress/compressor.h"

namespace pagoda {
namespace {

struct CompressArgs {
  std::string model;
  std::string file;
  std::string prompt;
  std::string question;
  std::string instruction;
  std::string granularity = "word";
  double ratio = 0.5;
  bool iterative = false;
  bool no_question_words = false;
  int32_t segment_tokens = 256;
  double name_share = 0.3;
  double question_share = CompressOptions{}.question_share;
  bool json = false;
  int32_t threads = 0;
  int32_t logits_mib = 64;
  int32_t scorer_vocab = CompressOptions{}.vocab_subset;
};

// What the scorer normalized over: null when nothing was scored.
nlohmann::json vocab_json(const CompressResult& r) {
  if (std::isnan(r.vocab_mass)) return nullptr;
  return {{"tokens", r.vocab_tokens}, {"mass", r.vocab_mass}};
}

std::string vocab_note(const CompressResult& r) {
  if (std::isnan(r.vocab_mass)) return "";
  if (r.vocab_tokens == 0) return fmt::format(" (exact normalizer; a subset would have held {:.3f})", r.vocab_mass);
  return fmt::format(" (normalizer over {} tokens, {:.3f} of the probability)", r.vocab_tokens, r.vocab_mass);
}

int run_compress(const CompressArgs& a) {
  // Checked before the scorer loads, so a typo costs no model load.
  if (!(a.ratio > 0.0 && a.ratio <= 1.0)) return report_error(error("--ratio {} is outside (0, 1]", a.ratio));
  if (a.prompt.empty() == a.file.empty())
    return report_error(error("give the text with -f FILE or -p TEXT (one of them)"));
  if (a.granularity != "word" && a.granularity != "token")
    return report_error(error("--granularity {} is not word or token", a.granularity));
  PromptParts parts{a.instruction, a.prompt, a.question};
  if (!a.file.empty()) {
    auto t = read_text_file(a.file, "-f");
    if (!t) return report_error(t.status());
    parts.context = std::move(*t);
  }
  while (!parts.context.empty() && (parts.context.back() == '\n' || parts.context.back() == '\r'))
    parts.context.pop_back();
  if (join_prompt(parts).find_first_not_of(" \t\r\n") == std::string::npos)
    return report_error(error("the prompt is empty: nothing to compress"));
  auto loaded = load_model_with_tokenizer(a.model, a.threads, /*require_tokenizer=*/true);
  if (!loaded) return report_error(loaded.status());
  CompressOptions o;
  o.ratio = a.ratio;
  o.iterative = a.iterative;
  o.protect_question_words = !a.no_question_words;
  o.segment_tokens = a.segment_tokens;
  o.name_share = a.name_share;
  o.question_share = a.question_share;
  o.logits_budget_bytes = static_cast<size_t>(std::max(a.logits_mib, 1)) << 20;
  o.vocab_subset = a.scorer_vocab;
  o.granularity = a.granularity == "token" ? Granularity::kToken : Granularity::kWord;
  auto r = compress_prompt(*loaded->model, *loaded->tokenizer, parts, o);
  if (!r) return report_error(r.status());
  const double achieved = r->origin_tokens > 0 ? static_cast<double>(r->compressed_tokens) / r->origin_tokens : 1.0;
  if (a.json) {
    nlohmann::json j = {{"compressed_prompt", r->prompt}, {"origin_tokens", r->origin_tokens},
                        {"compressed_tokens", r->compressed_tokens}, {"ratio", achieved},
                        {"seconds", r->seconds}, {"token_counts", "scorer"},
                        {"scorer_vocab", vocab_json(*r)}};
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  fmt::print("{}\n", r->prompt);
  std::fflush(stdout);
  fmt::print(stderr, "compressed {} -> {} tokens (the scorer's tokens), ratio {:.3f} (asked {:.3f}), {:.2f} s{}\n",
             r->origin_tokens, r->compressed_tokens, achieved, a.ratio, r->seconds, vocab_note(*r));
  return 0;
}

}  // namespace

Subcommand add_compress_command(CLI::App& app) {
  auto args = std::make_shared<CompressArgs>();
  CLI::App* sub = add_subcommand(app, "compress",
                                 "Compress a prompt by dropping its least informative words under a scorer model");
  add_model_option(*sub, args->model);
  sub->add_option("-f,--file", args->file, "The context to compress (UTF-8 text)");
  sub->add_option("-p,--prompt", args->prompt, "The context as text, instead of -f");
  sub->add_option("--ratio", args->ratio, "Share of the prompt's tokens to keep, in (0, 1] (0.5: 2x compression)");
  sub->add_option("--question", args->question, "Kept whole, after the context");
  sub->add_option("--instruction", args->instruction, "Kept whole, before the context");
  sub->add_flag("--iterative", args->iterative,
                "Score the context segment by segment, each conditioned on the compressed text before it");
  sub->add_flag("--no-question-words", args->no_question_words,
                "Do not protect the context's words that repeat the question's");
  sub->add_option("--segment-tokens", args->segment_tokens, "Iterative: tokens per segment (whole sentences)");
  sub->add_option("--granularity", args->granularity, "Drop whole words (word, default) or single tokens (token)");
  sub->add_option("--name-share", args->name_share,
                  "Share of the budget that protects numbers and capitalized names (default 0.3)");
  sub->add_option("--question-share", args->question_share,
                  "Share of the context's budget for the sentences the question is most about, kept whole "
                  "(default 0.25; 0: none)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--logits-mib", args->logits_mib,
                  "Logits held at once while scoring, MiB (default 64: 64 rows of a 262k vocabulary)");
  sub->add_option("--scorer-vocab", args->scorer_vocab,
                  "Normalize the scorer's probabilities over this many of its most frequent tokens plus the "
                  "context's (0: the whole vocabulary; default 32768)")
      ->check(CLI::NonNegativeNumber);
  add_threads_option(*sub, args->threads);
  sub->add_flag("--json", args->json, "Print one JSON object: compressed_prompt, token counts, ratio, seconds");
  return {"compress", sub, [args] { return run_compress(*args); }};
}

}  // namespace pagoda
