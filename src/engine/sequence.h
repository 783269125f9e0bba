// Internal to the engine: one sequence being generated (a request has n of them), with
// its tokens, how many of them have keys/values in the KV cache, the blocks holding them
// (a table per layer group) and the content hashes of its full blocks (for the prefix cache).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "constrain/constraint.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/speculative.h"
#include "kv/block_pool.h"
#include "sampling/sampler.h"

namespace pagoda {

enum class SeqStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  int64_t id = 0;               // unique, increasing: arrival order among sequences
  RequestId request = 0;
  int32_t index = 0;            // sample index within the request
  int32_t priority = 0;
  int64_t arrival_order = 0;    // the request's arrival (ties between its samples by id)
  const RequestParams* params = nullptr;  // owned by the engine's request record
  std::vector<int32_t> tokens;  // prompt then output
  int32_t prompt_len = 0;
  int32_t num_computed = 0;     // tokens whose K/V are in the cache
  int32_t num_hashed_blocks = 0;  // leading blocks already registered in the prefix cache
  // Per KV layer group (kv/kv_layout.h), the blocks holding its positions; a
  // sliding-window group's entries that left the window are kNoBlock.
  std::vector<std::vector<BlockId>> tables;
  std::vector<BlockHash> hashes;  // of full blocks 0.. of `tokens` (may run past num_computed)
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<OutputProcessor> output;
  std::unique_ptr<ConstraintMatcher> constraint;  // when the request has one
  SeqStatus status = SeqStatus::kWaiting;
  bool forked = false;          // n > 1: the samples have been split off
  bool padding = false;         // static mode: finished, but still computed with its batch
  int32_t cached_prompt_tokens = 0;
  DraftState draft;             // speculative decoding's adaptive draft length
  // An embedding request's sequence: how it pools, and the pooled state so far (a mean's
  // running sum over the chunks computed, a CLS or last row once reached).
  Pooling pool = Pooling::kNone;
  std::vector<float> embedding;
  double arrival_time = 0, first_token_time = 0;

  int32_t output_len() const { return static_cast<int32_t>(tokens.size()) - prompt_len; }
  int32_t len() const { return static_cast<int32_t>(tokens.size()); }
};

}  // namespace pagoda
