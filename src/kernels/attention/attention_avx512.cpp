// avx512 body of attention_causal (attention_body.h over 16-float vectors). Compiled for
// avx512 only and called only when the CPU has it.
#include "kernels/simd/simd_intrinsics.h"

#include "kernels/simd/vec_avx512.h"
#include "kernels/attention/attention_body.h"

namespace pagoda::attn {

void attend_avx512(const Unit& u) {
  if (u.i8) Attend<simd::V512, true>::run(u);
  else Attend<simd::V512, false>::run(u);
}

}  // namespace pagoda::attn
