// Single-sequence generation: prefill the prompt in one batched forward, then decode one
// token at a time, sampling each and streaming its text. Timings for the two phases are
// kept separately (time to first token, prefill and decode rates). The continuous
// batching engine replaces this for many sequences; this is what `pagoda run` drives.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

struct GenerateOptions {
  int32_t max_tokens = 128;   // < 0: until end of generation or context full
  bool ignore_eos = false;
  SamplingParams sampling;
};

struct GenerateStats {
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  double prefill_seconds = 0;   // the prompt's forward pass
  double ttft_seconds = 0;      // prefill + first sample
  double decode_seconds = 0;    // everything after the first token
  std::string stop_reason;      // "length", "eos", "context"
};

struct GenerateResult {
  std::vector<int32_t> tokens;           // generated ids
  std::vector<float> logits;             // per generated token, n_vocab each (if kept)
  GenerateStats stats;
};

// on_token(id, text): called for each generated token with the text that became
// complete (may be empty mid-character). Return false to stop early.
using TokenCallback = std::function<bool(int32_t, const std::string&)>;

Result<GenerateResult> generate(Model& model, KvCache& kv, const Tokenizer* tokenizer,
                                const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                const TokenCallback& on_token, bool keep_logits);

}  // namespace pagoda
