// Random-weight GGUF models of any supported architecture, size and tensor format, for
// tests (tiny) and benchmarks (1B- and 7B-shaped; decode speed does not depend on the
// values). Weights come from a counter-based generator seeded per tensor row, so the same
// spec gives the same file and rows are produced in parallel. The vocabulary is
// SentencePiece-style (three specials, 256 byte-fallback tokens, letters, then "[i]"
// fillers) so any text tokenizes and llama.cpp loads the file too.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "tensor/dtype.h"

namespace pagoda {

struct RandomModelSpec {
  std::string arch = "llama";  // a registered architecture (model/arch_spec.h)
  DType type = DType::F32;     // format of the 2-D weights; norms and biases stay F32.
                               // I8 means W8A8 (I8 quants + F32 row scales, quant/w8a8.h)
  int32_t dim = 64;
  int32_t layers = 2;
  int32_t heads = 4;
  int32_t kv_heads = 2;
  int32_t head_dim = 0;        // 0: dim / heads
  int32_t rope_dims = 0;       // rope.dimension_count: the rotated part of a head (0: all of it)
  int32_t ff = 128;
  int32_t vocab = 512;
  int32_t ctx = 2048;
  int32_t sliding_window = 16; // architectures with sliding-window layers
  // olmo2 only: > 0 writes OLMo 3's sliding window (sliding_window) with every
  // swa_pattern-th layer global; 0: OLMo 2, every layer global.
  int32_t swa_pattern = 0;
  bool rope_freqs = false;     // write a rope_freqs.weight tensor (Llama 3.1's RoPE factors)
  std::string rope_scaling;    // "", "linear" or "yarn": rope.scaling.type with the factor below
  float rope_factor = 4.0f;
  int32_t rope_orig_ctx = 64;  // rope.scaling.original_context_length (YaRN, LongRoPE)
  // LongRoPE (architectures that bind it: phi3): rope_factors_long / short.weight,
  // rope.scaling.original_context_length = rope_orig_ctx and Phi-3's attention factor
  // sqrt(1 + ln(ctx / orig) / ln(orig)).
  bool longrope = false;
  // Mixture of experts (architectures whose ArchSpec::moe allows it): experts per layer
  // and per token (0 experts: a dense FFN; an architecture that requires experts gets 4,
  // 2 per token), each expert's FFN width (0: ff) and the shared expert's (qwen2moe; 0: ff).
  int32_t experts = 0;
  int32_t experts_used = 0;
  int32_t expert_ff = 0;
  int32_t shared_expert_ff = 0;
  // > 0: the router prefers low expert ids, by up to about this much logit (the token
  // embeddings get a common offset the router rows lean toward), so expert load is uneven.
  float router_skew = 0.0f;
  // > 0 (encoders): a cross-encoder's classification head of this many outputs (cls.* and
  // cls.output.*, llama.cpp's names) and pooling_type rank.
  int32_t classifier_outputs = 0;
  uint64_t seed = 42;
};

Status write_random_model(const RandomModelSpec& spec, const std::string& path);

}  // namespace pagoda
