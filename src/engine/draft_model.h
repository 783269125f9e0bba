// Speculative decoding with a draft model (vLLM's "draft_model" method, llama.cpp's -md): a
// second, smaller model with the target's vocabulary proposes each drafting sequence's next
// tokens greedily, one batched forward per draft position, over a paged KV pool of its own;
// the target verifies them in its step (engine.h) and its sampler decides, so the output is
// the target's either way.
//
// The draft's KV follows each sequence without being told what was accepted: every proposal
// first cuts it back to the longest prefix of the tokens it computed that the sequence still
// has (rejected drafts roll back there, their slots are overwritten), then computes the rest
// (the prompt the first time, since then the accepted tokens and the target's own token).
// Full blocks of verified tokens go into the pool's prefix cache, so the samples of a request
// (n > 1) and requests that start alike compute their common prefix once.
//
// Cost per step: one draft forward of every drafting sequence's new tokens, then one of a
// token each for every further draft position; drafting stops early where the draft's own
// top probability falls below draft_p_min (llama.cpp's --draft-p-min), since a guess the
// draft itself doubts is rarely accepted and each one costs a verification row. With
// alternatives (a tree of drafts, SpeculativeConfig::branches), the next-best tokens of an
// unsure position are offered too, as leaves the target verifies beside the chain; the
// draft computes no KV for them (a sibling the target accepts is caught up next time).
// Thread-compatible: the engine's thread calls it between its own forward passes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "model/batch.h"
#include "model/model.h"
#include "tokenizer/vocab.h"

namespace pagoda {

// Whether a draft model's tokens mean the target's, as llama.cpp checks it: the same
// tokenizer kind, BOS/EOS ids and add_bos/add_eos, vocabulary sizes within 128 of each
// other, and every token from id 5 on spelled alike in both. The error names the first
// difference.
Status check_draft_vocabulary(const Vocab& target, const Vocab& draft);

// One sequence asking for drafts.
struct DraftRequest {
  int64_t seq = 0;                  // the sequence's id: which KV here is its own
  std::span<const int32_t> tokens;  // the sequence so far; its last token comes next in the target
  int32_t k = 0;                    // the most drafts wanted
  std::vector<int32_t> drafts;      // out: up to k tokens (fewer where the draft doubts)
  // In: at most this many next-best tokens per drafted position (a tree's other branches;
  // 0: none). Out: each such token the draft gives at least kAlternativeMinP, as a sibling
  // of drafts[alt_positions[j]].
  int32_t alternatives = 0;
  std::vector<int32_t> alt_tokens, alt_positions;
};

// A next-best token is worth a verification row only where the draft is unsure between it
// and its first choice: from this probability under the draft on.
inline constexpr double kAlternativeMinP = 0.1;

struct DraftStats {
  int64_t forwards = 0;         // draft forward passes
  double seconds = 0;           // time in propose()
  // The passes after each proposal's first (one token per drafting sequence): what one
  // more draft token costs, without the first pass's catch-up (a new prompt, say).
  int64_t token_forwards = 0;
  double token_seconds = 0;
};

class DraftModel {
 public:
  // The KV pool holds `num_blocks` blocks of `block_size` positions of the draft's shape
  // (one table for all layers). target_vocab: drafts at or past it are never proposed.
  static Result<std::unique_ptr<DraftModel>> create(Model& draft, int32_t target_vocab, int32_t block_size,
                                                    int32_t num_blocks, KvType kv_type, int32_t max_model_len,
                                                    float p_min);

  // Fills each request's drafts. A sequence whose KV does not fit the pool gets none (its
  // KV here is dropped) rather than failing the step; an error is the forward's own.
  Status propose(std::span<DraftRequest> reqs);
  // Forgets a sequence (finished or aborted); its blocks return to the pool.
  void release(int64_t seq);
  void release_all();

  const DraftStats& stats() const { return stats_; }
  const BlockPool& pool() const { return *pool_; }

 private:
  struct SeqKv {
    std::vector<std::vector<BlockId>> tables;  // one layer group
    std::vector<int32_t> computed;             // the tokens whose KV is here, in order
    int32_t hashed = 0;                        // leading blocks registered in the prefix cache
    BlockHash last_hash = 0;
  };
  DraftModel(Model& draft, int32_t target_vocab, float p_min) : model_(draft), target_vocab_(target_vocab), p_min_(p_min) {}
  // Cuts s back to the prefix `tokens` shares with what it computed; a fresh sequence takes
  // the cached blocks of its prompt's leading full blocks.
  void align(SeqKv& s, std::span<const int32_t> tokens);
  // Blocks for positions up to `end` (exclusive); false (nothing taken) when the pool is dry.
  bool reserve(SeqKv& s, int32_t end);
  // Releases every sequence not among reqs; whether there was one.
  bool evict_others(std::span<const DraftRequest> reqs);
  // Registers the full blocks of s below `verified` (tokens the target sampled).
  void register_blocks(SeqKv& s, int32_t verified);
  // The draft's choice from a row and whether it is confident enough to go on.
  int32_t choose(std::span<const float> row, bool& confident) const;
  // Appends to r's alternatives the next-best tokens of `row` (after `best`) the draft gives
  // at least kAlternativeMinP, as siblings of the draft about to be pushed.
  void offer_alternatives(const float* row, int32_t best, DraftRequest& r) const;

  Model& model_;
  int32_t target_vocab_;
  float p_min_;
  int32_t max_model_len_ = 0;
  std::unique_ptr<KvStorage> storage_;
  std::unique_ptr<BlockPool> pool_;
  std::unordered_map<int64_t, SeqKv> seqs_;
  Batch batch_;
  std::vector<float> logits_;
  std::vector<size_t> active_;  // requests still drafting in this pass
  DraftStats stats_;
};

}  // namespace pagoda
