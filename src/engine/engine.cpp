#include "engine/engine.h"

#include <chrono>
#include <algorithm>
#include <unordered_map>

#include "base/system_memory.h"
#include "sampling/logprobs.h"

namespace pagoda {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kNone: break;
  }
  return "";
}

Engine::Engine(Model& model, const Tokenizer* tokenizer, const EngineConfig& config)
    : model_(model), tokenizer_(tokenizer), config_(config) {}

KvShape Engine::kv_shape(const ModelConfig& mc, const EngineConfig& config) {
  KvShape shape{mc.n_layer, mc.n_head_kv, mc.head_dim, config.block_size, config.kv_type, {}};
  if (config.window_kv_release && mc.sliding_window > 0) {
    shape.windows.resize(static_cast<size_t>(mc.n_layer));
    for (int32_t l = 0; l < mc.n_layer; ++l) shape.windows[l] = mc.layer_is_local[l] ? mc.sliding_window : 0;
  }
  return shape;
}

Result<KvBudget> Engine::kv_budget(const ModelConfig& mc, const EngineConfig& config, size_t available) {
  const SchedulerConfig& sc = config.scheduler;
  KvBudget b;
  int32_t max_len = config.max_model_len > 0 ? config.max_model_len : mc.n_ctx_train;
  if (max_len <= 0) max_len = 4096;
  b.shape = kv_shape(mc, config);
  const KvLayout layout = b.shape.layout();
  // The most tokens of one sequence computed in a step: static batching prefills whole
  // prompts, so there a windowed group may need every block of the prompt at once.
  const int32_t chunk = sc.mode == ScheduleMode::kStatic ? INT32_MAX / 2 : sc.max_num_batched_tokens;
  size_t bytes = config.kv_cache_bytes;
  if (bytes == 0) {
    b.wanted = KvStorage::bytes_per_block(b.shape) *
               static_cast<size_t>(layout.max_blocks_for(max_len, std::max(1, config.block_size), chunk)) *
               static_cast<size_t>(sc.max_num_seqs);
    b.capped = available > 0 && b.wanted > available / 4;
    bytes = b.capped ? available / 4 : b.wanted;
  }
  // A budget the machine cannot give would be prefaulted into swap or the OOM killer.
  if (config.kv_cache_bytes > 0 && available > 0 && config.kv_cache_bytes > available)
    return error("--kv-cache-memory: {:.2f} GiB is more than the {:.2f} GiB of memory available on this machine",
                 static_cast<double>(config.kv_cache_bytes) / (1 << 30), static_cast<double>(available) / (1 << 30));
  b.blocks = KvStorage::blocks_for_bytes(b.shape, bytes);
  b.bytes = KvStorage::bytes_per_block(b.shape) * static_cast<size_t>(b.blocks);
  // One sequence alone always fits, so preemption can always make progress: the longest
  // whose blocks, over all layer groups, the pool holds.
  b.max_model_len = layout.longest_fitting(b.blocks, config.block_size, chunk, max_len);
  // A server whose pool cannot hold one block of one sequence would report healthy and
  // refuse every request.
  const int64_t min_len = std::min<int64_t>(max_len, std::max(1, config.block_size));
  if (b.max_model_len < min_len)
    return error("the KV cache budget of {} bytes holds {} tokens of context, fewer than one block ({} tokens); "
                 "raise --kv-cache-memory (one block of every layer takes {} bytes)",
                 bytes, b.max_model_len, min_len, KvStorage::bytes_per_block(b.shape));
  return b;
}

size_t Engine::scratch_bytes(const ModelConfig& mc, const EngineConfig& config) {
  const int64_t rows = std::min(config.scheduler.max_num_seqs, config.scheduler.max_num_batched_tokens);
  return static_cast<size_t>(std::max<int64_t>(rows, 1) * mc.n_vocab) * sizeof(float);
}

Result<std::unique_ptr<Engine>> Engine::create(Model& model, const Tokenizer* tokenizer, const EngineConfig& config,
                                               Model* draft) {
  const ModelConfig& mc = model.config();
  const SchedulerConfig& sc = config.scheduler;
  if (sc.max_num_seqs < 1) return error("--max-num-seqs must be at least 1 (got {})", sc.max_num_seqs);
  if (sc.max_num_batched_tokens < 1)
    return error("--max-num-batched-tokens must be at least 1 (got {})", sc.max_num_batched_tokens);
  std::unique_ptr<Engine> e(new Engine(model, tokenizer, config));
  auto budget = kv_budget(mc, config, available_memory_bytes());
  if (!budget) return budget.status();
  // A model split by heads over processes stores only its own heads' keys and values, in
  // as many blocks as every other rank (src/dist): the block ids are rank 0's.
  budget->shape.n_kv_heads = model.kv_heads_held();
  auto storage = KvStorage::create(budget->shape, budget->blocks);
  if (!storage) return storage.status();
  e->storage_ = std::move(storage.value());
  e->pool_ = std::make_unique<BlockPool>(budget->blocks, config.block_size);
  e->max_model_len_ = budget->max_model_len;
  // How far a sequence may grow is what LongRoPE picks its factors by (llama.cpp's
  // per-sequence context).
  model.set_context_length(static_cast<int32_t>(e->max_model_len_));
  SchedulerConfig scheduler_config = sc;
  scheduler_config.max_model_len = static_cast<int32_t>(e->max_model_len_);
  scheduler_config.whole_prompts = !mc.causal;
  e->scheduler_ = std::make_unique<Scheduler>(scheduler_config, *e->pool_, *e->storage_);
  if (config.speculative.enabled() && config.speculative.method == "draft_model") {
    if (draft == nullptr) return error("speculative decoding with a draft model needs the draft model loaded");
    // As many positions as the target's pool holds, and every running sequence's drafts
    // past them: the draft never runs out where the target does not.
    const int32_t bs = config.block_size;
    const int32_t extra = sc.max_num_seqs * ((config.speculative.num_speculative_tokens + bs - 1) / bs + 1);
    auto d = DraftModel::create(*draft, mc.n_vocab, bs, budget->blocks + extra, config.kv_type,
                                static_cast<int32_t>(e->max_model_len_), config.speculative.draft_p_min);
    if (!d) return d.status();
    e->drafter_ = std::move(d.value());
  }
  return e;
}

std::optional<RequestRejection> Engine::check_request(std::span<const int32_t> prompt,
                                                     const RequestParams& params) const {
  auto reject = [](const char* param, std::string message) {
    return std::optional<RequestRejection>(RequestRejection{param, std::move(message)});
  };
  const ModelConfig& mc = model_.config();
  const int32_t n_vocab = mc.n_vocab;
  if (!params.embed && !mc.has_lm_head) {
    if (default_pooling() == Pooling::kRank)
      return reject("model", fmt::format("this model ({}) is a reranker: it has no output head to generate text "
                                         "with; ask it to rank documents instead (/v1/rerank, pagoda rerank)",
                                         mc.arch_name));
    return reject("model", fmt::format("this model ({}) is an embedding model: it has no output head to generate "
                                       "text with; ask it for embeddings instead (/v1/embeddings, pagoda embed)",
                                       mc.arch_name));
  }
  if (params.embed) {
    if (prompt.empty()) return reject("input", "an input is empty (no tokens to embed)");
    for (int32_t t : prompt)
      if (t < 0 || t >= n_vocab)
        return reject("input", fmt::format("token id {} is outside the vocabulary (0..{})", t, n_vocab - 1));
    // Nothing is generated, so the whole context is the input's.
    if (static_cast<int64_t>(prompt.size()) > max_model_len_)
      return reject("input", fmt::format("this model's maximum context length is {} tokens, but an input has {}",
                                         max_model_len_, prompt.size()));
    if (params.n != 1) return reject("n", "an embedding request has one result per input (n must be 1)");
    const Pooling pool = params.pooling != Pooling::kNone ? params.pooling : default_pooling();
    if (pool == Pooling::kRank && mc.n_cls_out == 0)
      return reject("model", fmt::format("this model ({}) has no classification head (cls.output.weight): it is not "
                                         "a reranker",
                                         mc.arch_name));
    if (params.segment_b < 0 || params.segment_b >= static_cast<int64_t>(prompt.size()))
      return reject("input", fmt::format("a text pair's second text starts at token {}, outside its {} tokens",
                                         params.segment_b, prompt.size()));
    if (params.segment_b > 0 && mc.n_token_types < 2)
      return reject("model", fmt::format("this model ({}) has {} token type(s): it cannot encode a text pair",
                                         mc.arch_name, mc.n_token_types));
    return std::nullopt;
  }
  if (prompt.empty()) return reject("prompt", "the prompt is empty (no tokens to start from)");
  for (int32_t t : prompt)
    if (t < 0 || t >= n_vocab)
      return reject("prompt", fmt::format("prompt token id {} is outside the vocabulary (0..{})", t, n_vocab - 1));
  const int64_t len = static_cast<int64_t>(prompt.size());
  if (len >= max_model_len_)
    return reject("prompt", fmt::format("this model's maximum context length is {} tokens (prompt and output "
                                        "together), but the prompt alone has {}",
                                        max_model_len_, len));
  if (params.max_tokens_must_fit && params.max_tokens > 0 && len + params.max_tokens > max_model_len_)
    return reject("max_tokens", fmt::format("this model's maximum context length is {} tokens, but the request asks "
                                            "for {} ({} in the prompt, {} for the completion)",
                                            max_model_len_, len + params.max_tokens, len, params.max_tokens));
  if (params.n < 1 || params.n > 128) return reject("n", fmt::format("n must be between 1 and 128 (got {})", params.n));
  if (params.max_tokens == 0) return reject("max_tokens", "max_tokens must be at least 1 (or negative for no limit)");
  if (params.logprobs > 20)
    return reject("logprobs", fmt::format("logprobs must be at most 20 (got {})", params.logprobs));
  if (tokenizer_ == nullptr && !params.stop.empty())
    return reject("stop", "stop strings need the model's tokenizer (this engine runs on token ids only)");
  return std::nullopt;
}

Result<RequestId> Engine::add_request(std::vector<int32_t> prompt, const RequestParams& params) {
  if (auto rejected = check_request(prompt, params)) return Status::error(std::move(rejected->message));
  const RequestId id = next_request_++;
  RequestRecord& r = requests_[id];
  r.params = params;
  std::erase_if(r.params.stop, [](const std::string& s) { return s.empty(); });
  auto s = std::make_unique<Sequence>();
  s->id = next_seq_++;
  s->request = id;
  s->priority = params.priority;
  s->arrival_order = id;
  s->params = &r.params;
  s->prompt_len = static_cast<int32_t>(prompt.size());
  s->tokens = std::move(prompt);
  s->sampler = std::make_unique<Sampler>(params.sampling);
  s->output = std::make_unique<OutputProcessor>(tokenizer_, r.params);
  if (params.constraint) s->constraint = std::make_unique<ConstraintMatcher>(params.constraint);
  s->arrival_time = clock_.seconds();
  if (params.embed) s->pool = params.pooling != Pooling::kNone ? params.pooling : default_pooling();
  scheduler_->add(s.get());
  r.seqs.push_back(std::move(s));
  r.live = 1;
  return id;
}

bool Engine::abort(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  for (auto& s : it->second.seqs) {
    if (s->status != SeqStatus::kFinished) scheduler_->remove(s.get());
    forget_drafts(*s);
  }
  requests_.erase(it);
  if (requests_.empty()) {  // as at the end of step()
    release_rows();
  }
  return true;
}

void Engine::release_rows() {
  // Swapped out, not assigned {}: that would keep the capacity.
  std::vector<float>().swap(logits_);
  std::vector<std::vector<float>>().swap(draw_rows_);
  // Nothing runs, so no draft KV is anyone's (the pool keeps its cached prefixes).
  if (drafter_) drafter_->release_all();
}

void Engine::forget_drafts(const Sequence& s) {
  if (drafter_) drafter_->release(s.id);
}

void Engine::fork(RequestRecord& r, Sequence& parent) {
  parent.forked = true;
  for (int32_t i = 1; i < r.params.n; ++i) {
    auto c = std::make_unique<Sequence>();
    c->id = next_seq_++;
    c->request = parent.request;
    c->index = i;
    c->priority = parent.priority;
    c->arrival_order = parent.arrival_order;
    c->params = parent.params;
    SamplingParams sp = r.params.sampling;
    // Distinct but reproducible samples: sample i draws from seed + i.
    if (sp.seed != kRandomSeed) sp.seed = sp.seed + static_cast<uint64_t>(i);
    c->sampler = std::make_unique<Sampler>(sp);
    c->output = std::make_unique<OutputProcessor>(tokenizer_, r.params);
    if (parent.constraint) c->constraint = parent.constraint->fork();
    c->forked = true;
    c->cached_prompt_tokens = parent.cached_prompt_tokens;
    c->arrival_time = parent.arrival_time;
    scheduler_->add_fork(c.get(), parent);
    r.seqs.push_back(std::move(c));
    ++r.live;
  }
}

bool Engine::at_length(const Sequence& s) const {
  const RequestParams& p = *s.params;
  return (p.max_tokens > 0 && s.output_len() >= p.max_tokens) || s.len() >= max_model_len_;
}

void Engine::draw_samples() {
  const int64_t V = model_.config().n_vocab;
  ThreadPool& pool = model_.pool();
  if (draw_rows_.size() < static_cast<size_t>(pool.num_threads())) draw_rows_.resize(pool.num_threads());
  if (draw_scratch_.size() < static_cast<size_t>(pool.num_threads())) draw_scratch_.resize(pool.num_threads());
  auto draw = [&](int64_t b, int64_t e, int thread) {
    for (int64_t i = b; i < e; ++i) {
      Draw& d = draws_[i];
      std::span<float> row(logits_.data() + d.row * V, static_cast<size_t>(V));
      if (d.copy) {
        // The sampler's penalties edit the row in place.
        std::vector<float>& mine = draw_rows_[thread];
        mine.assign(row.begin(), row.end());
        row = mine;
      }
      if (d.seq->constraint) {
        const auto t0 = std::chrono::steady_clock::now();
        d.seq->constraint->mask(row);
        d.mask_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      d.token = d.seq->sampler->sample(row, d.seq->tokens, draw_scratch_[thread]);
    }
  };
  // Each sequence draws from its own sampler and RNG, so the split changes no result.
  // A full-vocabulary scan per row is worth a parallel region once there are a few.
  const int64_t n = static_cast<int64_t>(draws_.size());
  if (n >= 2 && n * V >= (int64_t{1} << 16)) pool.parallel_for(n, 1, draw);
  else draw(0, n, 0);
}

void Engine::record_sample(const Draw& d, StepOutput& out) {
  Sequence& s = *d.seq;
  const int64_t V = model_.config().n_vocab;
  const std::span<const float> logits(logits_.data() + d.row * V, static_cast<size_t>(V));
  out.request = s.request;
  out.index = s.index;
  if (s.params->return_logits) out.logits.assign(logits.begin(), logits.end());
  const int32_t tok = d.token;
  if (s.params->logprobs >= 0) {
    out.logprob = static_cast<float>(logits[tok] - log_sum_exp(logits));
    if (s.params->logprobs > 0) out.top_logprobs = top_logprobs(logits, s.params->logprobs);
  }
  append_token(s, tok, out);
  if (s.constraint) out.mask_seconds = d.mask_seconds;
}

void Engine::append_token(Sequence& s, int32_t tok, StepOutput& out) {
  out.request = s.request;
  out.index = s.index;
  s.tokens.push_back(tok);
  out.token = tok;
  const double now = clock_.seconds();
  out.token_time = now;
  if (s.output_len() == 1) s.first_token_time = now;
  out.arrival_time = s.arrival_time;
  out.first_token_time = s.first_token_time;
  out.prompt_tokens = s.prompt_len;
  out.cached_prompt_tokens = s.cached_prompt_tokens;
  out.output_tokens = s.output_len();
  // The mask allowed only tokens the grammar accepts, so accept() cannot fail here; a
  // complete grammar has taken its stop token and ends the sample even under ignore_eos.
  bool grammar_done = false;
  if (s.constraint) {
    grammar_done = !s.constraint->accept(tok) || s.constraint->terminated();
    out.constrained = true;
  }
  OutputProcessor::Update u = s.output->push(tok, at_length(s), grammar_done);
  out.text = std::move(u.text);
  out.finish = u.finish;
  out.stop_string = std::move(u.stop_string);
  if (out.finish != FinishReason::kNone) out.finish_time = now;
  ++counters_.generated_tokens;
}

bool Engine::fast_forward(Sequence& s, std::vector<StepOutput>& extra) {
  if (!s.constraint || tokenizer_ == nullptr || !config_.grammar_fast_forward ||
      config_.scheduler.mode != ScheduleMode::kContinuous || s.params->logprobs >= 0 || s.params->return_logits ||
      at_length(s))
    return false;
  for (int32_t tok : s.constraint->forced_tokens(*tokenizer_)) {
    StepOutput out;
    append_token(s, tok, out);
    out.forced = true;
    extra.push_back(std::move(out));
    if (extra.back().finish != FinishReason::kNone) return true;
    if (at_length(s)) break;
  }
  return false;
}

// The cost gate's break-even with margin (paying_draft_length): drafting stops only where
// the best expected speedup is under 0.9.
constexpr double kDraftPaysFloor = 0.9;

void Engine::propose_drafts() {
  speculation_.clear();
  const SpeculativeConfig& sc = config_.speculative;
  if (!sc.enabled() || config_.scheduler.mode != ScheduleMode::kContinuous) return;
  const auto t0 = std::chrono::steady_clock::now();
  // A draft token's cost as a share of a target decode step, for the cost gate below.
  const double cost = sc.fixed_draft_cost > 0                         ? sc.fixed_draft_cost
                      : draft_forward_s_ > 0 && target_step_s_ > 0 ? draft_forward_s_ / target_step_s_
                                                                   : 0.0;
  std::vector<Sequence*> seqs;
  std::vector<int32_t> ks;
  for (Sequence* s : scheduler_->running()) {
    // Decode only: a sample's last token is its only uncomputed one.
    const RequestParams& p = *s->params;
    if (s->status != SeqStatus::kRunning || s->padding || s->pool != Pooling::kNone ||
        s->num_computed != s->len() - 1 ||
        (p.n > 1 && !s->forked) || at_length(*s))
      continue;
    if (s->draft.skip > 0) {
      --s->draft.skip;
      continue;
    }
    int32_t k = s->draft.length > 0 ? s->draft.length : sc.num_speculative_tokens;
    // A draft model's tokens cost a forward each: draft only as many as pay for their time
    // at this sequence's acceptance (judged once it has drafted a few steps), and none when
    // none would, then probe (draft one step regardless) after 8, 16, ... 64 steps; a probe
    // first has the draft catch up on the tokens since the last one.
    if (drafter_ && sc.cost_gate && cost > 0 && s->draft.trials >= 3 && !s->draft.probe) {
      k = paying_draft_length(s->draft.acceptance(), cost, k, kDraftPaysFloor);
      if (k == 0) {
        s->draft.skip = 4 << std::min(++s->draft.unpaid, 4);
        s->draft.probe = true;
        continue;
      }
      s->draft.unpaid = 0;
    }
    s->draft.probe = false;
    // The last accepted draft is followed by one more token: leave room for it.
    if (p.max_tokens > 0) k = std::min(k, p.max_tokens - s->output_len() - 1);
    k = static_cast<int32_t>(std::min<int64_t>(k, int64_t{max_model_len_} - s->len() - 1));
    if (k <= 0 || k < sc.draft_min) continue;
    seqs.push_back(s);
    ks.push_back(k);
  }
  std::vector<std::vector<int32_t>> drafts;
  std::vector<DraftTree> trees;  // per sequence, where it drafted a tree with branches
  if (drafter_) {
    const DraftStats before = drafter_->stats();
    drafts = propose_with_model(seqs, ks, trees);
    if (const int64_t n = drafter_->stats().token_forwards - before.token_forwards; n > 0) {
      const double per = (drafter_->stats().token_seconds - before.token_seconds) / static_cast<double>(n);
      draft_forward_s_ = draft_forward_s_ > 0 ? draft_forward_s_ + (per - draft_forward_s_) / 8 : per;
    }
  } else {
    trees.resize(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (sc.branches > 1 && tree_allowed(*seqs[i])) {
        trees[i] = propose_ngram_tree(seqs[i]->tokens, sc.prompt_lookup_min, sc.prompt_lookup_max, ks[i], sc.branches,
                                      static_cast<size_t>(ks[i]) * static_cast<size_t>(sc.branches));
        drafts.push_back(trees[i].tokens);
        continue;
      }
      drafts.push_back(propose_ngram(seqs[i]->tokens, sc.prompt_lookup_min, sc.prompt_lookup_max, ks[i]));
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::vector<int32_t>& d = drafts[i];
    Sequence* s = seqs[i];
    // A constrained sequence's drafts end before the first its grammar forbids (that one
    // would be rejected, and those after it with it), on a copy of its grammar's state.
    if (s->constraint && !d.empty()) {
      const std::unique_ptr<ConstraintMatcher> m = s->constraint->fork();
      size_t ok = 0;
      while (ok < d.size() && !m->terminated() && m->accept(d[ok])) ++ok;
      d.resize(ok);
    }
    if (d.empty() || static_cast<int32_t>(d.size()) < sc.draft_min) continue;
    const int32_t base = s->len();
    s->tokens.insert(s->tokens.end(), d.begin(), d.end());
    Speculation& sp = speculation_.emplace_back(Speculation{s, base, std::move(d), {}});
    // One branch is a chain, verified as one.
    if (i < trees.size() && trees[i].depth() < static_cast<int32_t>(trees[i].size())) {
      sp.row_parent.push_back(-1);
      for (int32_t p : trees[i].parent) sp.row_parent.push_back(p + 1);
    }
  }
  counters_.spec_draft_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::vector<int32_t>> Engine::propose_with_model(std::span<Sequence* const> seqs,
                                                            std::span<const int32_t> k, std::vector<DraftTree>& trees) {
  const SpeculativeConfig& sc = config_.speculative;
  draft_requests_.resize(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    draft_requests_[i] = DraftRequest{};
    draft_requests_[i].seq = seqs[i]->id;
    draft_requests_[i].tokens = seqs[i]->tokens;
    draft_requests_[i].k = k[i];
    if (sc.branches > 1 && tree_allowed(*seqs[i])) draft_requests_[i].alternatives = sc.branches - 1;
  }
  std::vector<std::vector<int32_t>> out(seqs.size());
  trees.assign(seqs.size(), DraftTree{});
  // A failing draft forward costs the step its drafts, never its tokens: plain decoding
  // goes on (the draft's KV of those sequences is dropped and rebuilt on the next try).
  if (!drafter_->propose(draft_requests_).is_ok()) return out;
  for (size_t i = 0; i < seqs.size(); ++i) {
    DraftRequest& r = draft_requests_[i];
    out[i] = std::move(r.drafts);
    if (r.alt_tokens.empty()) continue;
    // The chain, then the next-best tokens of its unsure positions as leaves beside it.
    DraftTree& t = trees[i];
    for (size_t j = 0; j < out[i].size(); ++j) {
      t.tokens.push_back(out[i][j]);
      t.parent.push_back(static_cast<int32_t>(j) - 1);
    }
    const size_t budget = static_cast<size_t>(k[i]) * static_cast<size_t>(sc.branches);
    for (size_t j = 0; j < r.alt_tokens.size() && t.size() < budget; ++j) {
      if (r.alt_positions[j] >= static_cast<int32_t>(out[i].size())) continue;
      t.tokens.push_back(r.alt_tokens[j]);
      t.parent.push_back(r.alt_positions[j] - 1);
    }
    out[i] = t.tokens;
  }
  return out;
}

bool Engine::tree_allowed(const Sequence& s) const {
  // A constrained sequence cuts its drafts at the first its grammar forbids, a chain's
  // notion; a split model does not take trees.
  return !s.constraint && !model_.split().split();
}

void Engine::trim_drafts(const std::vector<ScheduledSeq>& work) {
  for (Speculation& sp : speculation_) {
    int32_t computed_end = sp.base_len;  // not scheduled (or preempted): no draft runs
    for (const ScheduledSeq& w : work)
      if (w.seq == sp.seq) computed_end = std::max(sp.base_len, sp.seq->num_computed + w.n_tokens);
    sp.drafts.resize(static_cast<size_t>(computed_end - sp.base_len));
    sp.seq->tokens.resize(static_cast<size_t>(computed_end));
    // Nodes come parents first, so the first ones kept are still a tree.
    if (!sp.row_parent.empty()) sp.row_parent.resize(sp.drafts.size() + 1);
  }
  std::erase_if(speculation_, [](const Speculation& sp) { return sp.drafts.empty(); });
}

const Engine::Speculation* Engine::speculation_of(const Sequence* s) const {
  for (const Speculation& sp : speculation_)
    if (sp.seq == s) return &sp;
  return nullptr;
}

int32_t Engine::verify_drafts(const Speculation& sp, size_t first_row, std::vector<StepOutput>& outputs,
                              bool& finished) {
  Sequence& s = *sp.seq;
  s.tokens.resize(static_cast<size_t>(sp.base_len));
  if (draw_rows_.empty()) draw_rows_.resize(1);
  if (draw_scratch_.empty()) draw_scratch_.resize(1);
  const int64_t V = model_.config().n_vocab;
  const auto n = static_cast<int32_t>(sp.drafts.size());
  const bool tree = !sp.row_parent.empty();
  // The first child row of a row (a chain's next row); its siblings follow it.
  auto first_child = [&](int32_t r) {
    if (!tree) return r < n ? r + 1 : -1;
    for (int32_t c = r + 1; c <= n; ++c)
      if (sp.row_parent[static_cast<size_t>(c)] == r) return c;
    return -1;
  };
  int32_t accepted = 0;
  bool off_first = false;  // the walk left the first branch: a chain would have stopped
  path_rows_.clear();
  for (int32_t at = 0;;) {
    // Row `at` saw the drafts on its branch before it, all accepted so far: it is the row
    // plain decoding would have sampled this token from.
    const int32_t next = first_child(at);
    Draw d{&s, first_row + static_cast<size_t>(at), s.params->logprobs >= 0 || s.params->return_logits, -1};
    std::span<float> row(logits_.data() + d.row * V, static_cast<size_t>(V));
    if (d.copy) {
      draw_rows_[0].assign(row.begin(), row.end());
      row = draw_rows_[0];
    }
    // A constrained sequence's grammar has taken the drafts before this row (append_token
    // below), so its mask is the one plain decoding would apply here; a draft it forbids
    // has no probability and is rejected.
    if (s.constraint) {
      const auto t0 = std::chrono::steady_clock::now();
      s.constraint->mask(row);
      d.mask_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    // A draft is kept with the probability the sequence's sampler gives it (greedy: when it
    // is the argmax); after the last draft, a plain draw.
    // In a tree, a token the first child's draft did not match was drawn from the rest of
    // the distribution (greedy: the argmax), so following the sibling that drafted it
    // keeps the target's distribution exactly.
    bool kept = false;
    int32_t follow = -1;
    if (next >= 0) {
      d.token = s.sampler->sample_draft(row, s.tokens, sp.drafts[static_cast<size_t>(next - 1)], draw_scratch_[0], &kept);
      if (kept) follow = next;
      for (int32_t c = next + 1; tree && !kept && c <= n; ++c)
        if (sp.row_parent[static_cast<size_t>(c)] == at && sp.drafts[static_cast<size_t>(c - 1)] == d.token) {
          kept = true;
          follow = c;
          off_first = true;
        }
    } else {
      d.token = s.sampler->sample(row, s.tokens, draw_scratch_[0]);
    }
    StepOutput out;
    record_sample(d, out);
    finished = out.finish != FinishReason::kNone;
    outputs.push_back(std::move(out));
    if (finished || !kept) break;
    ++accepted;
    if (off_first) ++counters_.spec_branch_accepted_tokens;
    path_rows_.push_back(follow);
    at = follow;
  }
  // A tree's deepest branch, as the chain it stands for (row 0, the root, is not a draft).
  const int32_t depth = tree ? tree_depth(sp.row_parent) - 1 : n;
  ++counters_.spec_drafts;
  counters_.spec_drafted_tokens += n;
  counters_.spec_accepted_tokens += accepted;
  s.draft.update(depth, accepted, config_.speculative.num_speculative_tokens);
  if (tree) keep_branch(sp, path_rows_);
  return accepted;
}

void Engine::keep_branch(const Speculation& sp, std::span<const int32_t> rows) {
  const Sequence& s = *sp.seq;
  const int32_t root = sp.base_len - 1;  // the last token's position, row 0's slot
  const int32_t shift = storage_->block_shift();
  const int32_t mask = (1 << shift) - 1;
  // Depth d's row sits at or after slot root + d, and later rows at later slots, so moving
  // in order of depth never overwrites a row still to move.
  for (size_t d = 1; d <= rows.size(); ++d) {
    const int32_t from = root + rows[d - 1], to = root + static_cast<int32_t>(d);
    if (from == to) continue;
    for (const std::vector<BlockId>& table : s.tables)
      storage_->copy_row(table[static_cast<size_t>(from >> shift)], from & mask, table[static_cast<size_t>(to >> shift)],
                         to & mask);
  }
}

Result<std::vector<StepOutput>> Engine::step() {
  std::vector<StepOutput> outputs;
  propose_drafts();
  const std::vector<ScheduledSeq>& scheduled = scheduler_->schedule();
  trim_drafts(scheduled);
  if (scheduled.empty()) return outputs;
  // A copy: verification cuts a drafted sequence's computed tokens to those accepted.
  std::vector<ScheduledSeq> work = scheduled;
  batch_.clear();
  first_rows_.clear();
  size_t rows = 0;
  for (const ScheduledSeq& w : work) {
    Sequence* s = w.seq;
    const bool embed = s->pool != Pooling::kNone;
    const bool last = s->num_computed + w.n_tokens == s->len() && !embed;
    // A drafted sequence gets a row for its last token and for each draft.
    const int32_t logit_rows = speculation_of(s) != nullptr ? w.n_tokens : 1;
    batch_.add(std::span<const int32_t>(s->tokens).subspan(s->num_computed, w.n_tokens), s->num_computed, s->tables,
               last, logit_rows);
    batch_.seqs.back().pool = s->pool;
    if (const Speculation* sp = speculation_of(s); sp != nullptr && !sp->row_parent.empty() && last)
      batch_.seqs.back().tree_parent = sp->row_parent;
    if (embed) batch_.seqs.back().segment_b = s->params->segment_b;
    if (embed) counters_.embed_tokens += w.n_tokens;
    first_rows_.push_back(last ? rows : SIZE_MAX);
    if (last) rows += static_cast<size_t>(logit_rows);
    // Tokens before the prompt's end are prefill; a decode step computes the last sample.
    counters_.prompt_tokens_computed += std::max(0, std::min(s->prompt_len, s->num_computed + w.n_tokens) - s->num_computed);
  }
  // A split model sends each rank's k best (logit, id) per row instead of its slice when
  // nothing reads more of the row than greedy or top-k sampling does.
  batch_.top_candidates = 0;
  const int64_t n_vocab = model_.config().n_vocab;
  for (const ScheduledSeq& w : work) {
    const Sequence* s = w.seq;
    if (s->pool != Pooling::kNone) continue;
    const RequestParams& p = *s->params;
    const SamplingParams& sp = p.sampling;
    const bool penalties = sp.repeat_last_n != 0 && (sp.repeat_penalty != 1.0f || sp.presence_penalty != 0.0f ||
                                                      sp.frequency_penalty != 0.0f);
    const int32_t k = sp.temperature <= 0.0f ? 1 : sp.top_k > 0 && sp.top_k < n_vocab ? sp.top_k : 0;
    if (k == 0 || k > 256 || penalties || p.logprobs >= 0 || p.return_logits || p.constraint != nullptr) {
      batch_.top_candidates = 0;
      break;
    }
    batch_.top_candidates = std::max(batch_.top_candidates, k);
  }
  const int64_t V = model_.config().n_vocab;
  logits_.resize(static_cast<size_t>(batch_.n_logits()) * V);
  const int64_t E = model_.config().n_embd;
  pooled_.resize(static_cast<size_t>(batch_.n_pooled() * E));
  const int64_t prompt_before = counters_.prompt_tokens_computed;
  const auto t0 = std::chrono::steady_clock::now();
  PAGODA_TRY(model_.forward(batch_, *storage_, logits_.data(), pooled_.data()));
  // Each embedding sequence's rows: a mean sums over its chunks; a CLS or last row is
  // taken from the one chunk that has it (Model::forward leaves the others zero).
  {
    size_t slot = 0;
    for (const ScheduledSeq& w : work) {
      Sequence* s = w.seq;
      if (s->pool == Pooling::kNone) continue;
      const float* row = pooled_.data() + static_cast<int64_t>(slot++) * E;
      // A first chunk starts the sum afresh (also after a preemption dropped the computed tokens).
      if (s->embedding.empty() || s->num_computed == 0) s->embedding.assign(static_cast<size_t>(E), 0.0f);
      const bool first = s->pool == Pooling::kCls || s->pool == Pooling::kRank;
      const bool has_row = s->pool == Pooling::kMean || (first && s->num_computed == 0) ||
                           (s->pool == Pooling::kLast && s->num_computed + w.n_tokens == s->len());
      if (!has_row) continue;
      for (int64_t i = 0; i < E; ++i) s->embedding[i] = s->pool == Pooling::kMean ? s->embedding[i] + row[i] : row[i];
    }
  }
  if (drafter_ && counters_.prompt_tokens_computed == prompt_before) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    target_step_s_ = target_step_s_ > 0 ? target_step_s_ + (s - target_step_s_) / 8 : s;
  }
  // Drafted sequences first: each keeps the drafts its sampler agrees with, and only the
  // positions of its last token and those drafts count as computed.
  std::vector<std::pair<Sequence*, bool>> verified;
  for (size_t i = 0; i < work.size(); ++i) {
    const Speculation* sp = speculation_of(work[i].seq);
    if (sp == nullptr) continue;
    bool finished = false;
    const int32_t accepted = verify_drafts(*sp, first_rows_[i], outputs, finished);
    work[i].n_tokens = 1 + accepted;
    verified.emplace_back(work[i].seq, finished);
  }
  scheduler_->commit(work);
  ++counters_.steps;
  std::vector<RequestId> done;
  for (auto [t, finished] : verified) {
    RequestRecord& r = requests_.at(t->request);
    // What the grammar forces after the verified tokens, as after a plain draw.
    if (!finished) {
      forced_.clear();
      finished = fast_forward(*t, forced_);
      for (StepOutput& o : forced_) outputs.push_back(std::move(o));
    }
    if (finished) forget_drafts(*t);
    if (!scheduler_->settle(t, finished)) continue;
    if (finished && --r.live == 0) done.push_back(t->request);
  }
  // Who samples from which row: a request with n > 1 forks its samples on the first one,
  // all drawing from the prompt's row.
  draws_.clear();
  for (size_t i = 0; i < work.size(); ++i) {
    Sequence* s = work[i].seq;
    if (s->pool != Pooling::kNone) {
      if (s->num_computed == s->len()) {
        outputs.push_back(finish_embedding(*s));
        RequestRecord& r = requests_.at(s->request);
        if (--r.live == 0) done.push_back(s->request);
      }
      continue;
    }
    if (speculation_of(s) != nullptr) continue;  // verified above
    if (s->num_computed != s->len()) continue;   // a prefill chunk with more to come
    const size_t row = first_rows_[i];
    RequestRecord& r = requests_.at(s->request);
    const size_t first = draws_.size();
    draws_.push_back(Draw{s, row, false, -1});
    if (r.params.n > 1 && !s->forked) {
      const size_t before = r.seqs.size();
      fork(r, *s);
      for (size_t c = before; c < r.seqs.size(); ++c) draws_.push_back(Draw{r.seqs[c].get(), row, false, -1});
    }
    const bool shared = draws_.size() - first > 1;
    for (size_t j = first; j < draws_.size(); ++j) {
      const RequestParams& p = *draws_[j].seq->params;
      draws_[j].copy = shared || p.logprobs >= 0 || p.return_logits;
    }
  }
  draw_samples();
  for (const Draw& d : draws_) {
    Sequence* t = d.seq;
    RequestRecord& r = requests_.at(t->request);
    StepOutput out;
    record_sample(d, out);
    forced_.clear();
    bool finished = out.finish != FinishReason::kNone;
    if (!finished) finished = fast_forward(*t, forced_);
    if (finished) forget_drafts(*t);
    // The scheduling mode decides what a finished sequence holds on to (scheduler.h).
    if (!scheduler_->settle(t, finished)) continue;
    if (finished && --r.live == 0) done.push_back(t->request);
    outputs.push_back(std::move(out));
    for (StepOutput& f : forced_) outputs.push_back(std::move(f));
  }
  scheduler_->end_step();
  for (RequestId id : done) lingering_.push_back(id);
  // A request's record goes once none of its sequences is still computing.
  std::erase_if(lingering_, [&](RequestId id) {
    auto it = requests_.find(id);
    if (it == requests_.end()) return true;
    for (const auto& sq : it->second.seqs)
      if (sq->status != SeqStatus::kFinished) return false;
    requests_.erase(it);
    return true;
  });
  // The logits hold a vocabulary-wide row per sequence of the widest step (1 MiB each at
  // 262k tokens); an idle engine gives them back rather than keep a burst's worth.
  if (requests_.empty()) {
    release_rows();
  }
  return outputs;
}

Pooling Engine::default_pooling() const {
  const ModelConfig& mc = model_.config();
  if (mc.pooling != Pooling::kNone) return mc.pooling;
  return mc.causal ? Pooling::kLast : Pooling::kMean;
}

StepOutput Engine::finish_embedding(Sequence& s) {
  StepOutput out;
  out.request = s.request;
  out.index = s.index;
  out.finish = FinishReason::kStop;
  out.embedding = std::move(s.embedding);
  if (s.pool == Pooling::kMean)
    for (float& v : out.embedding) v /= static_cast<float>(s.prompt_len);
  if (s.pool == Pooling::kRank) out.embedding.resize(static_cast<size_t>(model_.config().n_cls_out));
  const double now = clock_.seconds();
  out.arrival_time = s.arrival_time;
  out.first_token_time = out.finish_time = out.token_time = now;
  out.prompt_tokens = s.prompt_len;
  scheduler_->finish(&s);
  ++counters_.embed_requests;
  return out;
}

EngineStats Engine::stats() const {
  EngineStats st = counters_;
  const SchedulerStats& ss = scheduler_->stats();
  st.preemptions = ss.preemptions;
  st.prefix_query_tokens = ss.prefix_query_tokens;
  st.prefix_hit_tokens = ss.prefix_hit_tokens;
  st.num_blocks = pool_->num_blocks();
  st.used_blocks = pool_->num_used();
  st.num_running = scheduler_->num_running();
  st.num_waiting = scheduler_->num_waiting();
  if (drafter_) st.spec_draft_forwards = drafter_->stats().forwards;
  return st;
}

double Engine::kv_waste() const {
  // Filled slots per distinct block (the samples of a request share prompt blocks).
  std::unordered_map<BlockId, int32_t> filled;
  const int32_t bs = pool_->block_size();
  for (const Sequence* s : scheduler_->running())
    for (const std::vector<BlockId>& table : s->tables)
      for (size_t i = 0; i < table.size(); ++i) {
        if (table[i] == kNoBlock) continue;
        const int32_t f = std::clamp(s->num_computed - static_cast<int32_t>(i) * bs, 0, bs);
        int32_t& slot = filled[table[i]];
        slot = std::max(slot, f);
      }
  int64_t used = 0;
  for (const auto& [b, f] : filled) used += f;
  const double alloc = static_cast<double>(pool_->num_used()) * bs;
  return alloc > 0 ? 1.0 - static_cast<double>(used) / alloc : 0.0;
}

}  // namespace pagoda
