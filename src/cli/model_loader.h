// Opening a GGUF file and loading the model in it, for the subcommands that run one.
// The file is kept alongside the model because the weights point into its mapping.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "model/model.h"

namespace pagoda {

struct LoadedModel {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
};

inline Result<LoadedModel> load_model(const std::string& path, ThreadPool& pool) {
  auto file = GgufFile::open(path);
  if (!file) return file.status();
  LoadedModel out;
  out.file = std::make_unique<GgufFile>(std::move(file.value()));
  auto model = Model::load(*out.file, pool);
  if (!model) return model.status();
  out.model = std::move(model.value());
  return out;
}

}  // namespace pagoda
