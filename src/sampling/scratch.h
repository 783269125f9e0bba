// Working space of one Sampler. Each buffer grows on first use to what the chain's path
// needs and is reused after, so a decode step in steady state allocates nothing. With
// top-k on (the default) that is a few thousand entries; the paths without top-k need
// about 14 bytes per vocabulary entry (3.7 MB for a 262k vocabulary).
#pragma once

#include <cstdint>
#include <vector>

#include "sampling/candidates.h"

namespace pagoda {

struct SamplerScratch {
  std::vector<int32_t> window;     // penalty window, sorted
  std::vector<TokenLogit> tokens;  // filter survivors
  std::vector<float> weights;      // e^(logit - max) per token or per survivor
  std::vector<double> block_sums;  // sums of weights per kExpBlock run
  std::vector<uint16_t> buckets;   // top-p's mass bucket per token
};

}  // namespace pagoda
