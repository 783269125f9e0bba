// The per-architecture parts of loading: config defaults that differ from the common
// keys, and which tensors each layer has. The forward pass itself is shared
// (decoder.cpp): every supported family is a pre-norm decoder whose optional pieces
// (QKV bias, QK-norm, post-norms) are present exactly when the architecture binds them.
#pragma once

#include "base/status.h"
#include "model/config.h"
#include "model/weights.h"

namespace pagoda {

class GgufFile;

Status configure_llama(const GgufFile& f, ModelConfig& c);
Status configure_qwen2(const GgufFile& f, ModelConfig& c);
Status configure_gemma3(const GgufFile& f, ModelConfig& c);

// Binds the tensors every architecture has plus the optional ones the config asks for.
struct LayerTensorSet {
  bool qkv_bias = false;
  bool qk_norm = false;
  bool post_norms = false;
};
LayerTensorSet layer_tensors(Arch arch);

Status bind_weights(const GgufFile& f, const ModelConfig& c, ModelWeights& w);

}  // namespace pagoda
