// `pagoda run -m MODEL -p PROMPT -n N`: generate text and print a stats line. Flags follow
// llama.cpp's names. --prompt-ids/--ids-out/--logits-out exist for the oracle
// comparisons (scripts/compare_llamacpp.py) and tests.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/log.h"
#include "base/thread_pool.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/engine_options.h"
#include "engine/generator.h"
#include "cli/model_loader.h"
#include "cli/parallel_options.h"
#include "constrain/constraint.h"

namespace pagoda {
namespace {

constexpr auto fail = report_error;

struct RunArgs {
  std::string model;
  std::string prompt;
  std::string prompt_file;
  std::string prompt_ids;
  int32_t n_predict = 128;
  int32_t threads = 0;
  int32_t ctx = 4096;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  bool no_bos = false;
  bool quiet_stats = false;
  std::string ids_out;
  std::string logits_out;
  bool moe_stats = false;
  std::string moe_stats_out;
  std::string moe_routing_out;
  SamplingParams sp;
  int64_t seed = -1;
  std::string json_schema;  // text or a file holding it
  std::string grammar;
  EngineArgs engine;
  ParallelArgs parallel;
};

// A value that names an existing file is that file's contents; anything else is the text.
Result<std::string> text_or_file(const std::string& v) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(v, ec)) return v;
  std::ifstream in(v, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) return error("cannot read {}", v);
  return ss.str();
}

Result<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return error("--prompt-ids: '{}' is not a token id", item);
    }
  }
  if (ids.empty()) return error("--prompt-ids: no token ids given");
  return ids;
}

// use_ids: --prompt-ids was given (even empty, which is an error).
int run_run(const RunArgs& a, bool use_ids) {
  auto parallel = start_parallel(a.parallel);
  if (!parallel) return fail(parallel.status());
  ParallelRun* par = parallel->get();
  auto loaded = load_model_with_tokenizer(a.model, a.threads, /*require_tokenizer=*/false,
                                          par != nullptr ? par->place() : ParallelRank{});
  if (!loaded) return fail(loaded.status());
  if (auto code = attach_or_serve(par, *loaded)) return *code;
  ThreadPool& pool = ThreadPool::global();
  Model& model = *loaded->model;
  std::unique_ptr<Tokenizer>& tokenizer = loaded->tokenizer;

  std::vector<int32_t> prompt;
  if (use_ids) {
    auto ids = parse_ids(a.prompt_ids);
    if (!ids) return fail(ids.status());
    prompt = std::move(ids.value());
  } else {
    std::string text = a.prompt;
    if (!a.prompt_file.empty()) {
      auto read = read_text_file(a.prompt_file, "--file");
      if (!read) return fail(read.status());
      text = std::move(read.value());
    }
    if (!tokenizer) return fail(error("the model has no tokenizer; pass --prompt-ids"));
    prompt = tokenizer->encode(text, !a.no_bos, true);
  }
  const ModelConfig& c = model.config();
  int32_t ctx = a.ctx > 0 ? std::min(a.ctx, c.n_ctx_train) : c.n_ctx_train;
  // One sequence: the default KV budget is one full context.
  EngineArgs ea = a.engine;
  ea.max_num_seqs = 1;
  auto ec = engine_config(ea, ctx);
  if (!ec) return fail(ec.status());
  auto draft = load_draft_model(ec->speculative, *loaded);
  if (!draft) return fail(draft.status());
  auto engine = Engine::create(model, tokenizer.get(), *ec, draft->model.get());
  if (!engine) return fail(engine.status());

  GenerateOptions opts;
  opts.max_tokens = a.n_predict;
  opts.ignore_eos = a.ignore_eos;
  opts.stop = a.stop;
  opts.sampling = a.sp;
  opts.sampling.seed = a.seed < 0 ? 0xFFFFFFFFu : static_cast<uint64_t>(a.seed);
  if (!a.json_schema.empty() || !a.grammar.empty()) {
    if (!tokenizer) return fail(error("--json-schema and --grammar need the model's tokenizer"));
    const bool schema = !a.json_schema.empty();
    auto text = text_or_file(schema ? a.json_schema : a.grammar);
    if (!text) return fail(text.status());
    ConstraintSpec spec;
    spec.kind = schema ? ConstraintKind::kJsonSchema : ConstraintKind::kGrammar;
    spec.text = std::move(text.value());
    auto compiler = ConstraintCompiler::create(*tokenizer, static_cast<int32_t>(model.config().n_vocab), a.threads);
    if (!compiler) return fail(compiler.status());
    auto compiled = (*compiler)->compile(spec);
    if (!compiled) return fail(error("{}: {}", schema ? "--json-schema" : "--grammar", compiled.status().message()));
    opts.constraint = std::move(compiled.value());
  }

  // Echo the prompt as llama.cpp does, then stream the continuation.
  if (tokenizer && !use_ids) {
    fmt::print("{}", a.prompt_file.empty() ? a.prompt : std::string());
  }
  std::fflush(stdout);
  auto on_token = [&](int32_t id, const std::string& text) {
    if (tokenizer) fmt::print("{}", text);
    else fmt::print("{} ", id);
    std::fflush(stdout);
    return true;
  };
  // Per MoE layer, every position's experts in the order the positions ran.
  std::vector<std::vector<std::vector<int32_t>>> routing;
  if (!a.moe_routing_out.empty()) {
    const ModelConfig& c = (*engine)->model().config();
    if (!c.is_moe()) return fail(error("--moe-routing-out: {} has no experts", a.model));
    routing.resize(static_cast<size_t>(c.n_layer));
    const int32_t k = c.n_expert_used;
    (*engine)->model().set_routing_observer([&routing, k](int32_t layer, int64_t n, const int32_t* ids) {
      for (int64_t t = 0; t < n; ++t) routing[static_cast<size_t>(layer)].emplace_back(ids + t * k, ids + (t + 1) * k);
    });
  }
  auto res = generate(**engine, prompt, opts, on_token, !a.logits_out.empty());
  (*engine)->model().set_routing_observer(nullptr);
  if (!res) return fail(res.status());
  fmt::print("\n");
  const GenerateStats& s = res->stats;
  if (!a.ids_out.empty()) {
    nlohmann::json j;
    j["prompt_ids"] = prompt;
    j["generated_ids"] = res->tokens;
    std::ofstream out(a.ids_out);
    out << j.dump() << "\n";
    if (!out) return fail(error("cannot write {}", a.ids_out));
  }
  if (!a.logits_out.empty()) {
    std::ofstream out(a.logits_out, std::ios::binary);
    out.write(reinterpret_cast<const char*>(res->logits.data()),
              static_cast<std::streamsize>(res->logits.size() * sizeof(float)));
    if (!out) return fail(error("cannot write {}", a.logits_out));
  }
  if (!a.moe_routing_out.empty()) {
    std::ofstream out(a.moe_routing_out);
    out << nlohmann::json(routing).dump() << "\n";
    if (!out) return fail(error("cannot write {}", a.moe_routing_out));
  }
  const MoeStats& moe = (*engine)->model().moe_stats();
  if (!a.moe_stats_out.empty()) {
    if (!moe.enabled()) return fail(error("--moe-stats-out: {} has no experts", a.model));
    std::ofstream out(a.moe_stats_out);
    out << moe.to_json() << "\n";
    if (!out) return fail(error("cannot write {}", a.moe_stats_out));
  }
  if (a.moe_stats) {
    if (moe.enabled()) fmt::print(stderr, "\n{}", moe.to_text());
    else fmt::print(stderr, "\n{} has no experts: no expert statistics\n", a.model);
  }
  if (!a.quiet_stats && (*engine)->config().speculative.enabled()) {
    const EngineStats es = (*engine)->stats();
    fmt::print(stderr,
               "\nspeculative decoding ({}): {} drafts of {} draft tokens, {} accepted ({:.0f}%), mean accepted length "
               "{:.2f}, drafting {:.2f} s{}{}",
               (*engine)->config().speculative.method, es.spec_drafts, es.spec_drafted_tokens, es.spec_accepted_tokens,
               es.spec_drafted_tokens > 0 ? 100.0 * es.spec_accepted_tokens / es.spec_drafted_tokens : 0.0,
               es.spec_drafts > 0 ? static_cast<double>(es.spec_accepted_tokens) / es.spec_drafts : 0.0,
               es.spec_draft_seconds,
               es.spec_draft_forwards > 0 ? fmt::format(" ({} draft forwards)", es.spec_draft_forwards) : std::string(),
               (*engine)->config().speculative.branches > 1
                   ? fmt::format(", {} accepted off the first branch", es.spec_branch_accepted_tokens)
                   : std::string());
  }
  if (!a.quiet_stats) {
    const double decode_tps = s.generated_tokens > 1 ? (s.generated_tokens - 1) / s.decode_seconds : 0.0;
    fmt::print(stderr,
               "\nprompt {} tokens | prefill {:.1f} tok/s | time to first token {:.1f} ms | generated {} tokens | "
               "decode {:.1f} tok/s | threads {} | stop: {}\n",
               s.prompt_tokens, s.prompt_tokens / std::max(1e-9, s.prefill_seconds), s.ttft_seconds * 1e3,
               s.generated_tokens, decode_tps, pool.num_threads(), s.stop_reason);
  }
  return 0;
}

}  // namespace

Subcommand add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* sub = add_subcommand(app, "run", "Generate text from a prompt");
  add_model_option(*sub, args->model);
  sub->add_option("-p,--prompt", args->prompt, "Prompt text");
  sub->add_option("-f,--file", args->prompt_file, "Read the prompt from a file");
  CLI::Option* prompt_ids = sub->add_option("--prompt-ids", args->prompt_ids,
                                            "Prompt as comma-separated token ids (no tokenizer, no BOS added)");
  add_predict_option(*sub, args->n_predict, "Tokens to generate (-1: until end of text)");
  add_threads_option(*sub, args->threads);
  add_context_option(*sub, args->ctx, "Context size in tokens (0: the model's trained context)");
  add_generation_options(*sub, args->sp, args->seed, args->stop);
  CLI::Option* schema = sub->add_option("-j,--json-schema", args->json_schema,
                                        "Constrain the output to this JSON schema (its text, or a file holding it)");
  sub->add_option("--grammar", args->grammar,
                  "Constrain the output to this GBNF/EBNF grammar with a root rule (its text, or a file)")
      ->excludes(schema);
  sub->add_flag("--ignore-eos", args->ignore_eos, "Keep generating past end-of-text tokens");
  sub->add_flag("--no-bos", args->no_bos, "Do not add the BOS token to the prompt");
  sub->add_flag("--no-stats", args->quiet_stats, "Do not print the stats line");
  sub->add_option("--ids-out", args->ids_out, "Write prompt and generated token ids as JSON");
  sub->add_flag("--moe-stats", args->moe_stats,
                "Print expert statistics of a mixture-of-experts model: per layer the tokens routed, load "
                "imbalance (max/mean), the share of steps each expert ran in, and the time spent routing");
  sub->add_option("--moe-routing-out", args->moe_routing_out,
                  "Write each MoE layer's expert choices per position as JSON ([layer][position][k ids]; for "
                  "oracle comparisons)");
  sub->add_option("--moe-stats-out", args->moe_stats_out,
                  "Write the expert statistics as JSON (per layer and expert: tokens, active steps)");
  sub->add_option("--logits-out", args->logits_out, "Write each generated token's logits (float32 rows)");
  add_engine_options(*sub, args->engine);
  add_parallel_options(*sub, args->parallel);
  return {"run", sub, [args, prompt_ids] { return run_run(*args, prompt_ids->count() > 0); }};
}

}  // namespace pagoda
