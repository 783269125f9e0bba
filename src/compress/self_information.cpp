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

void ScorerSession::use_subset(std::vector<int32_t> frequent, double min_mass) {
  frequent_ = std::move(frequent);
  subset_min_mass_ = min_mass;
  subset_on_ = true;
  subset_checked_ = false;
  subset_ok_ = false;
  subset_.reset();
}

Status ScorerSession::cover(std::span<const int32_t> tokens) {
  if (subset_ && std::all_of(tokens.begin(), tokens.end(), [&](int32_t t) { return subset_->column(t) >= 0; }))
    return Status::ok();
  std::vector<int32_t> ids;
  std::vector<bool> in(static_cast<size_t>(model_->config().n_vocab), false);
  auto add = [&](int32_t t) {
    if (t < 0 || static_cast<size_t>(t) >= in.size() || in[static_cast<size_t>(t)]) return;
    in[static_cast<size_t>(t)] = true;
    ids.push_back(t);
  };
  if (subset_) for (int32_t t : subset_->ids()) add(t);
  else for (int32_t t : frequent_) add(t);
  for (int32_t t : tokens) add(t);
  auto s = OutputSubset::make(*model_, ids);
  if (!s) return s.status();
  subset_.emplace(std::move(*s));
  return Status::ok();
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
  if (subset_on_) PAGODA_TRY(cover(tokens));
  // Everything before the last old token runs without logits (once); the row of
  // position p predicts history_[p + 1], so positions start-1 .. end-2 predict the new
  // tokens (the first has no row when nothing precedes it).
  if (Status st = sync(); !st) return st;
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  const size_t first = start > 0 ? start - 1 : 0;
  const size_t last = history_.size() - 1;  // exclusive
  std::span<const int32_t> h(history_);
  // A subset's rows are narrower, so a piece holds more of them (within the same budget).
  const size_t sub_rows =
      subset_ ? std::clamp<size_t>(logits_.size() / static_cast<size_t>(subset_->size()), 1, 512) : 0;
  for (size_t p = first; p < last;) {
    const bool narrow = subset_on_ && subset_checked_ && subset_ok_;
    const bool check = subset_on_ && !subset_checked_;
    const size_t n = std::min(narrow ? sub_rows : static_cast<size_t>(piece_rows_), last - p);
    const int64_t width = narrow ? subset_->size() : V;
    Status st = model_->forward(h.subspan(p, n), static_cast<int32_t>(p), kv_, logits_.data(), /*all_logits=*/true,
                                narrow ? &*subset_ : nullptr);
    if (!st) return st;
    kv_len_ = p + n;
    std::atomic<bool> finite{true};
    // Checking: each row's exact score and its score over the subset, and the subset's
    // share of the row's probability; which scores stand is decided by the mean share.
    std::vector<double> renorm(check ? n : 0), mass(check ? n : 0);
    model_->pool().parallel_for(static_cast<int64_t>(n), 1, [&](int64_t b, int64_t e, int) {
      std::vector<float> gathered;
      for (int64_t r = b; r < e; ++r) {
        std::span<const float> row(logits_.data() + r * width, static_cast<size_t>(width));
        const size_t target = p + static_cast<size_t>(r) + 1;
        const int32_t token = history_[target];
        double nll;
        if (narrow) {
          nll = token_nll(row, subset_->column(token), summarize_row(row).log_norm);
        } else {
          nll = token_nll(row, token, summarize_row(row).log_norm);
          if (check) {
            gathered.resize(static_cast<size_t>(subset_->size()));
            for (size_t i = 0; i < gathered.size(); ++i) gathered[i] = row[static_cast<size_t>(subset_->ids()[i])];
            const double sub = token_nll(gathered, subset_->column(token), summarize_row(gathered).log_norm);
            renorm[static_cast<size_t>(r)] = sub;
            // p_exact = p_subset x share, so the share is e^(sub - exact).
            mass[static_cast<size_t>(r)] = std::exp(sub - nll);
          }
        }
        if (!std::isfinite(nll)) finite = false;
        out[target - start] = static_cast<float>(nll);
      }
    });
    if (!finite) return error("the scorer produced non-finite logits at position {}", p);
    if (check) {
      double sum = 0;
      for (double m : mass) sum += m;
      subset_mass_ = sum / static_cast<double>(n);
      subset_checked_ = true;
      subset_ok_ = subset_mass_ >= subset_min_mass_;
      // Every score of the session is of one kind: these rows' too.
      if (subset_ok_)
        for (size_t r = 0; r < n; ++r) out[p + r + 1 - start] = static_cast<float>(renorm[r]);
    }
    p += n;
  }
  return out;
}

Result<std::vector<float>> self_information(Model& model, std::span<const int32_t> tokens, size_t logits_budget_bytes) {
  auto s = ScorerSession::create(model, static_cast<int32_t>(std::max<size_t>(tokens.size(), 1)), logits_budget_bytes);
  if (!s) return s.status();
  return s->score(tokens);
}

}  // namespace pagoda
