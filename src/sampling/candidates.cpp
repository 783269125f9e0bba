#include "sampling/candidates.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pagoda {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Scans go 16 logits at a time: a block is tested with branch-free comparisons that the
// compiler vectorizes, and only blocks holding a possible winner take the scalar path.
// Once top-k's threshold has risen, almost every block is skipped.
constexpr size_t kBlock = 16;

bool any_above(const float* x, float threshold) {
  int any = 0;
  for (size_t j = 0; j < kBlock; ++j) any |= x[j] > threshold;
  return any != 0;
}

}  // namespace

float max_logit(std::span<const float> logits) {
  float lanes[kBlock];
  std::fill(lanes, lanes + kBlock, kNegInf);
  size_t i = 0;
  for (; i + kBlock <= logits.size(); i += kBlock) {
    for (size_t j = 0; j < kBlock; ++j) {
      lanes[j] = logits[i + j] > lanes[j] ? logits[i + j] : lanes[j];
    }
  }
  float best = kNegInf;
  for (; i < logits.size(); ++i) best = logits[i] > best ? logits[i] : best;
  for (float l : lanes) best = l > best ? l : best;
  return best;
}

size_t select_top_k(std::span<const float> logits, size_t k, std::vector<TokenLogit>& buf) {
  const size_t n_vocab = logits.size();
  k = std::min(k, n_vocab);
  if (k == 0) return 0;
  // Candidates gather in buf until it is full, then the best k are kept and the k-th
  // logit becomes the bar for later tokens. The slack above k bounds how often that
  // partition runs: for random order about k * ln(V / k) tokens ever pass the bar.
  const size_t cap = std::min(n_vocab, std::max(2 * k, k + 256));
  if (buf.size() < cap) buf.resize(cap);
  TokenLogit* out = buf.data();
  size_t n = 0;
  // Strictly greater: a later token equal to the bar has a higher id, so it loses the
  // tie to the k-th token already held. Starting at -inf keeps masked tokens out.
  float bar = kNegInf;
  auto take = [&](size_t i) {
    const float l = logits[i];
    if (!(l > bar)) return;
    out[n++] = {static_cast<int32_t>(i), l};
    if (n == cap && cap > k) {
      std::nth_element(out, out + (k - 1), out + n, better);
      n = k;
      bar = out[k - 1].logit;
    }
  };
  size_t i = 0;
  for (; i + kBlock <= n_vocab; i += kBlock) {
    if (!any_above(logits.data() + i, bar)) continue;
    for (size_t j = 0; j < kBlock; ++j) take(i + j);
  }
  for (; i < n_vocab; ++i) take(i);
  if (n > k) {
    std::nth_element(out, out + (k - 1), out + n, better);
    n = k;
  }
  std::sort(out, out + n, better);
  return n;
}

size_t collect_at_least(std::span<const float> logits, float threshold, TokenLogit* out) {
  // Raising -inf to the lowest finite float keeps masked tokens out without a second test.
  threshold = std::max(threshold, std::numeric_limits<float>::lowest());
  size_t n = 0;
  size_t i = 0;
  const float below = std::nextafter(threshold, kNegInf);
  for (; i + kBlock <= logits.size(); i += kBlock) {
    if (!any_above(logits.data() + i, below)) continue;
    for (size_t j = 0; j < kBlock; ++j) {
      if (logits[i + j] >= threshold) out[n++] = {static_cast<int32_t>(i + j), logits[i + j]};
    }
  }
  for (; i < logits.size(); ++i) {
    if (logits[i] >= threshold) out[n++] = {static_cast<int32_t>(i), logits[i]};
  }
  return n;
}

void sort_best_first(std::span<TokenLogit> tokens) {
  std::sort(tokens.begin(), tokens.end(), better);
}

}  // namespace pagoda
