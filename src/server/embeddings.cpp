#include "server/embeddings.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "engine/embedding.h"
#include "server/embedding_runs.h"

namespace pagoda {

using json = nlohmann::json;

namespace {

struct EmbeddingRequest {
  std::vector<std::vector<int32_t>> inputs;
  bool base64 = false;
  int normalize = 2;
};

std::string base64(const std::vector<float>& v) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(v.data());
  const int n = static_cast<int>(v.size() * sizeof(float));
  std::string out(static_cast<size_t>(4 * ((n + 2) / 3)), '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes, n);
  out.resize(static_cast<size_t>(std::max(written, 0)));
  return out;
}

// A list of token ids, or nullopt when `j` is not one (a non-integer element).
std::optional<std::vector<int32_t>> as_ids(const json& j) {
  if (!j.is_array() || j.empty()) return std::nullopt;
  std::vector<int32_t> ids;
  for (const json& t : j) {
    if (!t.is_number_integer()) return std::nullopt;
    const int64_t v = t.get<int64_t>();
    if (v < INT32_MIN || v > INT32_MAX) return std::nullopt;
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

std::variant<EmbeddingRequest, ApiError> parse(const ServerContext& ctx, const Tokenizer& tok, const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return ApiError::bad_request("the body is not a JSON object");
  EmbeddingRequest r;
  if (!j.contains("input")) return ApiError::bad_request("'input' is required", "input");
  const json& in = j["input"];
  const char* shape = "'input' must be a string, a list of strings, a list of token ids or a list of such lists";
  auto text = [&](const std::string& s) { return tok.encode(s, /*add_special=*/true, /*parse_special=*/true); };
  if (in.is_string()) {
    r.inputs.push_back(text(in.get<std::string>()));
  } else if (in.is_array()) {
    if (in.empty()) return ApiError::bad_request("'input' is an empty list", "input");
    if (auto ids = as_ids(in)) {
      r.inputs.push_back(std::move(*ids));
    } else {
      if (in.size() > kMaxEmbeddingInputs)
        return ApiError::bad_request(
            fmt::format("'input' has {} items; at most {} per request", in.size(), kMaxEmbeddingInputs), "input");
      for (const json& item : in) {
        if (item.is_string()) r.inputs.push_back(text(item.get<std::string>()));
        else if (auto ids = as_ids(item)) r.inputs.push_back(std::move(*ids));
        else return ApiError::bad_request(shape, "input");
      }
    }
  } else {
    return ApiError::bad_request(shape, "input");
  }
  if (j.contains("encoding_format") && !j["encoding_format"].is_null()) {
    const json& f = j["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64"))
      return ApiError::bad_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
    r.base64 = f == "base64";
  }
  if (j.contains("dimensions") && !j["dimensions"].is_null()) {
    const json& d = j["dimensions"];
    const int32_t width = ctx.embedding_dim;
    if (!d.is_number_integer() || d.get<int64_t>() != width)
      return ApiError::bad_request(fmt::format("'dimensions': this model gives {}-dimensional embeddings and was not "
                                               "trained for shorter ones; leave 'dimensions' out or set it to {}",
                                               width, width),
                                   "dimensions");
  }
  if (j.contains("embd_normalize") && !j["embd_normalize"].is_null()) {
    const json& n = j["embd_normalize"];
    if (!n.is_number_integer() || n.get<int64_t>() < -1 || n.get<int64_t>() > 64)
      return ApiError::bad_request("'embd_normalize' must be an integer from -1 (none) to 64", "embd_normalize");
    r.normalize = n.get<int>();
  }
  return r;
}

}  // namespace

std::variant<std::string, ApiError> serve_embeddings(const ServerContext& ctx, const std::string& body,
                                                     HttpRequest* req) {
  if (ctx.embed_loop == nullptr && ctx.reranker)
    return ApiError::bad_request(
        fmt::format("this server's model ({}) is a reranker (rank pooling): it scores query-document pairs at "
                    "/v1/rerank and gives no embeddings; serve an embedding model with --embedding-model",
                    ctx.model_name),
        "model");
  EngineLoop* mloop = ctx.embed_loop != nullptr ? ctx.embed_loop : ctx.loop;
  const Tokenizer& tok = ctx.embed_tokenizer != nullptr ? *ctx.embed_tokenizer : *ctx.tokenizer;
  auto parsed = parse(ctx, tok, body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  EmbeddingRequest r = std::move(std::get<EmbeddingRequest>(parsed));
  RequestParams params;
  params.embed = true;
  params.pooling = ctx.pooling;
  int64_t tokens = 0;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (auto rejected = mloop->check(r.inputs[i], params))
      return ApiError::bad_request(r.inputs.size() > 1 ? fmt::format("input {}: {}", i, rejected->message)
                                                       : rejected->message,
                                   rejected->param);
    tokens += static_cast<int64_t>(r.inputs[i].size());
  }
  std::vector<RequestParams> each(r.inputs.size(), params);
  auto ran = run_embedding_requests(*mloop, std::move(r.inputs), std::move(each), "input", req);
  if (auto* e = std::get_if<ApiError>(&ran)) return *e;
  std::vector<std::vector<float>>& vecs = std::get<std::vector<std::vector<float>>>(ran);
  json data = json::array();
  for (size_t i = 0; i < vecs.size(); ++i) {
    std::vector<float>& v = vecs[i];
    if (Status st = normalize_embedding(v, r.normalize); !st.is_ok()) return ApiError::bad_request(st.message());
    json item = {{"object", "embedding"}, {"index", i}};
    if (r.base64) item["embedding"] = base64(v);
    else item["embedding"] = v;
    data.push_back(std::move(item));
  }
  if (ctx.metrics != nullptr) ctx.metrics->count_embeddings(static_cast<int64_t>(vecs.size()), tokens);
  json out = {{"object", "list"},
              {"data", std::move(data)},
              {"model", ctx.model_name},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace pagoda
