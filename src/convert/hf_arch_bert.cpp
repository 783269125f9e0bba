// BERT (BertModel, BertForMaskedLM): learned position and token-type embeddings,
// post-LayerNorm encoder layers, bidirectional attention. Written as llama.cpp's
// converter writes it: attention.causal = false, the sentence-transformers pooling, the
// WordPiece vocabulary in phantom-space form, and the pooler and masked-LM heads left out
// (an embedding model does not use them).
// BertForSequenceClassification with one label is a cross-encoder (a reranker): its
// pooler (dense + tanh) becomes cls.* and its classifier cls.output.*, llama.cpp's names,
// with pooling_type 4 (rank) and the label in classifier.output_labels. llama.cpp's own
// converter drops the pooler of this class, which Hugging Face's forward does apply;
// both Pagoda and llama.cpp run cls.* (with tanh) when the file has it.
#include <fmt/format.h>

#include <charconv>

#include "base/printable.h"
#include "convert/hf_arch.h"
#include "convert/hf_text_model.h"
#include "gguf/gguf_writer.h"

namespace pagoda {
namespace {

constexpr std::string_view kClassifierClass = "BertForSequenceClassification";

bool is_classifier(const ConvertContext& c) { return c.config.architecture() == kClassifierClass; }

// The classifier's one label (a reranker's relevance logit), from id2label as
// transformers' config reads it; more than one label is a classifier Pagoda cannot serve.
Result<std::string> reranker_label(const ConvertContext& c) {
  const nlohmann::json& j = c.config.raw();
  std::vector<std::string> labels;
  if (const auto it = j.find("id2label"); it != j.end() && it->is_object()) {
    for (const auto& [id, label] : it->items()) labels.push_back(label.is_string() ? label.get<std::string>() : id);
  } else {
    // transformers' default when config.json names neither: two labels.
    const int64_t n = c.config.find_int({"num_labels"}).value_or(2);
    for (int64_t i = 0; i < n && i < 100; ++i) labels.push_back(fmt::format("LABEL_{}", i));
  }
  if (labels.size() != 1)
    return error("{}: {} with {} labels is a classifier, not a reranker: pagoda convert takes cross-encoders with "
                 "one output (num_labels 1, a relevance logit), which /v1/rerank and pagoda rerank serve",
                 c.config.path(), kClassifierClass, labels.size());
  for (std::string_view t : {"pooler.dense.weight", "classifier.weight"})
    if (c.weights.find(t) == nullptr && c.weights.find("bert." + std::string(t)) == nullptr)
      return error("{}: the checkpoint has no {} ({} computes the score from it)", c.dir, t, kClassifierClass);
  return labels[0];
}

Status write_metadata(const ConvertContext& c, HfVocab& vocab, GgufWriter& w) {
  PAGODA_TRY(write_text_model_keys(c, "bert", w));
  w.set_bool("bert.attention.causal", false);
  if (is_classifier(c)) {
    auto label = reranker_label(c);
    if (!label) return label.status();
    w.set_u32("bert.pooling_type", 4);  // llama.cpp's LLAMA_POOLING_TYPE_RANK
    w.set_string_array("bert.classifier.output_labels", {*label});
  } else {
    PAGODA_TRY(write_pooling_type(c, "bert", w));
  }
  auto types = c.config.has("type_vocab_size") ? c.config.require_u32({"type_vocab_size"}) : Result<uint32_t>(1u);
  if (!types) return types.status();
  vocab.token_type_count = *types;
  if (auto pos = c.config.find_string("position_embedding_type"); pos && *pos != "absolute")
    return error("{}: position_embedding_type '{}' is not supported (absolute only)", c.config.path(),
                 printable(*pos, 40));
  return Status::ok();
}

// The per-layer tensors below encoder.layer.N.
struct LayerName {
  std::string_view hf, gguf;
};
constexpr LayerName kLayer[] = {
    {"attention.self.query", "attn_q"},
    {"attention.self.key", "attn_k"},
    {"attention.self.value", "attn_v"},
    {"attention.output.dense", "attn_output"},
    {"attention.output.LayerNorm", "attn_output_norm"},
    {"intermediate.dense", "ffn_up"},
    {"output.dense", "ffn_down"},
    {"output.LayerNorm", "layer_output_norm"},
};

Result<std::optional<TensorMapping>> map_tensor(const ConvertContext& c, const HfVocab&, std::string_view hf_name) {
  using Out = std::optional<TensorMapping>;
  std::string name(hf_name);
  if (name.starts_with("bert.")) name.erase(0, 5);
  // Old TensorFlow-era checkpoints name LayerNorm parameters gamma and beta.
  if (name.ends_with(".gamma")) name = name.substr(0, name.size() - 6) + ".weight";
  if (name.ends_with(".beta")) name = name.substr(0, name.size() - 5) + ".bias";
  if (is_classifier(c)) {
    if (name == "pooler.dense.weight") return Out(TensorMapping{.name = "cls.weight"});
    if (name == "pooler.dense.bias") return Out(TensorMapping{.name = "cls.bias"});
    if (name == "classifier.weight") return Out(TensorMapping{.name = "cls.output.weight"});
    if (name == "classifier.bias") return Out(TensorMapping{.name = "cls.output.bias"});
  }
  if (name == "embeddings.position_ids" || name.starts_with("pooler.") || name.starts_with("cls.predictions") ||
      name.starts_with("cls.seq_relationship"))
    return Out();
  std::string_view suffix;
  std::string_view stem = name;
  for (std::string_view s : {".weight", ".bias"})
    if (stem.ends_with(s)) {
      suffix = s;
      stem.remove_suffix(s.size());
      break;
    }
  if (suffix.empty()) return error("tensor '{}' is not one BERT maps", printable(hf_name, 200));
  const auto out = [&](std::string gguf) { return Out(TensorMapping{.name = gguf + std::string(suffix)}); };
  if (stem == "embeddings.word_embeddings" && suffix == ".weight") return out("token_embd");
  if (stem == "embeddings.token_type_embeddings" && suffix == ".weight") return out("token_types");
  if (stem == "embeddings.position_embeddings" && suffix == ".weight") return out("position_embd");
  if (stem == "embeddings.LayerNorm") return out("token_embd_norm");
  constexpr std::string_view kPrefix = "encoder.layer.";
  if (stem.starts_with(kPrefix)) {
    std::string_view rest = stem.substr(kPrefix.size());
    int64_t layer = -1;
    const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), layer);
    if (ec == std::errc() && p < rest.data() + rest.size() && *p == '.') {
      const int64_t blocks = c.config.find_int({"num_hidden_layers"}).value_or(0);
      if (layer < 0 || layer >= blocks)
        return error("tensor '{}' belongs to layer {}, but config.json has {} layers", printable(hf_name, 200), layer,
                     blocks);
      rest = rest.substr(static_cast<size_t>(p - rest.data()) + 1);
      for (const LayerName& l : kLayer)
        if (rest == l.hf) return out(fmt::format("blk.{}.{}", layer, l.gguf));
    }
  }
  return error("tensor '{}' is not one BERT maps", printable(hf_name, 200));
}

}  // namespace

extern const HfArch kHfArchBert = {
    .gguf_name = "bert",
    .hf_classes = {"BertModel", "BertForMaskedLM", kClassifierClass},
    .vocab = HfVocabKind::kWordPiece,
    .write_metadata = write_metadata,
    .map_tensor = map_tensor,
};

}  // namespace pagoda
