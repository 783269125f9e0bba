// `pagoda list`: the models in the cache, with their sizes; --all adds every catalog
// model that can be pulled by name.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

#include "base/human_size.h"
#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/model_loader.h"
#include "hub/catalog.h"
#include "hub/model_cache.h"

namespace pagoda {
namespace {

struct ListArgs {
  bool all = false;
  bool json = false;
};

int run_list(const ListArgs& a) {
  auto catalog = Catalog::load();
  if (!catalog) return report_error(catalog.status());
  ModelCache cache(ModelCache::default_root());
  const std::vector<CachedFile> files = cache.list(*catalog);
  std::vector<const CatalogEntry*> not_pulled;
  for (const CatalogEntry& e : catalog->entries())
    if (std::none_of(files.begin(), files.end(), [&](const CachedFile& f) { return f.entry == &e; }))
      not_pulled.push_back(&e);
  if (a.json) {
    nlohmann::json out = {{"cache", cache.models_dir()}, {"models", nlohmann::json::array()}};
    for (const CachedFile& f : files)
      out["models"].push_back({{"name", f.entry ? f.entry->name : ""}, {"file", f.file}, {"path", f.path},
                               {"size", f.size}, {"cached", true}, {"verified", f.verified}});
    if (a.all)
      for (const CatalogEntry* e : not_pulled)
        out["models"].push_back({{"name", e->name}, {"file", e->file}, {"size", e->size}, {"cached", false},
                                 {"verified", false}, {"licence", e->licence}});
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("cache: {}\n", cache.models_dir());
  fmt::print("{:<32} {:<44} {:>11}  {}\n", "NAME", "FILE", "SIZE", "STATUS");
  for (const CachedFile& f : files) {
    const char* status = f.entry == nullptr ? "file" : f.verified ? "verified" : "not verified (pull to check)";
    fmt::print("{:<32} {:<44} {:>11}  {}\n", f.entry ? f.entry->name : "-", f.file,
               human_size(static_cast<double>(f.size)), status);
  }
  if (a.all) {
    for (const CatalogEntry* e : not_pulled)
      fmt::print("{:<32} {:<44} {:>11}  not pulled ({})\n", e->name, e->file, human_size(static_cast<double>(e->size)),
                 e->licence);
  } else if (files.empty()) {
    fmt::print("(nothing cached; `pagoda list --all` shows what `pagoda pull NAME` can fetch)\n");
  }
  return 0;
}

}  // namespace

Subcommand add_list_command(CLI::App& app) {
  auto args = std::make_shared<ListArgs>();
  CLI::App* sub = add_subcommand(app, "list", "Models in the cache (and, with --all, the catalog)");
  sub->add_flag("--all", args->all, "Also list catalog models not pulled yet");
  sub->add_flag("--json", args->json, "JSON output");
  return {"list", sub, [args] { return run_list(*args); }};
}

}  // namespace pagoda
