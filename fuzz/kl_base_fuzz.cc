// The KL-base file reader (`perplexity --kl-base`) on arbitrary bytes: the header and
// then every row either read or fail naming the file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "eval/kl_base_file.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  pagoda::fuzz::seed_empty_corpus(*argc, *argv, [](const std::string& dir) {
    for (bool sparse : {false, true}) {
      pagoda::KlBaseHeader h;
      h.n_vocab = 64;
      h.n_ctx = 4;
      h.n_chunks = 1;
      h.rows_per_chunk = 2;
      h.tokens = {1, 2, 3, 4};
      auto w = pagoda::KlBaseWriter::create(dir + (sparse ? "/seed-sparse.kl" : "/seed-dense.kl"), h);
      if (!w) return;
      for (int r = 0; r < 2; ++r) {
        pagoda::BaseRow row;
        row.lo = -10.0f;
        row.step = 0.01f;
        row.nll = 2.5f;
        row.argmax = 3;
        row.sparse = sparse;
        if (sparse) {
          row.ids = {1, 3, 7};
          row.codes = {5, 900, 20};
        } else {
          row.codes.assign(64, 7);
        }
        (void)w->write_row(row);
      }
      (void)w->finish();
    }
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pagoda::fuzz::InputFile in(data, size);
  if (!in.ok()) return 0;
  auto r = pagoda::KlBaseReader::open(in.path());
  if (!r) return 0;
  pagoda::BaseRow row;
  for (int i = 0; i < 64 && r->read_row(row); ++i) {
  }
  return 0;
}
