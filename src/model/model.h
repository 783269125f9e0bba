// A loaded model: config, weights bound into the GGUF mapping, and the forward pass.
// forward() runs a chunk of a sequence's tokens at positions pos0.. through every layer,
// appends their keys/values to the cache and writes logits. Prefill is one call with the
// whole prompt (batched matrix work); decode is one call per token. The model holds
// scratch buffers, so one Model runs one forward at a time (the engine loop's thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace pagoda {

class GgufFile;

class Model {
 public:
  // The file must outlive the model (weights point into its mapping).
  static Result<std::unique_ptr<Model>> load(const GgufFile& file, ThreadPool& pool);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  KvCache make_cache(int32_t n_ctx) const { return KvCache(config_.n_layer, n_ctx, config_.kv_dim()); }
  size_t weight_bytes() const { return weight_bytes_; }

  // logits: n_vocab floats for the last token, or n_tokens * n_vocab with all_logits.
  // Fails (changing nothing) on token ids outside the vocabulary or when the tokens do
  // not fit in the cache.
  Status forward(std::span<const int32_t> tokens, int32_t pos0, KvCache& kv, float* logits,
                 bool all_logits = false);

 private:
  Model() = default;
  void forward_chunk(const int32_t* tokens, int64_t n, int32_t pos0, KvCache& kv, float* logits, bool all_logits);
  void ensure_scratch(int64_t n);

  ModelConfig config_;
  ModelWeights weights_;
  ThreadPool* pool_ = nullptr;
  size_t weight_bytes_ = 0;
  // Scratch for a chunk of up to scratch_tokens_ tokens.
  int64_t scratch_tokens_ = 0;
  std::vector<float> x_, xn_, q_, k_, v_, att_, proj_, gate_, up_, last_;
};

}  // namespace pagoda
