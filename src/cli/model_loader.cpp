#include "cli/model_loader.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/log.h"
#include "base/system_memory.h"
#include "cli/pull_progress.h"
#include "engine/draft_model.h"

namespace pagoda {

Result<LoadedModel> load_model(const std::string& model, ThreadPool& pool, ParallelRank where) {
  auto path = resolve_model_arg(model);
  if (!path) return path.status();
  auto file = GgufFile::open(*path);
  if (!file) return file.status();
  LoadedModel out;
  out.file = std::make_unique<GgufFile>(std::move(file.value()));
  auto loaded = Model::load(*out.file, pool, /*repack=*/true, where);
  if (!loaded) return loaded.status();
  out.model = std::move(loaded.value());
  return out;
}

Result<LoadedModel> load_draft_model(const SpeculativeConfig& spec, const LoadedModel& target) {
  if (!spec.enabled() || spec.method != "draft_model") return LoadedModel{};
  auto draft = load_model(spec.model, ThreadPool::global());
  if (!draft) return error("the draft model {}: {}", spec.model, draft.status().message());
  auto draft_vocab = Vocab::from_gguf(*draft->file);
  if (!draft_vocab) return error("the draft model {}: {}", spec.model, draft_vocab.status().message());
  Result<Vocab> target_vocab = target.tokenizer ? Result<Vocab>(target.tokenizer->vocab()) : Vocab::from_gguf(*target.file);
  if (!target_vocab) return error("the target model's vocabulary: {}", target_vocab.status().message());
  if (Status st = check_draft_vocabulary(*target_vocab, *draft_vocab); !st.is_ok())
    return error("the draft model {} cannot draft for this model: {}", spec.model, st.message());
  draft->file->drop_all_pages();
  release_free_heap();
  return draft;
}

Result<LoadedModel> load_model_with_tokenizer(const std::string& path, int32_t threads, bool require_tokenizer,
                                              ParallelRank where) {
  if (threads > 0) ThreadPool::set_default_threads(threads);
  auto loaded = load_model(path, ThreadPool::global(), where);
  if (!loaded) return loaded.status();
  auto tok = Tokenizer::from_gguf(*loaded->file);
  // The vocabulary's metadata is now in the tokenizer's own tables, and its build's
  // transient heap (as much again as it keeps) is free: neither stays resident.
  loaded->file->drop_all_pages();
  release_free_heap();
  if (tok) {
    loaded->tokenizer = std::move(tok.value());
  } else if (require_tokenizer) {
    return error("the model's tokenizer cannot be used: {}", tok.status().message());
  } else {
    log_warn("no usable tokenizer ({}); output is printed as token ids", tok.status().message());
  }
  return loaded;
}

Result<std::string> chat_template_source(const GgufFile& file, const std::string& template_file) {
  if (!template_file.empty()) {
    std::ifstream in(template_file, std::ios::binary);
    if (!in) return error("cannot read --chat-template {}", template_file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  if (auto t = file.get_string("tokenizer.chat_template")) return *t;
  return std::string();
}

int report_error(const Status& st) {
  std::fflush(stdout);
  fmt::print(stderr, "error: {}\n", st.message());
  return 1;
}

}  // namespace pagoda
