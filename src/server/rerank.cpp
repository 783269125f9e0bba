#include "server/rerank.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <numeric>

#include "server/embedding_runs.h"
#include "tokenizer/text_pair.h"

namespace pagoda {

using json = nlohmann::json;

namespace {

struct RerankRequest {
  std::string query;
  std::vector<std::string> documents;
  size_t top_n = 0;  // 0: every document
  bool return_documents = true;
};

std::variant<RerankRequest, ApiError> parse(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return ApiError::bad_request("the body is not a JSON object");
  RerankRequest r;
  const auto q = j.find("query");
  if (q == j.end() || q->is_null())
    return ApiError::bad_request("'query' is required (the text to rank against)", "query");
  if (!q->is_string()) return ApiError::bad_request("'query' must be a string", "query");
  r.query = q->get<std::string>();
  const auto d = j.find("documents");
  if (d == j.end() || d->is_null())
    return ApiError::bad_request("'documents' is required (a list of texts to rank)", "documents");
  if (!d->is_array())
    return ApiError::bad_request("'documents' must be a list of strings or {\"text\": ...} objects", "documents");
  if (d->empty()) return ApiError::bad_request("'documents' is an empty list: there is nothing to rank", "documents");
  for (size_t i = 0; i < d->size(); ++i) {
    const json& doc = (*d)[i];
    if (doc.is_string()) {
      r.documents.push_back(doc.get<std::string>());
      continue;
    }
    const auto text = doc.is_object() ? doc.find("text") : doc.end();
    if (!doc.is_object() || text == doc.end() || !text->is_string())
      return ApiError::bad_request(
          fmt::format("document {} is neither a string nor an object with a string 'text'", i), "documents");
    r.documents.push_back(text->get<std::string>());
  }
  if (const auto n = j.find("top_n"); n != j.end() && !n->is_null()) {
    if (!n->is_number_integer() || n->get<int64_t>() < 1)
      return ApiError::bad_request("'top_n' must be a positive integer (the number of best documents to return)",
                                   "top_n");
    r.top_n = static_cast<size_t>(std::min<int64_t>(n->get<int64_t>(), static_cast<int64_t>(r.documents.size())));
  }
  if (const auto rd = j.find("return_documents"); rd != j.end() && !rd->is_null()) {
    if (!rd->is_boolean()) return ApiError::bad_request("'return_documents' must be true or false", "return_documents");
    r.return_documents = rd->get<bool>();
  }
  return r;
}

}  // namespace

std::variant<std::string, ApiError> serve_rerank(const ServerContext& ctx, const std::string& body, HttpRequest* req) {
  if (!ctx.reranker)
    return ApiError::bad_request(
        fmt::format("this server's model ({}) is not a reranker: /v1/rerank needs a cross-encoder with a "
                    "classification head (pooling rank), such as a BertForSequenceClassification folder converted "
                    "by pagoda convert, served with -m",
                    ctx.model_name),
        "model");
  auto parsed = parse(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const RerankRequest& r = std::get<RerankRequest>(parsed);
  std::vector<std::vector<int32_t>> pairs;
  std::vector<RequestParams> params;
  pairs.reserve(r.documents.size());
  params.reserve(r.documents.size());
  int64_t tokens = 0;
  for (size_t i = 0; i < r.documents.size(); ++i) {
    TextPair pair = encode_text_pair(*ctx.tokenizer, r.query, r.documents[i]);
    // A pair is scored whole or not at all: a cut document would get a score for text
    // the client did not send.
    if (static_cast<int64_t>(pair.ids.size()) > ctx.max_model_len)
      return ApiError::bad_request(
          fmt::format("document {}: the query and document together are {} tokens, over this model's context of {} "
                      "(nothing is truncated); shorten or split the document",
                      i, pair.ids.size(), ctx.max_model_len),
          "documents");
    RequestParams p;
    p.embed = true;
    p.pooling = Pooling::kRank;
    p.segment_b = pair.second;
    if (auto rejected = ctx.loop->check(pair.ids, p))
      return ApiError::bad_request(fmt::format("document {}: {}", i, rejected->message),
                                   rejected->param == "input" ? "documents" : rejected->param);
    tokens += static_cast<int64_t>(pair.ids.size());
    pairs.push_back(std::move(pair.ids));
    params.push_back(p);
  }
  auto ran = run_embedding_requests(*ctx.loop, std::move(pairs), std::move(params), "documents", req);
  if (auto* e = std::get_if<ApiError>(&ran)) return *e;
  const std::vector<std::vector<float>>& scores = std::get<std::vector<std::vector<float>>>(ran);
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Best first; equal scores keep the documents' order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a][0] > scores[b][0]; });
  if (r.top_n > 0) order.resize(r.top_n);
  json results = json::array();
  for (size_t i : order) {
    json item = {{"index", i}, {"relevance_score", scores[i][0]}};
    if (r.return_documents) item["document"] = {{"text", r.documents[i]}};
    results.push_back(std::move(item));
  }
  if (ctx.metrics != nullptr) ctx.metrics->count_rerank(static_cast<int64_t>(scores.size()), tokens);
  static std::atomic<uint64_t> next_id{0};
  json out = {{"id", fmt::format("rerank-{:x}", next_id.fetch_add(1) + 1)},
              {"object", "list"},
              {"model", ctx.model_name},
              {"results", std::move(results)},
              {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace pagoda
