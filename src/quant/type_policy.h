// Which format each tensor gets when `pagoda quantize` writes a model of one target type,
// by llama.cpp's rules (llama-quantize --pure, so the files can be compared tensor for
// tensor): only weight matrices are quantized, norms and other small or lookup tensors
// keep their type; `--keep TYPE=REGEX` rules pick another type for the tensors whose
// names they match (first matching rule wins, searched anywhere in the name like
// llama-quantize's --tensor-type); and a tensor whose rows do not split into the type's
// blocks falls back to a 32-value format, or to F16 when even 32 does not divide the row.
// Pure functions of names and shapes; the regexes are compiled once, when parsed.
#pragma once

#include <cstdint>
#include <regex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace pagoda {

// The formats --type and --keep accept: those Pagoda can both write and run.
bool is_quantize_target(DType t);
// W8A8 (int8 weights with row scales, src/quant/w8a8.h) is written as I8 tensors plus
// scale tensors; it is target DType::I8 here and named "W8A8" to users.
std::string_view quantize_type_name(DType t);
// Every accepted name, best first ("F32, F16, ..., W8A8").
std::string quantize_type_names();
// Case-insensitive ("q4_k" is Q4_K, "w8a8" is W8A8). The error lists what is accepted.
Result<DType> parse_quantize_type(std::string_view name);

struct KeepRule {
  DType type = DType::F32;
  std::string pattern;  // as given, for messages
  std::regex regex;
};
// "TYPE=REGEX", e.g. "q8_0=output\.weight|token_embd" (ECMAScript syntax).
Result<KeepRule> parse_keep_rule(std::string_view spec);

// llama.cpp's LLAMA_FTYPE for a file whose weight matrices are all `target`, which is
// what llama-quantize --pure writes as general.file_type (Q4_K is MOSTLY_Q4_K_S = 14).
uint32_t llama_file_type(DType target);

// `--sparsity 2:4`: the 2:4 sparse counterpart of a dense target (Q8_0 -> Q8_0_S24, Q4_0
// -> Q4_0_S24; a sparse type is its own), or an error naming the types that have one.
Result<DType> sparse_counterpart(DType dense);
// The dense format a sparse one expands to (the identity for a dense type).
DType dense_counterpart(DType t);
// The rule `--sparsity` adds after the user's: the token embedding and the output matrix
// stay dense (a lookup table costs one row per token, and pruning the logits' matrix
// costs quality for little speed), as the 2:4 pruning papers leave them.
KeepRule sparse_keeps_dense_rule(DType sparse);

// llama.cpp's rule for what may be quantized: tensors of 2 or more dimensions (trailing
// dimensions of 1 do not count) whose name ends in "weight", except norms, MoE routers,
// position embeddings and the small side tensors of a few architectures.
bool tensor_allows_quantization(std::string_view name, std::span<const int64_t> shape);

// The type a row of row_len values is written in when `wanted` does not fit it: the
// K-quants step down to a 32-value format (Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0; Q5_K ->
// Q5_1; Q6_K -> Q8_0), and anything whose blocks still do not divide the row becomes F16.
// Returns `wanted` when it fits.
DType fallback_type(DType wanted, int64_t row_len);

struct TensorTypeChoice {
  DType type = DType::F32;    // what the tensor is written as
  bool quantizable = false;   // false: not a weight matrix, kept in its source type
  DType wanted = DType::F32;  // the target or the --keep type, before any fallback
  int keep_rule = -1;         // index of the --keep rule that matched, or -1
  bool fell_back() const { return quantizable && type != wanted; }
};

class TypePolicy {
 public:
  TypePolicy(DType target, std::vector<KeepRule> keep) : target_(target), keep_(std::move(keep)) {}
  DType target() const { return target_; }
  const std::vector<KeepRule>& keep_rules() const { return keep_; }
  // shape[0] is the row length (GGUF's ne[0]).
  TensorTypeChoice choose(std::string_view name, std::span<const int64_t> shape, DType source) const;

 private:
  DType target_;
  std::vector<KeepRule> keep_;
};

}  // namespace pagoda
