#include "engine/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace pagoda {

Scheduler::Scheduler(const SchedulerConfig& config, BlockPool& pool, KvStorage& storage)
    : config_(config), pool_(pool), storage_(storage), layout_(storage.layout()) {}

bool Scheduler::before(const Sequence* a, const Sequence* b) const {
  if (config_.policy == SchedulePolicy::kPriority)
    return std::tie(a->priority, a->arrival_order, a->id) < std::tie(b->priority, b->arrival_order, b->id);
  return std::tie(a->arrival_order, a->id) < std::tie(b->arrival_order, b->id);
}

void Scheduler::add(Sequence* s) {
  s->tables.resize(static_cast<size_t>(layout_.n_groups()));
  s->status = SeqStatus::kWaiting;
  waiting_.push_back(s);
}

void Scheduler::add_fork(Sequence* child, const Sequence& parent) {
  child->tokens = parent.tokens;
  child->prompt_len = parent.prompt_len;
  child->num_computed = parent.num_computed;
  child->num_hashed_blocks = parent.num_hashed_blocks;
  child->hashes = parent.hashes;
  child->tables = parent.tables;
  for (const std::vector<BlockId>& table : child->tables)
    for (BlockId b : table)
      if (b != kNoBlock) pool_.retain(b);
  child->status = SeqStatus::kRunning;
  running_.push_back(child);
}

void Scheduler::release(Sequence* s) {
  // Full-attention groups first: the window blocks at a sequence's end, without which no
  // prefix of it can be reused, are the last of its blocks to be evicted.
  for (const bool windowed : {false, true})
    for (int32_t g = 0; g < layout_.n_groups(); ++g) {
      if ((layout_.window(g) > 0) != windowed) continue;
      pool_.release_all(s->tables[g]);
      s->tables[g].clear();
    }
  s->num_computed = 0;
  s->num_hashed_blocks = 0;
}

void Scheduler::remove(Sequence* s) {
  std::erase(waiting_, s);
  std::erase(running_, s);
  release(s);
  s->status = SeqStatus::kFinished;
}

void Scheduler::finish(Sequence* s) { remove(s); }

bool Scheduler::settle(Sequence* s, bool finished) {
  const bool at_context = config_.max_model_len > 0 && s->len() >= config_.max_model_len;
  if (s->padding) {
    if (at_context && s->status != SeqStatus::kFinished) finish(s);
    return false;
  }
  if (!finished) return true;
  if (config_.mode == ScheduleMode::kStatic) {
    s->padding = true;
    if (at_context) finish(s);
  } else {
    finish(s);
  }
  return true;
}

void Scheduler::end_step() {
  if (config_.mode != ScheduleMode::kStatic) return;
  for (const Sequence* s : running_)
    if (!s->padding) return;
  const std::vector<Sequence*> batch = running_;
  for (Sequence* s : batch) finish(s);
}

void Scheduler::preempt(Sequence* s) {
  std::erase(running_, s);
  release(s);
  s->status = SeqStatus::kWaiting;
  waiting_.push_back(s);
  ++stats_.preemptions;
}

void Scheduler::release_out_of_window(Sequence* s) {
  const int32_t bs = pool_.block_size();
  for (int32_t g = 0; g < layout_.n_groups(); ++g) {
    if (layout_.window(g) <= 0) continue;
    std::vector<BlockId>& table = s->tables[g];
    // Released entries form a prefix: walk back from the first live block to it.
    for (int32_t i = std::min<int32_t>(layout_.first_live_block(g, s->num_computed, bs),
                                       static_cast<int32_t>(table.size())) - 1;
         i >= 0 && table[i] != kNoBlock; --i) {
      pool_.release(table[i]);
      table[i] = kNoBlock;
    }
  }
}

bool Scheduler::reserve(Sequence* s, int32_t upto, int32_t keep_free) {
  const int32_t bs = pool_.block_size();
  const int32_t need = (upto + bs - 1) / bs;
  // Blocks the new tokens write into that others also hold (a prompt block shared by the
  // n samples of a request) are copied first.
  const int32_t first = s->num_computed / bs;
  int32_t wanted = 0;
  for (const std::vector<BlockId>& table : s->tables) {
    const int32_t have = static_cast<int32_t>(table.size());
    for (int32_t i = first; i < std::min(have, need); ++i) wanted += pool_.ref_count(table[i]) > 1 ? 1 : 0;
    wanted += std::max(0, need - have);
  }
  if (wanted + keep_free > pool_.num_free()) return false;
  for (std::vector<BlockId>& table : s->tables) {
    const int32_t have = static_cast<int32_t>(table.size());
    for (int32_t i = first; i < std::min(have, need); ++i) {
      const BlockId old = table[i];
      if (pool_.ref_count(old) <= 1) continue;
      const BlockId mine = *pool_.make_unique(old);
      const int32_t filled = std::clamp(s->num_computed - i * bs, 0, bs);
      storage_.copy_block(old, mine, filled);
      table[i] = mine;
    }
    if (need > have) pool_.allocate(need - have, table);
  }
  return true;
}

int32_t Scheduler::claim_cached_prefix(Sequence* s) {
  // An embedding pools the hidden states of every prompt token, which a cached prefix
  // would skip.
  if (!config_.prefix_caching || config_.whole_prompts || s->pool != Pooling::kNone) return 0;
  const int32_t bs = pool_.block_size();
  // The last token always runs: its logits are what the step is for.
  const int32_t max_blocks = (s->len() - 1) / bs;
  while (static_cast<int32_t>(s->hashes.size()) < max_blocks) {
    const size_t i = s->hashes.size();
    const BlockHash parent = i == 0 ? 0 : s->hashes[i - 1];
    s->hashes.push_back(BlockPool::hash_tokens(parent, std::span<const int32_t>(s->tokens).subspan(i * bs, bs)));
  }
  // The longest prefix whose blocks are cached in every full-attention group...
  auto cached = [&](int32_t g, int32_t i) { return pool_.lookup(BlockPool::group_hash(s->hashes[i], g)); };
  int32_t hits = 0;
  for (; hits < max_blocks; ++hits) {
    bool all = true;
    for (int32_t g = 0; g < layout_.n_groups() && all; ++g)
      if (layout_.window(g) <= 0) all = cached(g, hits).has_value();
    if (!all) break;
  }
  // ...cut back until every windowed group also has the blocks of the window before the
  // prefix's end: a missing block i rules out every prefix whose window covers it, so the
  // next candidate ends at i. A cut for one group moves the others' windows back, so this
  // runs until no group cuts.
  for (int32_t before = -1; before != hits;) {
    before = hits;
    for (int32_t g = 0; g < layout_.n_groups(); ++g) {
      if (layout_.window(g) <= 0) continue;
      for (int32_t i = hits - 1; i >= layout_.first_live_block(g, hits * bs, bs); --i)
        if (!cached(g, i)) hits = i;  // the loop bound moves back with it
    }
  }
  for (int32_t g = 0; g < layout_.n_groups(); ++g) {
    std::vector<BlockId>& table = s->tables[g];
    const int32_t live = layout_.first_live_block(g, hits * bs, bs);
    for (int32_t i = 0; i < hits; ++i) {
      if (i < live) {
        table.push_back(kNoBlock);
        continue;
      }
      const BlockId b = *cached(g, i);
      pool_.retain(b);
      table.push_back(b);
    }
  }
  s->num_hashed_blocks = hits;
  return hits * bs;
}

void Scheduler::count_prefix_lookup(const Sequence* s, int32_t cached) {
  if (!config_.prefix_caching) return;
  // As vLLM counts them: every token of an admitted sequence was a query. Counted at
  // admission only, since a sequence waiting for memory looks its prefix up every step.
  stats_.prefix_query_tokens += s->len();
  stats_.prefix_hit_tokens += cached;
}

void Scheduler::hash_full_blocks(Sequence* s) {
  if (!config_.prefix_caching || config_.whole_prompts) return;
  const int32_t bs = pool_.block_size();
  const int32_t full = s->num_computed / bs;
  for (int32_t i = s->num_hashed_blocks; i < full; ++i) {
    if (static_cast<int32_t>(s->hashes.size()) <= i) {
      const BlockHash parent = i == 0 ? 0 : s->hashes[i - 1];
      s->hashes.push_back(BlockPool::hash_tokens(parent, std::span<const int32_t>(s->tokens).subspan(
                                                             static_cast<size_t>(i) * bs, bs)));
    }
    for (int32_t g = 0; g < layout_.n_groups(); ++g)
      if (s->tables[g][i] != kNoBlock) pool_.set_hash(s->tables[g][i], BlockPool::group_hash(s->hashes[i], g));
  }
  s->num_hashed_blocks = std::max(s->num_hashed_blocks, full);
}

const std::vector<ScheduledSeq>& Scheduler::schedule() {
  work_.clear();
  // Blocks that left the windows go back before anything is reserved, so they count as
  // free for every sequence, also those this step does not reach. (Sequences admitted
  // below start with their tables already cut at the window.)
  for (Sequence* s : running_) release_out_of_window(s);
  if (config_.mode == ScheduleMode::kStatic) schedule_static();
  else schedule_continuous();
  return work_;
}

void Scheduler::schedule_continuous() {
  int32_t budget = config_.max_num_batched_tokens;
  bool preempted = false;
  // Running sequences first, in admission order; out of blocks, the sequence served last
  // gives its blocks up (possibly the one being scheduled).
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    const int32_t want = std::min(s->len() - s->num_computed, budget);
    if (want <= 0) {
      ++i;
      continue;
    }
    bool ok = false;
    while (!(ok = reserve(s, s->num_computed + want))) {
      Sequence* victim = *std::max_element(running_.begin(), running_.end(),
                                           [&](const Sequence* a, const Sequence* b) { return before(a, b); });
      for (size_t w = 0; w < work_.size(); ++w)
        if (work_[w].seq == victim) {
          budget += work_[w].n_tokens;
          work_.erase(work_.begin() + static_cast<std::ptrdiff_t>(w));
          break;
        }
      const size_t vi = static_cast<size_t>(std::find(running_.begin(), running_.end(), victim) - running_.begin());
      preempt(victim);
      preempted = true;
      if (vi < i) --i;
      if (victim == s) break;
    }
    if (!ok) continue;  // s itself was preempted; running_[i] is now the next one
    work_.push_back({s, want});
    budget -= want;
    ++i;
  }
  if (preempted) return;  // memory is short: admit nothing new this step
  while (budget > 0 && !waiting_.empty() && static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    auto it = std::min_element(waiting_.begin(), waiting_.end(),
                               [&](const Sequence* a, const Sequence* b) { return before(a, b); });
    Sequence* s = *it;
    const int32_t cached = claim_cached_prefix(s);
    s->num_computed = cached;
    if (s->output_len() == 0) s->cached_prompt_tokens = cached;
    int32_t want = std::min(s->len() - s->num_computed, budget);
    if (config_.whole_prompts && want < s->len() - s->num_computed) {
      if (!work_.empty()) break;  // waits for a step of its own
      want = s->len() - s->num_computed;
    }
    // Headroom: admit only if afterwards every running sequence, this one included, could
    // still get its next block. Admitting into the last free blocks makes the next steps'
    // growth preempt someone and recompute it (Gemma 3 270M, 128 requests in 180 MiB of KV:
    // 30 preemptions cost 7% of the run; with the headroom none happen).
    const int32_t headroom = running_.empty() ? 0 : (static_cast<int32_t>(running_.size()) + 1) * layout_.n_groups();
    if (!reserve(s, s->num_computed + want, headroom)) {
      release(s);  // waits for memory, cached blocks back to the free queue
      break;
    }
    waiting_.erase(it);
    count_prefix_lookup(s, cached);
    s->status = SeqStatus::kRunning;
    running_.push_back(s);
    work_.push_back({s, want});
    budget -= std::min(budget, want);
  }
}

int32_t Scheduler::static_reservation(const Sequence* s) const {
  const int64_t cap = config_.max_model_len > 0 ? config_.max_model_len : INT32_MAX;
  const int64_t max_tokens = s->params != nullptr ? s->params->max_tokens : -1;
  const int64_t want = max_tokens < 0 ? cap : static_cast<int64_t>(s->prompt_len) + max_tokens;
  return static_cast<int32_t>(std::max<int64_t>(s->len(), std::min(cap, want)));
}

void Scheduler::schedule_static() {
  if (running_.empty()) {
    // A new batch: whole prompts, in arrival order, as many as the rectangle of rows x
    // (longest prompt + largest max_tokens) fits in the free blocks; every row reserves
    // the rectangle's length, which its padding never outgrows.
    std::sort(waiting_.begin(), waiting_.end(), [&](const Sequence* a, const Sequence* b) { return before(a, b); });
    const int64_t bs = pool_.block_size();
    int64_t rows = 0, longest_prompt = 0, longest_output = 0, length = 0;
    for (const Sequence* s : waiting_) {
      if (rows == config_.max_num_seqs) break;
      const int64_t p = std::max<int64_t>(longest_prompt, s->len());
      const int64_t o = std::max<int64_t>(longest_output, static_reservation(s) - s->len());
      const int64_t len = std::min<int64_t>(p + o, config_.max_model_len > 0 ? config_.max_model_len : p + o);
      if (rows > 0 && (rows + 1) * ((len + bs - 1) / bs) * layout_.n_groups() > pool_.num_free()) break;
      ++rows, longest_prompt = p, longest_output = o, length = len;
    }
    size_t taken = 0;
    while (taken < static_cast<size_t>(rows)) {
      Sequence* s = waiting_[taken];
      const int32_t cached = claim_cached_prefix(s);
      s->num_computed = cached;
      if (s->output_len() == 0) s->cached_prompt_tokens = s->num_computed;
      if (!reserve(s, static_cast<int32_t>(length)) && (!running_.empty() || !reserve(s, s->len()))) {
        release(s);
        break;
      }
      count_prefix_lookup(s, cached);
      s->status = SeqStatus::kRunning;
      running_.push_back(s);
      work_.push_back({s, s->len() - s->num_computed});
      ++taken;
    }
    waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(taken));
    return;
  }
  for (size_t i = 0; i < running_.size();) {
    Sequence* s = running_[i];
    const int32_t want = s->len() - s->num_computed;
    bool ok = false;
    while (!(ok = reserve(s, s->len()))) {
      Sequence* victim = running_.back();
      for (size_t w = 0; w < work_.size(); ++w)
        if (work_[w].seq == victim) {
          work_.erase(work_.begin() + static_cast<std::ptrdiff_t>(w));
          break;
        }
      preempt(victim);
      if (victim == s) break;
    }
    if (!ok) continue;
    if (want > 0) work_.push_back({s, want});
    ++i;
  }
}

void Scheduler::commit(const std::vector<ScheduledSeq>& work) {
  for (const ScheduledSeq& w : work) {
    w.seq->num_computed += w.n_tokens;
    hash_full_blocks(w.seq);
  }
}

}  // namespace pagoda
