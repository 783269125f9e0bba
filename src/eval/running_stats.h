// The statistics `pagoda perplexity` reports, computed the way llama-perplexity computes
// them so the two tools' numbers line up: a mean with its standard error from running
// sums, PPL = e^(mean NLL) with the error carried through the exponential, a proportion
// with its binomial error, and linearly interpolated quantiles.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

namespace pagoda {

// Mean and standard error of the mean of a stream of values: sqrt((E[x^2] - E[x]^2) /
// (n - 1)) from sums in double (llama.cpp's formula; one pass, no stored values).
class RunningMean {
 public:
  void add(double x) {
    ++n_;
    sum_ += x;
    sum2_ += x * x;
  }
  void merge(const RunningMean& o) {
    n_ += o.n_;
    sum_ += o.sum_;
    sum2_ += o.sum2_;
  }
  int64_t count() const { return n_; }
  double mean() const { return n_ > 0 ? sum_ / static_cast<double>(n_) : 0.0; }
  // 0 with fewer than two values, or when rounding makes the variance non-positive.
  double standard_error() const {
    if (n_ < 2) return 0.0;
    const double m = mean();
    const double var = sum2_ / static_cast<double>(n_) - m * m;
    return var > 0 ? std::sqrt(var / static_cast<double>(n_ - 1)) : 0.0;
  }

 private:
  int64_t n_ = 0;
  double sum_ = 0, sum2_ = 0;
};

struct ValueWithError {
  double value = 0, error = 0;
};

// Perplexity from the running mean of per-token NLLs: e^mean, error e^mean * SE(mean).
inline ValueWithError perplexity_of(const RunningMean& nll) {
  const double ppl = std::exp(nll.mean());
  return {ppl, ppl * nll.standard_error()};
}

// A proportion hits / n with its binomial standard error sqrt(p (1 - p) / (n - 1)).
ValueWithError proportion(int64_t hits, int64_t n);

// The `fraction` quantile of ascending values, interpolating linearly between the two
// nearest (position fraction * (n - 1)); fraction 0.5 is the median. 0 when empty.
double quantile_sorted(std::span<const float> sorted, double fraction);

}  // namespace pagoda
