// Top-p over a whole vocabulary, for when no top-k has cut it down first. The nucleus
// of a flat distribution can hold most of the vocabulary, so sorting it (as a plain
// implementation does) costs tens of milliseconds at 262k entries. Instead a histogram
// of probability mass by logit finds the one narrow band of logits where the cumulative
// mass crosses p: everything above the band is in, everything below is out, and only
// the band (a small fraction of the vocabulary) is sorted.
#pragma once

#include <cstddef>
#include <span>

#include "sampling/candidates.h"
#include "sampling/scratch.h"

namespace pagoda {

// Writes to out (room for logits.size() entries) the smallest best-first set of tokens
// whose probability reaches p, keeping only those with logit >= floor (min-p's cut; pass
// -inf for none), and returns the count; always at least one. `max` is the largest logit.
// The survivors come in no particular order. Cost: three scans of the vocabulary and a
// sort of the band.
size_t top_p_nucleus(std::span<const float> logits, float max, float p, float floor,
                     TokenLogit* out, SamplerScratch& scratch);

}  // namespace pagoda
