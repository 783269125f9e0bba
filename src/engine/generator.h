// Single-request generation on top of the engine: what `pagoda run` and the tools drive.
// The prompt is prefilled (in one batched forward, or chunks of the engine's token
// budget), then tokens are sampled one at a time and their text streamed. Timings for the
// two phases are kept separately (time to first token, prefill and decode rates).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "sampling/sampler.h"

namespace pagoda {

struct GenerateOptions {
  int32_t max_tokens = 128;   // < 0: until end of generation or context full
  bool ignore_eos = false;
  std::vector<std::string> stop;  // stop strings (RequestParams::stop)
  SamplingParams sampling;
  std::shared_ptr<const Constraint> constraint;  // RequestParams::constraint
};

struct GenerateStats {
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  double prefill_seconds = 0;   // the prompt's forward pass (and the first sample)
  double ttft_seconds = 0;      // request queued -> first token
  double decode_seconds = 0;    // everything after the first token
  std::string stop_reason;      // "length", "eos", "stop" (a stop string), "context", "cancelled"
};

struct GenerateResult {
  std::vector<int32_t> tokens;           // generated ids
  std::vector<float> logits;             // per generated token, n_vocab each (if kept)
  GenerateStats stats;
};

// on_token(id, text): called for each generated token with the text that became safe to
// show (the engine's output processor: empty mid-character or while it may be the start
// of a stop string; everything held comes with the last token). Return false to stop
// early. The engine must have no other work (its steps run here).
using TokenCallback = std::function<bool(int32_t, const std::string&)>;

Result<GenerateResult> generate(Engine& engine, const std::vector<int32_t>& prompt,
                                const GenerateOptions& opts, const TokenCallback& on_token, bool keep_logits);

}  // namespace pagoda
