// Prompt compression in the server: POST /v1/compress ({"prompt" or "messages", "ratio",
// "question"?, "instruction"?, "iterative"?} -> {"compressed_prompt", "origin_tokens",
// "compressed_tokens", "ratio", "seconds"}; counts in the scorer's tokens), and the
// `compress_prompt: {"ratio": r}` option of /v1/completions and /v1/chat/completions,
// which compresses the prompt before it runs (a completion prompt's last paragraph is
// its question and stays whole; in a chat, every user message is compressed except the
// last one's last paragraph).
//
// The scorer is its own Model on its own ThreadPool: the served model belongs to the
// engine thread, which must not wait for a compression (nor a compression for a step).
// Compressions run on the HTTP handler's thread, one at a time under the scorer's mutex;
// each costs the scorer's forward pass over the text (compress/compressor.h). The scorer
// loads at startup when named, or on the first compression when it is the served model's
// file (so a server never asked to compress never pays for a second copy).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "base/status.h"
#include "base/thread_pool.h"
#include "compress/compressor.h"
#include "compress/frequent_head.h"
#include "gguf/gguf_file.h"
#include "server/api_error.h"
#include "server/completion_session.h"

namespace pagoda {

class CompressScorer {
 public:
  // path: a GGUF file; threads: its pool's size. With lazy, nothing loads until used.
  static Result<std::shared_ptr<CompressScorer>> create(const std::string& path, int threads, bool lazy);

  // Loads the model on first use; thread-safe (one compression at a time).
  Result<CompressResult> compress(const PromptParts& parts, const CompressOptions& options);
  // The caller's mistake in parts or options (compress_input_error), if any; fails only
  // when the scorer cannot be loaded (the server's fault).
  Result<std::optional<std::string>> input_error(const PromptParts& parts, const CompressOptions& options);
  const std::string& path() const { return path_; }

 private:
  Status load_locked();

  std::string path_;
  int threads_ = 1;
  std::mutex mu_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  FrequentHead heads_;  // the scorer's frequent-token head, kept between compressions
};

// POST /v1/compress: the response body, or the error (400 naming the field; 400 when the
// server has no scorer).
std::variant<std::string, ApiError> serve_compress(const ServerContext& ctx, const std::string& body);

// Applies a request's compress_prompt option: rewrites its text prompts or its chat
// messages' user contents in place. Nothing when the option is absent.
std::optional<ApiError> apply_prompt_compression(const ServerContext& ctx, ApiRequest& r);

}  // namespace pagoda
