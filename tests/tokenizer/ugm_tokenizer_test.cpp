// SentencePiece Unigram ("t5") on small hand-made vocabularies and charsmaps, with the
// expected ids worked out by hand from llama.cpp's rules (ugm_tokenizer.h);
// test_ugm_vs_sentencepiece.py compares with sentencepiece and llama.cpp at scale.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_vocabs.h"
#include "tokenizer/piece_trie.h"
#include "tokenizer/precompiled_charsmap.h"

namespace pagoda {
namespace {

using test::id_of;
using test::make;
using Ids = std::vector<int32_t>;

const std::string kMark = "\xE2\x96\x81";  // "▁"

// T5's layout: 0 <pad>, 1 </s>, 2 <unk>, then the given pieces (normal unless typed).
struct Piece {
  std::string text;
  float score;
  TokenType type = TokenType::kNormal;
};

Vocab t5_vocab(const std::vector<Piece>& pieces) {
  Vocab v;
  v.kind = TokenizerKind::kUnigram;
  v.pieces = {"<pad>", "</s>", "<unk>"};
  v.scores = {0, 0, 0};
  v.types = {TokenType::kControl, TokenType::kControl, TokenType::kUnknown};
  for (const Piece& p : pieces) {
    v.pieces.push_back(p.text);
    v.scores.push_back(p.score);
    v.types.push_back(p.type);
  }
  v.pad = 0;
  v.eos = 1;
  v.unk = 2;
  v.add_eos = true;
  v.add_space_prefix = true;
  v.remove_extra_whitespaces = true;
  return v;
}

// A Darts-clone double array, as SentencePiece's precompiled charsmap stores it, for a
// few rules: each parent's children sit at (parent ^ base ^ label) with a base no other
// parent uses, a key's value unit at (node ^ base), bit 31 set.
std::string build_charsmap(const std::map<std::string, std::string>& rules) {
  std::string strings;
  struct Node {
    std::map<uint8_t, int> kids;
    int64_t value = -1;
  };
  std::vector<Node> trie(1);
  for (const auto& [from, to] : rules) {
    size_t n = 0;
    for (unsigned char c : from) {
      auto it = trie[n].kids.find(c);
      if (it == trie[n].kids.end()) {
        trie.emplace_back();
        it = trie[n].kids.emplace(c, static_cast<int>(trie.size() - 1)).first;
      }
      n = static_cast<size_t>(it->second);
    }
    trie[n].value = static_cast<int64_t>(strings.size());
    strings += to;
    strings.push_back('\0');
  }
  std::vector<uint32_t> units(1, 0);
  std::vector<bool> used(1, true);
  std::set<uint32_t> blocks;  // parent ^ base of every placed parent
  std::function<void(int, uint32_t)> place = [&](int n, uint32_t s) {
    std::vector<uint32_t> labels;
    if (trie[n].value >= 0) labels.push_back(0);
    for (const auto& kid : trie[n].kids) labels.push_back(kid.first);
    if (labels.empty()) return;
    uint32_t base = 1;
    for (;; ++base) {
      bool ok = blocks.count(s ^ base) == 0;
      for (uint32_t c : labels) {
        const uint32_t i = s ^ base ^ c;
        if (i >= units.size()) {
          units.resize(i + 1, 0);
          used.resize(i + 1, false);
        }
        ok = ok && !used[i];
      }
      if (ok) break;
    }
    blocks.insert(s ^ base);
    units[s] |= base << 10;
    for (uint32_t c : labels) used[s ^ base ^ c] = true;
    if (trie[n].value >= 0) units[s ^ base] = (1u << 31) | static_cast<uint32_t>(trie[n].value);
    for (const auto& [c, kid] : trie[n].kids) {
      const uint32_t i = s ^ base ^ c;
      units[i] = c | (trie[kid].value >= 0 ? 1u << 8 : 0u);
      place(kid, i);
    }
  };
  place(0, 0);
  std::string blob(4, '\0');
  auto put32 = [&](uint32_t x) {
    for (int k = 0; k < 4; ++k) blob.push_back(static_cast<char>((x >> (8 * k)) & 0xFF));
  };
  const auto trie_bytes = static_cast<uint32_t>(units.size() * 4);
  for (int k = 0; k < 4; ++k) blob[k] = static_cast<char>((trie_bytes >> (8 * k)) & 0xFF);
  for (uint32_t u : units) put32(u);
  return blob + strings;
}

const std::string kFullA = "\xEF\xBC\xA1";      // "Ａ", NFKC "A"
const std::string kFiLigature = "\xEF\xAC\x81";  // "ﬁ", NFKC "fi"
const std::string kSoftHyphen = "\xC2\xAD";      // removed by nmt_nfkc

std::string nfkc_like_charsmap() {
  return build_charsmap({{kFullA, "A"}, {kFiLigature, "fi"}, {"\t", " "}, {kSoftHyphen, ""}, {"x", "x"}, {"xy", "Z"}});
}

TEST(PieceTrie, WalksEveryPieceFromAPositionAndKeepsTheLastDuplicate) {
  const PieceTrie t({{"a", 1}, {"ab", 2}, {"abc", 3}, {"b", 4}, {"ab", 5}, {"", 6}});
  uint32_t n = t.child(PieceTrie::kRoot, 'a');
  ASSERT_NE(n, PieceTrie::kNone);
  EXPECT_EQ(t.value(n), 1);
  n = t.child(n, 'b');
  EXPECT_EQ(t.value(n), 5);  // given twice: the later id
  n = t.child(n, 'c');
  EXPECT_EQ(t.value(n), 3);
  EXPECT_EQ(t.child(n, 'd'), PieceTrie::kNone);
  EXPECT_EQ(t.child(PieceTrie::kRoot, 'c'), PieceTrie::kNone);
  EXPECT_EQ(t.longest_path("abx"), 2u);
  EXPECT_EQ(t.longest_path("abcd"), 3u);
  EXPECT_EQ(t.longest_path("x"), 0u);
  EXPECT_TRUE(PieceTrie({{"", 1}}).empty());
}

TEST(PieceTrie, ManyChildrenUseTheSortedSearch) {
  std::vector<std::string> texts;
  for (int b = 1; b < 256; ++b) texts.push_back(std::string("q") + static_cast<char>(b));
  std::vector<std::pair<std::string_view, int32_t>> entries;
  for (size_t i = 0; i < texts.size(); ++i) entries.emplace_back(texts[i], static_cast<int32_t>(i));
  const PieceTrie t(entries);
  const uint32_t q = t.child(PieceTrie::kRoot, 'q');
  for (int b = 1; b < 256; ++b) {
    const uint32_t n = t.child(q, static_cast<uint8_t>(b));
    ASSERT_NE(n, PieceTrie::kNone) << b;
    EXPECT_EQ(t.value(n), b - 1);
  }
  EXPECT_EQ(t.child(q, 0), PieceTrie::kNone);
}

TEST(PrecompiledCharsmap, MapsTheLongestPrefix) {
  auto m = PrecompiledCharsmap::parse(nfkc_like_charsmap());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto match = [&](std::string_view s) {
    const auto r = m->longest_match(s);
    return std::make_pair(std::string(r.replacement), r.consumed);
  };
  EXPECT_EQ(match(kFullA + "B"), std::make_pair(std::string("A"), size_t{3}));
  EXPECT_EQ(match(kFiLigature), std::make_pair(std::string("fi"), size_t{3}));
  EXPECT_EQ(match("xyx"), std::make_pair(std::string("Z"), size_t{2}));
  EXPECT_EQ(match("xq"), std::make_pair(std::string("x"), size_t{1}));
  EXPECT_EQ(match(kSoftHyphen + "a"), std::make_pair(std::string(), size_t{2}));  // deleted
  EXPECT_EQ(match("q"), std::make_pair(std::string(), size_t{0}));
  EXPECT_EQ(match(""), std::make_pair(std::string(), size_t{0}));
  EXPECT_EQ(match(std::string("\0x", 2)), std::make_pair(std::string(), size_t{0}));  // NUL stops
  EXPECT_EQ(match(kFullA.substr(0, 2)), std::make_pair(std::string(), size_t{0}));   // cut short
}

TEST(PrecompiledCharsmap, RefusesABadHeader) {
  EXPECT_FALSE(PrecompiledCharsmap::parse("ab").is_ok());
  // A trie of 8 bytes needs more than the 8 that follow the header.
  EXPECT_FALSE(PrecompiledCharsmap::parse(std::string("\x08\0\0\0", 4) + std::string(8, '\0')).is_ok());
  EXPECT_TRUE(PrecompiledCharsmap::parse(std::string("\x04\0\0\0", 4) + std::string(5, '\0')).is_ok());
  // A unit pointing outside the trie matches nothing instead of reading past it.
  std::string wild("\x04\0\0\0", 4);
  wild += std::string("\x00\xFC\xFF\x7F", 4);  // root base far outside
  wild += "x";
  auto m = PrecompiledCharsmap::parse(wild);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->longest_match("abc").consumed, 0u);
}

TEST(UgmTokenizer, ViterbiPicksTheBestScoringSegmentation) {
  const Vocab v = t5_vocab({{kMark, -2}, {"a", -3}, {"b", -3}, {"ab", -4}, {kMark + "a", -2.5f}, {kMark + "ab", -7}});
  auto tok = make(v);
  // ▁a + b (-5.5) beats ▁ + ab (-6), ▁ab (-7) and ▁ + a + b (-8).
  EXPECT_EQ(tok->encode("ab", false, false), (Ids{id_of(v, kMark + "a"), id_of(v, "b")}));
  EXPECT_EQ(tok->encode("abab", false, false), (Ids{id_of(v, kMark + "a"), id_of(v, "b"), id_of(v, "ab")}));
  EXPECT_TRUE(tok->encode("", false, false).empty());
  EXPECT_TRUE(tok->encode("   ", false, false).empty());  // nothing but merged spaces
}

TEST(UgmTokenizer, EqualScoresKeepTheFirstPathFound) {
  Vocab v = t5_vocab({{"x", -1}, {"y", -1}, {"xy", -2}});
  v.add_space_prefix = v.remove_extra_whitespaces = false;
  auto tok = make(v);
  // "xy" reaches the end first (from position 0); x + y ties it and does not replace it.
  EXPECT_EQ(tok->encode("xy", false, false), (Ids{id_of(v, "xy")}));
}

TEST(UgmTokenizer, UncoveredCharactersAreOneUnknownPerRun) {
  const Vocab v = t5_vocab({{kMark, -2}, {"a", -3}, {"b", -3}, {kMark + "a", -2.5f}});
  auto tok = make(v);
  const std::string snow = "\xE2\x98\x83";  // ☃, no piece
  EXPECT_EQ(tok->encode("a" + snow + snow + "b", false, false), (Ids{id_of(v, kMark + "a"), 2, id_of(v, "b")}));
  EXPECT_EQ(tok->encode(snow + "a" + snow, false, false), (Ids{id_of(v, kMark), 2, id_of(v, "a"), 2}));
}

TEST(UgmTokenizer, WhitespaceOptions) {
  const std::vector<Piece> pieces = {{kMark, -2}, {"a", -3}, {"b", -3}, {kMark + "a", -1}, {kMark + "b", -1}};
  const std::string text = "  a  b  ";
  auto encode = [&](bool prefix, bool merge, bool suffix) {
    Vocab v = t5_vocab(pieces);
    v.add_space_prefix = prefix;
    v.remove_extra_whitespaces = merge;
    v.treat_whitespace_as_suffix = suffix;
    return make(v)->encode(text, false, false);
  };
  const Vocab v = t5_vocab(pieces);
  const int32_t m = id_of(v, kMark), ma = id_of(v, kMark + "a"), mb = id_of(v, kMark + "b");
  EXPECT_EQ(encode(true, true, false), (Ids{ma, mb}));
  // Merging puts "▁" before every word, the first too, with or without the prefix
  // (llama.cpp; sentencepiece would give "a▁b").
  EXPECT_EQ(encode(false, true, false), (Ids{ma, mb}));
  // Kept spaces: "▁▁" + "▁a" + "▁" + "▁b" + "▁▁", the prefix added before the first word.
  EXPECT_EQ(encode(true, false, false), (Ids{m, m, ma, m, mb, m, m}));
  EXPECT_EQ(encode(false, false, false), (Ids{m, ma, m, mb, m, m}));
  // As a suffix the dummy space goes after the text.
  EXPECT_EQ(encode(true, false, true), (Ids{m, ma, m, mb, m, m, m}));

  Vocab plain = t5_vocab({{" ", -2}, {" a", -1}, {"a", -3}});
  plain.escape_whitespaces = false;
  EXPECT_EQ(make(plain)->encode("a", false, false), (Ids{id_of(plain, " a")}));
}

TEST(UgmTokenizer, TheCharsmapNormalizesBeforeTheSpacesAreHandled) {
  Vocab v = t5_vocab({{kMark + "A", -1}, {kMark + "fi", -1}, {kMark, -5}, {"f", -5}, {"i", -5}, {"A", -5}});
  v.precompiled_charsmap = nfkc_like_charsmap();
  auto tok = make(v);
  // "Ａ" -> "A", the tab -> a space (merged), "ﬁ" -> "fi", the soft hyphen deleted.
  EXPECT_EQ(tok->encode(kFullA + "\t\t" + kFiLigature, false, false), (Ids{id_of(v, kMark + "A"), id_of(v, kMark + "fi")}));
  EXPECT_EQ(tok->encode("f" + kSoftHyphen + "i", false, false), (Ids{id_of(v, kMark + "fi")}));
}

TEST(UgmTokenizer, UserDefinedPiecesAreWholeAndTheirPrefixesUnnormalized) {
  Vocab v = t5_vocab({{kMark, -2}, {"a", -3}, {"b", -3}, {kMark + "a", -1}, {kMark + "b", -1}, {"<", -3},
                      {kFullA, -3}, {"A", -3}, {"<" + kFullA + ">", -1000, TokenType::kUserDefined}});
  v.precompiled_charsmap = nfkc_like_charsmap();
  auto tok = make(v);
  const int32_t ud = id_of(v, "<" + kFullA + ">");
  // Split out before normalizing; each side is its own text, so "b" gets the prefix too.
  EXPECT_EQ(tok->encode("a<" + kFullA + ">b", false, false), (Ids{id_of(v, kMark + "a"), ud, id_of(v, kMark + "b")}));
  // A stretch that runs along a user-defined piece is copied as it is: "Ａ" stays full width.
  EXPECT_EQ(tok->encode("<" + kFullA, false, false), (Ids{id_of(v, kMark), id_of(v, "<"), id_of(v, kFullA)}));
  EXPECT_EQ(tok->encode(kFullA, false, false), (Ids{id_of(v, kMark), id_of(v, "A")}));
}

TEST(UgmTokenizer, InvalidBytesBecomeReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  const Vocab v = t5_vocab({{kMark + "a", -1}, {"b", -1}, {fffd, -1}});
  auto tok = make(v);
  const int32_t ma = id_of(v, kMark + "a"), b = id_of(v, "b"), r = id_of(v, fffd);
  EXPECT_EQ(tok->encode("a\x80" "b", false, false), (Ids{ma, r, b}));
  EXPECT_EQ(tok->encode("a\xFF\xFE" "b", false, false), (Ids{ma, r, r, b}));
  EXPECT_EQ(tok->encode("a\xE4\xB8", false, false), (Ids{ma, r, r}));  // truncated
  // llama.cpp reads lead + continuation bytes as a character even when overlong: it is
  // kept, and no piece covers it.
  EXPECT_EQ(tok->encode("a\xC0\xAF" "b", false, false), (Ids{ma, 2, b}));
}

TEST(UgmTokenizer, AddsEosNotBosAndParsesControlText) {
  const Vocab v = t5_vocab({{kMark + "a", -1}, {kMark + "b", -1}, {"<", -9}, {"/", -9}, {"s", -9}, {">", -9}});
  auto tok = make(v);
  const int32_t ma = id_of(v, kMark + "a"), mb = id_of(v, kMark + "b");
  EXPECT_EQ(tok->encode("a", true, false), (Ids{ma, 1}));
  EXPECT_EQ(tok->encode("", true, false), (Ids{1}));
  EXPECT_EQ(tok->encode("a</s>b", false, true), (Ids{ma, 1, mb}));
  EXPECT_EQ(tok->encode("a</s>", false, false),
            (Ids{ma, id_of(v, "<"), id_of(v, "/"), id_of(v, "s"), id_of(v, ">")}));
}

TEST(UgmTokenizer, DecodeTurnsMarksIntoSpacesAndBytesIntoBytes) {
  Vocab v = t5_vocab({{kMark + "a", -1}, {"b", -1}, {kMark + "b", -1}, {"<0x41>", 0, TokenType::kByte}});
  auto tok = make(v);
  const Ids ids = {id_of(v, kMark + "a"), id_of(v, "b"), id_of(v, kMark + "b"), id_of(v, "<0x41>"), 1};
  EXPECT_EQ(tok->decode(ids), "ab bA");
  EXPECT_EQ(tok->decode(ids, true), "ab bA</s>");
  EXPECT_EQ(tok->decode({2}, true), "<unk>");
  // Only the very first token loses its space, as in llama.cpp: after a control token
  // the space stays (sentencepiece would drop it from the first text piece).
  const Ids after_control = {1, id_of(v, kMark + "a"), id_of(v, kMark + "b")};
  EXPECT_EQ(tok->decode(after_control), " a b");
  IncrementalDetokenizer stream(*tok);
  std::string streamed;
  for (int32_t id : after_control) streamed += stream.push(id);
  EXPECT_EQ(streamed + stream.flush(), " a b");
  v.add_space_prefix = false;  // the leading space is text then
  EXPECT_EQ(make(v)->decode(ids), " ab bA");
}

TEST(UgmTokenizer, NeedsAnUnknownTokenAndAValidCharsmap) {
  Vocab v = t5_vocab({{"a", -1}});
  v.unk = -1;
  EXPECT_FALSE(Tokenizer::create(v).is_ok());
  v = t5_vocab({{"a", -1}});
  v.precompiled_charsmap = "xy";
  auto t = Tokenizer::create(v);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("precompiled_charsmap"), std::string::npos);
}

// The keys a T5 GGUF carries, as llama.cpp's converter writes them, and the defaults.
class UgmFromGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("pagoda-ugm-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf"))
                .string();
    w_.set_string("general.architecture", "t5");
    w_.set_string("tokenizer.ggml.model", "t5");
    w_.set_string_array("tokenizer.ggml.tokens", {"<pad>", "</s>", "<unk>", kMark + "A", kMark + "a", "A"});
    w_.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1, -1, -5});
    w_.set_i32_array("tokenizer.ggml.token_type", {3, 3, 2, 1, 1, 1});
  }
  void TearDown() override { std::filesystem::remove(path_); }

  void set_bytes(const std::string& key, const std::string& bytes, GgufType type = GgufType::UINT8) {
    auto arr = std::make_shared<GgufArray>();
    arr->elem_type = type;
    for (unsigned char c : bytes) {
      if (type == GgufType::UINT8) arr->values.push_back(GgufValue{type, uint64_t{c}});
      else arr->values.push_back(GgufValue{type, int64_t{static_cast<int8_t>(c)}});
    }
    w_.set(key, GgufValue{GgufType::ARRAY, arr});
  }

  Result<std::unique_ptr<Tokenizer>> load() {
    if (Status st = w_.write(path_); !st) return st;
    auto f = GgufFile::open(path_);
    if (!f) return f.status();
    return Tokenizer::from_gguf(*f);
  }

  std::string path_;
  GgufWriter w_;
};

TEST_F(UgmFromGguf, DefaultsAreLlamaCpps) {
  auto tok = load();
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  const Vocab& v = (*tok)->vocab();
  EXPECT_EQ(v.kind, TokenizerKind::kUnigram);
  EXPECT_STREQ(tokenizer_kind_name(v.kind), "t5");
  EXPECT_EQ(v.bos, -1);
  EXPECT_EQ(v.eos, 1);
  EXPECT_EQ(v.unk, 2);
  EXPECT_EQ(v.pad, 0);
  EXPECT_FALSE(v.add_bos);
  EXPECT_TRUE(v.add_eos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_FALSE(v.remove_extra_whitespaces);
  EXPECT_TRUE(v.precompiled_charsmap.empty());
  EXPECT_EQ(v.eog, (Ids{1}));
  EXPECT_EQ((*tok)->encode("a", true, true), (Ids{2, 1}));  // no prefix: "a" has no piece
}

TEST_F(UgmFromGguf, ReadsTheNormalizerKeys) {
  w_.set_bool("tokenizer.ggml.add_space_prefix", true);
  w_.set_bool("tokenizer.ggml.remove_extra_whitespaces", true);
  const std::string charsmap = build_charsmap({{kFullA, "A"}});
  set_bytes("tokenizer.ggml.precompiled_charsmap", charsmap, GgufType::INT8);  // either signedness
  auto tok = load();
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  EXPECT_EQ((*tok)->vocab().precompiled_charsmap, charsmap);
  EXPECT_EQ((*tok)->encode("  " + kFullA + "  a ", false, false), (Ids{3, 4}));
  EXPECT_EQ((*tok)->decode({3, 4}), "A a");
}

TEST_F(UgmFromGguf, ErrorsNameTheFileAndKey) {
  w_.set_string_array("tokenizer.ggml.precompiled_charsmap", {"x"});
  auto tok = load();
  ASSERT_FALSE(tok.is_ok());
  EXPECT_NE(tok.status().message().find("precompiled_charsmap"), std::string::npos);
  EXPECT_NE(tok.status().message().find(path_), std::string::npos);

  set_bytes("tokenizer.ggml.precompiled_charsmap", std::string("\x40\0\0\0xyz", 7));
  tok = load();
  ASSERT_FALSE(tok.is_ok());
  EXPECT_NE(tok.status().message().find("precompiled_charsmap"), std::string::npos);
  EXPECT_NE(tok.status().message().find(path_), std::string::npos);

  w_.set_string("tokenizer.ggml.model", "rwkv");
  tok = load();
  ASSERT_FALSE(tok.is_ok());
  EXPECT_NE(tok.status().message().find("'rwkv'"), std::string::npos);
  EXPECT_NE(tok.status().message().find(path_), std::string::npos);
}

}  // namespace
}  // namespace pagoda
