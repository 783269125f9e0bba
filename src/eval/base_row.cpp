#include "eval/base_row.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "eval/token_scores.h"
#include "sampling/fast_exp.h"

namespace pagoda {
namespace {

uint16_t encode(double lp, double lo, double inv_step) {
  const double c = 1.0 + std::nearbyint((lp - lo) * inv_step);
  return static_cast<uint16_t>(std::clamp(c, 1.0, 65535.0));
}

// -sum p log p over the whole row, in double.
double row_entropy(std::span<const float> logits, double log_norm) {
  double h = 0;
  for (float x : logits) {
    const double lp = static_cast<double>(x) - log_norm;
    if (lp > -700) h -= std::exp(lp) * lp;
  }
  return h;
}

}  // namespace

double BaseRow::log_prob(int32_t token) const {
  uint16_t code = 0;
  if (!sparse) {
    code = codes[static_cast<size_t>(token)];
  } else {
    auto it = std::lower_bound(ids.begin(), ids.end(), static_cast<uint32_t>(token));
    if (it != ids.end() && *it == static_cast<uint32_t>(token)) code = codes[static_cast<size_t>(it - ids.begin())];
  }
  return code == 0 ? -std::numeric_limits<double>::infinity() : decode(code);
}

void pack_base_row(std::span<const float> logits, int32_t target, BaseRow& out) {
  const RowSummary s = summarize_row(logits);
  const size_t n = logits.size();
  out.argmax = s.argmax;
  out.nll = static_cast<float>(token_nll(logits, target, s.log_norm));
  // The kept tokens and the smallest kept log-probability; the largest is the argmax's.
  const double hi = static_cast<double>(logits[static_cast<size_t>(s.argmax)]) - s.log_norm;
  double lo = hi;
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const double lp = static_cast<double>(logits[i]) - s.log_norm;
    if (lp > kMinLogProb) {
      ++kept;
      lo = std::min(lo, lp);
    }
  }
  out.lo = static_cast<float>(lo);
  const double lo_f = out.lo;  // encode against the value the reader will see
  out.step = static_cast<float>((hi - lo_f) / kCodeLevels);
  const double inv_step = out.step > 0 ? 1.0 / out.step : 0.0;
  // Dense costs 2 bytes per token, sparse 6 per kept token.
  out.sparse = kept * 3 < n;
  out.codes.clear();
  out.ids.clear();
  if (out.sparse) {
    out.codes.reserve(kept);
    out.ids.reserve(kept);
    for (size_t i = 0; i < n; ++i) {
      const double lp = static_cast<double>(logits[i]) - s.log_norm;
      if (lp > kMinLogProb) {
        out.ids.push_back(static_cast<uint32_t>(i));
        out.codes.push_back(encode(lp, lo_f, inv_step));
      }
    }
  } else {
    out.codes.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const double lp = static_cast<double>(logits[i]) - s.log_norm;
      out.codes[i] = lp > kMinLogProb ? encode(lp, lo_f, inv_step) : 0;
    }
  }
}

void pack_top_k_row(std::span<const float> logits, int32_t target, int32_t k, BaseRow& out) {
  const RowSummary s = summarize_row(logits);
  const size_t n = logits.size();
  const size_t kept = std::min(static_cast<size_t>(std::max(k, 1)), n);
  out.argmax = s.argmax;
  out.nll = static_cast<float>(token_nll(logits, target, s.log_norm));
  out.sparse = true;
  out.ids.resize(n);
  for (size_t i = 0; i < n; ++i) out.ids[i] = static_cast<uint32_t>(i);
  auto higher = [&](uint32_t a, uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::nth_element(out.ids.begin(), out.ids.begin() + static_cast<std::ptrdiff_t>(kept - 1), out.ids.end(), higher);
  out.ids.resize(kept);
  std::sort(out.ids.begin(), out.ids.end());
  const double hi = static_cast<double>(logits[static_cast<size_t>(s.argmax)]) - s.log_norm;
  double lo = hi, mass = 0;
  for (uint32_t id : out.ids) {
    const double lp = static_cast<double>(logits[id]) - s.log_norm;
    lo = std::min(lo, lp);
    mass += std::exp(lp);
  }
  out.tail = static_cast<float>(std::max(0.0, 1.0 - mass));
  out.entropy = static_cast<float>(row_entropy(logits, s.log_norm));
  out.lo = static_cast<float>(lo);
  const double lo_f = out.lo;
  out.step = static_cast<float>((hi - lo_f) / kCodeLevels);
  const double inv_step = out.step > 0 ? 1.0 / out.step : 0.0;
  out.codes.resize(kept);
  for (size_t j = 0; j < kept; ++j)
    out.codes[j] = encode(static_cast<double>(logits[out.ids[j]]) - s.log_norm, lo_f, inv_step);
}

RowComparison compare_to_base(const BaseRow& base, std::span<const float> logits, int32_t target) {
  const RowSummary s = summarize_row(logits);
  RowComparison r;
  r.nll = token_nll(logits, target, s.log_norm);
  r.same_top = s.argmax == base.argmax;
  // sum over kept tokens of p_base * (log p_base - log p_model)
  double kld = 0;
  auto term = [&](size_t i, uint16_t code) {
    const double lp = base.decode(code);
    const double lq = static_cast<double>(logits[i]) - s.log_norm;
    kld += static_cast<double>(exp_nonpositive(static_cast<float>(std::min(lp, 0.0)))) * (lp - lq);
  };
  if (base.tail >= 0) {
    // The teacher's tail: its exact share of the entropy, against the student's tail
    // log-probabilities weighted as the student spreads its own tail (base_row.h).
    double q_kept = 0, p_log_p_kept = 0, q_log_q_kept = 0;
    for (size_t k = 0; k < base.ids.size(); ++k) {
      term(base.ids[k], base.codes[k]);
      const double lp = base.decode(base.codes[k]);
      const double lq = static_cast<double>(logits[base.ids[k]]) - s.log_norm;
      p_log_p_kept += std::exp(lp) * lp;
      q_kept += std::exp(lq);
      q_log_q_kept += std::exp(lq) * lq;
    }
    const double p_tail = base.tail, q_tail = 1.0 - q_kept;
    if (p_tail > 0 && q_tail > 1e-12) {
      const double p_log_p_tail = std::min(0.0, -static_cast<double>(base.entropy) - p_log_p_kept);
      const double q_log_q_tail = -row_entropy(logits, s.log_norm) - q_log_q_kept;
      kld += p_log_p_tail - p_tail * (q_log_q_tail / q_tail);
    }
  } else if (base.sparse) {
    for (size_t k = 0; k < base.ids.size(); ++k) term(base.ids[k], base.codes[k]);
  } else {
    for (size_t i = 0; i < base.codes.size(); ++i)
      if (base.codes[i] != 0) term(i, base.codes[i]);
  }
  r.kld = kld;
  return r;
}

}  // namespace pagoda
