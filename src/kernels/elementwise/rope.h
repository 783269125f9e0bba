// Rotary position embedding applied in place to one token's heads. Two pair layouts:
// kNorm rotates adjacent pairs (x[2i], x[2i+1]) as GGUF "llama" models expect (their
// Q/K rows were permuted at conversion); kNeox rotates (x[i], x[i + rot/2]) as Qwen2 and
// Gemma use. Only the first `rot_dims` of each head rotate. The angles are computed in
// ggml's order (pos * base^(-2i/rot), divided by the pair's factor, times freq_scale), so
// they round as llama.cpp's do.
#pragma once

#include <cstdint>

namespace pagoda {

enum class RopeLayout { kNorm, kNeox };

struct RopeParams {
  RopeLayout layout = RopeLayout::kNorm;
  int32_t rot_dims = 0;      // <= head_dim, even
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // linear scaling: position multiplied by this
  // rot_dims / 2 divisors of the pairs' frequencies, or null (Llama 3.1's rope_freqs
  // tensor: low frequencies stretched for long context).
  const float* freq_factors = nullptr;
  // YaRN (ggml's rope_yarn): pairs below corr_dims[0] keep their extrapolated angle,
  // pairs above corr_dims[1] take the interpolated one (freq_scale), a ramp mixes the
  // rest (times ext_factor; 0 = no YaRN). attn_factor scales cos and sin (YaRN's mscale).
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float corr_dims[2] = {0.0f, 0.0f};
};

// llama.cpp's YaRN correction range for a rotation of n_dims over n_ctx_orig positions.
void rope_yarn_corr_dims(int32_t n_dims, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                         float dims[2]);

// x: n_heads * head_dim floats of one token at position pos.
void rope_apply(float* x, int32_t n_heads, int32_t head_dim, int32_t pos, const RopeParams& p);
// A token's query and key heads at once (k may be null): the angles, which depend only on
// the position, are computed once for both.
void rope_apply(float* q, int32_t n_q_heads, float* k, int32_t n_k_heads, int32_t head_dim, int32_t pos,
                const RopeParams& p);

}  // namespace pagoda
