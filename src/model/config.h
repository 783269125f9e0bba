// Hyper-parameters of a decoder-only transformer, read from GGUF metadata
// ("{arch}.embedding_length", ...) and checked for consistency before any weight is
// touched. One struct covers every architecture; each architecture's ArchSpec
// (model/arch_spec.h) fills the parts that differ (RoPE layout, sliding-window pattern,
// embedding scale).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/elementwise/rope.h"

namespace pagoda {

class GgufFile;
struct ArchSpec;

// The FFN's activation: with a gate (ffn_gate) SwiGLU or GeGLU, act(gate) * up; without
// one (LayerTensorSet::ungated_ffn) act(up), which only GELU is (StarCoder2's MLP).
enum class FfnActivation { kSilu, kGeluTanh };
// The norms of a decoder: RMSNorm (x / rms(x) * w), or LayerNorm ((x - mean) / sd * w + b,
// StarCoder2).
enum class NormKind { kRms, kLayer };
// How a sequence's hidden states become one embedding, numbered as llama.cpp's
// {arch}.pooling_type: the mean over its tokens, the first token's ([CLS]), or the last;
// kRank is a cross-encoder's relevance score instead of a vector: the first token's state
// through the classification head (ModelConfig::n_cls_out values).
enum class Pooling : int8_t { kNone = 0, kMean = 1, kCls = 2, kLast = 3, kRank = 4 };
// "none", "mean", "cls", "last", "rank".
const char* pooling_name(Pooling p);
// The inverse of pooling_name; an unknown name is an error listing the five.
Result<Pooling> pooling_from_name(std::string_view name);

struct ModelConfig {
  const ArchSpec* arch = nullptr;  // the registered architecture (never null once read)
  std::string arch_name;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;      // key/value length per head
  int32_t n_ff = 0;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  float norm_eps = 1e-5f;    // every norm's epsilon (attention.layer_norm_rms_epsilon; LayerNorm's its own key)
  NormKind norm = NormKind::kRms;  // the pre-norms and the output norm (QK-norms and post-norms are RMSNorm)
  float attn_scale = 0.0f;   // multiplies q.k; 1/sqrt(head_dim) unless the arch says otherwise
  float embed_scale = 1.0f;  // multiplies token embeddings (Gemma: sqrt(n_embd))
  float residual_scale = 1.0f;  // multiplies each attention / FFN output before the residual add (Granite)
  float logit_scale = 1.0f;     // the logits are divided by it (Granite)
  float attn_softcap = 0.0f;    // > 0: attention scores become cap * tanh(score / cap) before the softmax (Gemma 2)
  float final_softcap = 0.0f;   // > 0: the logits become cap * tanh(logit / cap) (Gemma 2)
  FfnActivation act = FfnActivation::kSilu;
  RopeParams rope;           // global-attention layers
  RopeParams rope_local;     // sliding-window layers
  int32_t rope_orig_ctx = 0; // rope.scaling.original_context_length (the trained context when absent)
  int32_t sliding_window = 0;
  std::vector<bool> layer_is_local;  // per layer: sliding-window attention
  std::vector<bool> layer_skips_rope;  // per layer: no RoPE at all (SmolLM3's NoPE layers)
  // Mixture of experts (ArchSpec::moe): every layer's FFN is n_expert experts of width
  // n_ff_exp of which each token runs n_expert_used; 0 experts: a dense FFN of n_ff.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  int32_t n_ff_shexp = 0;            // the shared expert's width (0: none)
  bool expert_norm_weights = false;  // the selected probabilities are divided by their sum
  // Whether a token attends only to earlier positions ({arch}.attention.causal, true when
  // absent); false: an encoder (BERT), whose every token sees the whole sequence, which
  // must then run in one forward call from position 0.
  bool causal = true;
  // Whether the model has an output head (logits); an encoder-only embedding model does not.
  bool has_lm_head = true;
  Pooling pooling = Pooling::kNone;  // {arch}.pooling_type: how the file says to pool (kNone: not said)
  // Rows of token_types.weight (BERT's segment embeddings; 0: the model has none). A text
  // pair (BatchSeq::segment_b) needs two.
  int32_t n_token_types = 0;
  // Outputs of the classification head (cls.output.weight's rows; 0: no head), which rank
  // pooling computes: a reranker has one, its relevance logit.
  int32_t n_cls_out = 0;

  bool is_moe() const { return n_expert > 0; }

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
};

// Reads the common keys and validates them, and finds the architecture's spec (whose
// configure() Model::load then runs for the defaults that differ). Fails on an
// architecture that is not registered.
Result<ModelConfig> read_config(const GgufFile& file);

}  // namespace pagoda
