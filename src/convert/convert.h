// `pagoda convert`: a Hugging Face model folder (config.json, *.safetensors,
// tokenizer.json, tokenizer_config.json, a sentence-transformers pooling config) to one
// GGUF file with the metadata keys and tensor names llama.cpp's converter writes. The
// whole output is planned first (every tensor's name, shape, type and source, every key)
// so anything unsupported fails before a byte is written; then the GGUF writer streams
// the tensors, each decoded from the mapped checkpoint, transformed and encoded when the
// writer asks for it, so memory stays near the largest tensor (as floats) rather than
// the model. One call at a time per output file; the matrix encoding runs on the pool.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "convert/hf_arch.h"
#include "tensor/dtype.h"

namespace pagoda {

class ThreadPool;

struct ConvertOptions {
  std::string hf_dir;
  std::string output;
  std::string type = "auto";  // output_type.h: parse_convert_type
  std::string name;           // general.name; empty: the folder's name
};

struct PlannedTensor {
  std::string name;            // GGUF name
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the row length
  DType type = DType::F32;
  const SafetensorsTensor* source = nullptr;  // nullptr: `generated`
  TensorMapping map;
  std::vector<float> generated;
  size_t out_bytes = 0;
};

struct ConvertPlan {
  const HfArch* arch = nullptr;
  DType target = DType::F16;
  std::vector<PlannedTensor> tensors;  // in the checkpoint's order, generated ones last
  std::vector<std::string> notes;      // fallbacks and dropped tensors, for the user
  size_t in_bytes = 0, out_bytes = 0;
};

// Maps every checkpoint tensor through the architecture and checks shapes and types.
Result<ConvertPlan> plan_conversion(const ConvertContext& c, const HfArch& arch, const HfVocab& vocab, DType target);

// The float values of one planned tensor, after the mapping's transform, into `out`
// (rows x row length in GGUF's order; resized).
Status tensor_values(const PlannedTensor& t, ThreadPool& pool, std::vector<float>& out);

struct ConvertSummary {
  std::string arch;
  DType target = DType::F16;
  size_t tensors = 0, in_bytes = 0, out_bytes = 0;
};

// `progress` gets one line per tensor written (and the notes before the first).
Result<ConvertSummary> convert_hf_model(const ConvertOptions& o, ThreadPool& pool,
                                        const std::function<void(const std::string&)>& progress);

}  // namespace pagoda
