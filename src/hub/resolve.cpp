#include "hub/resolve.h"

#include <filesystem>

namespace pagoda {

Result<std::string> resolve_model(const std::string& arg, const ResolveOptions& opt) {
  std::error_code ec;
  if (arg.empty()) return error("no model given (-m FILE.gguf or a name from `pagoda list --all`)");
  if (std::filesystem::exists(arg, ec)) return arg;
  auto catalog = Catalog::load();
  if (!catalog) return catalog.status();
  const CatalogEntry* e = catalog->find(arg);
  if (e == nullptr) {
    return error("{}: no such file, and no model of that name in the catalog (`pagoda list --all` shows the names)",
                 arg);
  }
  ModelCache cache(ModelCache::default_root());
  if (cache.is_verified(*e)) return cache.path_of(*e);
  if (!opt.allow_pull) return error("{} is not in the cache ({}); run `pagoda pull {}`", e->name, cache.models_dir(), e->name);
  return pull_model(*e, cache, opt.pull);
}

}  // namespace pagoda
