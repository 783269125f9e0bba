// Test helpers: wheels (zip archives) with chosen members, written with libzip, and a
// fresh temporary folder per test.
#pragma once

#include <zip.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace pagoda::testing {

inline bool write_wheel(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members,
                        bool compress = true) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (z == nullptr) return false;
  for (const auto& [name, data] : members) {
    zip_source_t* src = zip_source_buffer(z, data.data(), data.size(), 0);
    const zip_int64_t idx = zip_file_add(z, name.c_str(), src, ZIP_FL_OVERWRITE);
    if (idx < 0) {
      zip_source_free(src);
      zip_discard(z);
      return false;
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  return zip_close(z) == 0;
}

inline std::string temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("pagoda-" + tag + "-XXXXXX")).string();
  char* d = ::mkdtemp(tmpl.data());
  return d ? std::string(d) : std::string();
}

}  // namespace pagoda::testing
