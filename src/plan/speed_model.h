// Predicted speed of a model on a HardwareProfile, a roofline per matrix: a step of n
// tokens reads each weight matrix once and does 2 * rows * cols * n FLOPs; the step takes
// the larger of the two for every matrix, plus attention of every layer over its context
// (sliding-window layers over their window). Where the profile timed the model's own
// shapes and attention (`--hardware auto`) those times are used, else the format's
// streaming and GEMM rates and attention's KV bytes and FLOPs at the bulk format's rates.
// Where it also timed the model's whole step on a copy of its shape (model_probe.h), one
// sequence's decode and prefill are that step, scaled to the model's layers and tokens,
// plus attention past the context the copy ran at: what runs between the calls (norms,
// RoPE, activations, the forks and joins) is then in the prediction. Decode of one
// sequence is bandwidth-bound on every CPU, prefill compute-bound; bench/plan_accuracy.py
// measures how far off it is.
//
// Cost: a pass over the model's bound views. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/hardware.h"

namespace pagoda {

class GgufFile;
class Model;

// As llama-bench (and `pagoda bench`) measure: pp = `prompt` tokens prefilled after
// `depth` cached ones, tg = `gen` tokens decoded after `depth` (their mean rate).
struct SpeedRequest {
  int32_t prompt = 512;
  int32_t gen = 128;
  int32_t depth = 0;
  int32_t batch = 1;     // decode: sequences stepped together, each at the same depth
  double kv_bytes_per_token_layer = 0;  // K and V of one token in one layer (kv_row_bytes * 2)
  KvType kv_type = KvType::kF16;         // for the profile's attention timing
  // model_shape_key of the model's file: where the profile timed the model's own step
  // (model_probe.h), one sequence's decode and prefill scale that instead of summing calls.
  std::string model_key;
};

struct SpeedPlan {
  double weight_bytes_per_step = 0;  // every matrix once (as the engine reads them: panels where packed)
  double decode_step_s = 0;          // one step of `batch` sequences
  double decode_tok_s = 0;           // batch / decode_step_s
  double decode_bound_by_memory = 0; // share of the step's matrix time that is bandwidth-bound
  double decode_matrix_s = 0;        // of decode_step_s, the matrices' part (attention is the rest)
  DType bulk_type = DType::F32;      // the format holding most of the matrix bytes
  double prefill_s = 0;
  double prefill_tok_s = 0;
  double ttft_s = 0;                 // the prefill of `prompt` tokens (the first token samples its last row)
};

SpeedPlan plan_speed(const Model& model, const HardwareProfile& hw, const SpeedRequest& r);

// The distinct matmul calls of the model's step (what `--hardware auto` times).
std::vector<MatmulCall> matmul_calls(const Model& model);

// The profile `--hardware` names for this model: "auto" (this machine: the cached
// profile, measuring what the model's calls, attention shapes (f16 and int8 KV) and the
// read bandwidth still lack; only this model's timings kept), "none" (nullopt), or a named
// profile; an unknown name is an error listing the known ones.
// With `file` (the model's), auto also times the model's own step on a copy of its
// shape (model_probe.h; decoders without experts).
Result<std::optional<HardwareProfile>> hardware_for_model(const std::string& choice, const Model& model,
                                                          ThreadPool& pool, bool remeasure,
                                                          const GgufFile* file = nullptr);

}  // namespace pagoda
