// `pagoda rerank -m MODEL -q QUERY -f DOCS`: each line of DOCS scored against the query by
// a cross-encoder (a model with a classification head, such as a
// BertForSequenceClassification converted by pagoda convert), as [CLS] query [SEP]
// document [SEP] through the engine in batches; printed best first (index, score, text),
// or with --json in /v1/rerank's response shape. The score is the classifier's raw logit.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <unordered_map>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/engine_options.h"
#include "cli/model_loader.h"
#include "engine/engine.h"
#include "tokenizer/text_pair.h"

namespace pagoda {
namespace {

constexpr auto fail = report_error;

struct RerankArgs {
  std::string model;
  std::string query;
  std::string file;
  int32_t top_n = 0;  // 0: every document
  bool json = false;
  int32_t threads = 0;
  int32_t ctx = 0;
  EngineArgs engine;
};

// The file's non-empty lines (a trailing \r dropped).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(std::move(line));
    at = end + 1;
  }
  return out;
}

int run_rerank(const RerankArgs& a) {
  auto read = read_text_file(a.file, "-f");
  if (!read) return fail(read.status());
  const std::vector<std::string> docs = lines_of(*read);
  if (docs.empty()) return fail(error("-f {}: no documents (one per line; the file has no non-empty line)", a.file));
  auto loaded = load_model_with_tokenizer(a.model, a.threads, /*require_tokenizer=*/true);
  if (!loaded) return fail(loaded.status());
  const ModelConfig& c = loaded->model->config();
  // Any file with a one-output head ranks, whatever its pooling_type says (llama.cpp's
  // converter writes none for rerankers).
  if (c.n_cls_out != 1)
    return fail(error("{} is not a reranker: pagoda rerank needs a cross-encoder with a one-output classification "
                      "head (cls.output.weight); this model has {}",
                      a.model, c.n_cls_out == 0 ? std::string("none") : fmt::format("{} outputs", c.n_cls_out)));
  const int32_t ctx = a.ctx > 0 ? std::min(a.ctx, c.n_ctx_train) : c.n_ctx_train;
  auto ec = engine_config(a.engine, ctx);
  if (!ec) return fail(ec.status());
  auto engine = Engine::create(*loaded->model, loaded->tokenizer.get(), *ec);
  if (!engine) return fail(engine.status());
  Engine& e = **engine;

  const auto t0 = std::chrono::steady_clock::now();
  std::unordered_map<RequestId, size_t> index;
  int64_t tokens = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    TextPair pair = encode_text_pair(*loaded->tokenizer, a.query, docs[i]);
    if (static_cast<int64_t>(pair.ids.size()) > e.max_model_len())
      return fail(error("document {} (line {}): the query and document together are {} tokens, over the context of "
                        "{} (nothing is truncated)",
                        i, i + 1, pair.ids.size(), e.max_model_len()));
    RequestParams p;
    p.embed = true;
    p.pooling = Pooling::kRank;
    p.segment_b = pair.second;
    tokens += static_cast<int64_t>(pair.ids.size());
    auto id = e.add_request(std::move(pair.ids), p);
    if (!id) return fail(error("document {}: {}", i, id.status().message()));
    index[*id] = i;
  }
  std::vector<float> scores(docs.size(), 0.0f);
  while (e.has_work()) {
    auto outs = e.step();
    if (!outs) return fail(outs.status());
    for (const StepOutput& o : *outs)
      if (!o.embedding.empty()) scores[index.at(o.request)] = o.embedding[0];
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<size_t> order(docs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return scores[x] > scores[y]; });
  if (a.top_n > 0 && static_cast<size_t>(a.top_n) < order.size()) order.resize(static_cast<size_t>(a.top_n));
  if (a.json) {
    nlohmann::json results = nlohmann::json::array();
    for (size_t i : order)
      results.push_back({{"index", i}, {"relevance_score", scores[i]}, {"document", {{"text", docs[i]}}}});
    nlohmann::json out = {{"object", "list"},
                          {"model", a.model},
                          {"results", std::move(results)},
                          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    for (size_t i : order) fmt::print("{:5} {:12.6f}  {}\n", i, scores[i], docs[i]);
  }
  fmt::print(stderr, "rerank: {} documents, {} tokens, {:.3f} s ({:.1f} documents/s)\n", docs.size(), tokens, secs,
             secs > 0 ? static_cast<double>(docs.size()) / secs : 0.0);
  return 0;
}

}  // namespace

Subcommand add_rerank_command(CLI::App& app) {
  auto args = std::make_shared<RerankArgs>();
  CLI::App* sub = add_subcommand(app, "rerank", "Score documents (one per line of -f) against a query with a reranker");
  add_model_option(*sub, args->model);
  sub->add_option("-q,--query", args->query, "the query the documents are ranked against")->required();
  sub->add_option("-f,--file", args->file, "the documents, one per line")->required();
  sub->add_option("--top-n", args->top_n, "print only the best N (default: all)")->check(CLI::Range(1, 1 << 30));
  sub->add_flag("--json", args->json, "print /v1/rerank's response shape (best first) instead of text lines");
  add_threads_option(*sub, args->threads);
  add_context_option(*sub, args->ctx, "tokens per query-document pair (default and at most: the model's context)");
  add_engine_options(*sub, args->engine);
  return {"rerank", sub, [args] { return run_rerank(*args); }};
}

}  // namespace pagoda
