// The inputs that groups of a layer's linear maps share: Q/K/V read the normed residual,
// the output projection the attention result, gate/up the normed residual again, down
// the activated gate * up. Calibration (AWQ, GPTQ) records activations per input.
#pragma once

#include <cstdint>

namespace pagoda {

enum class LinearInput : int32_t { kAttention, kAttentionOutput, kFfn, kFfnDown };
inline constexpr int32_t kNumLinearInputs = 4;

}  // namespace pagoda
