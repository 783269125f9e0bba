// The GGUF reader, the model configuration and weight binding, and the tokenizer built
// from the file's vocabulary, on arbitrary bytes: each step either succeeds or returns
// an error; a sanitizer report, a crash or an uncaught exception is a finding.
#include <cstddef>
#include <cstdint>

#include "base/printable.h"
#include "base/thread_pool.h"
#include "fuzz_input_file.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/random_model.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  pagoda::fuzz::seed_empty_corpus(*argc, *argv, [](const std::string& dir) {
    const char* archs[] = {"llama", "gemma3", "qwen2", "phi3", "olmo2"};
    const pagoda::DType types[] = {pagoda::DType::Q8_0, pagoda::DType::Q4_K, pagoda::DType::Q4_0,
                                   pagoda::DType::F16, pagoda::DType::Q6_K};
    for (int i = 0; i < 5; ++i) {
      pagoda::RandomModelSpec s;
      s.arch = archs[i];
      s.type = types[i];
      s.dim = 256;  // a K-quant row is 256 values
      s.ff = 256;
      s.vocab = 300;
      s.ctx = 64;
      (void)pagoda::write_random_model(s, dir + "/seed-" + s.arch + ".gguf");
    }
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::fuzz::InputFile in(data, size);
  if (!in.ok()) return 0;
  auto file = pagoda::GgufFile::open(in.path());
  if (!file) return 0;
  for (const auto& [key, value] : file->metadata())
    if (const std::string* s = value.as_string()) (void)pagoda::printable(*s);
  static pagoda::ThreadPool pool(1);
  auto model = pagoda::Model::load(*file, pool, /*repack=*/false);
  auto tok = pagoda::Tokenizer::from_gguf(*file);
  if (tok) {
    const auto ids = (*tok)->encode("Hello, world! \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x99\x82\n", true, true);
    (void)(*tok)->decode(ids);
  }
  return 0;
}
