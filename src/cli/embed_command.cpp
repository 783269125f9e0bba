// `pagoda embed -m MODEL -f TEXTS`: one embedding per input (a line of the file, or of -p
// split at --embd-separator), computed through the engine in batches, pooled and
// normalized as llama.cpp's llama-embedding does (its flag names: --pooling,
// --embd-normalize, --embd-separator, --embd-output-format), printed as text, a JSON
// array, or OpenAI's list shape.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <unordered_map>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/engine_options.h"
#include "cli/model_loader.h"
#include "engine/embedding.h"
#include "engine/engine.h"

namespace pagoda {
namespace {

constexpr auto fail = report_error;

struct EmbedArgs {
  std::string model;
  std::string prompt;
  std::string file;
  std::string separator = "\n";
  std::string pooling;  // "": the model's
  int32_t normalize = 2;
  std::string output_format;
  int32_t threads = 0;
  int32_t ctx = 0;
  EngineArgs engine;
};

std::vector<std::string> split_inputs(const std::string& text, const std::string& sep) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = sep.empty() ? std::string::npos : text.find(sep, at);
    std::string piece = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (!piece.empty() && piece != "\r") out.push_back(std::move(piece));
    if (end == std::string::npos) break;
    at = end + sep.size();
  }
  return out;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

void print_results(const EmbedArgs& a, const std::vector<std::vector<float>>& vecs, int32_t prompt_tokens) {
  if (a.output_format.empty()) {
    for (size_t i = 0; i < vecs.size(); ++i) {
      fmt::print("embedding {}:", i);
      for (float v : vecs[i]) fmt::print(" {:9.6f}", v);
      fmt::print("\n");
    }
    return;
  }
  nlohmann::json out;
  if (a.output_format == "array") {
    out = nlohmann::json::array();
    for (const auto& v : vecs) out.push_back(v);
  } else {
    out = {{"object", "list"}, {"data", nlohmann::json::array()}, {"model", a.model},
           {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
    for (size_t i = 0; i < vecs.size(); ++i)
      out["data"].push_back({{"object", "embedding"}, {"index", i}, {"embedding", vecs[i]}});
    if (a.output_format == "json+") {
      nlohmann::json sim = nlohmann::json::array();
      for (const auto& x : vecs) {
        nlohmann::json row = nlohmann::json::array();
        for (const auto& y : vecs) row.push_back(cosine(x, y));
        sim.push_back(std::move(row));
      }
      out["cosineSimilarity"] = std::move(sim);
    }
  }
  fmt::print("{}\n", out.dump());
}

int run_embed(const EmbedArgs& a) {
  if (a.prompt.empty() == a.file.empty()) return fail(error("give the inputs with -p TEXT or -f FILE (one of them)"));
  if (!a.output_format.empty() && a.output_format != "array" && a.output_format != "json" && a.output_format != "json+")
    return fail(error("--embd-output-format {} is not one of array, json, json+ (or empty for text)", a.output_format));
  if (a.normalize < -1) return fail(error("--embd-normalize {} is not -1 (none), 0, 1, 2 or p > 2", a.normalize));
  std::string text = a.prompt;
  if (!a.file.empty()) {
    auto read = read_text_file(a.file, "-f");
    if (!read) return fail(read.status());
    text = std::move(read.value());
  }
  const std::vector<std::string> inputs = split_inputs(text, a.separator);
  if (inputs.empty()) return fail(error("no inputs: every piece between separators is empty"));
  Pooling pooling = Pooling::kNone;
  if (!a.pooling.empty()) {
    auto p = pooling_from_name(a.pooling);
    if (!p) return fail(p.status());
    if (*p == Pooling::kNone)
      return fail(error("--pooling none gives a vector per token, which pagoda embed does not print; "
                        "use mean, cls or last"));
    pooling = *p;
  }
  auto loaded = load_model_with_tokenizer(a.model, a.threads, /*require_tokenizer=*/true);
  if (!loaded) return fail(loaded.status());
  Model& model = *loaded->model;
  const ModelConfig& c = model.config();
  const int32_t ctx = a.ctx > 0 ? std::min(a.ctx, c.n_ctx_train) : c.n_ctx_train;
  auto ec = engine_config(a.engine, ctx);
  if (!ec) return fail(ec.status());
  auto engine = Engine::create(model, loaded->tokenizer.get(), *ec);
  if (!engine) return fail(engine.status());
  Engine& e = **engine;
  if ((pooling != Pooling::kNone ? pooling : e.default_pooling()) == Pooling::kRank)
    return fail(error("{} pools by rank: it is a reranker, which scores a query against documents (pagoda rerank), "
                      "not an embedding model; --pooling mean, cls or last embeds with it anyway",
                      a.model));

  const auto t0 = std::chrono::steady_clock::now();
  std::unordered_map<RequestId, size_t> index;
  RequestParams params;
  params.embed = true;
  params.pooling = pooling;
  int32_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t> ids = loaded->tokenizer->encode(inputs[i], /*add_special=*/true, /*parse_special=*/true);
    tokens += static_cast<int32_t>(ids.size());
    auto id = e.add_request(std::move(ids), params);
    if (!id) return fail(error("input {}: {}", i, id.status().message()));
    index[*id] = i;
  }
  std::vector<std::vector<float>> vecs(inputs.size());
  while (e.has_work()) {
    auto outs = e.step();
    if (!outs) return fail(outs.status());
    for (StepOutput& o : *outs) {
      if (o.embedding.empty()) continue;
      std::vector<float>& v = vecs[index.at(o.request)];
      v = std::move(o.embedding);
      if (Status st = normalize_embedding(v, a.normalize); !st.is_ok()) return fail(st);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_results(a, vecs, tokens);
  fmt::print(stderr, "embed: {} inputs, {} tokens, {} pooling, {:.3f} s ({:.1f} tokens/s)\n", inputs.size(), tokens,
             pooling_name(pooling != Pooling::kNone ? pooling : e.default_pooling()), secs,
             secs > 0 ? tokens / secs : 0.0);
  return 0;
}

}  // namespace

Subcommand add_embed_command(CLI::App& app) {
  auto args = std::make_shared<EmbedArgs>();
  CLI::App* sub = add_subcommand(app, "embed", "Embed texts (one per line of -f, or -p split at --embd-separator)");
  add_model_option(*sub, args->model);
  sub->add_option("-p,--prompt", args->prompt, "the inputs, split at --embd-separator");
  sub->add_option("-f,--file", args->file, "a file of inputs, split at --embd-separator (one per line)");
  sub->add_option("--embd-separator", args->separator, "what separates the inputs (default: a newline)");
  sub->add_option("--pooling", args->pooling, "mean, cls or last (default: the model's; a decoder's last token)");
  sub->add_option("--embd-normalize", args->normalize,
                  "-1 none, 0 int16 range, 1 taxicab, 2 Euclidean (default), p > 2 the p-norm");
  sub->add_option("--embd-output-format", args->output_format,
                  "empty: text lines; array: a JSON array of vectors; json: OpenAI's list; json+: with cosine "
                  "similarities");
  add_threads_option(*sub, args->threads);
  add_context_option(*sub, args->ctx, "tokens per input (default and at most: the model's context)");
  add_engine_options(*sub, args->engine);
  return {"embed", sub, [args] { return run_embed(*args); }};
}

}  // namespace pagoda
