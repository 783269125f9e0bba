// What a caller hands the engine and what it gets back. A request is a prompt (token ids)
// plus how to continue it; each step reports the tokens its sequences produced. A request
// with n > 1 runs n sequences that share the prompt's KV blocks (parallel sampling).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "constrain/constraint.h"
#include "model/config.h"
#include "sampling/params.h"

namespace pagoda {

using RequestId = int64_t;

struct RequestParams {
  SamplingParams sampling;
  int32_t max_tokens = 128;          // < 0: until a stop or the context is full
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  // Text that ends a sample where it first appears (not included in the text); needs
  // the engine's tokenizer. Empty strings are ignored.
  std::vector<std::string> stop;
  int32_t n = 1;                     // parallel samples of the same prompt
  int32_t priority = 0;              // lower runs first (priority policy only)
  int32_t logprobs = -1;             // >= 0: report the token's logprob and this many top ones
  bool return_logits = false;        // copy each step's raw logits row into the output (tools)
  // Reject a request whose prompt plus max_tokens exceeds the context, as OpenAI and vLLM
  // do; otherwise (llama.cpp's way) generation just stops at the context's end.
  bool max_tokens_must_fit = false;
  // Constrained decoding (constrain/constraint.h): each sample's text stays inside this
  // grammar; the sample ends when the grammar is complete and takes a stop token.
  std::shared_ptr<const Constraint> constraint;
  // An embedding request: the prompt is computed and its final hidden states pooled into
  // one vector (StepOutput::embedding, not normalized; engine/embedding.h), with no
  // token generated; n must be 1 and the sampling fields are unused. kNone: the model's
  // own pooling (Engine::default_pooling).
  bool embed = false;
  Pooling pooling = Pooling::kNone;
  // > 0: the prompt is a text pair (a cross-encoder's query and document, tokenizer/
  // text_pair.h) whose second text starts at this index: token type 1 from there on.
  int32_t segment_b = 0;
};

// Why the engine refuses a request: the field at fault, by its OpenAI name ("prompt",
// "n", "max_tokens", "logprobs", "stop"), and a message a user can act on.
struct RequestRejection {
  std::string param;
  std::string message;
};

enum class FinishReason { kNone, kLength, kStop, kAbort };
const char* finish_reason_name(FinishReason r);

// One token of one sequence, or the end of it.
struct StepOutput {
  RequestId request = 0;
  int32_t index = 0;            // which of the request's n samples
  int32_t token = -1;           // -1: no new token (an abort)
  float logprob = 0.0f;         // when RequestParams::logprobs >= 0
  std::vector<std::pair<int32_t, float>> top_logprobs;
  std::vector<float> logits;    // when RequestParams::return_logits
  // The text this token made safe to show (engine/output_processor.h): empty without a
  // tokenizer, mid-character, or while it could still be the start of a stop string; at
  // the end of a sequence, everything still held.
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::string stop_string;      // the stop string that ended the sample, if one did
  // An embedding request's result (n_embd floats, pooled, not normalized; under rank
  // pooling the classification head's n_cls_out scores), on its one output, which has no
  // token and finishes with kStop.
  std::vector<float> embedding;
  // Set on the first token of a sequence and at its end (seconds since engine start).
  double arrival_time = 0, first_token_time = 0, finish_time = 0;
  double token_time = 0;             // when this token was sampled
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // prompt tokens found in the prefix cache
  int32_t output_tokens = 0;         // so far, this one included
  // Constrained samples: the time the grammar's mask of this token's row took.
  bool constrained = false;
  bool forced = false;  // appended because the grammar forced it (no mask, no sampling)
  double mask_seconds = 0;
};

}  // namespace pagoda
