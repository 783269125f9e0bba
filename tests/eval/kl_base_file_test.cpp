#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "eval/kl_base_file.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

class KlBaseFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pagoda_klbase_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

KlBaseHeader small_header() {
  KlBaseHeader h;
  h.n_vocab = 6;
  h.n_ctx = 4;
  h.n_chunks = 1;
  h.rows_per_chunk = 1;  // 4 - 1 - 2
  h.key = 0x1234567890abcdefull;
  h.tokens = {1, 2, 3, 4};
  return h;
}

TEST_F(KlBaseFile, RowsRoundTripDenseAndSparse) {
  KlBaseHeader h = small_header();
  h.rows_per_chunk = 2;
  h.n_ctx = 8;
  h.tokens = {1, 2, 3, 4, 5, 0, 1, 2};
  BaseRow dense;
  dense.lo = -3.5f;
  dense.step = 0.001f;
  dense.nll = 1.25f;
  dense.argmax = 4;
  dense.codes = {1, 0, 65535, 7, 9, 0};
  BaseRow sparse = dense;
  sparse.sparse = true;
  sparse.ids = {0, 3, 5};
  sparse.codes = {2, 65535, 1};
  const std::string path = (dir_ / "sub" / "x.klbase").string();
  {
    auto w = KlBaseWriter::create(path, h);
    ASSERT_TRUE(w) << w.status().message();
    ASSERT_TRUE(w->write_row(dense));
    ASSERT_TRUE(w->write_row(sparse));
    EXPECT_FALSE(w->write_row(dense));  // one too many
    ASSERT_TRUE(w->finish());
  }
  auto r = KlBaseReader::open(path);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->header().key, h.key);
  EXPECT_EQ(r->header().tokens, h.tokens);
  EXPECT_EQ(r->header().rows_per_chunk, 2u);
  BaseRow a, b;
  ASSERT_TRUE(r->read_row(a));
  ASSERT_TRUE(r->read_row(b));
  EXPECT_FALSE(a.sparse);
  EXPECT_EQ(a.codes, dense.codes);
  EXPECT_EQ(a.argmax, 4);
  EXPECT_FLOAT_EQ(a.nll, 1.25f);
  EXPECT_TRUE(b.sparse);
  EXPECT_EQ(b.ids, sparse.ids);
  EXPECT_EQ(b.codes, sparse.codes);
  EXPECT_DOUBLE_EQ(b.log_prob(3), b.decode(65535));
  EXPECT_TRUE(std::isinf(b.log_prob(1)));
  EXPECT_FALSE(r->read_row(a));  // past the end: truncated
}

TEST_F(KlBaseFile, UnfinishedWriterLeavesNoFile) {
  const std::string path = (dir_ / "y.klbase").string();
  {
    auto w = KlBaseWriter::create(path, small_header());
    ASSERT_TRUE(w);
    EXPECT_FALSE(w->finish());  // a row is missing
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(KlBaseFile, RejectsForeignAndDamagedFiles) {
  fs::create_directories(dir_);
  const std::string junk = (dir_ / "junk").string();
  std::ofstream(junk) << "not a cache file at all";
  auto r = KlBaseReader::open(junk);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("not a KL base cache"), std::string::npos);
  EXPECT_FALSE(KlBaseReader::open((dir_ / "missing").string()));
  // A row whose sparse ids are out of order.
  const std::string path = (dir_ / "z.klbase").string();
  BaseRow row;
  row.sparse = true;
  row.ids = {3, 1};
  row.codes = {1, 1};
  auto w = KlBaseWriter::create(path, small_header());
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->write_row(row));
  ASSERT_TRUE(w->finish());
  auto rd = KlBaseReader::open(path);
  ASSERT_TRUE(rd);
  BaseRow back;
  const Status st = rd->read_row(back);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("delete the file"), std::string::npos);
}

TEST_F(KlBaseFile, KeyFollowsTheFileTokensAndShape) {
  fs::create_directories(dir_);
  const std::string model = (dir_ / "m.gguf").string();
  std::ofstream(model) << "GGUF some bytes";
  const std::vector<int32_t> toks = {1, 2, 3, 4};
  auto k = kl_base_key(model, toks, 4, 1);
  ASSERT_TRUE(k);
  EXPECT_EQ(*k, *kl_base_key(model, toks, 4, 1));
  EXPECT_NE(*k, *kl_base_key(model, std::vector<int32_t>{1, 2, 3, 5}, 4, 1));
  EXPECT_NE(*k, *kl_base_key(model, toks, 2, 2));
  std::ofstream(model) << "GGUF other bytes";
  EXPECT_NE(*k, *kl_base_key(model, toks, 4, 1));
  EXPECT_FALSE(kl_base_key((dir_ / "nope.gguf").string(), toks, 4, 1));
}

TEST_F(KlBaseFile, TopKRowsRoundTripInAVersionTwoFile) {
  KlBaseHeader h = small_header();
  h.top_k = 2;
  h.vocab_hash = vocabulary_hash({"a", "b", "c", "d", "e", "f"});
  BaseRow row;
  row.sparse = true;
  row.lo = -2.0f;
  row.step = 0.01f;
  row.nll = 0.5f;
  row.argmax = 3;
  row.ids = {3, 5};
  row.codes = {65535, 1};
  row.tail = 0.25f;
  row.entropy = 1.5f;
  const std::string path = (dir_ / "t.dump").string();
  {
    auto w = KlBaseWriter::create(path, h);
    ASSERT_TRUE(w) << w.status().message();
    BaseRow wide = row;
    wide.ids = {1, 3, 5};
    wide.codes = {1, 2, 3};
    EXPECT_FALSE(w->write_row(wide));  // more than the file's top-k
    BaseRow full = row;
    full.tail = -1;
    EXPECT_FALSE(w->write_row(full));  // a cache row in a dump
    ASSERT_TRUE(w->write_row(row));
    ASSERT_TRUE(w->finish());
  }
  auto r = KlBaseReader::open(path);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->header().top_k, 2u);
  EXPECT_EQ(r->header().vocab_hash, h.vocab_hash);
  EXPECT_NE(h.vocab_hash, vocabulary_hash({"a", "b", "c", "d", "e", "g"}));
  EXPECT_EQ(r->header().tokens, h.tokens);
  BaseRow back;
  ASSERT_TRUE(r->read_row(back));
  EXPECT_TRUE(back.sparse);
  EXPECT_EQ(back.ids, row.ids);
  EXPECT_EQ(back.codes, row.codes);
  EXPECT_FLOAT_EQ(back.tail, 0.25f);
  EXPECT_FLOAT_EQ(back.entropy, 1.5f);
  // A tail outside 0..1 is damage, not a distribution.
  std::vector<char> bytes((std::istreambuf_iterator<char>(std::ifstream(path, std::ios::binary).rdbuf())),
                          std::istreambuf_iterator<char>());
  const float bad = 2.0f;
  std::memcpy(bytes.data() + bytes.size() - 8, &bad, sizeof(bad));
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  auto r2 = KlBaseReader::open(path);
  ASSERT_TRUE(r2);
  BaseRow x;
  EXPECT_FALSE(r2->read_row(x));
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// Found by fuzz/kl_base_fuzz.cc: sizes in a corrupt header or row were allocated before
// the file was checked to hold them (2^32 tokens: a 16 GiB vector for a small file).
TEST_F(KlBaseFile, SizesBeyondTheFileAreTruncationNotAllocations) {
  fs::create_directories(dir_);
  const std::string path = (dir_ / "small.klbase").string();
  auto w = KlBaseWriter::create(path, small_header());
  ASSERT_TRUE(w);
  BaseRow row;
  row.codes.assign(6, 3);
  ASSERT_TRUE(w->write_row(row));
  ASSERT_TRUE(w->finish());
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // magic (8), version, n_vocab, n_ctx, n_chunks, rows_per_chunk, 0 (u32 each), key (8),
  // 4 tokens, then the row: lo, step, nll, argmax, layout, n.
  constexpr size_t kVocab = 12, kCtx = 16, kChunks = 20, kRowN = 56 + 20;
  ASSERT_EQ(bytes.size(), 56u + 24u + 12u);
  auto edited = [&](std::vector<std::pair<size_t, uint32_t>> fields, size_t keep) {
    std::vector<char> b(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(keep));
    for (auto [at, v] : fields) std::memcpy(b.data() + at, &v, 4);
    const std::string p = (dir_ / "edited.klbase").string();
    std::ofstream(p, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
    return p;
  };
  auto r = KlBaseReader::open(edited({{kCtx, 65536}, {kChunks, 65536}}, bytes.size()));
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  // A dense row of 2^31 - 1 codes (the vocabulary the header claims) in a file that
  // ends after the row's head.
  auto rd = KlBaseReader::open(edited({{kVocab, 0x7fffffff}, {kRowN, 0x7fffffff}}, 56 + 24));
  ASSERT_TRUE(rd) << rd.status().message();
  BaseRow back;
  const Status st = rd->read_row(back);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
  EXPECT_LT(back.codes.capacity(), 1000u) << "the row was sized before the file was checked";
}

}  // namespace
}  // namespace pagoda
