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

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <algorithm>

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
  size_t converted = 0;         // 1-D tensors copied out as floats
  size_t vectors_file = 0;      // their bytes in the file, pages let go after the load
  KvBudget kv;
  size_t metadata = 0;          // the file's parsed metadata (kept: the vocabulary arrays are most of it)
  size_t tokenizer = 0;         // its tables (vocabulary, merges, lookup structures)
  size_t tokenizer_build = 0;   // the heap its build touches, kept and freed (freed at the load's end)
  size_t model_scratch = 0;     // activations of the largest step
  size_t engine_scratch = 0;    // logits rows
  size_t runtime = kRuntimeBaselineBytes;
  // Running: everything the engine holds. Loading: the weights and the tokenizer's build.
  size_t running() const { return weights_resident + kv.bytes + metadata + tokenizer + model_scratch + engine_scratch + runtime; }
  size_t loading() const { return weights_resident + metadata + tokenizer_build + runtime; }
  size_t total() const { return std::max(running(), loading()); }
};

// `model` is loaded from `file` without repacking (Model::load(..., repack=false));
// packing is predicted for this machine's kernels. `available`: the memory the engine
// would see (0: no cap on the KV budget); `measured`: what the file's metadata and the
// tokenizer took when this process built them.
struct LoadMemory {
  size_t metadata = 0;         // heap of the parsed GGUF metadata (its vocabulary arrays)
  size_t tokenizer = 0;        // heap in use once the tokenizer is built
  size_t tokenizer_build = 0;  // anonymous memory its build touched (its peak)
};
Result<MemoryPlan> plan_memory(const GgufFile& file, const Model& model, const EngineConfig& config,
                               size_t available, LoadMemory measured = {});

// One process of a model split over several (--tp/--pp; `rank` loaded with its
// ParallelRank, `whole` without): the whole model's plan with the rank's rows and layers of
// every matrix in place of all of them (its panels, its file pages), the KV of its heads
// and its stage's layers (the pages it prefaults; the other stages' layers are never
// touched), and the logits rows only on world rank 0, the one running the engine. The
// metadata, the tokenizer and the vectors are every rank's in full.
Result<MemoryPlan> plan_rank_memory(const GgufFile& file, const Model& whole, const Model& rank,
                                    const EngineConfig& config, size_t available, LoadMemory measured = {});

// The plan as `plan --json` and `doctor --json` print it (docs/plan.md: "memory").
nlohmann::json memory_plan_json(const MemoryPlan& m);

// The tokenizer parts of LoadMemory, measured by building it (a large vocabulary's
// tables are tens of MiB: Qwen2.5's 151k tokens and merges or Gemma 3's 262k pieces about
// 25 kept, up to twice that while building); zeros without one. Costs the tokenizer's load
// (0.1-0.5 s); call it once, before the process's heap has free pages to reuse.
void measure_tokenizer(const GgufFile& file, LoadMemory& out);

}  // namespace pagoda
