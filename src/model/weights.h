// Weight tensors of a model bound by name from a GGUF file, with shapes and types checked
// against the config at load time. Matrices stay in the file's mapping (zero copy);
// small 1-D tensors (norms, biases) are copied out as float (converted where stored
// otherwise), so no step reads them from the file. Absent optional tensors are empty views / null pointers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "tensor/weight_view.h"

namespace pagoda {

class GgufFile;
struct GgufTensor;

struct LayerWeights {
  const float* attn_norm = nullptr;    // null: no pre-norm, attention reads the residual (OLMo 2)
  const float* attn_norm_b = nullptr;  // LayerNorm's bias (StarCoder2)
  WeightView wq, wk, wv, wo;  // row ranges of one attn_qkv matrix when the file fuses them
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* bo = nullptr;
  const float* q_norm = nullptr;  // RMSNorm of Q and K, per head (Gemma 3) or whole rows (OLMo 2)
  const float* k_norm = nullptr;
  const float* post_attn_norm = nullptr;  // norms after attention and FFN (Gemma, OLMo 2)
  const float* ffn_norm = nullptr;    // null: no pre-norm (OLMo 2)
  const float* ffn_norm_b = nullptr;
  WeightView gate, up, down;  // gate and up: the two halves of ffn_up when it holds both; no gate: ungated
  const float* b_gate = nullptr;
  const float* b_up = nullptr;
  const float* b_down = nullptr;
  const float* post_ffw_norm = nullptr;
  // LayerNorms of the residual stream after the attention's and the FFN's add (BERT's
  // attn_output_norm and layer_output_norm), with their biases.
  const float* attn_out_norm = nullptr;
  const float* attn_out_norm_b = nullptr;
  const float* layer_out_norm = nullptr;
  const float* layer_out_norm_b = nullptr;
  // A mixture-of-experts FFN (ModelConfig::is_moe) in place of gate/up/down: the router
  // (ffn_gate_inp, n_expert rows), each expert's matrices (views into the 3-D
  // ffn_{gate,up,down}_exps tensors, one per expert) and the shared expert with its
  // sigmoid gate vector (Qwen2-MoE; empty / null otherwise).
  WeightView router;
  std::vector<WeightView> gate_exps, up_exps, down_exps;
  WeightView gate_shexp, up_shexp, down_shexp;
  const float* shexp_gate = nullptr;
};

struct ModelWeights {
  WeightView tok_embd;
  const float* output_norm = nullptr;
  const float* output_norm_b = nullptr;  // LayerNorm's bias (StarCoder2)
  WeightView output;  // equals tok_embd when the embeddings are tied; empty without an output head
  // Learned positions (BERT): position_embd's row per position, token_types' rows
  // (ModelConfig::n_token_types of n_embd, copied as float), and the LayerNorm of the sum
  // (token_embd_norm).
  WeightView pos_embd;
  const float* type_embd = nullptr;
  const float* embd_norm = nullptr;
  const float* embd_norm_b = nullptr;
  // A cross-encoder's classification head (rank pooling), as llama.cpp names it: cls, the
  // pooler's n_embd x n_embd dense layer followed by tanh (absent in some rerankers), and
  // cls.output, the classifier's n_cls_out x n_embd projection; biases optional.
  WeightView cls, cls_out;
  const float* cls_b = nullptr;
  const float* cls_out_b = nullptr;
  const float* rope_freqs = nullptr;  // rope_freqs.weight (Llama 3.1+), rot_dims / 2 factors
  // LongRoPE's factors (Phi-3), rot_dims / 2 each, or null: Model::set_context_length
  // picks one of them.
  const float* rope_long = nullptr;
  const float* rope_short = nullptr;
  std::vector<LayerWeights> layers;
  std::vector<std::unique_ptr<float[]>> owned;  // converted 1-D tensors
  std::vector<AlignedBuffer> packed;            // repacked matrices (weight_packing.h)
};

// Rows [r0, r0 + n) of w (a view of the same memory; W8A8 row scales follow).
WeightView weight_rows(const WeightView& w, int64_t r0, int64_t n);

// Looks tensors up by name and checks them; every failure names the file and tensor.
class WeightBinder {
 public:
  WeightBinder(const GgufFile& file, ModelWeights& out) : file_(file), out_(out) {}
  // A [rows x cols] matrix (GGUF shape {cols, rows}); an I8 one is W8A8 and needs its
  // F32 row scales under name + kW8A8ScaleSuffix (src/quant/w8a8.h).
  Result<WeightView> matrix(const std::string& name, int64_t rows, int64_t cols, bool required);
  // The n_expert matrices of a 3-D expert tensor (GGUF shape {cols, rows, n_expert}), each
  // [rows x cols], as views into it.
  Result<std::vector<WeightView>> experts(const std::string& name, int64_t n_expert, int64_t rows, int64_t cols);
  // A vector of n values as float.
  Result<const float*> vector(const std::string& name, int64_t n, bool required);
  bool has(const std::string& name) const;

 private:
  Result<WeightView> w8a8_matrix(const GgufTensor& t, int64_t rows, int64_t cols);

  const GgufFile& file_;
  ModelWeights& out_;
};

}  // namespace pagoda
