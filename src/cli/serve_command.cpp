// `pagoda serve -m MODEL`: the OpenAI-compatible server (src/server/). The engine runs on
// its own thread; SIGTERM or SIGINT stops admitting requests, lets the running ones
// finish, then exits.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <thread>

#include "base/log.h"
#include "base/thread_pool.h"
#include "constrain/constraint.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/engine_options.h"
#include "cli/model_loader.h"
#include "cli/parallel_options.h"
#include "chat/chat_prompt.h"
#include "chat/json_value.h"
#include "chat/reasoning_split.h"
#include "chat/tool_syntax.h"
#include "cli/pull_progress.h"
#include "server/compress_endpoint.h"
#include "server/engine_loop.h"
#include "server/http_server.h"
#include "server/metrics.h"

namespace pagoda {
namespace {

constexpr auto fail = report_error;

struct ServeArgs {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string served_name;
  std::string pooling;  // /v1/embeddings' pooling; "": the model's
  // A second model, an encoder such as all-MiniLM-L6-v2, that answers /v1/embeddings
  // beside the generating model (one base URL for a RAG pipeline); "": the served model.
  std::string embedding_model;
  // The scorer of prompt compression (/v1/compress, compress_prompt): a path or catalog
  // name, "none" for no compression; "": the served model's file, loaded on first use.
  std::string compress_scorer;
  std::string chat_template_file;
  std::string tool_call_parser;      // empty: detected from the template
  std::string reasoning_format = "auto";
  std::string chat_template_kwargs;  // JSON object
  int32_t ctx = 0;
  int32_t threads = 0;
  int32_t max_tokens_limit = 0;
  size_t max_queued = 512;
  RequestLimits limits;              // per request; max_tokens 0 here: 16 x the KV capacity
  int64_t max_seqs_in_flight = 4096;
  size_t max_body_mib = 16;
  ServerOptions http;                // transport limits; host, port, key and body set above
  size_t max_header_kib = 16;
  EngineArgs engine;
  ParallelArgs parallel;
};

// The template's tool-call syntax and reasoning, and the flags that override them.
Result<std::shared_ptr<const ChatConventions>> chat_conventions(const ServeArgs& a, const ChatPrompter& prompter) {
  auto cv = std::make_shared<ChatConventions>();
  cv->tool_syntax = detect_tool_syntax(prompter.source());
  if (!a.tool_call_parser.empty() && a.tool_call_parser != "auto") {
    cv->tool_syntax = find_tool_syntax(a.tool_call_parser);
    if (cv->tool_syntax == nullptr)
      return error("--tool-call-parser: unknown syntax '{}' (known: auto, {})", a.tool_call_parser,
                   fmt::join(tool_syntax_names(), ", "));
  }
  cv->template_reasons = template_has_reasoning(prompter.source());
  if (!parse_reasoning_format(a.reasoning_format, cv->reasoning_format))
    return error("--reasoning-format: '{}' is not one of auto, deepseek, none", a.reasoning_format);
  if (!a.chat_template_kwargs.empty()) {
    auto j = nlohmann::ordered_json::parse(a.chat_template_kwargs, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return error("--chat-template-kwargs: must be a JSON object");
    for (const auto& [key, value] : j.items()) cv->template_kwargs.set(jinja::Value(key), jinja_from_json(value));
  }
  return std::shared_ptr<const ChatConventions>(std::move(cv));
}

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) {
  g_stop.store(true);
  // Split over processes: mpirun sends this when a rank died, and SIGKILL a second later;
  // a transfer stuck since before the signal fails at once, so the open requests get
  // their errors in time. Transfers that still progress (a plain Ctrl-C) go on draining.
  MpiComm::note_termination();
}

int run_serve(const ServeArgs& a) {
  auto parallel = start_parallel(a.parallel);
  if (!parallel) return fail(parallel.status());
  ParallelRun* par = parallel->get();
  auto loaded = load_model_with_tokenizer(a.model, a.threads, /*require_tokenizer=*/true,
                                          par != nullptr ? par->place() : ParallelRank{});
  if (!loaded) return fail(loaded.status());
  if (auto code = attach_or_serve(par, *loaded)) return *code;
  ThreadPool& pool = ThreadPool::global();
  Model& model = *loaded->model;
  std::unique_ptr<Tokenizer>& tokenizer = loaded->tokenizer;
  auto tpl_r = chat_template_source(*loaded->file, a.chat_template_file);
  if (!tpl_r) return fail(tpl_r.status());
  const std::string& tpl = *tpl_r;
  const std::string origin = a.chat_template_file.empty() ? "model" : "file";
  auto prompter = ChatPrompter::create(tpl, model.config().arch_name, *tokenizer);
  if (!prompter) return fail(prompter.status());
  if (!tpl.empty()) (*prompter)->set_origin(origin);

  const int32_t ctx = a.ctx > 0 ? a.ctx : model.config().n_ctx_train;
  auto ec = engine_config(a.engine, ctx);
  if (!ec) return fail(ec.status());
  auto draft = load_draft_model(ec->speculative, *loaded);
  if (!draft) return fail(draft.status());
  auto engine = Engine::create(model, tokenizer.get(), *ec, draft->model.get());
  if (!engine) return fail(engine.status());
  (*engine)->prefault_kv();

  const std::string name = a.served_name.empty() ? std::filesystem::path(a.model).stem().string()
                                                      : a.served_name;
  Metrics metrics(name);
  EngineLoopConfig lc;
  lc.max_queued = a.max_queued;
  lc.max_sequences = a.max_seqs_in_flight;
  if (par != nullptr) lc.engine_lost = [par] { return par->comm().lost(); };
  EngineLoop loop(**engine, &metrics, lc);
  ServerContext sctx;
  sctx.loop = &loop;
  sctx.tokenizer = tokenizer.get();
  sctx.metrics = &metrics;
  sctx.model_name = name;
  sctx.max_model_len = (*engine)->max_model_len();
  sctx.max_tokens_limit = a.max_tokens_limit;
  sctx.embedding_dim = model.config().n_embd;
  // The embedding model runs its own engine on its own thread and pool: a Model and its
  // pool serve one forward at a time, and the generating engine's steps must not wait
  // for an embedding batch (or the other way round).
  std::unique_ptr<ThreadPool> embed_pool;
  LoadedModel embed_loaded;
  std::unique_ptr<Engine> embed_engine;
  std::unique_ptr<EngineLoop> embed_loop;
  if (!a.embedding_model.empty()) {
    embed_pool = std::make_unique<ThreadPool>(pool.num_threads());
    auto em = load_model(a.embedding_model, *embed_pool);
    if (!em) return fail(error("--embedding-model {}: {}", a.embedding_model, em.status().message()));
    embed_loaded = std::move(em.value());
    auto etok = Tokenizer::from_gguf(*embed_loaded.file);
    if (!etok) return fail(error("--embedding-model {}: {}", a.embedding_model, etok.status().message()));
    embed_loaded.tokenizer = std::move(etok.value());
    const ModelConfig& emc = embed_loaded.model->config();
    auto eec = engine_config(EngineArgs{}, emc.n_ctx_train);
    if (!eec) return fail(eec.status());
    auto ee = Engine::create(*embed_loaded.model, embed_loaded.tokenizer.get(), *eec);
    if (!ee) return fail(error("--embedding-model {}: {}", a.embedding_model, ee.status().message()));
    embed_engine = std::move(ee.value());
    embed_loop = std::make_unique<EngineLoop>(*embed_engine, nullptr, lc);
    sctx.embed_loop = embed_loop.get();
    sctx.embed_tokenizer = embed_loaded.tokenizer.get();
    sctx.embedding_dim = emc.n_embd;
  }
  if (!a.pooling.empty()) {
    auto p = pooling_from_name(a.pooling);
    if (!p) return fail(error("--pooling: {}", p.status().message()));
    if (*p == Pooling::kNone) return fail(error("--pooling none gives no single vector per input; use mean, cls or last"));
    if (*p == Pooling::kRank && embed_loop)
      return fail(error("--pooling rank makes the served model a reranker; --pooling says how /v1/embeddings pools, "
                        "which --embedding-model answers here"));
    sctx.pooling = *p;
  }
  if (embed_loop && embed_engine->default_pooling() == Pooling::kRank)
    return fail(error("--embedding-model {} is a reranker (pooling rank): serve it with -m for /v1/rerank",
                      a.embedding_model));
  // The served model ranks when the file (or --pooling rank) says so: /v1/rerank answers.
  if ((sctx.pooling != Pooling::kNone ? sctx.pooling : (*engine)->default_pooling()) == Pooling::kRank) {
    const int32_t outs = model.config().n_cls_out;
    if (outs != 1)
      return fail(error("{}: rank pooling needs a classification head with one output (a relevance logit); this "
                        "model has {}",
                        a.model, outs == 0 ? std::string("none") : fmt::format("{} outputs", outs)));
    sctx.reranker = true;
  }
  if (a.compress_scorer != "none") {
    // Its own Model and pool (server/compress_endpoint.h); named ones load now so a wrong
    // name fails at startup.
    auto path = resolve_model_arg(a.compress_scorer.empty() ? a.model : a.compress_scorer);
    if (!path) return fail(error("--compress-scorer: {}", path.status().message()));
    auto scorer = CompressScorer::create(*path, pool.num_threads(), /*lazy=*/a.compress_scorer.empty());
    if (!scorer) return fail(error("--compress-scorer: {}", scorer.status().message()));
    sctx.compress_scorer = std::move(scorer.value());
  }
  sctx.limits = a.limits;
  // The vocabulary's token table for grammars is built once here (measured: 110 ms on
  // Gemma 3's 262k tokens), so no request pays for it.
  const auto grammar_t0 = std::chrono::steady_clock::now();
  auto constraints = ConstraintCompiler::create(*tokenizer, static_cast<int32_t>(model.config().n_vocab), a.threads);
  if (!constraints) return fail(constraints.status());
  const double grammar_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - grammar_t0).count();
  sctx.constraints = constraints->get();
  auto conventions = chat_conventions(a, **prompter);
  if (!conventions) return fail(conventions.status());
  sctx.chat = std::move(conventions.value());
  // A request may ask for a few times what the KV pool holds (samples share the prompt's
  // blocks and take turns), not unboundedly more.
  if (sctx.limits.max_tokens == 0)
    sctx.limits.max_tokens = int64_t{16} * (*engine)->block_pool().num_blocks() * (*engine)->block_pool().block_size();
  ServerOptions so = a.http;
  so.max_header_bytes = a.max_header_kib << 10;
  so.host = a.host;
  so.port = a.port;
  so.api_key = a.api_key;
  so.max_body_bytes = a.max_body_mib << 20;
  ChatPrompter* chat = prompter->get();
  HttpServer http(so, sctx, [chat](const ChatInput& input) { return (*chat)(input); });
  if (Status st = http.bind(); !st.is_ok()) return fail(st);
  loop.start();
  if (embed_loop) embed_loop->start();

  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  std::thread watcher([&] {
    while (!g_stop.load() && !loop.lost()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (loop.lost()) log_error("shutting down: the processes running the model are lost");
    else log_info("shutting down: finishing the running requests");
    loop.drain();
    if (embed_loop) embed_loop->drain();
    // Let handlers write their last events before the sockets close.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    http.stop();
  });
  const auto& kv = (*engine)->kv_storage();
  fmt::print(stderr,
             "pagoda serve: {} ({}) | context {} | KV {} blocks of {}{} ({}, {:.0f} MiB) | chat template: {} | "
             "threads {} | grammar vocabulary {:.0f} ms\nlistening on http://{}:{}\n",
             name, model.config().arch_name, sctx.max_model_len, kv.num_blocks(), kv.shape().block_size,
             kv.layout().n_groups() > 1
                 ? fmt::format(" x {} layers in {} layer groups", kv.layout().layers_per_block(), kv.layout().n_groups())
                 : std::string(),
             kv_type_name(kv.shape().type), kv.bytes() / 1048576.0, (*prompter)->origin(), pool.num_threads(),
             grammar_ms, a.host, http.port());
  const bool ok = http.serve();
  g_stop.store(true);
  watcher.join();
  fmt::print(stderr, "pagoda serve: stopped\n");
  return ok && !loop.lost() ? 0 : 1;
}

}  // namespace

Subcommand add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* sub = add_subcommand(app, "serve", "OpenAI-compatible HTTP server with a web playground");
  add_model_option(*sub, args->model);
  sub->add_option("--host", args->host, "Address to listen on");
  sub->add_option("--port", args->port, "Port (0: any free port)")->check(CLI::Range(0, 65535));
  sub->add_option("--api-key", args->api_key, "Require 'Authorization: Bearer KEY' on /v1 endpoints");
  sub->add_option("--served-model-name", args->served_name, "Model name in the API (default: the file's stem)");
  sub->add_option("--embedding-model", args->embedding_model,
                  "A second model (path or catalog name) that answers /v1/embeddings, e.g. a BERT encoder; "
                  "default: the served model embeds");
  sub->add_option("--compress-scorer", args->compress_scorer,
                  "Model (path or catalog name) that scores prompts for /v1/compress and compress_prompt; "
                  "none: no compression; default: the served model's file, loaded again on first use");
  sub->add_option("--pooling", args->pooling,
                  "How /v1/embeddings pools: mean, cls or last (default: the model's; a decoder's last token); "
                  "rank: the model is a reranker that answers /v1/rerank (the default when its file says rank)");
  sub->add_option("--chat-template", args->chat_template_file, "Jinja chat template file (default: the model's)");
  sub->add_option("--tool-call-parser", args->tool_call_parser,
                  "Tool-call syntax of the model's replies: auto (from the chat template), hermes, llama3_json, mistral");
  sub->add_option("--reasoning-format", args->reasoning_format,
                  "auto (split <think> off into reasoning_content when the template reasons), deepseek (always), none")
      ->check(CLI::IsMember({"auto", "deepseek", "none"}));
  sub->add_option("--chat-template-kwargs", args->chat_template_kwargs,
                  "JSON object of extra chat template variables, e.g. '{\"enable_thinking\": false}' (a request's own "
                  "chat_template_kwargs take precedence)");
  add_context_option(*sub, args->ctx, "Context per sequence (0: the model's trained context)");
  add_threads_option(*sub, args->threads);
  add_parallel_options(*sub, args->parallel);
  sub->add_option("--max-tokens-limit", args->max_tokens_limit, "Largest max_tokens a request may ask (0: the context)")
      ->check(CLI::Range(0, 1 << 30));
  sub->add_option("--max-queued-requests", args->max_queued, "Waiting requests beyond which new ones get 429")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-prompts-per-request", args->limits.max_prompts, "Prompts in one request beyond which it gets 400")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-n", args->limits.max_n, "Largest n (samples per prompt) a request may ask")
      ->check(CLI::Range(1, 128));
  sub->add_option("--max-seqs-per-request", args->limits.max_sequences, "Prompts x n beyond which a request gets 400")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-request-tokens", args->limits.max_tokens,
                  "(prompt + max_tokens) x n over a request's prompts beyond which it gets 400 (0: 16 x the KV capacity)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  sub->add_option("--max-seqs-in-flight", args->max_seqs_in_flight,
                  "Sequences queued or running in the server beyond which new requests get 429")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  sub->add_option("--max-body-mib", args->max_body_mib, "Largest request body in MiB (413 beyond)")
      ->check(CLI::Range(1, 1 << 16));
  // Transport limits (docs/serving.md): hostile or slow clients cost a socket, not a thread.
  sub->add_option("--http-threads", args->http.http_threads, "Requests handled at once (a stream holds one)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--max-queued-http", args->http.max_queued_http,
                  "Complete requests waiting for a handler thread beyond which new ones get 503")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-connections", args->http.max_connections,
                  "Open connections beyond which a new one gets 503 and is closed")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-header-kib", args->max_header_kib, "Largest request header in KiB (431 beyond)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--header-timeout", args->http.header_timeout_s, "Seconds to receive a request's headers")
      ->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--body-timeout", args->http.body_timeout_s, "Seconds to receive a request's body")
      ->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--keep-alive-timeout", args->http.idle_timeout_s,
                  "Seconds an idle keep-alive connection waits for its next request")
      ->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--write-timeout", args->http.write_timeout_s, "Seconds one write to a slow reader may take")
      ->check(CLI::Range(0.05, 36000.0));
  add_engine_options(*sub, args->engine);
  return {"serve", sub, [args] { return run_serve(*args); }};
}

}  // namespace pagoda
