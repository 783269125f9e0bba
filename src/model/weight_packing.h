// Load-time repacking of a model's matrices into the 16-row panels of
// src/kernels/matmul/packed_weights.h, where this machine has kernels for them (Q4_0, Q5_0,
// Q8_0 and Q4_K on AVX-512 VNNI; PAGODA_REPACK=0 turns it off). Panels take the bytes of their
// rows (Q4_K 2.8% more); the file's pages of a repacked matrix are dropped from the
// resident set as it is packed, so memory stays about the model's size during the load and
// after it (a tied embedding table's pages too: Model::embed reads its rows and lets them
// go again).
#pragma once

#include <cstddef>

#include "base/thread_pool.h"

namespace pagoda {

class GgufFile;
struct ModelWeights;

struct PackingReport {
  int matrices = 0;
  size_t bytes = 0;               // of the panels
  size_t dropped_file_bytes = 0;  // file pages of packed matrices let go
};

// What pack_model_weights would do to w on this machine, without doing it (the memory
// `pagoda plan` predicts). Costs a pass over the views and the file's tensor table.
// split: w holds this process's rows of matrices split over processes, whose file pages
// may go once packed (no one here reads the other rows).
PackingReport plan_packing(const GgufFile& f, const ModelWeights& w, bool split = false);

// What w's matrices keep resident once packed as pack_model_weights would: the panels of a
// packed matrix plus its file pages that cannot go, the file pages of one left row-major
// (read at every step). `pagoda plan` sizes a rank of a split model by the difference
// between the whole model's weights and the rank's (model/parallel.h).
size_t matrix_resident_bytes(const GgufFile& f, const ModelWeights& w, bool split = false);

// Repacks what pays in w (views into f's mapping). A matrix whose panels find no memory
// stays row-major (with a warning): loading never fails here.
PackingReport pack_model_weights(const GgufFile& f, ModelWeights& w, ThreadPool& pool, bool split = false);

}  // namespace pagoda
