// The model's own step timed on this machine, without its weights: a copy of its shape
// (the file's metadata, its tensors' names, formats and shapes, its first `layers` layers)
// with zero weights, loaded and repacked as the engine loads it, and run through the
// engine's forward pass on the plan's thread pool: one token after a few cached ones
// (decode) and a chunk of tokens from an empty cache (prefill), and both again after a
// long context. Summing the model's matmul
// calls timed one at a time (hardware.h) misses what runs between them, and on two
// threads that is most of the error: Qwen2.5-Coder-0.5B's calls ran 10-25% slower inside a
// decode step than timed alone (docs/plan.md). A copy of the whole model when it is small
// enough, else of as many layers as `max_bytes` allows (the step scales per layer).
//
// Cost: writing and loading the copy (up to max_bytes of zeros in a temporary file beside
// the hardware cache), 32 decode steps and a 512-token prefill of it, each after 16 and
// after 4096 cached tokens: 2-10 s; cached with
// the hardware profile by model_shape_key. Thread-safety: uses the pool it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/attention/attention.h"

namespace pagoda {

class GgufFile;

struct ModelTiming {
  std::string key;            // model_shape_key of the model timed
  KvType kv = KvType::kF16;   // the KV cache it ran with
  int32_t n_layer = 0;        // the model's layers
  int32_t layers = 0;         // of which the copy had (all of them when it fit)
  int32_t decode_keys = 0;    // the context each decode step attended to (mean)
  double decode_s = 0;        // one token through the copy: its layers, then its output head
  int32_t prefill_tokens = 0;
  double prefill_s = 0;       // prefill_tokens from an empty cache through the copy
  double output_s = 0;        // of both, the output head's and final norm's share (one row)
  // The same at deep_keys of context (0: not timed, the model's context is too short): how
  // much attention over a long context costs inside the step, which attention timed alone
  // underestimates too.
  int32_t deep_keys = 0;      // decode: the context each step attended to (mean)
  double deep_decode_s = 0;
  int32_t deep_prefill_keys = 0;  // prefill: the chunk starts after this many cached tokens
  double deep_prefill_s = 0;
};

// Names the model's shape: its architecture and every tensor's name, format and shape
// (not its values), so two files of one shape share a timing.
std::string model_shape_key(const GgufFile& file);

// Times the copy of `file`'s shape. `output_s` is what the profile's call timing gives
// for the output head (the part of a step that does not scale with layers).
Result<ModelTiming> time_model_shape(const GgufFile& file, KvType kv, double output_s, size_t max_bytes,
                                     const std::string& scratch_dir, ThreadPool& pool);

}  // namespace pagoda
