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
  if (base.sparse) {
    for (size_t k = 0; k < base.ids.size(); ++k) term(base.ids[k], base.codes[k]);
  } else {
    for (size_t i = 0; i < base.codes.size(); ++i)
      if (base.codes[i] != 0) term(i, base.codes[i]);
  }
  r.kld = kld;
  return r;
}

}  // namespace pagoda
