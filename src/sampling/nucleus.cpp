#include "sampling/nucleus.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

#include "sampling/fast_exp.h"

namespace pagoda {
namespace {

// Buckets 1/64 nat wide cover gaps of 32 nats below the best logit; the last one takes
// everything further down, whose combined mass is at most V * e^-32 of the best token's.
// 2048 doubles (16 KB) stay in L1 while the histogram is built.
constexpr int kBuckets = 2048;
constexpr float kPerNat = 64.0f;

// Pass 1: each token's weight e^(logit - max) and mass bucket, and the normalizer. Both
// are computed together in one loop the compiler vectorizes (hence the bucket's clamp on
// the bit pattern: see exp_nonpositive); the scatter into the histogram cannot be, so it
// is a separate, short loop.
double weigh_and_bucket(std::span<const float> logits, float max, float* weight,
                        uint16_t* bucket) {
  constexpr int kLanes = 8;
  constexpr uint32_t kLastBucket = std::bit_cast<uint32_t>(static_cast<float>(kBuckets - 1));
  auto one = [&](size_t i) {
    const float e = exp_nonpositive(logits[i] - max);
    weight[i] = e;
    // The gap is >= 0, or +inf/NaN; for those, a larger bit pattern is a larger value.
    const uint32_t gap = std::bit_cast<uint32_t>((max - logits[i]) * kPerNat);
    bucket[i] = static_cast<uint16_t>(
        static_cast<int32_t>(std::bit_cast<float>(std::min(gap, kLastBucket))));
    return e;
  };
  const size_t n = logits.size();
  double z = 0;
  size_t i = 0;
  for (; i + kExpBlock <= n; i += kExpBlock) {
    float acc[kLanes] = {};
    for (size_t j = i; j < i + kExpBlock; j += kLanes) {
      for (int k = 0; k < kLanes; ++k) acc[k] += one(j + k);
    }
    for (float a : acc) z += a;
  }
  for (; i < n; ++i) z += one(i);
  return z;
}

}  // namespace

size_t top_p_nucleus(std::span<const float> logits, float max, float p, float floor,
                     TokenLogit* out, SamplerScratch& scratch) {
  const size_t n_vocab = logits.size();
  if (scratch.weights.size() < n_vocab) scratch.weights.resize(n_vocab);
  if (scratch.buckets.size() < n_vocab) scratch.buckets.resize(n_vocab);
  const float* weight = scratch.weights.data();
  const uint16_t* bucket = scratch.buckets.data();
  const double z = weigh_and_bucket(logits, max, scratch.weights.data(), scratch.buckets.data());

  // Pass 2: mass per bucket, summed in double so that the bucket sums and the walk
  // below agree to far better than any probability that matters.
  std::array<double, kBuckets> mass{};
  for (size_t i = 0; i < n_vocab; ++i) mass[bucket[i]] += weight[i];

  // The band is the bucket where the running mass reaches p; all before it are in.
  const double target = static_cast<double>(p) * z;
  double above = 0;
  int band = 0;
  while (band < kBuckets - 1 && above + mass[band] < target) above += mass[band++];

  // Pass 3: tokens above the band from the front of `out`, the band from the back.
  floor = std::max(floor, std::numeric_limits<float>::lowest());  // never -inf tokens
  size_t n_in = 0;
  size_t band_begin = n_vocab;
  for (size_t i = 0; i < n_vocab; ++i) {
    if (bucket[i] > band || !(logits[i] >= floor)) continue;
    const TokenLogit t{static_cast<int32_t>(i), logits[i]};
    if (bucket[i] < band) {
      out[n_in++] = t;
    } else {
      out[--band_begin] = t;
    }
  }
  // The band's best-first prefix that brings the mass to p. min-p's floor can only
  // shorten the band from below, so the walk stays exact; when the floor stops it
  // early, everything that is left stays.
  const std::span<TokenLogit> band_tokens(out + band_begin, n_vocab - band_begin);
  sort_best_first(band_tokens);
  size_t keep = band_tokens.size();
  double cum = above;
  for (size_t i = 0; i < band_tokens.size(); ++i) {
    cum += weight[band_tokens[i].id];
    if (cum >= target) {
      keep = i + 1;
      break;
    }
  }
  if (band_begin != n_in) {
    std::copy(band_tokens.begin(), band_tokens.begin() + static_cast<ptrdiff_t>(keep), out + n_in);
  }
  return n_in + keep;
}

}  // namespace pagoda
