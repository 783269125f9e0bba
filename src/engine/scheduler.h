// Which tokens of which sequences run in the next step, as token-budget accounting in the
// style of vLLM v1: every running sequence needs some tokens computed (1 for a decode,
// a chunk for a prompt still being prefilled); running sequences are served first, then
// waiting ones are admitted while the step's token budget (max_num_batched_tokens), the
// sequence limit (max_num_seqs) and the free KV blocks allow, keeping a free block for
// every running sequence's growth. A long prompt is cut into
// chunks (chunked prefill), so decodes never stall behind it.
//
// Out of blocks, the scheduler preempts by recompute: the lowest-priority running
// sequence (the most recently admitted under FCFS) drops its blocks and goes back to the
// front of the queue; its full blocks stay in the prefix cache, so it usually gets most
// of them back. A request is never dropped for lack of memory.
//
// Prefix caching: a newly admitted sequence looks its full prompt blocks up by content
// hash and starts computing after the longest cached prefix (never past its last token,
// which must run to give logits). Blocks it fills are hashed for others.
//
// Sliding-window layers (kv/kv_layout.h): each layer group has its own block table per
// sequence. A windowed group's blocks are released once no token still to be computed
// can see them, so a long Gemma 3 sequence holds its global layers' blocks plus a
// window's worth of the rest; a cached prefix is reused only as far as its full-attention
// blocks and the window before its end are all still cached.
//
// Static mode (the baseline, request-level batching as in FasterTransformer or HF
// generate): a batch of up to max_num_seqs requests is admitted only when nothing runs,
// prefilled whole, and decoded until all of it has finished; a sequence that finishes
// early keeps its row and is computed (as padding, its tokens unreported) until then.
// Like those systems it allocates the batch's KV up front as a rectangle: every row gets
// the longest prompt plus the largest max_tokens of the batch (capped at the context),
// since a row cannot grow later and its padding runs as long as the longest request. So
// at equal KV memory it fits fewer requests than paged continuous batching, which is the
// comparison the baseline is for. A request whose rectangle would not fit even an empty
// pool runs alone, reserving only its prompt and growing block by block.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sequence.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"

namespace pagoda {

enum class SchedulePolicy { kFcfs, kPriority };
enum class ScheduleMode { kContinuous, kStatic };

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  SchedulePolicy policy = SchedulePolicy::kFcfs;
  ScheduleMode mode = ScheduleMode::kContinuous;
  bool prefix_caching = true;
  // An encoder's prompts (bidirectional attention): each is computed whole in one step,
  // never chunked (one longer than the step's budget runs alone, past it), and its blocks
  // are never cached (a key depends on the tokens after it).
  bool whole_prompts = false;
  int32_t max_model_len = 0;  // static mode's reservation cap; 0: no cap
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int32_t n_tokens = 0;  // tokens from seq->num_computed on
};

struct SchedulerStats {
  int64_t preemptions = 0;
  int64_t prefix_query_tokens = 0;  // tokens of admitted sequences (all looked up in the prefix cache)
  int64_t prefix_hit_tokens = 0;    // of those, found
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, BlockPool& pool, KvStorage& storage);

  void add(Sequence* s);  // to the waiting queue
  // Removes a sequence wherever it is and frees its blocks.
  void remove(Sequence* s);
  // Frees a finished sequence's blocks and takes it out of the running set.
  void finish(Sequence* s);
  // Adds a running sequence split off `parent` (n > 1): it gets the parent's tokens, its
  // computed state and a share of every block the parent holds (copy-on-write later).
  void add_fork(Sequence* child, const Sequence& parent);

  // The next step's work; empty when nothing can run.
  const std::vector<ScheduledSeq>& schedule();
  // After the step ran: counts the computed tokens and hashes newly full blocks.
  void commit(const std::vector<ScheduledSeq>& work);
  // After s sampled a token, `finished` saying whether that ended it: whether the token
  // is reported. A finished sequence leaves as the mode says: at once (continuous), or as
  // padding, still computed with its batch and never reported again, until every row of
  // the batch is done or it reaches the context (static).
  bool settle(Sequence* s, bool finished);
  // After every sample of a step settled: a static batch whose rows are all padding ends.
  void end_step();

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  const std::vector<Sequence*>& running() const { return running_; }
  const SchedulerStats& stats() const { return stats_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  bool before(const Sequence* a, const Sequence* b) const;  // a is served first
  // Makes s's blocks cover its first `upto` positions, copying a shared block it is about
  // to write into (copy-on-write). False (allocating nothing new) when that would leave
  // fewer than `keep_free` blocks free.
  bool reserve(Sequence* s, int32_t upto, int32_t keep_free = 0);
  // Releases the blocks of s's windowed groups that no token from num_computed on reads
  // (at the start of every schedule()).
  void release_out_of_window(Sequence* s);
  void preempt(Sequence* s);
  void release(Sequence* s);
  // Retains the cached blocks of s's longest cached prompt prefix; returns the tokens
  // they cover.
  int32_t claim_cached_prefix(Sequence* s);
  // Adds an admitted sequence's tokens and its cached prefix to the prefix cache stats.
  void count_prefix_lookup(const Sequence* s, int32_t cached);
  void hash_full_blocks(Sequence* s);
  void schedule_continuous();
  void schedule_static();
  // A static-mode request's own length: prompt + max_tokens, capped at the context.
  int32_t static_reservation(const Sequence* s) const;

  SchedulerConfig config_;
  BlockPool& pool_;
  KvStorage& storage_;
  const KvLayout& layout_;
  std::vector<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  std::vector<ScheduledSeq> work_;
  SchedulerStats stats_;
};

}  // namespace pagoda
