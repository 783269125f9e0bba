#include "compress/self_information.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "eval/token_scores.h"

namespace pagoda {

ScorerSession::ScorerSession(Model& model, int32_t capacity, size_t logits_budget_bytes)
    : model_(&model), kv_(model.make_cache(capacity)), capacity_(capacity) {
  const size_t row_bytes = static_cast<size_t>(model.config().n_vocab) * sizeof(float);
  piece_rows_ = static_cast<int32_t>(std::clamp<size_t>(logits_budget_bytes / row_bytes, 1, 512));
  logits_.resize(static_cast<size_t>(piece_rows_) * static_cast<size_t>(model.config().n_vocab));
}

Result<ScorerSession> ScorerSession::create(Model& model, int32_t capacity, size_t logits_budget_bytes) {
  if (capacity < 1) return error("a scorer session needs room for at least one token");
  const int32_t trained = model.config().n_ctx_train;
  if (trained > 0 && capacity > trained)
    return error("the prompt has {} tokens, more than the scorer's context of {}", capacity, trained);
  ScorerSession s(model, capacity, logits_budget_bytes);
  if (!s.kv_.ok()) return error("cannot reserve the scorer's KV cache for {} tokens", capacity);
  // LongRoPE picks its factors by the sequence length, as perplexity does by -c.
  model.set_context_length(capacity);
  return s;
}

Status ScorerSession::sync() {
  if (history_.empty() || kv_len_ + 1 >= history_.size()) return Status::ok();
  std::span<const int32_t> h(history_);
  const size_t n = history_.size() - 1 - kv_len_;
  Status st = model_->forward(h.subspan(kv_len_, n), static_cast<int32_t>(kv_len_), kv_, nullptr);
  if (!st) return st;
  kv_len_ += n;
  return Status::ok();
}

Status ScorerSession::append(std::span<const int32_t> tokens) {
  if (history_.size() + tokens.size() > static_cast<size_t>(capacity_))
    return error("the scorer session holds {} tokens; {} more do not fit", capacity_, tokens.size());
  const int32_t V = model_->config().n_vocab;
  for (int32_t t : tokens)
    if (t < 0 || t >= V) return error("token id {} is outside the scorer's vocabulary of {}", t, V);
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  return sync();
}

void ScorerSession::truncate(size_t n) {
  if (n < history_.size()) history_.resize(n);
  kv_len_ = std::min(kv_len_, n);
}

Result<std::vector<float>> ScorerSession::score(std::span<const int32_t> tokens) {
  const size_t start = history_.size();
  if (start + tokens.size() > static_cast<size_t>(capacity_))
    return error("the scorer session holds {} tokens; {} more do not fit", capacity_, tokens.size());
  const int32_t V = model_->config().n_vocab;
  for (int32_t t : tokens)
    if (t < 0 || t >= V) return error("token id {} is outside the scorer's vocabulary of {}", t, V);
  std::vector<float> out(tokens.size(), std::numeric_limits<float>::infinity());
  if (tokens.empty()) return out;
  // Everything before the last old token runs without logits (once); the row of
  // position p predicts history_[p + 1], so positions start-1 .. end-2 predict the new
  // tokens (the first has no row when nothing precedes it).
  if (Status st = sync(); !st) return st;
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  const size_t first = start > 0 ? start - 1 : 0;
  const size_t last = history_.size() - 1;  // exclusive
  std::span<const int32_t> h(history_);
  for (size_t p = first; p < last; p += static_cast<size_t>(piece_rows_)) {
    const size_t n = std::min(static_cast<size_t>(piece_rows_), last - p);
    Status st = model_->forward(h.subspan(p, n), static_cast<int32_t>(p), kv_, logits_.data(), /*all_logits=*/true);
    if (!st) return st;
    kv_len_ = p + n;
    std::atomic<bool> finite{true};
    model_->pool().parallel_for(static_cast<int64_t>(n), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r) {
        std::span<const float> row(logits_.data() + r * V, static_cast<size_t>(V));
        const size_t target = p + static_cast<size_t>(r) + 1;
        const double nll = token_nll(row, history_[target], summarize_row(row).log_norm);
        if (!std::isfinite(nll)) finite = false;
        out[target - start] = static_cast<float>(nll);
      }
    });
    if (!finite) return error("the scorer produced non-finite logits at position {}", p);
  }
  return out;
}

Result<std::vector<float>> self_information(Model& model, std::span<const int32_t> tokens, size_t logits_budget_bytes) {
  auto s = ScorerSession::create(model, static_cast<int32_t>(std::max<size_t>(tokens.size(), 1)), logits_budget_bytes);
  if (!s) return s.status();
  return s->score(tokens);
}

}  // namespace pagoda
