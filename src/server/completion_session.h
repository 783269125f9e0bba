// One /v1/completions or /v1/chat/completions call from submission to the last byte:
// the prompts go to the engine loop (n samples each), whose output processor turns every
// sample's tokens into text and ends it at a stop string (engine/output_processor.h);
// logprobs are collected in OpenAI's shapes, and the result is either one JSON body or a
// sequence of server-sent events ending in [DONE].
#pragma once

#include <chrono>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "chat/reasoning_split.h"
#include "chat/tool_syntax.h"
#include "constrain/constraint.h"
#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/engine_loop.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class CompressScorer;

struct ServerContext {
  EngineLoop* loop = nullptr;
  const Tokenizer* tokenizer = nullptr;
  Metrics* metrics = nullptr;
  std::string model_name;
  int32_t max_model_len = 0;
  int32_t max_tokens_limit = 0;  // 0: none beyond the context
  int32_t embedding_dim = 0;     // the embedding model's hidden width: what /v1/embeddings returns
  // serve --embedding-model: the engine and tokenizer /v1/embeddings uses (null: loop's).
  EngineLoop* embed_loop = nullptr;
  const Tokenizer* embed_tokenizer = nullptr;
  Pooling pooling = Pooling::kNone;  // how /v1/embeddings pools (kNone: the model's own)
  // The served model (loop) is a cross-encoder pooled by rank, with one output: /v1/rerank
  // answers, /v1/embeddings refuses (unless embed_loop embeds).
  bool reranker = false;
  RequestLimits limits;          // per request (openai_request.h); the server-wide ones are the loop's
  // Compiles structured-output requests (response_format, guided_*, grammar) on the
  // handler's thread, so a slow schema never holds up the engine. Null: refused with 400.
  const ConstraintCompiler* constraints = nullptr;
  // The chat template's tool-call syntax, reasoning and default kwargs (chat_request.h).
  std::shared_ptr<const ChatConventions> chat;
  // The scorer of /v1/compress and compress_prompt (server/compress_endpoint.h); null: 400.
  std::shared_ptr<CompressScorer> compress_scorer;
};

class CompletionSession {
 public:
  // Validates counts and lengths and submits. prompts: token ids per prompt (chat: one,
  // rendered by the caller). An ApiError when the request cannot run (400 over a
  // per-request limit, 429 when the queue or the server's sequences are full, 503 while
  // shutting down, 500 when the engine failed to admit it).
  static std::variant<std::unique_ptr<CompletionSession>, ApiError> start(const ServerContext& ctx, ApiRequest req,
                                                                          std::vector<std::vector<int32_t>> prompts);
  ~CompletionSession();

  // Non-streaming: waits for every sample; the response body or an error.
  std::variant<std::string, ApiError> wait_json();
  // Streaming: appends the SSE events that became ready (waiting up to `wait` for one).
  // False once the stream is complete (the last events, [DONE] included, appended).
  bool next_events(std::string& out, std::chrono::milliseconds wait);
  // The client went away: abort everything still running.
  void abort();

 private:
  struct Choice {
    std::string content;
    std::string reasoning;
    std::vector<ToolCall> tool_calls;
    // Chat replies read back: <think> text split off, tool calls extracted.
    std::unique_ptr<ReasoningSplitter> think;
    std::unique_ptr<ToolCallExtractor> calls;
    std::vector<std::string> call_ids;  // of the calls streamed so far
    int32_t tokens = 0;
    bool done = false;
    bool role_sent = false;
    std::string finish_reason;
    nlohmann::json* logprobs = nullptr;  // owned by lp_store_
  };
  struct Prompt {
    std::shared_ptr<OutputChannel> channel;
    int32_t tokens = 0;
    std::string echo;
    bool closed = false;
  };
  CompletionSession(const ServerContext& ctx, ApiRequest req);
  // Feeds outputs of prompt p; appends stream events when streaming.
  void consume(size_t p, std::vector<StepOutput>& outs, std::string* events);
  void append_logprobs(Choice& c, const StepOutput& o, const std::string& token_text);
  std::string chunk(size_t choice, const std::string& delta, const std::string* finish, const nlohmann::json* lp,
                    const std::string& reasoning = {}, const nlohmann::json* tool_calls = nullptr);
  nlohmann::json usage() const;
  bool all_done() const;

  ServerContext ctx_;
  ApiRequest req_;
  std::vector<Prompt> prompts_;
  std::vector<Choice> choices_;
  std::vector<std::unique_ptr<nlohmann::json>> lp_store_;
  std::string id_;
  int64_t created_ = 0;
  bool finished_events_ = false;
  std::optional<ApiError> failure_;
  std::mutex abort_mu_;  // guards Prompt::closed: abort() may come from the transport's I/O thread
};

}  // namespace pagoda
