// What the subcommands that run a model share: setting the thread count, opening the GGUF
// file and loading the model and its tokenizer (the file is kept alongside, because the
// weights point into its mapping), finding the chat template to use, and reporting an
// error as the one line every subcommand prints.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "engine/speculative.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

struct LoadedModel {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;  // null when the file's is unusable and not required
};

// `model` is a GGUF path or a catalog name (pulled into the cache when missing).
// threads > 0 sizes the global pool first. With require_tokenizer, a model whose
// tokenizer cannot be built is an error; otherwise it loads with a warning and no tokenizer.
// where: this process's place in a model split over several (model/parallel.h).
Result<LoadedModel> load_model(const std::string& model, ThreadPool& pool, ParallelRank where = {});
Result<LoadedModel> load_model_with_tokenizer(const std::string& model, int32_t threads, bool require_tokenizer,
                                              ParallelRank where = {});

// The draft model speculative decoding asks for (speculative.method "draft_model"), loaded
// as `model` is (a path or a catalog name) onto the same thread pool, its vocabulary
// checked against the target's (check_draft_vocabulary); an empty LoadedModel otherwise.
Result<LoadedModel> load_draft_model(const SpeculativeConfig& spec, const LoadedModel& target);

// The chat template's source: the file named (when given), else the model's
// tokenizer.chat_template, else empty (the server's built-in one for the family).
Result<std::string> chat_template_source(const GgufFile& file, const std::string& template_file);

// Prints "error: <message>" on stderr (after flushing stdout) and returns 1.
int report_error(const Status& st);

}  // namespace pagoda
