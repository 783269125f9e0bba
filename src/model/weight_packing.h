// Load-time repacking of a model's matrices into the 16-row panels of
// src/kernels/packed_weights.h, where this machine has kernels for them (Q4_0 and Q8_0
// on AVX-512 VNNI; PAGODA_REPACK=0 turns it off). The panels take the same bytes as the
// rows; the file's pages of a repacked matrix are dropped from the resident set, so
// memory stays about the model's size, except for a tied embedding table, whose rows are
// still looked up and so are kept too.
#pragma once

#include "base/status.h"
#include "base/thread_pool.h"

namespace pagoda {

class GgufFile;
struct ModelWeights;

struct PackingReport {
  int matrices = 0;
  size_t bytes = 0;
};

// Repacks what pays in w (views into f's mapping). Fails only when memory runs out.
Result<PackingReport> pack_model_weights(const GgufFile& f, ModelWeights& w, ThreadPool& pool);

}  // namespace pagoda
