#include "plan/memory_plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/parallel.h"
#include "model/weight_packing.h"
#include "kv/kv_layout.h"
#include "base/system_memory.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

Result<MemoryPlan> plan_memory(const GgufFile& file, const Model& model, const EngineConfig& config,
                               size_t available, LoadMemory measured) {
  MemoryPlan p;
  p.metadata = measured.metadata;
  p.tokenizer = measured.tokenizer;
  p.tokenizer_build = std::max(measured.tokenizer, measured.tokenizer_build);
  const ModelWeights& w = model.weights();
  for (const GgufTensor& t : file.tensors()) {
    p.weights_file += t.nbytes;
    // Vectors (norms, biases) are copied out as floats, their file pages let go.
    if (t.shape.size() == 1 || (t.shape.size() == 2 && t.shape[1] == 1)) {
      p.converted += static_cast<size_t>(t.num_elements()) * sizeof(float);
      p.vectors_file += t.nbytes;
    }
  }
  const bool tied = w.output.data == w.tok_embd.data;
  if (!tied)
    for (const GgufTensor& t : file.tensors())
      if (t.data == w.tok_embd.data) p.embedding_lookup = t.nbytes;
  const PackingReport packing = plan_packing(file, w);
  p.packed = packing.bytes;
  p.packed_matrices = packing.matrices;
  p.dropped = packing.dropped_file_bytes;
  p.weights_resident = p.weights_file - p.vectors_file - p.embedding_lookup - p.dropped + p.packed + p.converted;
  auto kv = Engine::kv_budget(model.config(), config, available);
  if (!kv) return kv.status();
  p.kv = *kv;
  p.model_scratch = Model::scratch_bytes(model.config(), config.scheduler.max_num_batched_tokens);
  p.engine_scratch = Engine::scratch_bytes(model.config(), config);
  return p;
}

Result<MemoryPlan> plan_rank_memory(const GgufFile& file, const Model& whole, const Model& rank,
                                    const EngineConfig& config, size_t available, LoadMemory measured) {
  auto p = plan_memory(file, whole, config, available, measured);
  if (!p) return p.status();
  const ParallelSplit& s = rank.split();
  if (!s.tensor_parallel() && !s.pipelined()) return p;
  const PackingReport packing = plan_packing(file, rank.weights(), /*split=*/true);
  p->weights_resident = p->weights_resident - matrix_resident_bytes(file, whole.weights()) +
                        matrix_resident_bytes(file, rank.weights(), /*split=*/true);
  p->packed = packing.bytes;
  p->packed_matrices = packing.matrices;
  p->dropped = packing.dropped_file_bytes;
  const ModelConfig& c = whole.config();
  // Every rank allocates as many blocks as rank 0, of its own heads, for every layer slot,
  // and touches only its stage's layers' slots (KvStorage::prefault).
  const double heads = static_cast<double>(rank.kv_heads_held()) / std::max(1, c.n_head_kv);
  const KvLayout layout = p->kv.shape.layout();
  std::vector<bool> slots(static_cast<size_t>(layout.layers_per_block()), false);
  for (int64_t l = s.layers.begin; l < s.layers.end; ++l) slots[static_cast<size_t>(layout.slot_of(static_cast<int32_t>(l)))] = true;
  const double touched = static_cast<double>(std::count(slots.begin(), slots.end(), true)) /
                         std::max<size_t>(1, slots.size());
  p->kv.bytes = static_cast<size_t>(static_cast<double>(p->kv.bytes) * heads * touched);
  if (!s.root()) p->engine_scratch = 0;
  if (s.tensor_parallel())
    p->model_scratch += Model::tp_scratch_bytes(c, config.scheduler.max_num_batched_tokens);
  return p;
}

nlohmann::json memory_plan_json(const MemoryPlan& m) {
  return {{"weights_file_bytes", m.weights_file},
          {"weights_resident_bytes", m.weights_resident},
          {"packed_bytes", m.packed},
          {"packed_matrices", m.packed_matrices},
          {"dropped_file_bytes", m.dropped},
          {"embedding_lookup_bytes", m.embedding_lookup},
          {"converted_bytes", m.converted},
          {"vectors_file_bytes", m.vectors_file},
          {"kv_bytes", m.kv.bytes},
          {"kv_blocks", m.kv.blocks},
          {"kv_capped", m.kv.capped},
          {"max_model_len", m.kv.max_model_len},
          {"metadata_bytes", m.metadata},
          {"tokenizer_bytes", m.tokenizer},
          {"tokenizer_build_bytes", m.tokenizer_build},
          {"running_bytes", m.running()},
          {"loading_bytes", m.loading()},
          {"model_scratch_bytes", m.model_scratch},
          {"engine_scratch_bytes", m.engine_scratch},
          {"runtime_bytes", m.runtime},
          {"total_bytes", m.total()}};
}

void measure_tokenizer(const GgufFile& file, LoadMemory& out) {
  release_free_heap();  // what the build touches then is new pages, not reused free ones
  const size_t heap0 = heap_in_use_bytes(), anon0 = anonymous_resident_bytes();
  auto tok = Tokenizer::from_gguf(file);
  const size_t heap1 = heap_in_use_bytes(), anon1 = anonymous_resident_bytes();
  if (!tok) return;
  out.tokenizer = heap1 > heap0 ? heap1 - heap0 : 0;
  out.tokenizer_build = anon1 > anon0 ? anon1 - anon0 : 0;
}

}  // namespace pagoda
