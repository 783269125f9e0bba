#include "eval/kl_base_file.h"

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>

namespace pagoda {
namespace {

constexpr char kMagic[8] = {'P', 'G', 'D', 'K', 'L', 'B', 'A', 'S'};
constexpr uint32_t kVersion = 1, kTopKVersion = 2;
constexpr uint32_t kDense = 0, kSparse = 1, kTopK = 2;

struct RowHead {
  float lo, step, nll;
  int32_t argmax;
  uint32_t layout, n;
};
static_assert(sizeof(RowHead) == 24);

template <typename T>
bool put(std::FILE* f, const T* p, size_t n) {
  return std::fwrite(p, sizeof(T), n, f) == n;
}
template <typename T>
bool get(std::FILE* f, T* p, size_t n) {
  return std::fread(p, sizeof(T), n, f) == n;
}

}  // namespace

Result<uint64_t> kl_base_key(const std::string& base_path, std::span<const int32_t> tokens, int32_t n_ctx,
                             int32_t n_chunks) {
  struct stat st {};
  if (::stat(base_path.c_str(), &st) != 0) return error("cannot read the base model {}", base_path);
  FilePtr f(std::fopen(base_path.c_str(), "rb"));
  if (!f) return error("cannot read the base model {}", base_path);
  std::vector<unsigned char> head(1 << 20);
  head.resize(std::fread(head.data(), 1, head.size(), f.get()));
  XXH3_state_t* s = XXH3_createState();
  if (s == nullptr) return error("out of memory");
  XXH3_64bits_reset(s);
  const uint64_t fields[] = {kVersion,
                             static_cast<uint64_t>(st.st_size),
                             static_cast<uint64_t>(st.st_mtim.tv_sec),
                             static_cast<uint64_t>(st.st_mtim.tv_nsec),
                             static_cast<uint64_t>(n_ctx),
                             static_cast<uint64_t>(n_chunks),
                             tokens.size()};
  XXH3_64bits_update(s, fields, sizeof(fields));
  XXH3_64bits_update(s, head.data(), head.size());
  XXH3_64bits_update(s, tokens.data(), tokens.size_bytes());
  const uint64_t key = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return key;
}

bool is_kl_base_file(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  char magic[8];
  return f && get(f.get(), magic, 8) && std::memcmp(magic, kMagic, 8) == 0;
}

uint64_t vocabulary_hash(const std::vector<std::string>& pieces) {
  XXH3_state_t* s = XXH3_createState();
  if (s == nullptr) return 0;
  XXH3_64bits_reset(s);
  for (const std::string& p : pieces) {
    const uint64_t n = p.size();
    XXH3_64bits_update(s, &n, sizeof(n));
    XXH3_64bits_update(s, p.data(), p.size());
  }
  const uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return h;
}

Result<KlBaseWriter> KlBaseWriter::create(const std::string& path, const KlBaseHeader& h) {
  if (h.tokens.size() != static_cast<size_t>(h.n_chunks) * h.n_ctx)
    return error("KL base header: {} tokens for {} chunks of {}", h.tokens.size(), h.n_chunks, h.n_ctx);
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  KlBaseWriter w;
  w.path_ = path;
  w.tmp_path_ = fmt::format("{}.tmp.{}", path, ::getpid());
  w.file_.reset(std::fopen(w.tmp_path_.c_str(), "wb"));
  if (!w.file_) return error("cannot write the KL base cache {} (set PAGODA_CACHE to another folder)", w.tmp_path_);
  w.n_vocab_ = h.n_vocab;
  w.rows_left_ = static_cast<uint64_t>(h.n_chunks) * h.rows_per_chunk;
  w.top_k_ = h.top_k;
  const uint32_t fields[] = {h.top_k > 0 ? kTopKVersion : kVersion, h.n_vocab, h.n_ctx, h.n_chunks, h.rows_per_chunk,
                             h.top_k};
  std::FILE* f = w.file_.get();
  if (!put(f, kMagic, 8) || !put(f, fields, 6) || !put(f, &h.key, 1) || (h.top_k > 0 && !put(f, &h.vocab_hash, 1)) ||
      !put(f, h.tokens.data(), h.tokens.size()))
    return error("cannot write the KL base cache {}", w.tmp_path_);
  return w;
}

KlBaseWriter::~KlBaseWriter() {
  if (file_) {
    file_.reset();
    std::remove(tmp_path_.c_str());
  }
}

Status KlBaseWriter::write_row(const BaseRow& row) {
  if (rows_left_ == 0) return error("KL base cache {}: more rows than the header declares", path_);
  const size_t n = row.codes.size();
  if (row.sparse ? row.ids.size() != n : n != n_vocab_)
    return error("KL base cache {}: a row holds {} codes for a vocabulary of {}", path_, n, n_vocab_);
  const bool top_k = row.tail >= 0;
  if (top_k != (top_k_ > 0) || (top_k && n > top_k_))
    return error("KL base cache {}: a row of {} tokens in a file of top-{} rows", path_, n, top_k_);
  const uint32_t layout = top_k ? kTopK : row.sparse ? kSparse : kDense;
  const RowHead head{row.lo, row.step, row.nll, row.argmax, layout, static_cast<uint32_t>(n)};
  std::FILE* f = file_.get();
  if (!put(f, &head, 1) || (row.sparse && !put(f, row.ids.data(), n)) || !put(f, row.codes.data(), n) ||
      (top_k && (!put(f, &row.tail, 1) || !put(f, &row.entropy, 1))))
    return error("cannot write the KL base cache {} (disk full?)", tmp_path_);
  --rows_left_;
  return Status::ok();
}

Status KlBaseWriter::finish() {
  if (rows_left_ != 0) return error("KL base cache {}: {} rows missing", path_, rows_left_);
  const bool ok = std::fflush(file_.get()) == 0;
  file_.reset();
  if (!ok || std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_path_.c_str());
    return error("cannot write the KL base cache {}", path_);
  }
  return Status::ok();
}

Result<KlBaseReader> KlBaseReader::open(const std::string& path) {
  KlBaseReader r;
  r.path_ = path;
  r.file_.reset(std::fopen(path.c_str(), "rb"));
  if (!r.file_) return error("cannot read the KL base cache {}", path);
  std::FILE* f = r.file_.get();
  char magic[8];
  uint32_t fields[6];
  KlBaseHeader& h = r.header_;
  if (!get(f, magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return error("{} is not a KL base cache file", path);
  if (!get(f, fields, 6) || !get(f, &h.key, 1)) return error("KL base cache {} is truncated", path);
  if (fields[0] != kVersion && fields[0] != kTopKVersion)
    return error("KL base cache {} has version {}, expected {} or {}", path, fields[0], kVersion, kTopKVersion);
  h.top_k = fields[0] == kTopKVersion ? fields[5] : 0;
  if (fields[0] == kTopKVersion && (h.top_k == 0 || !get(f, &h.vocab_hash, 1)))
    return error("KL base cache {} has a malformed header", path);
  h.n_vocab = fields[1];
  h.n_ctx = fields[2];
  h.n_chunks = fields[3];
  h.rows_per_chunk = fields[4];
  const uint64_t n_tokens = static_cast<uint64_t>(h.n_ctx) * h.n_chunks;
  if (h.n_vocab == 0 || h.n_ctx == 0 || n_tokens > (uint64_t{1} << 32) || h.rows_per_chunk >= h.n_ctx)
    return error("KL base cache {} has a malformed header", path);
  // Sizes come from the file: checked against its length before anything is sized by
  // them, so a corrupt header is an error, not a 16 GiB allocation.
  struct stat st {};
  if (::fstat(::fileno(f), &st) != 0) return error("cannot read the KL base cache {}", path);
  r.size_ = static_cast<uint64_t>(st.st_size);
  if (n_tokens * sizeof(int32_t) > r.remaining()) return error("KL base cache {} is truncated", path);
  h.tokens.resize(n_tokens);
  if (!get(f, h.tokens.data(), h.tokens.size())) return error("KL base cache {} is truncated", path);
  return r;
}

uint64_t KlBaseReader::remaining() const {
  const long pos = std::ftell(file_.get());
  return pos < 0 || static_cast<uint64_t>(pos) > size_ ? 0 : size_ - static_cast<uint64_t>(pos);
}

Status KlBaseReader::read_row(BaseRow& row) {
  RowHead head{};
  std::FILE* f = file_.get();
  auto bad = [&](const char* what) {
    return error("KL base cache {}: {}; delete the file to recompute it", path_, what);
  };
  if (!get(f, &head, 1)) return bad("truncated");
  if (head.layout > kTopK || (head.layout == kTopK) != (header_.top_k > 0)) return bad("unknown row layout");
  const uint32_t n = head.n;
  if (head.layout == kDense ? n != header_.n_vocab : n > header_.n_vocab) return bad("row size does not match the vocabulary");
  if (head.layout == kTopK && (n == 0 || n > header_.top_k)) return bad("more tokens in a row than its top-k");
  if (head.argmax < 0 || static_cast<uint32_t>(head.argmax) >= header_.n_vocab) return bad("argmax outside the vocabulary");
  row.lo = head.lo;
  row.step = head.step;
  row.nll = head.nll;
  row.argmax = head.argmax;
  row.sparse = head.layout != kDense;
  row.tail = -1;
  row.ids.clear();
  if (uint64_t{n} * (sizeof(uint16_t) + (row.sparse ? sizeof(uint32_t) : 0)) > remaining()) return bad("truncated");
  if (row.sparse) {
    row.ids.resize(n);
    if (!get(f, row.ids.data(), n)) return bad("truncated");
    for (uint32_t i = 0; i < n; ++i)
      if (row.ids[i] >= header_.n_vocab || (i > 0 && row.ids[i] <= row.ids[i - 1])) return bad("token ids out of order");
  }
  row.codes.resize(n);
  if (!get(f, row.codes.data(), n)) return bad("truncated");
  if (head.layout == kTopK) {
    if (!get(f, &row.tail, 1) || !get(f, &row.entropy, 1)) return bad("truncated");
    if (!(row.tail >= 0.0f && row.tail <= 1.0f)) return bad("tail probability outside 0..1");
    if (!(row.entropy >= 0.0f && row.entropy < 1e3f)) return bad("entropy not a finite non-negative number");
  }
  return Status::ok();
}

}  // namespace pagoda
