// Embedding vectors as clients want them: normalized as llama.cpp's --embd-normalize
// numbers the norms (-1 none, 0 scaled so the largest |value| is 32760, as int16 output
// wants, 1 taxicab, 2 Euclidean, p > 2 the p-norm). A pure function, O(n).
#pragma once

#include <span>

#include "base/status.h"

namespace pagoda {

// Divides v by its norm of kind `norm` (a zero vector stays zero). Fails on norm < -1.
Status normalize_embedding(std::span<float> v, int norm);

}  // namespace pagoda
