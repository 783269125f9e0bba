// The serving engine: many requests at once over one model, with paged KV memory shared
// between them. add_request() queues a prompt; each step() schedules work under the
// token budget (scheduler.h), runs it as one batched forward pass, samples one token for
// every sequence whose pending tokens all ran, and reports them. abort() drops a request
// and frees its memory. Single-threaded: one thread owns the engine (the server runs it in
// its own loop and talks to it through a queue); step() spreads its work, the samples
// included, over the model's thread pool from that thread.
//
// Memory: the KV pool is sized once, from kv_cache_bytes (or, when 0, enough for
// max_num_seqs full contexts but at most a quarter of the machine's available memory).
// A sequence can never outgrow the pool alone: max_model_len is capped to it. Sliding-
// window layers get block tables of their own whose blocks are released as they leave
// the window (kv/kv_layout.h), unless window_kv_release is off.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/timer.h"
#include "engine/draft_model.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/speculative.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "model/batch.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

struct EngineConfig {
  SchedulerConfig scheduler;
  int32_t block_size = 16;
  KvType kv_type = KvType::kF16;
  size_t kv_cache_bytes = 0;    // 0: see above
  int32_t max_model_len = 0;    // tokens per sequence (prompt + output); 0: the model's training context
  // Sliding-window layers in layer groups of their own that release blocks out of the
  // window (vLLM's hybrid KV cache manager); off: one table for all layers, as before.
  bool window_kv_release = true;
  // Constrained samples take the tokens their grammar forces without a sampling step
  // each (jump-forward decoding): they are appended at once and computed together in
  // the next step, as a chunk of prefill. Continuous scheduling, samples without
  // logprobs or logits only (a forced token has no distribution of its own).
  bool grammar_fast_forward = true;
  // Speculative decoding (engine/speculative.h): samples in decode draft tokens by prompt
  // lookup or with a draft model (engine/draft_model.h) and verify them in the step; off
  // unless configured.
  SpeculativeConfig speculative;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t prompt_tokens_computed = 0;  // prefill tokens that ran (cache hits excluded)
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int32_t num_blocks = 0;
  int32_t used_blocks = 0;        // held by sequences now
  size_t num_running = 0, num_waiting = 0;
  // Speculative decoding: drafts verified (one per sequence and step), their tokens, and
  // the tokens accepted (each saved a step).
  int64_t spec_drafts = 0;
  int64_t spec_drafted_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  // Of those, the ones a draft tree took from a branch other than its first (a chain of
  // the first branch would have rejected them).
  int64_t spec_branch_accepted_tokens = 0;
  double spec_draft_seconds = 0;       // time spent proposing drafts (a draft model's forwards included)
  // Embedding requests finished, and their prompt tokens.
  int64_t embed_requests = 0;
  int64_t embed_tokens = 0;
  int64_t spec_draft_forwards = 0;     // a draft model's forward passes
  double kv_usage() const { return num_blocks > 0 ? static_cast<double>(used_blocks) / num_blocks : 0.0; }
};

// The KV cache an engine allocates for a model and config (Engine::kv_budget).
struct KvBudget {
  KvShape shape;
  int32_t blocks = 0;
  size_t bytes = 0;           // blocks * KvStorage::bytes_per_block(shape)
  size_t wanted = 0;          // without --kv-cache-memory: max_num_seqs sequences of max_model_len
  bool capped = false;        // wanted was cut to a quarter of the available memory
  int64_t max_model_len = 0;  // the longest sequence the blocks hold (at most the asked length)
};

class Engine {
 public:
  // The tokenizer (optional) decides which tokens end generation. `draft` is the draft
  // model of speculative.method "draft_model" (required there, else unused); its
  // vocabulary must be checked against the target's first (check_draft_vocabulary). Its KV
  // pool holds as many positions as the target's, plus the drafts of a full batch.
  static Result<std::unique_ptr<Engine>> create(Model& model, const Tokenizer* tokenizer, const EngineConfig& config,
                                                Model* draft = nullptr);

  // The one validation of a request: an empty prompt, ids outside the vocabulary, a
  // prompt that leaves no room in max_model_len (or, with max_tokens_must_fit, no room
  // for max_tokens), or bad parameters (stop strings without a tokenizer among them).
  // Reads only what create() fixed, so any thread may call it while another steps.
  std::optional<RequestRejection> check_request(std::span<const int32_t> prompt, const RequestParams& params) const;
  // Queues a request. Fails (queuing nothing) with check_request's message.
  Result<RequestId> add_request(std::vector<int32_t> prompt, const RequestParams& params);
  // Runs one step; the tokens it produced (and the ends of sequences). Fails only on an
  // internal error of the forward pass.
  Result<std::vector<StepOutput>> step();
  // Drops a request wherever it is; its blocks are freed. False when it is unknown
  // (finished already).
  bool abort(RequestId id);
  // Requests not finished yet (and, in static mode, finished ones still padding a batch).
  bool has_work() const { return !requests_.empty(); }

  // Counters and gauges; cheap enough for every step.
  EngineStats stats() const;
  // Allocated but unused KV slots over allocated slots (blocks shared by the samples of a
  // request counted once). Walks every running block table: for benchmarks, not per step.
  double kv_waste() const;
  const EngineConfig& config() const { return config_; }
  int32_t max_model_len() const { return max_model_len_; }
  const BlockPool& block_pool() const { return *pool_; }
  const KvStorage& kv_storage() const { return *storage_; }
  const DraftModel* draft_model() const { return drafter_.get(); }
  // Only this process's layers' (a pipeline stage's) KV.
  void prefault_kv() {
    storage_->prefault(static_cast<int32_t>(model_.split().layers.begin), static_cast<int32_t>(model_.split().layers.end));
  }
  // The KV shape the engine builds for a model (to size budgets from outside).
  static KvShape kv_shape(const ModelConfig& mc, const EngineConfig& config);
  // The KV cache create() allocates, given the memory available (0: unknown, no cap);
  // what `pagoda plan` predicts with. Fails as create() does on a budget the machine
  // cannot give or that holds less than one block of one sequence.
  static Result<KvBudget> kv_budget(const ModelConfig& mc, const EngineConfig& config, size_t available);
  // The engine's own buffers at their largest: a logits row for each sequence of a step.
  static size_t scratch_bytes(const ModelConfig& mc, const EngineConfig& config);
  Model& model() { return model_; }
  // How an embedding request with Pooling::kNone pools: as the model file says, else the
  // last token (a decoder, whose last token has seen the whole input) or the mean (an
  // encoder).
  Pooling default_pooling() const;

 private:
  struct RequestRecord {
    RequestParams params;
    std::vector<std::unique_ptr<Sequence>> seqs;
    int32_t live = 0;  // sequences not finished
  };
  Engine(Model& model, const Tokenizer* tokenizer, const EngineConfig& config);
  // One sequence's sample of a step: from logits row `row`, drawn into `token`.
  struct Draw {
    Sequence* seq = nullptr;
    size_t row = 0;
    bool copy = false;  // sample from a copy: the raw row is shared or still needed
    int32_t token = -1;
    double mask_seconds = 0;
  };
  // Draws every pending sample, in parallel across sequences when the rows are wide.
  void draw_samples();
  // Appends d's token to its sequence and fills `out` (logprobs from the raw row).
  void record_sample(const Draw& d, StepOutput& out);
  // An embedding sequence whose prompt has all run: its output, and it leaves.
  StepOutput finish_embedding(Sequence& s);
  // Appends `tok` to s and fills the rest of `out` (text, finish, times).
  void append_token(Sequence& s, int32_t tok, StepOutput& out);
  // The tokens s's grammar forces after its last one, each as an output in `extra`;
  // true when one of them finished the sample.
  bool fast_forward(Sequence& s, std::vector<StepOutput>& extra);
  // Whether the sequence reached its max_tokens or the model length with its last token.
  bool at_length(const Sequence& s) const;
  void fork(RequestRecord& r, Sequence& parent);
  // Speculative decoding of one step: drafts appended to eligible sequences before the
  // schedule, dropped again where the step does not compute them.
  struct Speculation {
    Sequence* seq = nullptr;
    int32_t base_len = 0;            // the sequence's length without drafts
    std::vector<int32_t> drafts;     // those the step computes (after trim_drafts)
    // A tree of drafts (SpeculativeConfig::branches): the parent row of each logit row
    // (row 0 the last token, with -1; row i + 1 draft i), as BatchSeq::tree_parent wants
    // it. Empty: the drafts are one chain.
    std::vector<int32_t> row_parent;
  };
  void propose_drafts();
  // The draft model's proposals for the eligible sequences (k each) of this step.
  // With branches, `trees` gets the chain plus the draft's next-best tokens where it was
  // unsure, for each sequence that has some (empty trees elsewhere).
  std::vector<std::vector<int32_t>> propose_with_model(std::span<Sequence* const> seqs, std::span<const int32_t> k,
                                                       std::vector<DraftTree>& trees);
  // Whether this sequence's drafts may form a tree.
  bool tree_allowed(const Sequence& s) const;
  // A sequence that finished or left: its draft KV goes too.
  void forget_drafts(const Sequence& s);
  void trim_drafts(const std::vector<ScheduledSeq>& work);
  // After a tree's verification: the accepted rows' keys and values move to the positions
  // the branch was computed for (row r's slot is the last token's + r, its position the
  // last token's + its depth).
  void keep_branch(const Speculation& sp, std::span<const int32_t> rows);
  const Speculation* speculation_of(const Sequence* s) const;
  // Samples row after row of a drafted sequence while its choices equal the drafts;
  // returns the drafts accepted, with the outputs appended and `finished` set.
  int32_t verify_drafts(const Speculation& sp, size_t first_row, std::vector<StepOutput>& outputs, bool& finished);
  // Frees the logits and the sampling rows (vocabulary-wide, one per sequence of the
  // widest step), for an idle engine.
  void release_rows();

  Model& model_;
  const Tokenizer* tokenizer_;
  EngineConfig config_;
  int32_t max_model_len_ = 0;
  std::unique_ptr<KvStorage> storage_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<DraftModel> drafter_;  // speculative.method "draft_model"
  // The draft model's cost gate (speculative.h, draft_speedup): running means of one draft
  // forward's seconds and of one decode step's target forward (steps without prefill), each
  // new measurement weighing 1/8; 0 until measured.
  double draft_forward_s_ = 0, target_step_s_ = 0;
  std::vector<DraftRequest> draft_requests_;
  std::unordered_map<RequestId, RequestRecord> requests_;
  RequestId next_request_ = 1;
  int64_t next_seq_ = 1;
  Batch batch_;
  std::vector<float> logits_;
  std::vector<float> pooled_;  // a step's pooled rows (Model::forward), one per embedding sequence
  std::vector<Draw> draws_;
  std::vector<std::vector<float>> draw_rows_;  // per pool thread: a row to sample from
  // Per pool thread: the samplers' working space. Kept here rather than in each Sampler,
  // which would hold up to 14 bytes per vocabulary entry for every live sequence (8,192
  // sequences of a 262k vocabulary: about 30 GB).
  std::vector<SamplerScratch> draw_scratch_;
  std::vector<StepOutput> forced_;     // fast_forward's outputs of one sequence, reused
  std::vector<Speculation> speculation_;  // this step's drafted sequences
  std::vector<int32_t> path_rows_;        // verify_drafts: the rows of the accepted branch
  std::vector<size_t> first_rows_;        // per scheduled sequence: its first logits row (SIZE_MAX: none)
  std::vector<RequestId> lingering_;  // reported finished, sequences still padding a static batch
  EngineStats counters_;
  Timer clock_;
};

}  // namespace pagoda
