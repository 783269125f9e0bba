// Memory of a model run by the engine, predicted before it runs: what `pagoda plan` prints
// and what `pagoda doctor` checks a setup against. Every part comes from the function the
// engine or the loader itself sizes with (Engine::kv_budget, plan_packing,
// Model::scratch_bytes, Engine::scratch_bytes), so the prediction and the engine cannot
// drift apart; only the process's own baseline (code, libraries, allocator) is a measured
// constant.
//
// Cost: one pass over the file's tensor table and the model's bound views; no weight is
// read. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "engine/engine.h"

namespace pagoda {

class GgufFile;
class Model;

// Resident memory of `pagoda` with no model loaded (binary, shared libraries, allocator
// arenas, thread stacks touched), measured on Debian 12 x86-64 (bench/plan_accuracy.py).
inline constexpr size_t kRuntimeBaselineBytes = size_t{24} << 20;

struct MemoryPlan {
  size_t weights_file = 0;      // every tensor as stored in the file
  size_t weights_resident = 0;  // in memory while running: file pages read, panels, converted tensors
  size_t packed = 0;            // of which repacked panels (model/weight_packing.h)
  int packed_matrices = 0;
  size_t dropped = 0;           // file pages of packed matrices let go
  size_t embedding_lookup = 0;  // an untied token_embd: looked up by row, its pages mostly never read
  size_t converted = 0;         // 1-D tensors kept as floats
  KvBudget kv;
  size_t model_scratch = 0;     // activations of the largest step
  size_t engine_scratch = 0;    // logits rows
  size_t runtime = kRuntimeBaselineBytes;
  size_t total() const { return weights_resident + kv.bytes + model_scratch + engine_scratch + runtime; }
};

// `model` is loaded from `file` without repacking (Model::load(..., repack=false));
// packing is predicted for this machine's kernels. `available`: the memory the engine
// would see (0: no cap on the KV budget).
Result<MemoryPlan> plan_memory(const GgufFile& file, const Model& model, const EngineConfig& config,
                               size_t available);

}  // namespace pagoda
