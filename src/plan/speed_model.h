// Predicted speed of a model on a HardwareProfile, a roofline per matrix: a step of n
// tokens reads each weight matrix once (its bytes at the format's measured GEMV rate) and
// does 2 * rows * cols * n FLOPs (at the format's measured GEMM rate); the step takes the
// larger of the two for every matrix, plus attention (the KV bytes of the context, and its
// FLOPs). Decode of one sequence is bandwidth-bound on every CPU, prefill compute-bound.
// Where it is wrong: the output head and small matrices of tiny models run below the
// probe's rates, and the per-step overhead (sampling, scheduling) is not in it;
// bench/plan_accuracy.py measures how far off it is.
//
// Cost: a pass over the model's bound views. Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "plan/hardware.h"

namespace pagoda {

class Model;

// As llama-bench (and `pagoda bench`) measure: pp = `prompt` tokens prefilled after
// `depth` cached ones, tg = `gen` tokens decoded after `depth` (their mean rate).
struct SpeedRequest {
  int32_t prompt = 512;
  int32_t gen = 128;
  int32_t depth = 0;
  int32_t batch = 1;     // decode: sequences stepped together, each at the same depth
  double kv_bytes_per_token_layer = 0;  // K and V of one token in one layer (kv_row_bytes * 2)
};

struct SpeedPlan {
  double weight_bytes_per_step = 0;  // every matrix once (as the engine reads them: panels where packed)
  double decode_step_s = 0;          // one step of `batch` sequences
  double decode_tok_s = 0;           // batch / decode_step_s
  double decode_bound_by_memory = 0; // share of the step's matrix time that is bandwidth-bound
  double prefill_s = 0;
  double prefill_tok_s = 0;
  double ttft_s = 0;                 // the prefill of `prompt` tokens (the first token samples its last row)
};

SpeedPlan plan_speed(const Model& model, const HardwareProfile& hw, const SpeedRequest& r);

}  // namespace pagoda
