#include "sampling/candidates.h"
#include "sampling/sampler.h"

namespace pagoda {

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) return -1;
  // Two scans that vectorize beat one with a compare-and-branch per entry: the largest
  // value, then its first position, 16 entries at a time.
  const float best = max_logit(logits);
  constexpr size_t kBlock = 16;
  size_t i = 0;
  for (; i + kBlock <= logits.size(); i += kBlock) {
    int hit = 0;
    for (size_t j = 0; j < kBlock; ++j) hit |= logits[i + j] == best;
    if (hit) break;
  }
  for (; i < logits.size(); ++i) {
    if (logits[i] == best) return static_cast<int32_t>(i);
  }
  return 0;  // no entry compares: all NaN
}

}  // namespace pagoda
