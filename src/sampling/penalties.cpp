#include "sampling/penalties.h"

#include <algorithm>

namespace pagoda {

void apply_penalties(std::span<float> logits, std::span<const int32_t> history,
                     const SamplingParams& params, std::vector<int32_t>& scratch) {
  const bool any = params.repeat_penalty != 1.0f || params.frequency_penalty != 0.0f ||
                   params.presence_penalty != 0.0f;
  if (!any || params.repeat_last_n == 0 || history.empty()) return;
  const size_t window = params.repeat_last_n < 0
                            ? history.size()
                            : std::min(history.size(), static_cast<size_t>(params.repeat_last_n));
  // Sorting a copy of the window groups repeats into runs. The window is short (64 by
  // default), and unlike a per-vocabulary count table this costs nothing per sequence.
  const auto recent = history.last(window);
  scratch.assign(recent.begin(), recent.end());
  std::sort(scratch.begin(), scratch.end());
  const auto n_vocab = static_cast<int64_t>(logits.size());
  for (size_t i = 0; i < scratch.size();) {
    const int32_t token = scratch[i];
    size_t j = i + 1;
    while (j < scratch.size() && scratch[j] == token) ++j;
    const auto count = static_cast<float>(j - i);
    i = j;
    if (token < 0 || token >= n_vocab) continue;
    float& l = logits[static_cast<size_t>(token)];
    if (params.repeat_penalty != 1.0f) {
      l = l > 0 ? l / params.repeat_penalty : l * params.repeat_penalty;
    }
    l -= count * params.frequency_penalty + params.presence_penalty;
  }
}

}  // namespace pagoda
