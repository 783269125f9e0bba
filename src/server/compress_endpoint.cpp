#include "server/compress_endpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>

#include "base/log.h"

namespace pagoda {

using json = nlohmann::json;

Result<std::shared_ptr<CompressScorer>> CompressScorer::create(const std::string& path, int threads, bool lazy) {
  auto s = std::shared_ptr<CompressScorer>(new CompressScorer());
  s->path_ = path;
  s->threads_ = std::max(threads, 1);
  if (!lazy) {
    std::lock_guard<std::mutex> lock(s->mu_);
    if (Status st = s->load_locked(); !st) return st;
  }
  return s;
}

Status CompressScorer::load_locked() {
  if (model_) return Status::ok();
  auto file = GgufFile::open(path_);
  if (!file) return error("the compression scorer {}: {}", path_, file.status().message());
  auto f = std::make_unique<GgufFile>(std::move(file.value()));
  auto pool = std::make_unique<ThreadPool>(threads_);
  auto model = Model::load(*f, *pool);
  if (!model) return error("the compression scorer {}: {}", path_, model.status().message());
  auto tok = Tokenizer::from_gguf(*f);
  if (!tok) return error("the compression scorer {}: {}", path_, tok.status().message());
  file_ = std::move(f);
  pool_ = std::move(pool);
  model_ = std::move(model.value());
  tokenizer_ = std::move(tok.value());
  // The frequent-token head at the default size now, not in the first request's time.
  const int32_t k = CompressOptions{}.vocab_subset;
  if (k > 0 && k < model_->config().n_vocab)
    if (auto head = heads_.get(*model_, tokenizer_->vocab(), k); !head)
      log_warn("compression scorer {}: {} (made again on each request)", path_, head.status().message());
  log_info("compression scorer loaded: {} ({} threads)", path_, threads_);
  return Status::ok();
}

Result<CompressResult> CompressScorer::compress(const PromptParts& parts, const CompressOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status st = load_locked(); !st) return st;
  return compress_prompt(*model_, *tokenizer_, parts, options, &heads_);
}

Result<std::optional<std::string>> CompressScorer::input_error(const PromptParts& parts,
                                                               const CompressOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status st = load_locked(); !st) return st;
  return compress_input_error(*model_, *tokenizer_, parts, options);
}

namespace {

std::optional<ApiError> no_scorer(const ServerContext& ctx, const char* field) {
  if (ctx.compress_scorer) return std::nullopt;
  return ApiError::bad_request("this server has no compression scorer (it was started with --compress-scorer none)",
                               field);
}

ApiError server_error(const Status& st) { return ApiError{500, st.message(), "server_error", "", ""}; }

// parts compressed by the scorer: the caller's mistakes (checked first) are 400s, and any
// failure after them the server's.
std::variant<CompressResult, ApiError> run_compress(const ServerContext& ctx, const PromptParts& parts,
                                                    const CompressOptions& o, const char* field) {
  CompressScorer& scorer = *ctx.compress_scorer;
  auto bad = scorer.input_error(parts, o);
  if (!bad) return server_error(bad.status());
  if (*bad) return ApiError::bad_request(**bad, field);
  auto r = scorer.compress(parts, o);
  if (!r) return server_error(r.status());
  if (ctx.metrics != nullptr) ctx.metrics->count_compression(r->origin_tokens, r->compressed_tokens, r->seconds);
  return std::move(r.value());
}

std::optional<ApiError> read_ratio(const json& v, const char* field, double& ratio) {
  if (!v.is_number() || !(v.get<double>() > 0.0 && v.get<double>() <= 1.0))
    return ApiError::bad_request(fmt::format("'{}': must be a number in (0, 1] (the share of tokens to keep)", field),
                                 field);
  ratio = v.get<double>();
  return std::nullopt;
}

// The user messages' contents compressed in place; the last one's last paragraph is the
// question. Returns the token counts (origin, compressed) and seconds summed.
struct Totals {
  int64_t origin = 0, compressed = 0;
  double seconds = 0;
  std::string joined;  // the compressed user contents, blank-line separated
};

std::optional<ApiError> compress_user_texts(const ServerContext& ctx, std::vector<std::string*> texts,
                                            const CompressOptions& o, const char* field, Totals& t) {
  for (size_t i = 0; i < texts.size(); ++i) {
    PromptParts parts;
    if (i + 1 == texts.size()) parts = split_prompt(*texts[i]);
    else parts.context = *texts[i];
    if (join_prompt(parts).find_first_not_of(" \t\r\n") == std::string::npos) continue;
    auto ran = run_compress(ctx, parts, o, field);
    if (auto* e = std::get_if<ApiError>(&ran)) return *e;
    const CompressResult* r = &std::get<CompressResult>(ran);
    *texts[i] = r->prompt;
    t.origin += r->origin_tokens;
    t.compressed += r->compressed_tokens;
    t.seconds += r->seconds;
    if (!t.joined.empty()) t.joined += "\n\n";
    t.joined += r->prompt;
  }
  return std::nullopt;
}

}  // namespace

std::variant<std::string, ApiError> serve_compress(const ServerContext& ctx, const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return ApiError::bad_request("the request body must be a JSON object");
  if (auto e = no_scorer(ctx, "")) return *e;
  CompressOptions o;
  if (auto it = j.find("ratio"); it != j.end() && !it->is_null())
    if (auto e = read_ratio(*it, "ratio", o.ratio)) return *e;
  PromptParts parts;
  for (auto [name, out] : {std::pair{"question", &parts.question}, std::pair{"instruction", &parts.instruction}}) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_string()) return ApiError::bad_request(fmt::format("'{}': must be a string", name), name);
    *out = it->get<std::string>();
  }
  for (auto [name, out] :
       {std::pair{"iterative", &o.iterative}, std::pair{"question_words", &o.protect_question_words}}) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_boolean()) return ApiError::bad_request(fmt::format("'{}': must be true or false", name), name);
    *out = it->get<bool>();
  }
  if (auto it = j.find("question_share"); it != j.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() >= 0.0 && it->get<double>() <= 1.0))
      return ApiError::bad_request("'question_share': must be a number in [0, 1]", "question_share");
    o.question_share = it->get<double>();
  }
  if (auto it = j.find("scorer_vocab"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT32_MAX)
      return ApiError::bad_request("'scorer_vocab': must be a non-negative integer (0: the whole vocabulary)",
                                   "scorer_vocab");
    o.vocab_subset = static_cast<int32_t>(it->get<int64_t>());
  }
  auto p = j.find("prompt");
  auto m = j.find("messages");
  const bool has_p = p != j.end() && !p->is_null(), has_m = m != j.end() && !m->is_null();
  if (has_p == has_m)
    return ApiError::bad_request("give the text as 'prompt' or as 'messages' (one of them)", "prompt");
  json out;
  if (has_p) {
    if (!p->is_string()) return ApiError::bad_request("'prompt': must be a string", "prompt");
    parts.context = p->get<std::string>();
    if (join_prompt(parts).find_first_not_of(" \t\r\n") == std::string::npos)
      return ApiError::bad_request("'prompt': is empty; there is nothing to compress", "prompt");
    auto ran = run_compress(ctx, parts, o, "prompt");
    if (auto* e = std::get_if<ApiError>(&ran)) return *e;
    const CompressResult* r = &std::get<CompressResult>(ran);
    out = {{"compressed_prompt", r->prompt}, {"origin_tokens", r->origin_tokens},
           {"compressed_tokens", r->compressed_tokens}, {"seconds", r->seconds}};
    if (!std::isnan(r->vocab_mass))
      out["scorer_vocab"] = {{"tokens", r->vocab_tokens}, {"mass", r->vocab_mass}};
  } else {
    if (!m->is_array() || m->empty()) return ApiError::bad_request("'messages': must be a non-empty list", "messages");
    std::vector<std::string> contents;
    std::vector<std::string*> users;
    contents.reserve(m->size());
    for (const json& msg : *m) {
      if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string() || !msg.contains("content") ||
          !msg["content"].is_string())
        return ApiError::bad_request("'messages': each message needs a string 'role' and a string 'content'",
                                     "messages");
      contents.push_back(msg["content"].get<std::string>());
      if (msg["role"] == "user") users.push_back(&contents.back());
    }
    if (users.empty()) return ApiError::bad_request("'messages': there is no user message to compress", "messages");
    Totals t;
    if (auto e = compress_user_texts(ctx, users, o, "messages", t)) return *e;
    if (t.origin == 0) return ApiError::bad_request("'messages': the user messages are empty", "messages");
    json msgs = *m;
    for (size_t i = 0; i < msgs.size(); ++i) msgs[i]["content"] = contents[i];
    out = {{"compressed_prompt", t.joined}, {"messages", msgs}, {"origin_tokens", t.origin},
           {"compressed_tokens", t.compressed}, {"seconds", t.seconds}};
  }
  const double origin = out["origin_tokens"].get<double>();
  out["ratio"] = origin > 0 ? out["compressed_tokens"].get<double>() / origin : 1.0;
  out["object"] = "compression";
  out["token_counts"] = "scorer";
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<ApiError> apply_prompt_compression(const ServerContext& ctx, ApiRequest& r) {
  if (!r.compress_prompt) return std::nullopt;
  if (auto e = no_scorer(ctx, "compress_prompt")) return *e;
  const std::string& want = r.compress_prompt->scorer;
  if (!want.empty() && want != ctx.compress_scorer->path() &&
      want != std::filesystem::path(ctx.compress_scorer->path()).stem().string())
    return ApiError::bad_request(
        fmt::format("'compress_prompt.scorer': this server's scorer is {} (set by --compress-scorer)",
                    std::filesystem::path(ctx.compress_scorer->path()).stem().string()),
        "compress_prompt.scorer");
  CompressOptions o;
  o.ratio = r.compress_prompt->ratio;
  Totals t;
  if (!r.chat) {
    std::vector<std::string*> texts;
    for (auto& p : r.prompts) {
      auto* s = std::get_if<std::string>(&p);
      if (s == nullptr)
        return ApiError::bad_request("'compress_prompt': needs text prompts, not token ids", "compress_prompt");
      // Each prompt on its own: its last paragraph is its question.
      if (auto e = compress_user_texts(ctx, {s}, o, "prompt", t)) return *e;
    }
  } else {
    std::vector<jinja::Value> msgs = r.chat_input.messages.items();
    std::vector<std::string> contents(msgs.size());
    std::vector<std::string*> users;
    for (size_t i = 0; i < msgs.size(); ++i) {
      const jinja::Value* role = msgs[i].dict().find("role");
      const jinja::Value* content = msgs[i].dict().find("content");
      if (role == nullptr || !role->is_string() || role->str() != "user" || content == nullptr || !content->is_string())
        continue;
      contents[i] = content->str();
      users.push_back(&contents[i]);
    }
    if (auto e = compress_user_texts(ctx, users, o, "messages", t)) return *e;
    for (size_t i = 0; i < msgs.size(); ++i) {
      if (std::find(users.begin(), users.end(), &contents[i]) == users.end()) continue;
      jinja::Dict d = msgs[i].dict();
      d.set(jinja::Value("content"), jinja::Value(contents[i]));
      msgs[i] = jinja::Value::dict(std::move(d));
    }
    r.chat_input.messages = jinja::Value::list(std::move(msgs));
  }
  log_info("compress_prompt: {} -> {} scorer tokens in {:.2f} s", t.origin, t.compressed, t.seconds);
  return std::nullopt;
}

}  // namespace pagoda
