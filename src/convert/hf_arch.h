// One Hugging Face architecture's mapping to GGUF: which config.json classes it takes,
// the vocabulary kind, the hyper-parameter keys llama.cpp's converter writes for it, and
// each checkpoint tensor's GGUF name and value change. Each architecture is one file
// (hf_arch_<name>.cpp) listed in hf_arch_registry.cpp, the one place a new one is added.
// The specs are constant data; every function is pure given its inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "convert/hf_config.h"
#include "convert/hf_vocab.h"
#include "convert/safetensors.h"

namespace pagoda {

class GgufWriter;

// What an architecture reads while it plans: the folder, its config and its weights.
struct ConvertContext {
  std::string dir;
  const HfConfig& config;
  const SafetensorsSet& weights;
};

enum class TensorTransform {
  kNone,
  kRopePermute,  // llama.cpp's Q/K row permutation (tensor_transforms.h)
  kAddOne,       // Gemma's norm shift
};

// Where one checkpoint tensor goes.
struct TensorMapping {
  std::string name;  // GGUF name, e.g. "blk.0.attn_q.weight"
  TensorTransform transform = TensorTransform::kNone;
  int32_t permute_heads = 0;  // kRopePermute: the heads the rows split into
  int64_t keep_rows = -1;     // >= 0: only the first keep_rows rows (Gemma's padded embedding)
};

// A tensor computed rather than read (Llama 3's rope_freqs).
struct GeneratedTensor {
  std::string name;
  std::vector<float> values;  // a vector; its GGUF shape is {values.size()}
};

struct HfArch {
  std::string_view gguf_name;                // general.architecture
  std::vector<std::string_view> hf_classes;  // config.json "architectures"[0] values
  HfVocabKind vocab;
  // The "<arch>.*" keys (general.* and tokenizer.* are written by the pipeline); may
  // add to the vocabulary what the architecture owns (BERT's token type count).
  Status (*write_metadata)(const ConvertContext& c, HfVocab& vocab, GgufWriter& w);
  // nullopt: the tensor is left out on purpose (llama.cpp drops it too); an error names
  // a tensor the architecture does not know, so nothing is lost silently.
  Result<std::optional<TensorMapping>> (*map_tensor)(const ConvertContext& c, const HfVocab& vocab,
                                                     std::string_view hf_name);
  Result<std::vector<GeneratedTensor>> (*extra_tensors)(const ConvertContext& c) = nullptr;
};

const std::vector<const HfArch*>& hf_archs();
// The architecture that converts this config.json class, or nullptr.
const HfArch* find_hf_arch(std::string_view hf_class);
// "BertModel, LlamaForCausalLM, ..." for messages.
std::string hf_class_names();

}  // namespace pagoda
