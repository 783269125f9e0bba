// Mixture-of-experts routing of one token, as llama.cpp's build_moe_ffn computes it for
// softmax gating: softmax over the router's logits, the k most probable experts (ties to
// the lower id), their probabilities as weights, optionally divided by their sum (clamped
// below at 2^-14, FP16's smallest normal, as llama.cpp clamps it). Pure and thread-safe;
// O(n_expert * k) per token.
#pragma once

#include <cstdint>

namespace pagoda {

// logits: n_expert values, overwritten with the probabilities. ids, weights: k each, most
// probable first.
void route_token(float* logits, int32_t n_expert, int32_t k, bool norm_weights, int32_t* ids, float* weights);

}  // namespace pagoda
