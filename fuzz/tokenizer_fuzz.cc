// A tokenizer on arbitrary text: encode (with and without BOS and special-token
// parsing, chosen by the first byte) and decode back. Every id must be in the
// vocabulary. The vocabulary is PAGODA_FUZZ_VOCAB's (any GGUF: Qwen's byte-level BPE,
// Gemma's SentencePiece, ...) or a generated SentencePiece-style one.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "gguf/gguf_file.h"
#include "model/random_model.h"
#include "tokenizer/tokenizer.h"

namespace {

std::unique_ptr<pagoda::Tokenizer> g_tok;
int32_t g_vocab = 0;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string path;
  if (const char* v = std::getenv("PAGODA_FUZZ_VOCAB")) {
    path = v;
  } else {
    path = "/tmp/pagoda-fuzz-vocab-" + std::to_string(::getpid()) + ".gguf";
    pagoda::RandomModelSpec s;
    s.vocab = 2000;
    s.layers = 1;
    if (!pagoda::write_random_model(s, path)) std::abort();
  }
  auto f = pagoda::GgufFile::open(path);
  if (!f) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", f.status().message().c_str());
    std::abort();
  }
  auto t = pagoda::Tokenizer::from_gguf(*f);
  if (!t) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", t.status().message().c_str());
    std::abort();
  }
  g_tok = std::move(t.value());
  g_vocab = static_cast<int32_t>(f->get_array("tokenizer.ggml.tokens")->values.size());
  if (std::getenv("PAGODA_FUZZ_VOCAB") == nullptr) std::remove(path.c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto ids = g_tok->encode(text, (flags & 1) != 0, (flags & 2) != 0);
  for (int32_t id : ids)
    if (id < 0 || id >= g_vocab) std::abort();
  (void)g_tok->decode(ids, (flags & 4) != 0);
  return 0;
}
