// avx2 body of attention_causal (attention_body.h over 8-float vectors). Compiled for
// avx2 (+FMA, F16C) only and called only when the CPU has it.
#include "kernels/simd/simd_intrinsics.h"

#include "kernels/simd/vec_avx2.h"
#include "kernels/attention/attention_body.h"

namespace pagoda::attn {

void attend_avx2(const Unit& u) {
  if (u.i8) Attend<simd::V256, true>::run(u);
  else Attend<simd::V256, false>::run(u);
}

}  // namespace pagoda::attn
