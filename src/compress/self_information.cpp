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

void ScorerSession::use_subset(std::shared_ptr<const OutputSubset> frequent, double min_mass) {
  frequent_ = std::move(frequent);
  subset_min_mass_ = min_mass;
  subset_on_ = frequent_ != nullptr;
  subset_ok_ = true;
  mass_sum_ = 0;
  mass_rows_ = 0;
  extra_.reset();
}

Status ScorerSession::cover(std::span<const int32_t> tokens) {
  if (!subset_on_) return Status::ok();
  auto held = [&](int32_t t) { return frequent_->column(t) >= 0 || (extra_ && extra_->column(t) >= 0); };
  if (std::all_of(tokens.begin(), tokens.end(), held)) return Status::ok();
  std::vector<int32_t> ids;
  if (extra_) ids.assign(extra_->ids().begin(), extra_->ids().end());
  for (int32_t t : tokens)
    if (!held(t) && std::find(ids.begin(), ids.end(), t) == ids.end()) ids.push_back(t);
  auto s = OutputSubset::make(*model_, ids);
  if (!s) return s.status();
  extra_.emplace(std::move(*s));
  return Status::ok();
}

namespace {

// log(e^a + e^b) for a row normalized in two parts.
double log_add(double a, double b) {
  if (std::isinf(a) && a < 0) return b;
  if (std::isinf(b) && b < 0) return a;
  const double m = std::max(a, b);
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

}  // namespace

// Every kCheckStride-th row of a subset-scored session also goes through the whole head,
// to measure the subset's share of the probability across the text (not only its start,
// where a title or the first words leave the scorer unsure).
constexpr size_t kCheckStride = 32;

Result<std::vector<float>> ScorerSession::score(std::span<const int32_t> tokens) {
  const size_t start = history_.size();
  if (start + tokens.size() > static_cast<size_t>(capacity_))
    return error("the scorer session holds {} tokens; {} more do not fit", capacity_, tokens.size());
  const int32_t V = model_->config().n_vocab;
  const int64_t E = model_->config().n_embd;
  for (int32_t t : tokens)
    if (t < 0 || t >= V) return error("token id {} is outside the scorer's vocabulary of {}", t, V);
  std::vector<float> out(tokens.size(), std::numeric_limits<float>::infinity());
  if (tokens.empty()) return out;
  PAGODA_TRY(cover(tokens));
  // Everything before the last old token runs without logits (once); the row of
  // position p predicts history_[p + 1], so positions start-1 .. end-2 predict the new
  // tokens (the first has no row when nothing precedes it).
  if (Status st = sync(); !st) return st;
  history_.insert(history_.end(), tokens.begin(), tokens.end());
  const size_t first = start > 0 ? start - 1 : 0;
  const size_t last = history_.size() - 1;  // exclusive
  std::span<const int32_t> h(history_);
  // Exact: the whole head's rows, a piece at a time, each row reduced to its token's score.
  auto exact_rows = [&](const float* logits, size_t p, size_t n) -> Status {
    std::atomic<bool> finite{true};
    model_->pool().parallel_for(static_cast<int64_t>(n), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r) {
        std::span<const float> row(logits + r * V, static_cast<size_t>(V));
        const size_t target = p + static_cast<size_t>(r) + 1;
        const double nll = token_nll(row, history_[target], summarize_row(row).log_norm);
        if (!std::isfinite(nll)) finite = false;
        out[target - start] = static_cast<float>(nll);
      }
    });
    if (!finite) return error("the scorer produced non-finite logits at position {}", p);
    return Status::ok();
  };
  if (!subset_in_use()) {
    for (size_t p = first; p < last;) {
      const size_t n = std::min(static_cast<size_t>(piece_rows_), last - p);
      PAGODA_TRY(model_->forward(h.subspan(p, n), static_cast<int32_t>(p), kv_, logits_.data(), /*all_logits=*/true));
      kv_len_ = p + n;
      PAGODA_TRY(exact_rows(logits_.data(), p, n));
      p += n;
    }
    return out;
  }
  // Over the subset: the hidden states of every row are kept (n_embd floats a row), so the
  // checked rows, and all of them if the subset holds too little, go through the whole
  // head without running the layers again.
  const int64_t n_freq = frequent_->size();
  const int64_t n_extra = extra_ ? extra_->size() : 0;
  const size_t total = last - first;
  hidden_.resize(total * static_cast<size_t>(E));
  // A subset's rows are narrower, so a piece holds more of them (within the same budget).
  const size_t sub_rows = std::clamp<size_t>(logits_.size() / static_cast<size_t>(n_freq + n_extra), 1, 512);
  std::atomic<bool> finite{true};
  for (size_t p = first; p < last;) {
    const size_t n = std::min(sub_rows, last - p);
    const auto rows = static_cast<int64_t>(n);
    float* hid = hidden_.data() + (p - first) * static_cast<size_t>(E);
    PAGODA_TRY(model_->forward_hidden(h.subspan(p, n), static_cast<int32_t>(p), kv_, hid));
    kv_len_ = p + n;
    model_->head_logits(frequent_->view(), hid, rows, logits_.data());
    if (n_extra > 0) {
      extra_logits_.resize(static_cast<size_t>(rows * n_extra));
      model_->head_logits(extra_->view(), hid, rows, extra_logits_.data());
    }
    model_->pool().parallel_for(rows, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r) {
        const size_t target = p + static_cast<size_t>(r) + 1;
        const int32_t token = history_[target];
        std::span<const float> row(logits_.data() + r * n_freq, static_cast<size_t>(n_freq));
        std::span<const float> more(extra_logits_.data() + r * n_extra, static_cast<size_t>(n_extra));
        double norm = summarize_row(row).log_norm;
        if (n_extra > 0) norm = log_add(norm, summarize_row(more).log_norm);
        const int32_t col = frequent_->column(token);
        const double nll = col >= 0 ? token_nll(row, col, norm) : token_nll(more, extra_->column(token), norm);
        if (!std::isfinite(nll)) finite = false;
        out[target - start] = static_cast<float>(nll);
      }
    });
    if (!finite) return error("the scorer produced non-finite logits at position {}", p);
    p += n;
  }
  // The check: each sampled row's exact score; p_exact = p_subset x share, so the share is
  // e^(subset score - exact score).
  std::vector<size_t> sampled;
  for (size_t r = (kCheckStride - 1) / 2; r < total; r += kCheckStride) sampled.push_back(r);
  if (sampled.empty()) sampled.push_back(total - 1);
  std::vector<float> picked(static_cast<size_t>(piece_rows_) * static_cast<size_t>(E));
  for (size_t i = 0; i < sampled.size(); i += static_cast<size_t>(piece_rows_)) {
    const size_t m = std::min(static_cast<size_t>(piece_rows_), sampled.size() - i);
    for (size_t j = 0; j < m; ++j)
      std::copy_n(hidden_.data() + sampled[i + j] * static_cast<size_t>(E), E, picked.data() + j * static_cast<size_t>(E));
    model_->head_logits(model_->weights().output, picked.data(), static_cast<int64_t>(m), logits_.data());
    std::vector<double> share(m);
    model_->pool().parallel_for(static_cast<int64_t>(m), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t j = b; j < e; ++j) {
        std::span<const float> row(logits_.data() + j * V, static_cast<size_t>(V));
        const size_t target = first + sampled[i + static_cast<size_t>(j)] + 1;
        const double exact = token_nll(row, history_[target], summarize_row(row).log_norm);
        share[static_cast<size_t>(j)] = std::exp(static_cast<double>(out[target - start]) - exact);
      }
    });
    for (double x : share) mass_sum_ += x;
    mass_rows_ += static_cast<int64_t>(m);
  }
  subset_mass_ = mass_sum_ / static_cast<double>(mass_rows_);
  if (subset_mass_ >= subset_min_mass_) return out;
  // Too little: exact from here on, these rows' too.
  subset_ok_ = false;
  for (size_t r = 0; r < total; r += static_cast<size_t>(piece_rows_)) {
    const size_t n = std::min(static_cast<size_t>(piece_rows_), total - r);
    model_->head_logits(model_->weights().output, hidden_.data() + r * static_cast<size_t>(E), static_cast<int64_t>(n),
                        logits_.data());
    PAGODA_TRY(exact_rows(logits_.data(), first + r, n));
  }
  return out;
}

Result<std::vector<float>> self_information(Model& model, std::span<const int32_t> tokens, size_t logits_budget_bytes) {
  auto s = ScorerSession::create(model, static_cast<int32_t>(std::max<size_t>(tokens.size(), 1)), logits_budget_bytes);
  if (!s) return s.status();
  return s->score(tokens);
}

}  // namespace pagoda
