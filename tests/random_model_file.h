// Shared by the tests that run a generated model: a random model (model/random_model.h)
// written to a temporary file and loaded, the file kept open for the weights it maps.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/random_model.h"

namespace pagoda::testing_util {

struct RandomModelFile {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
};

// name: the temporary file's, unique to the caller.
inline RandomModelFile load_random_model(const RandomModelSpec& spec, const std::string& name, ThreadPool& pool) {
  const auto path = (std::filesystem::temp_directory_path() / ("pagoda_" + name + ".gguf")).string();
  RandomModelFile out;
  EXPECT_TRUE(write_random_model(spec, path).is_ok());
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  if (!f) return out;
  out.file = std::make_unique<GgufFile>(std::move(f.value()));
  auto m = Model::load(*out.file, pool);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (m) out.model = std::move(m.value());
  return out;
}

}  // namespace pagoda::testing_util
