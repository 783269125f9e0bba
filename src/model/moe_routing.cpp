#include "model/moe_routing.h"

#include <algorithm>

#include "kernels/elementwise/elementwise.h"

namespace pagoda {

void route_token(float* logits, int32_t n_expert, int32_t k, bool norm_weights, int32_t* ids, float* weights) {
  softmax(logits, n_expert);
  // Selection by repeated scans: k is small (2-8) and n_expert at most a few hundred, so
  // this beats a sort and gives the first of equal probabilities, as a stable argsort does.
  for (int32_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < n_expert; ++e) {
      if (std::find(ids, ids + j, e) != ids + j) continue;
      if (best < 0 || logits[e] > logits[best]) best = e;
    }
    ids[j] = best;
    weights[j] = logits[best];
  }
  if (!norm_weights) return;
  float sum = 0.0f;
  for (int32_t j = 0; j < k; ++j) sum += weights[j];
  sum = std::max(sum, 6.103515625e-5f);
  for (int32_t j = 0; j < k; ++j) weights[j] /= sum;
}

}  // namespace pagoda
