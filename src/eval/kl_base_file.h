// The cache file of a base model's packed log-probabilities for `pagoda perplexity
// --kl-base`: the base runs over the chunks once, and later runs against the same base,
// text, context and chunk count read its rows instead of running it again. The same
// format with top-k rows is a teacher's distillation dump (`pagoda distill-dump`), which
// `--kl-base FILE` reads directly; scripts/read_kl_base.py reads either in Python.
//
// File format, version 1 for caches, 2 for top-k dumps (little-endian; written under a
// temporary name and renamed, so a file under its final name is always whole):
//
//   offset  type                     field
//   0       char[8]                  magic "PGDKLBAS"
//   8       u32                      version (1)
//   12      u32                      n_vocab
//   16      u32                      n_ctx (tokens per chunk)
//   20      u32                      n_chunks
//   24      u32                      rows_per_chunk (scored positions: n_ctx - 1 - n_ctx/2)
//   28      u32                      top_k (version 2; 0 in version 1)
//   32      u64                      key (kl_base_key: base file identity, tokens, n_ctx, n_chunks)
//   40      u64                      version 2 only: vocab_hash (vocabulary_hash of the base's tokens)
//   40|48   i32[n_chunks * n_ctx]    the evaluated token ids, chunk after chunk (as in the
//                                    text: the BOS put at each chunk's start is not stored)
//   then n_chunks * rows_per_chunk rows, chunk after chunk, in position order:
//           f32 lo, f32 step, f32 nll, i32 argmax     (BaseRow, see base_row.h)
//           u32 layout                                0 = dense, 1 = sparse, 2 = top-k
//           u32 n                                     dense: n_vocab; sparse, top-k: kept tokens
//           u32 ids[n]                                sparse, top-k: ascending token ids
//           u16 codes[n]
//           f32 tail, f32 entropy                     top-k only: probability of the other
//                                                     tokens; the whole row's entropy (nats)
//
// Size: a dense row is 24 + 2 * n_vocab bytes (512 KiB for Gemma's 262k vocabulary, as in
// llama.cpp's format); a sparse row 24 + 6 bytes per kept token; a top-k row 32 + 6 k
// (224 bytes at k = 32, against 1 MiB of FP32 logits for Gemma 3).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "eval/base_row.h"

namespace pagoda {

struct KlBaseHeader {
  uint32_t n_vocab = 0;
  uint32_t n_ctx = 0;
  uint32_t n_chunks = 0;
  uint32_t rows_per_chunk = 0;
  uint64_t key = 0;
  uint32_t top_k = 0;           // > 0: a distillation dump of top-k rows (version 2)
  uint64_t vocab_hash = 0;      // version 2: vocabulary_hash() of the model that wrote it
  std::vector<int32_t> tokens;  // n_chunks * n_ctx
};

// A hash of a vocabulary's token texts in id order: a dump is compared only against a
// model whose vocabulary hashes the same.
uint64_t vocabulary_hash(const std::vector<std::string>& pieces);

// Whether the file at `path` starts with this format's magic (a cache or a dump, not a
// GGUF model); false when it cannot be read.
bool is_kl_base_file(const std::string& path);

// The cache key: a hash of the base file's size, modification time and first MiB of
// content, the evaluated tokens, n_ctx and n_chunks (and the format version). Fails when
// the base file cannot be read.
Result<uint64_t> kl_base_key(const std::string& base_path, std::span<const int32_t> tokens, int32_t n_ctx,
                             int32_t n_chunks);

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

class KlBaseWriter {
 public:
  // Creates `path`'s directory when missing and starts a temporary file beside `path`.
  static Result<KlBaseWriter> create(const std::string& path, const KlBaseHeader& header);
  KlBaseWriter(KlBaseWriter&&) = default;
  KlBaseWriter& operator=(KlBaseWriter&&) = default;
  ~KlBaseWriter();  // an unfinished file is removed

  Status write_row(const BaseRow& row);
  // Checks the row count, flushes and renames the file to its final name.
  Status finish();

 private:
  KlBaseWriter() = default;
  FilePtr file_;
  std::string path_, tmp_path_;
  uint32_t n_vocab_ = 0;
  uint32_t top_k_ = 0;
  uint64_t rows_left_ = 0;
};

class KlBaseReader {
 public:
  // Opens the file and reads its header; fails on a missing file, a wrong magic or
  // version, or a truncated header.
  static Result<KlBaseReader> open(const std::string& path);
  const KlBaseHeader& header() const { return header_; }
  // The next row; fails (naming the file) on a truncated or malformed row.
  Status read_row(BaseRow& row);

 private:
  KlBaseReader() = default;
  uint64_t remaining() const;  // bytes after the read position
  FilePtr file_;
  uint64_t size_ = 0;
  std::string path_;
  KlBaseHeader header_;
};

}  // namespace pagoda
