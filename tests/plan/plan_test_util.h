// Helpers shared by the plan module's tests: generated models written to the test's
// temporary folder.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "model/random_model.h"

namespace pagoda::plan_test {

// Writes a generated model named `name` into the test's temporary folder; its path.
inline std::string write_model(const std::string& name, const RandomModelSpec& spec) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  const Status st = write_random_model(spec, path);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return path;
}

}  // namespace pagoda::plan_test
