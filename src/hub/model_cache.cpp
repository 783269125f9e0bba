#include "hub/model_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pagoda {

namespace {

namespace fs = std::filesystem;

// "SIZE MTIME": the first two fields are what `stat -c '%s %Y'` prints, so stamps the
// older scripts/fetch_model wrote are read the same way; the digest follows.
Result<std::string> stamp_for(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return error("no file {}", path);
  return fmt::format("{} {}", static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtime));
}

}  // namespace

std::string ModelCache::default_root() {
  if (const char* c = std::getenv("PAGODA_CACHE"); c != nullptr && *c != '\0') return c;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : ".") + "/.cache/pagoda";
}

bool ModelCache::is_verified(const CatalogEntry& e) const {
  const std::string path = path_of(e);
  std::error_code ec;
  if (fs::file_size(path, ec) != e.size || ec) return false;
  auto want = stamp_for(path);
  if (!want) return false;
  std::ifstream in(path + ".verified");
  std::string size, mtime;
  if (!(in >> size >> mtime)) return false;
  return size + " " + mtime == *want;
}

Status ModelCache::write_stamp(const CatalogEntry& e) const {
  const std::string path = path_of(e);
  auto s = stamp_for(path);
  if (!s) return s.status();
  const std::string stamp = path + ".verified";
  std::ofstream out(stamp, std::ios::trunc);
  out << *s << " " << e.sha256 << "\n";
  out.close();
  if (!out) return error("cannot write {}", stamp);
  return Status::ok();
}

std::vector<CachedFile> ModelCache::list(const Catalog& catalog) const {
  std::vector<CachedFile> out;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(models_dir(), ec)) {
    if (!de.is_regular_file(ec) || de.path().extension() != ".gguf") continue;
    CachedFile f;
    f.path = de.path().string();
    f.file = de.path().filename().string();
    f.size = de.file_size(ec);
    for (const CatalogEntry& e : catalog.entries())
      if (e.file == f.file) {
        f.entry = &e;
        break;
      }
    f.verified = f.entry != nullptr && is_verified(*f.entry);
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const CachedFile& a, const CachedFile& b) { return a.file < b.file; });
  return out;
}

}  // namespace pagoda
