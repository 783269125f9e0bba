#include "plan/memory_plan.h"

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/weight_packing.h"

namespace pagoda {

Result<MemoryPlan> plan_memory(const GgufFile& file, const Model& model, const EngineConfig& config,
                               size_t available) {
  MemoryPlan p;
  const ModelWeights& w = model.weights();
  for (const GgufTensor& t : file.tensors()) {
    p.weights_file += t.nbytes;
    if (t.shape.size() == 1 && t.type != DType::F32) p.converted += static_cast<size_t>(t.num_elements()) * sizeof(float);
  }
  const bool tied = w.output.data == w.tok_embd.data;
  if (!tied)
    for (const GgufTensor& t : file.tensors())
      if (t.data == w.tok_embd.data) p.embedding_lookup = t.nbytes;
  const PackingReport packing = plan_packing(file, w);
  p.packed = packing.bytes;
  p.packed_matrices = packing.matrices;
  p.dropped = packing.dropped_file_bytes;
  p.weights_resident = p.weights_file - p.embedding_lookup - p.dropped + p.packed + p.converted;
  auto kv = Engine::kv_budget(model.config(), config, available);
  if (!kv) return kv.status();
  p.kv = *kv;
  p.model_scratch = Model::scratch_bytes(model.config(), config.scheduler.max_num_batched_tokens);
  p.engine_scratch = Engine::scratch_bytes(model.config(), config);
  return p;
}

}  // namespace pagoda
