// The truncation filters of the chain (top-p, min-p), as cuts on a short candidate list
// sorted best first (top-p over a whole vocabulary is nucleus.h).
// Probabilities are e^(logit - max) / z; callers pass the max and the normalizer z over
// whatever set the filter sees (after top-k, or the whole vocabulary), so each filter
// matches llama.cpp's, which renormalizes over the current candidates.
#pragma once

#include <cstddef>
#include <span>

#include "sampling/candidates.h"

namespace pagoda {

// How many of `sorted` make the smallest prefix whose probability reaches p (at least
// one). All of them when the list runs out first, as when a caller already cut it.
size_t top_p_count(std::span<const TokenLogit> sorted, float p, float max, double z);

// How many of `sorted` have probability >= min_p times the best one's (at least one).
size_t min_p_count(std::span<const TokenLogit> sorted, float min_p, float max);

// The lowest logit min-p keeps: p >= min_p * p_max is a bound on the logit gap, so no
// probabilities are needed. Never above `max`, so the best token always stays.
float min_p_floor(float max, float min_p);

}  // namespace pagoda
