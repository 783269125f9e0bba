#include "convert/hf_vocab.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "base/printable.h"
#include "base/mapped_file.h"
#include "convert/hf_config.h"
#include "convert/hf_sentencepiece.h"
#include "gguf/gguf_writer.h"

namespace pagoda {
namespace {

using nlohmann::json;

constexpr std::string_view kPhantomSpace = "\xe2\x96\x81";  // U+2581

// The pre-tokenizer regexes of the byte-level BPE families, as their tokenizer.json
// spells them (Split, behavior Isolated, followed by ByteLevel without its own regex).
struct KnownPre {
  std::string_view regex;
  std::string_view name;  // what llama.cpp's converter writes for it
};
constexpr KnownPre kKnownPres[] = {
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama-bpe"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "qwen2"},
};

// json::value() throws when the key holds another type; these never do.
bool bool_or(const json& j, std::string_view key, bool fallback) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

std::string str_or_empty(const json& j, std::string_view key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// A tokenizer_config entry such as "bos_token": a string, or an AddedToken object's content.
std::string token_text(const json& tc, const std::string& key) {
  if (!tc.is_object()) return "";
  const auto it = tc.find(key);
  if (it == tc.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return str_or_empty(*it, "content");
  return "";
}

// SpecialToken id of one template entry, or "".
std::string template_special(const json& entry) {
  if (!entry.is_object()) return "";
  const auto st = entry.find("SpecialToken");
  return st == entry.end() ? "" : str_or_empty(*st, "id");
}

std::string template_sequence(const json& entry) {
  if (!entry.is_object()) return "";
  const auto st = entry.find("Sequence");
  return st == entry.end() ? "" : str_or_empty(*st, "id");
}

// Names as llama.cpp's converter marks added tokens that are not flagged special but
// act as control tokens (Gemma, DeepSeek, command-r).
bool looks_special(std::string_view t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (t.starts_with("<|") && t.ends_with("|>")) return true;
  if (t.starts_with("<\xef\xbd\x9c") && t.ends_with("\xef\xbd\x9c>")) return true;  // <｜ ... ｜>
  return t.starts_with("<unused") && t.ends_with(">");
}

// An insertion-ordered map, as the Python dicts SpecialVocab keeps.
template <typename V>
struct Ordered {
  std::vector<std::pair<std::string, V>> items;
  V* find(const std::string& k) {
    for (auto& [key, v] : items)
      if (key == k) return &v;
    return nullptr;
  }
  void set(const std::string& k, V v) {
    if (V* p = find(k))
      *p = v;
    else
      items.emplace_back(k, v);
  }
  void setdefault(const std::string& k, V v) {
    if (!find(k)) items.emplace_back(k, v);
  }
};

// gguf-py's SpecialVocab: special token ids and add_* flags from tokenizer.json's
// post-processor, tokenizer_config.json and config.json, in that order of precedence.
class SpecialVocab {
 public:
  SpecialVocab(const json& tj, json tc, const HfConfig& config, std::optional<size_t> n_vocab)
      : tj_(tj), tc_(std::move(tc)), config_(config), n_vocab_(n_vocab) {}

  // tj: tokenizer.json, or null when the folder has none (a SentencePiece-only folder).
  void load(const std::string& dir, HfVocab& out) {
    const json added = tj_.is_object() ? tj_.value("added_tokens", json::array()) : json::array();
    if (tj_.is_object()) {
      parse_normalizer(tj_.value("normalizer", json()), out);
      from_post_processor();
    }
    if (tc_.is_object() && !tc_.empty()) {
      chat_template(dir, out);
      for (const std::string& typ : types_) {
        const auto add = tc_.find("add_" + typ + "_token");
        if (add != tc_.end() && add->is_boolean()) add_.setdefault(typ, add->get<bool>());
        const std::string content = token_text(tc_, typ + "_token");
        if (content.empty()) continue;
        if (!added.is_array()) continue;
        for (const json& a : added)
          if (a.is_object() && str_or_empty(a, "content") == content) {
            const auto id = a.find("id");
            if (id != a.end() && id->is_number_integer()) set_special(typ, id->get<int64_t>());
            break;
          }
      }
    }
    for (const std::string& typ : types_)
      if (auto id = config_.raw().find(typ + "_token_id"); id != config_.raw().end() && id->is_number_integer())
        set_special(typ, id->get<int64_t>());
    static const std::map<std::string, std::string> kIdKeys = {
        {"bos", "bos_token_id"},       {"eos", "eos_token_id"},     {"unk", "unknown_token_id"},
        {"sep", "seperator_token_id"}, {"pad", "padding_token_id"}, {"mask", "mask_token_id"},
        {"eot", "eot_token_id"},       {"eom", "eom_token_id"}};
    for (const auto& [typ, id] : ids_.items)
      if (auto k = kIdKeys.find(typ); k != kIdKeys.end()) out.special_ids.emplace_back(k->second, id);
    for (const auto& [typ, v] : add_.items)
      if (typ == "bos" || typ == "eos" || typ == "sep") out.add_flags.emplace_back("add_" + typ + "_token", v);
  }

 private:
  void set_special(const std::string& typ, int64_t id) {
    if (id < 0) return;
    if (n_vocab_ && static_cast<size_t>(id) >= *n_vocab_) return;  // SpecialVocab skips it with a warning
    ids_.setdefault(typ, static_cast<uint32_t>(id));
  }

  void parse_normalizer(const json& n, HfVocab& out) {
    if (!n.is_object()) return;
    const std::string type = str_or_empty(n, "type");
    if (type == "Lowercase") {
      out.lowercase = true;
    } else if (type == "StripAccents") {
      out.strip_accents = true;
    } else if (type == "BertNormalizer") {
      if (auto it = n.find("lowercase"); it != n.end())
        out.lowercase = it->is_boolean() ? std::optional<bool>(it->get<bool>()) : std::nullopt;
      if (auto it = n.find("strip_accents"); it != n.end())
        out.strip_accents = it->is_boolean() ? std::optional<bool>(it->get<bool>()) : std::nullopt;
    } else if (type == "Sequence") {
      if (auto it = n.find("normalizers"); it != n.end() && it->is_array())
        for (const json& sub : *it) parse_normalizer(sub, out);
    }
  }

  void set_tc(const std::string& key, const std::string& v) {
    if (tc_.is_object() && !tc_.empty()) tc_[key] = v;
  }
  bool has_tc() const { return tc_.is_object() && !tc_.empty(); }

  void from_post_processor() {
    std::string bos = token_text(tc_, "bos_token"), cls = token_text(tc_, "cls_token");
    std::string eos = token_text(tc_, "eos_token"), sep = token_text(tc_, "sep_token");
    if (bos.empty() && !cls.empty() && has_tc()) set_tc("bos_token", bos = cls);
    if (eos.empty() && !sep.empty() && has_tc()) set_tc("eos_token", eos = sep);
    const auto pp = tj_.find("post_processor");
    if (pp == tj_.end() || !pp->is_object()) return;
    std::vector<json> procs;
    if (auto list = pp->find("processors"); list != pp->end() && list->is_array())
      procs.assign(list->begin(), list->end());
    else
      procs.push_back(*pp);
    for (const json& p : procs) {
      const std::string type = str_or_empty(p, "type");
      if (type == "ByteLevel") {
        add_.setdefault("bos", false);
        add_.setdefault("eos", false);
      } else if (type == "RobertaProcessing") {
        add_.set("bos", true);
        add_.set("eos", true);
        add_.set("sep", true);
        if (cls.empty() && has_tc()) {
          const auto c = p.find("cls");
          cls = c != p.end() && c->is_array() && !c->empty() && (*c)[0].is_string() ? (*c)[0].get<std::string>() : bos;
          set_tc("cls_token", cls);
        }
        if (sep.empty() && has_tc()) {
          const auto s = p.find("sep");
          sep = s != p.end() && s->is_array() && !s->empty() && (*s)[0].is_string() ? (*s)[0].get<std::string>() : eos;
          set_tc("sep_token", sep);
        }
      } else if (type == "TemplateProcessing") {
        template_processing(p, bos, cls, eos, sep);
      }
    }
  }

  // SpecialVocab's reading of a simple template: [first] $A [last] for one sequence and
  // what stands between A and B for a pair.
  void template_processing(const json& p, std::string& bos, std::string& cls, std::string& eos, std::string& sep) {
    const json single = p.value("single", json::array());
    const json pair = p.value("pair", json::array());
    std::string first, last;
    if (single.is_array() && single.size() > 1) {
      first = template_special(single.front());
      if (!first.empty()) {
        if (!has_tc()) {
          bos = first;
        } else if (first != bos && first != cls) {
          if (bos.empty()) set_tc("bos_token", bos = first);
          if (cls.empty()) set_tc("cls_token", cls = first);
        }
        add_.set("bos", first == bos || first == cls);
      }
      last = template_special(single.back());
      if (!last.empty()) {
        if (!has_tc()) {
          eos = last;
        } else if (last != eos) {
          if (std::find(types_.begin(), types_.end(), "eot") == types_.end()) {
            types_.push_back("eot");
            set_tc("eot_token", eos);
          } else if (std::find(types_.begin(), types_.end(), "eom") == types_.end()) {
            types_.push_back("eom");
            set_tc("eom_token", eos);
          }
          set_tc("eos_token", eos = last);
        }
        add_.set("eos", last == eos);
      }
    }
    if (!pair.is_array() || pair.empty()) return;
    const size_t start = !first.empty() && template_special(pair.front()) == first ? 1 : 0;
    const size_t stop = !last.empty() && template_special(pair.back()) == last ? pair.size() - 1 : pair.size();
    if (start >= stop) return;
    std::vector<json> t(pair.begin() + static_cast<ptrdiff_t>(start), pair.begin() + static_cast<ptrdiff_t>(stop));
    if (template_sequence(t.front()) != "A" || template_sequence(t.back()) != "B" || t.size() < 3) return;
    std::vector<json> mid(t.begin() + 1, t.end() - 1);
    bool add_sep = false;
    const std::string e1 = template_special(mid[0]);
    if (!e1.empty() && (e1 == sep || e1 == eos) && last.empty()) add_sep = true;
    if (mid.size() == 2) {
      const std::string e2 = template_special(mid[1]);
      if (!e2.empty() && (e2 == sep || e2 == eos)) add_sep = true;
    }
    add_.set("sep", add_sep);
    if (add_sep && sep.empty() && has_tc()) set_tc("sep_token", eos);
  }

  void chat_template(const std::string& dir, HfVocab& out) {
    if (auto it = tc_.find("chat_template"); it != tc_.end()) {
      if (it->is_string()) out.chat_template = it->get<std::string>();
      return;  // a list of named templates: not written (Pagoda reads one template)
    }
    std::ifstream in(std::filesystem::path(dir) / "chat_template.jinja", std::ios::binary);
    if (in) out.chat_template = std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  const json& tj_;
  json tc_;
  const HfConfig& config_;
  std::optional<size_t> n_vocab_;
  std::vector<std::string> types_ = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  Ordered<uint32_t> ids_;
  Ordered<bool> add_;
};

// A merges entry in GGUF's "a b" form: old tokenizers store strings, newer ones pairs
// (whose parts may hold spaces, written as U+0120 as gguf-py does).
Result<std::string> merge_entry(const json& m, const std::string& path, size_t i) {
  if (m.is_string()) return m.get<std::string>();
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    std::string out;
    for (int part = 0; part < 2; ++part) {
      if (part == 1) out += ' ';
      for (char c : m[static_cast<size_t>(part)].get<std::string>())
        out += c == ' ' ? std::string("\xc4\xa0") : std::string(1, c);
    }
    return out;
  }
  return error("{}: merges entry {} is neither a string nor a pair of strings", path, i);
}

}  // namespace

std::string phantom_piece(std::string_view piece, int32_t type) {
  if (type == kTokControl) return std::string(piece);
  if (piece.starts_with("##")) return std::string(piece.substr(2));
  return std::string(kPhantomSpace) + std::string(piece);
}

Result<std::string> detect_bpe_pre(const json& pt) {
  const std::string type = str_or_empty(pt, "type");
  if (type == "ByteLevel") {
    const auto re = pt.find("use_regex");
    if (re == pt.end() || (re->is_boolean() && re->get<bool>())) return std::string("gpt-2");
  }
  if (type == "Sequence") {
    const auto list = pt.find("pretokenizers");
    if (list != pt.end() && list->is_array() && list->size() == 2 && str_or_empty((*list)[0], "type") == "Split" &&
        str_or_empty((*list)[1], "type") == "ByteLevel") {
      const json& split = (*list)[0];
      const auto pattern = split.find("pattern");
      const std::string regex = pattern != split.end() ? str_or_empty(*pattern, "Regex") : "";
      for (const KnownPre& k : kKnownPres)
        if (regex == k.regex) return std::string(k.name);
      return error("the Split pre-tokenizer regex '{}' is not one Pagoda recognises (Llama 3's, Qwen2's)",
                   printable(regex, 160));
    }
  }
  return error(
      "pre_tokenizer '{}' is not a recognised byte-level one (GPT-2's ByteLevel, Llama 3's or Qwen2's Split + "
      "ByteLevel)",
      printable(pt.dump(), 160));
}

namespace {

// The tokens of tokenizer.model as llama.cpp's _create_vocab_sentencepiece lists them:
// SentencePiece's types (user-defined pieces count as normal), then added_tokens.json
// and tokenizer_config's added_tokens_decoder on top (score -1000; CONTROL when special
// or control-looking, else USER_DEFINED), padded with [PADi] to config's vocab_size.
Status sentencepiece_tokens(const std::string& dir, const std::vector<SpmPiece>& pieces, const HfConfig& config,
                            const json& tc, HfVocab& v) {
  namespace fs = std::filesystem;
  int64_t n_vocab = static_cast<int64_t>(pieces.size());
  if (auto cfg = config.find_int({"vocab_size_per_layer_input", "vocab_size"}); cfg && *cfg > 0) n_vocab = *cfg;
  if (n_vocab > (int64_t{1} << 31)) return error("{}: vocab_size {} is too large", config.path(), n_vocab);
  v.model = "llama";
  v.pre = "default";
  v.tokens.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) v.tokens[static_cast<size_t>(i)] = fmt::format("[PAD{}]", i);
  v.scores.assign(static_cast<size_t>(n_vocab), -10000.0f);
  v.types.assign(static_cast<size_t>(n_vocab), kTokUnused);
  for (size_t i = 0; i < pieces.size() && i < static_cast<size_t>(n_vocab); ++i) {
    v.tokens[i] = pieces[i].piece;
    v.scores[i] = pieces[i].score;
    const int32_t t = pieces[i].type;
    v.types[i] = t == 2 ? kTokUnknown : t == 3 ? kTokControl : t == 5 ? kTokUnused : t == 6 ? kTokByte : kTokNormal;
  }
  const auto in_range = [&](int64_t id) { return id >= 0 && id < n_vocab; };
  auto added = read_optional_json_file((fs::path(dir) / "added_tokens.json").string());
  if (!added) return added.status();
  if (added->has_value() && (*added)->is_object())
    for (const auto& [text, id] : (*added)->items())
      if (id.is_number_integer() && in_range(id.get<int64_t>())) {
        const auto i = static_cast<size_t>(id.get<int64_t>());
        v.tokens[i] = text;
        v.scores[i] = -1000.0f;
        v.types[i] = kTokUserDefined;
      }
  if (tc.is_object())
    if (auto dec = tc.find("added_tokens_decoder"); dec != tc.end() && dec->is_object())
      for (const auto& [key, entry] : dec->items()) {
        int64_t id = -1;
        const auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
        if (ec != std::errc() || p != key.data() + key.size() || !in_range(id) || !entry.is_object()) continue;
        std::string text = str_or_empty(entry, "content");
        const auto i = static_cast<size_t>(id);
        if (bool_or(entry, "special", false) || looks_special(text)) {
          v.types[i] = kTokControl;
        } else {
          for (size_t q = 0; (q = text.find(kPhantomSpace, q)) != std::string::npos;)
            text.replace(q, kPhantomSpace.size(), " ");
          v.types[i] = kTokUserDefined;
        }
        v.scores[i] = -1000.0f;
        v.tokens[i] = std::move(text);
      }
  v.hf_token_count = v.tokens.size();
  return Status::ok();
}

}  // namespace

Result<HfVocab> read_hf_vocab_json(const std::string& dir, const HfConfig& config, HfVocabKind kind, const json& tj,
                                   const json& tc_json);

Result<HfVocab> read_hf_vocab(const std::string& dir, const HfConfig& config, HfVocabKind kind) {
  namespace fs = std::filesystem;
  const std::string tj_path = (fs::path(dir) / "tokenizer.json").string();
  auto tc = read_optional_json_file((fs::path(dir) / "tokenizer_config.json").string());
  if (!tc) return tc.status();
  const json tc_json = tc->has_value() && (*tc)->is_object() ? **tc : json();
  auto tj_opt = read_optional_json_file(tj_path);
  if (!tj_opt) return tj_opt.status();

  // llama.cpp's converter reads tokenizer.model first for the decoder families.
  const std::string spm_path = (fs::path(dir) / "tokenizer.model").string();
  std::error_code ec;
  if (kind == HfVocabKind::kSentencePieceOrBpe && fs::exists(spm_path, ec)) {
    auto file = MappedFile::open(spm_path);
    if (!file) return file.status();
    auto pieces = parse_sentencepiece_model(file->data(), file->size(), spm_path);
    if (pieces) {
      HfVocab v;
      PAGODA_TRY(sentencepiece_tokens(dir, *pieces, config, tc_json, v));
      const json tj = tj_opt->has_value() ? **tj_opt : json();
      SpecialVocab special(tj, tc_json, config, v.tokens.size());
      special.load(dir, v);
      return v;
    }
    if (!tj_opt->has_value()) return pieces.status();
    // Llama 3 ships a tiktoken file under that name; its tokenizer.json is the vocabulary.
    auto bpe = read_hf_vocab_json(dir, config, kind, **tj_opt, tc_json);
    if (!bpe) return bpe.status();
    bpe->notes.push_back(fmt::format("{}; the vocabulary comes from tokenizer.json", pieces.status().message()));
    return bpe;
  }
  if (!tj_opt->has_value()) return error("{}: no such file", tj_path);
  return read_hf_vocab_json(dir, config, kind, **tj_opt, tc_json);
}

Result<HfVocab> read_hf_vocab_json(const std::string& dir, const HfConfig& config, HfVocabKind kind, const json& tj,
                                   const json& tc_json) {
  namespace fs = std::filesystem;
  const std::string tj_path = (fs::path(dir) / "tokenizer.json").string();
  if (!tj.is_object()) return error("{}: not a JSON object", tj_path);

  const auto model = tj.find("model");
  if (model == tj.end() || !model->is_object()) return error("{}: 'model' is missing", tj_path);
  const std::string model_type = str_or_empty(*model, "type");
  HfVocab v;
  if (kind == HfVocabKind::kWordPiece) {
    if (model_type != "WordPiece")
      return error("{}: model type '{}', but this architecture needs a WordPiece vocabulary", tj_path, model_type);
    v.model = "bert";
    // llama.cpp identifies the pre-tokenizer by hashing a tokenization; every uncased
    // BERT vocabulary (bert-base-uncased's, MiniLM's, BGE's) hashes to the entry named
    // jina-v2-en. llama.cpp ignores the value for WordPiece, so other vocabularies get
    // "default" rather than a refusal.
    const bool bert_pre = str_or_empty(tj.value("pre_tokenizer", json()), "type") == "BertPreTokenizer";
    const json norm = tj.value("normalizer", json());
    const bool lower = bool_or(norm, "lowercase", false);
    v.pre = bert_pre && lower ? "jina-v2-en" : "default";
  } else {
    if (model_type != "BPE") return error("{}: model type '{}' is not byte-level BPE", tj_path, model_type);
    if (bool_or(*model, "byte_fallback", false))
      return error(
          "{}: a SentencePiece-style BPE vocabulary (byte_fallback); only byte-level BPE (GPT-2, Llama 3, "
          "Qwen2 style) is converted",
          tj_path);
    auto pre = detect_bpe_pre(tj.value("pre_tokenizer", json()));
    if (!pre) return error("{}: {}", tj_path, pre.status().message());
    v.model = "gpt2";
    v.pre = *pre;
  }

  const auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object())
    return error("{}: model.vocab is missing or not an object", tj_path);
  std::map<int64_t, std::string> by_id;
  for (const auto& [piece, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 31))
      return error("{}: the id of '{}' is not a valid token id", tj_path, printable(piece, 80));
    by_id[id.get<int64_t>()] = piece;
  }
  std::map<int64_t, std::pair<std::string, bool>> added;  // id -> (content, special)
  if (auto at = tj.find("added_tokens"); at != tj.end() && at->is_array()) {
    for (const json& a : *at) {
      const auto id = a.is_object() ? a.find("id") : a.end();
      if (id == a.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
          id->get<int64_t>() >= (int64_t{1} << 31) || !a.contains("content") || !a["content"].is_string())
        return error("{}: an added_tokens entry lacks a valid id or content", tj_path);
      added[id->get<int64_t>()] = {a["content"].get<std::string>(), bool_or(a, "special", false)};
      by_id[id->get<int64_t>()] = a["content"].get<std::string>();
    }
  }
  if (by_id.empty()) return error("{}: the vocabulary is empty", tj_path);
  v.hf_token_count = vocab->size() + added.size();
  const int64_t max_id = by_id.rbegin()->first;
  int64_t n_vocab = static_cast<int64_t>(by_id.size());
  if (auto cfg = config.find_int({"vocab_size"})) n_vocab = *cfg;
  if (max_id >= n_vocab)
    return error("{}: token id {} is not below the vocabulary size {} (config.json vocab_size)", tj_path, max_id,
                 n_vocab);
  v.tokens.reserve(static_cast<size_t>(n_vocab));
  v.types.reserve(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) {
    const auto it = by_id.find(i);
    if (it == by_id.end()) {
      v.tokens.push_back(fmt::format("[PAD{}]", i));
      v.types.push_back(kTokUnused);
      continue;
    }
    std::string piece = it->second;
    int32_t type = kTokNormal;
    if (const auto a = added.find(i); a != added.end()) {
      if (a->second.second || looks_special(piece)) {
        type = kTokControl;
      } else {
        type = kTokUserDefined;
        // llama.cpp pre-normalizes user-defined spaces (Gemma's added tokens).
        for (size_t p = 0; (p = piece.find(kPhantomSpace, p)) != std::string::npos;)
          piece.replace(p, kPhantomSpace.size(), " ");
      }
    }
    v.tokens.push_back(kind == HfVocabKind::kWordPiece ? phantom_piece(piece, type) : piece);
    v.types.push_back(type);
  }
  if (kind == HfVocabKind::kSentencePieceOrBpe) {
    const auto merges = model->find("merges");
    if (merges == model->end() || !merges->is_array() || merges->empty())
      return error("{}: model.merges is missing or empty (a byte-level BPE vocabulary needs its merges)", tj_path);
    v.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      auto m = merge_entry((*merges)[i], tj_path, i);
      if (!m) return m.status();
      v.merges.push_back(std::move(m.value()));
    }
  }
  SpecialVocab special(tj, tc_json, config,
                       kind == HfVocabKind::kWordPiece ? std::optional<size_t>(v.tokens.size()) : std::nullopt);
  special.load(dir, v);
  return v;
}

void write_vocab(const HfVocab& v, GgufWriter& w) {
  if (v.token_type_count) w.set_u32("tokenizer.ggml.token_type_count", *v.token_type_count);
  w.set_string("tokenizer.ggml.model", v.model);
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  if (!v.merges.empty()) w.set_string_array("tokenizer.ggml.merges", v.merges);
  for (const auto& [key, id] : v.special_ids) w.set_u32("tokenizer.ggml." + key, id);
  for (const auto& [key, on] : v.add_flags) w.set_bool("tokenizer.ggml." + key, on);
  if (v.add_space_prefix) w.set_bool("tokenizer.ggml.add_space_prefix", *v.add_space_prefix);
  if (v.chat_template) w.set_string("tokenizer.chat_template", *v.chat_template);
  if (v.lowercase) w.set_bool("tokenizer.ggml.normalizer.lowercase", *v.lowercase);
  if (v.strip_accents) w.set_bool("tokenizer.ggml.normalizer.strip_accents", *v.strip_accents);
}

}  // namespace pagoda
