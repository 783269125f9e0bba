#include "hub/catalog.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace pagoda {

namespace {

using nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool all_of_chars(std::string_view s, std::string_view extra) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || extra.find(c) != std::string_view::npos;
  });
}

bool is_hex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// A member path must stay inside the wheel; a file name must stay inside the cache.
bool is_safe_member(std::string_view m) {
  if (m.empty() || m.front() == '/' || m.find('\\') != std::string_view::npos) return false;
  size_t start = 0;
  while (start <= m.size()) {
    size_t end = m.find('/', start);
    if (end == std::string_view::npos) end = m.size();
    std::string_view seg = m.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    start = end + 1;
  }
  return true;
}

Result<std::string> string_field(const json& obj, const char* key, const std::string& where, bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return error("{}: missing \"{}\"", where, key);
    return std::string();
  }
  if (!it->is_string()) return error("{}: \"{}\" must be a string", where, key);
  return it->get<std::string>();
}

Result<CatalogPart> parse_part(const json& j, const std::string& where) {
  if (!j.is_object()) return error("{}: a part must be an object", where);
  CatalogPart p;
  auto package = string_field(j, "package", where, true);
  if (!package) return package.status();
  auto version = string_field(j, "version", where, true);
  if (!version) return version.status();
  auto member = string_field(j, "member", where, true);
  if (!member) return member.status();
  p.package = *package;
  p.version = *version;
  p.member = *member;
  if (!all_of_chars(p.package, "-_.")) return error("{}: \"{}\" is not a package name", where, p.package);
  if (!all_of_chars(p.version, "-_.+!")) return error("{}: \"{}\" is not a version", where, p.version);
  if (!is_safe_member(p.member)) return error("{}: member \"{}\" is not a relative path inside the wheel", where, p.member);
  return p;
}

Result<CatalogEntry> parse_entry(const json& j, const std::string& source, size_t index) {
  std::string where = fmt::format("{}: model {}", source, index);
  if (!j.is_object()) return error("{} must be an object", where);
  CatalogEntry e;
  e.source = source;
  auto name = string_field(j, "name", where, true);
  if (!name) return name.status();
  e.name = *name;
  if (!all_of_chars(e.name, "-_.:")) return error("{}: \"{}\" is not a model name (letters, digits, - _ . :)", where, e.name);
  where = fmt::format("{}: model \"{}\"", source, e.name);
  if (auto it = j.find("aliases"); it != j.end()) {
    if (!it->is_array()) return error("{}: \"aliases\" must be a list of names", where);
    for (const json& a : *it) {
      if (!a.is_string() || !all_of_chars(a.get<std::string>(), "-_.:"))
        return error("{}: \"aliases\" must be a list of names", where);
      e.aliases.push_back(a.get<std::string>());
    }
  }
  auto file = string_field(j, "file", where, true);
  if (!file) return file.status();
  e.file = *file;
  if (!all_of_chars(e.file, "-_.") || e.file.front() == '.' || e.file.size() < 6 ||
      e.file.substr(e.file.size() - 5) != ".gguf")
    return error("{}: \"file\" must be a plain file name ending in .gguf", where);
  auto size = j.find("size");
  if (size == j.end() || !size->is_number_unsigned() || size->get<uint64_t>() == 0)
    return error("{}: \"size\" must be the file's size in bytes", where);
  e.size = size->get<uint64_t>();
  auto sha = string_field(j, "sha256", where, true);
  if (!sha) return sha.status();
  e.sha256 = lower(*sha);
  if (!is_hex64(e.sha256)) return error("{}: \"sha256\" must be 64 hex digits", where);
  auto licence = string_field(j, "licence", where, true);
  if (!licence) return licence.status();
  e.licence = *licence;
  auto description = string_field(j, "description", where, false);
  if (!description) return description.status();
  e.description = *description;
  auto parts = j.find("parts");
  if (parts == j.end() || !parts->is_array() || parts->empty())
    return error("{}: \"parts\" must list at least one part", where);
  for (size_t i = 0; i < parts->size(); ++i) {
    auto p = parse_part((*parts)[i], fmt::format("{}: part {}", where, i + 1));
    if (!p) return p.status();
    e.parts.push_back(std::move(p.value()));
  }
  return e;
}

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error("cannot read catalog {} (named by PAGODA_CATALOG)", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool names_match(const CatalogEntry& e, const std::string& key) {
  if (lower(e.name) == key) return true;
  return std::any_of(e.aliases.begin(), e.aliases.end(), [&](const std::string& a) { return lower(a) == key; });
}

}  // namespace

Result<std::vector<CatalogEntry>> Catalog::parse(std::string_view text, const std::string& source) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return error("{}: not valid JSON", source);
  if (!doc.is_object() || !doc.contains("models") || !doc["models"].is_array())
    return error("{}: expected {{\"models\": [...]}}", source);
  std::vector<CatalogEntry> out;
  const json& models = doc["models"];
  for (size_t i = 0; i < models.size(); ++i) {
    auto e = parse_entry(models[i], source, i + 1);
    if (!e) return e.status();
    for (const CatalogEntry& prev : out) {
      if (names_match(prev, lower(e->name)) ||
          std::any_of(e->aliases.begin(), e->aliases.end(), [&](const std::string& a) { return names_match(prev, lower(a)); }))
        return error("{}: model \"{}\" reuses a name of \"{}\"", source, e->name, prev.name);
    }
    out.push_back(std::move(e.value()));
  }
  return out;
}

Result<Catalog> Catalog::load() {
  std::vector<CatalogEntry> entries;
  // Catalogs named by the environment first, so their entries shadow built-in ones.
  if (const char* env = std::getenv("PAGODA_CATALOG"); env != nullptr && *env != '\0') {
    std::string_view list(env);
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(':', start);
      if (end == std::string_view::npos) end = list.size();
      std::string path(list.substr(start, end - start));
      start = end + 1;
      if (path.empty()) continue;
      auto text = read_text(path);
      if (!text) return text.status();
      auto parsed = parse(*text, path);
      if (!parsed) return parsed.status();
      for (CatalogEntry& e : parsed.value()) entries.push_back(std::move(e));
    }
  }
  auto builtin = parse(builtin_catalog_json(), "built-in catalog");
  if (!builtin) return builtin.status();
  for (CatalogEntry& e : builtin.value()) entries.push_back(std::move(e));
  return Catalog(std::move(entries));
}

const CatalogEntry* Catalog::find(std::string_view name) const {
  const std::string key = lower(name);
  for (const CatalogEntry& e : entries_)
    if (names_match(e, key)) return &e;
  return nullptr;
}

}  // namespace pagoda
