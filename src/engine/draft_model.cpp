#include "engine/draft_model.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include "kernels/elementwise/elementwise.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace pagoda {

namespace {

// llama.cpp's limits (common/speculative.cpp): ids below 5 are special tokens that
// families number differently, and a few extra added tokens are tolerated.
constexpr int32_t kVocabCheckStart = 5;
constexpr int32_t kVocabMaxSizeDifference = 128;

KvShape draft_shape(const ModelConfig& mc, int32_t block_size, KvType kv_type) {
  // One table for all layers: a draft's window layers keep their blocks, a small price for
  // not tracking windows twice.
  return KvShape{mc.n_layer, mc.n_head_kv, mc.head_dim, block_size, kv_type, {}};
}

}  // namespace

Status check_draft_vocabulary(const Vocab& target, const Vocab& draft) {
  if (target.kind != draft.kind)
    return error("the draft model's tokenizer is {}, the target's {}: their token ids do not mean the same text",
                 tokenizer_kind_name(draft.kind), tokenizer_kind_name(target.kind));
  if (target.bos != draft.bos || target.eos != draft.eos || target.add_bos != draft.add_bos ||
      target.add_eos != draft.add_eos)
    return error("the draft model's special tokens differ from the target's (BOS {} vs {}, EOS {} vs {}, add_bos {} vs "
                 "{}, add_eos {} vs {})",
                 draft.bos, target.bos, draft.eos, target.eos, draft.add_bos, target.add_bos, draft.add_eos,
                 target.add_eos);
  const auto nt = static_cast<int32_t>(target.pieces.size());
  const auto nd = static_cast<int32_t>(draft.pieces.size());
  if (std::abs(nt - nd) > kVocabMaxSizeDifference)
    return error("the draft model's vocabulary has {} tokens, the target's {}: more than {} apart", nd, nt,
                 kVocabMaxSizeDifference);
  for (int32_t i = kVocabCheckStart; i < std::min(nt, nd); ++i)
    if (target.pieces[i] != draft.pieces[i])
      return error("token {} is \"{}\" in the draft model's vocabulary but \"{}\" in the target's", i, draft.pieces[i],
                   target.pieces[i]);
  return Status::ok();
}

Result<std::unique_ptr<DraftModel>> DraftModel::create(Model& draft, int32_t target_vocab, int32_t block_size,
                                                       int32_t num_blocks, KvType kv_type, int32_t max_model_len,
                                                       float p_min) {
  if (!(p_min >= 0.0f && p_min < 1.0f)) return error("draft_p_min must be in [0, 1) (got {})", p_min);
  std::unique_ptr<DraftModel> d(new DraftModel(draft, target_vocab, p_min));
  auto storage = KvStorage::create(draft_shape(draft.config(), block_size, kv_type), num_blocks);
  if (!storage) return error("the draft model's KV cache: {}", storage.status().message());
  d->storage_ = std::move(storage.value());
  d->pool_ = std::make_unique<BlockPool>(num_blocks, block_size);
  d->max_model_len_ = max_model_len;
  draft.set_context_length(max_model_len);
  return d;
}

void DraftModel::release(int64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  pool_->release_all(it->second.tables[0]);
  seqs_.erase(it);
}

void DraftModel::release_all() {
  for (auto& entry : seqs_) pool_->release_all(entry.second.tables[0]);
  seqs_.clear();
}

void DraftModel::align(SeqKv& s, std::span<const int32_t> tokens) {
  const auto match = static_cast<size_t>(
      std::mismatch(s.computed.begin(), s.computed.end(), tokens.begin(), tokens.end()).first - s.computed.begin());
  // The last token's row gives the first draft, so it is computed again even where a
  // draft already put it here.
  const size_t common = std::min(match, tokens.size() - 1);
  s.computed.resize(common);
  const int32_t bs = pool_->block_size();
  // Blocks past the kept prefix hold positions that will be written again; a registered
  // block is never among them (it holds verified tokens, which the sequence keeps).
  const auto keep = static_cast<size_t>((common + static_cast<size_t>(bs) - 1) / static_cast<size_t>(bs));
  std::vector<BlockId>& table = s.tables[0];
  if (table.size() > keep) {
    pool_->release_all(std::span<const BlockId>(table).subspan(keep));
    table.resize(keep);
  }
  s.hashed = std::min<int32_t>(s.hashed, static_cast<int32_t>(common) / bs);
  if (!s.computed.empty()) return;
  // A fresh sequence: the cached blocks of its leading full blocks, leaving the last token
  // to compute (its row gives the first draft).
  BlockHash h = 0;
  const auto full = static_cast<int32_t>((tokens.size() - 1) / static_cast<size_t>(bs));
  for (int32_t b = 0; b < full; ++b) {
    h = BlockPool::hash_tokens(h, tokens.subspan(static_cast<size_t>(b * bs), static_cast<size_t>(bs)));
    const std::optional<BlockId> hit = pool_->lookup(h);
    if (!hit) break;
    pool_->retain(*hit);
    table.push_back(*hit);
    s.computed.insert(s.computed.end(), tokens.begin() + b * bs, tokens.begin() + (b + 1) * bs);
    s.hashed = b + 1;
    s.last_hash = h;
  }
}

bool DraftModel::evict_others(std::span<const DraftRequest> reqs) {
  // Sequences not drafting now (preempted, skipping) hold KV they may never use again;
  // those asking now have the better claim.
  std::vector<int64_t> idle;
  for (const auto& entry : seqs_)
    if (std::none_of(reqs.begin(), reqs.end(), [&](const DraftRequest& r) { return r.seq == entry.first; }))
      idle.push_back(entry.first);
  for (int64_t id : idle) release(id);
  return !idle.empty();
}

bool DraftModel::reserve(SeqKv& s, int32_t end) {
  const int32_t bs = pool_->block_size();
  std::vector<BlockId>& table = s.tables[0];
  const int32_t need = (end + bs - 1) / bs - static_cast<int32_t>(table.size());
  return need <= 0 || pool_->allocate(need, table);
}

void DraftModel::register_blocks(SeqKv& s, int32_t verified) {
  const int32_t bs = pool_->block_size();
  const int32_t full = std::min<int32_t>(verified, static_cast<int32_t>(s.computed.size())) / bs;
  for (; s.hashed < full; ++s.hashed) {
    const auto b = static_cast<size_t>(s.hashed);
    s.last_hash = BlockPool::hash_tokens(
        s.hashed == 0 ? 0 : s.last_hash,
        std::span<const int32_t>(s.computed).subspan(b * static_cast<size_t>(bs), static_cast<size_t>(bs)));
    pool_->set_hash(s.tables[0][b], s.last_hash);
  }
}

void DraftModel::offer_alternatives(const float* row, int32_t best, DraftRequest& r) const {
  const int64_t n = std::min<int64_t>(model_.config().n_vocab, target_vocab_);
  const double norm = log_sum_exp_row(row, model_.config().n_vocab, nullptr);
  // The few largest logits but the first choice, by one pass keeping them sorted (at most
  // 7: branches <= 8).
  std::array<int32_t, 8> top{};
  const size_t want = std::min(top.size(), static_cast<size_t>(r.alternatives));
  size_t have = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i == best || (have == want && row[i] <= row[top[have - 1]])) continue;
    size_t at = have < want ? have : want - 1;
    while (at > 0 && row[i] > row[top[at - 1]]) {
      top[at] = top[at - 1];
      --at;
    }
    top[at] = static_cast<int32_t>(i);
    have = std::min(want, have + 1);
  }
  for (size_t j = 0; j < have; ++j) {
    const int32_t t = top[j];
    if (std::exp(static_cast<double>(row[t]) - norm) < kAlternativeMinP) break;
    r.alt_tokens.push_back(t);
    r.alt_positions.push_back(static_cast<int32_t>(r.drafts.size()));
  }
}

int32_t DraftModel::choose(std::span<const float> row, bool& confident) const {
  const std::span<const float> usable = row.first(std::min(row.size(), static_cast<size_t>(target_vocab_)));
  const int32_t best = argmax(usable);
  confident = true;
  if (p_min_ > 0.0f) confident = std::exp(static_cast<double>(usable[best]) - log_sum_exp(row)) >= p_min_;
  return best;
}

Status DraftModel::propose(std::span<DraftRequest> reqs) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t V = model_.config().n_vocab;
  active_.clear();
  int32_t most = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    DraftRequest& r = reqs[i];
    r.drafts.clear();
    r.alt_tokens.clear();
    r.alt_positions.clear();
    if (r.k <= 0 || r.tokens.empty()) continue;
    auto [it, fresh] = seqs_.try_emplace(r.seq);
    SeqKv& s = it->second;
    if (fresh) s.tables.resize(1);
    align(s, r.tokens);
    // Positions up to the one before the last draft get KV here.
    const int32_t end = static_cast<int32_t>(r.tokens.size()) + r.k - 1;
    bool room = end <= max_model_len_ && reserve(s, end);
    if (!room && end <= max_model_len_ && evict_others(reqs)) room = reserve(seqs_.at(r.seq), end);
    if (!room) {
      release(r.seq);
      continue;
    }
    active_.push_back(i);
    most = std::max(most, r.k);
  }
  Status st = Status::ok();
  for (int32_t j = 0; j < most && !active_.empty(); ++j) {
    batch_.clear();
    for (size_t i : active_) {
      DraftRequest& r = reqs[i];
      SeqKv& s = seqs_.at(r.seq);
      // The first pass computes what the sequence gained since the last proposal; later
      // passes the draft before.
      const auto pos0 = static_cast<int32_t>(s.computed.size());
      if (j == 0) s.computed.insert(s.computed.end(), r.tokens.begin() + pos0, r.tokens.end());
      else s.computed.push_back(r.drafts.back());
      batch_.add(std::span<const int32_t>(s.computed).subspan(static_cast<size_t>(pos0)), pos0, s.tables, true);
    }
    logits_.resize(static_cast<size_t>(batch_.n_logits()) * static_cast<size_t>(V));
    const auto t0 = std::chrono::steady_clock::now();
    st = model_.forward(batch_, *storage_, logits_.data());
    ++stats_.forwards;
    if (j > 0) {
      ++stats_.token_forwards;
      stats_.token_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (!st.is_ok()) break;
    size_t row = 0;
    std::erase_if(active_, [&](size_t i) {
      DraftRequest& r = reqs[i];
      bool confident = true;
      const int32_t t = choose(std::span<const float>(logits_).subspan(row++ * static_cast<size_t>(V), static_cast<size_t>(V)), confident);
      // A doubted first guess is still worth its row when it is the only one; later ones end
      // the draft before them.
      if (!confident && !r.drafts.empty()) return true;
      if (r.alternatives > 0) offer_alternatives(logits_.data() + (row - 1) * static_cast<size_t>(V), t, r);
      r.drafts.push_back(t);
      return !confident || static_cast<int32_t>(r.drafts.size()) >= r.k;
    });
  }
  for (DraftRequest& r : reqs) {
    auto it = seqs_.find(r.seq);
    if (it == seqs_.end()) continue;
    if (!st.is_ok()) {
      release(r.seq);
      r.drafts.clear();
      r.alt_tokens.clear();
      r.alt_positions.clear();
      continue;
    }
    register_blocks(it->second, static_cast<int32_t>(r.tokens.size()));
  }
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace pagoda
