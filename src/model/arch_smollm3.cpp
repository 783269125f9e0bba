// SmolLM3: Llama's layout where every fourth layer (layers 3, 7, 11, ...) applies no RoPE
// at all (NoPE), as llama.cpp's smollm3 graph fixes it (n_no_rope_layer_step = 4); the
// output matrix is tied to the embeddings.
#include "model/arch_spec.h"

namespace pagoda {

extern const ArchSpec kArchSmollm3 = {
    .name = "smollm3",
    .configure = [](const GgufFile&, ModelConfig& c) {
      constexpr int32_t kNoRopeLayerStep = 4;
      configure_plain_decoder(c, RopeLayout::kNorm);
      for (int32_t l = 0; l < c.n_layer; ++l) c.layer_skips_rope[l] = (l + 1) % kNoRopeLayerStep == 0;
      return Status::ok();
    },
    .tied_output = true,
};

}  // namespace pagoda
