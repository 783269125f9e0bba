#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

#include "base/cpu_features.h"
#include "cli/commands.h"

namespace pagoda {

int cli_main(int argc, char** argv) {
  CLI::App app{"Pagoda: LLM inference engine for GGUF models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pagoda 0.1.0");
  std::vector<Subcommand> subs = {add_run_command(app), add_inspect_command(app), add_bench_command(app),
                                 add_serve_command(app), add_chat_command(app), add_quantize_command(app),
                                 add_perplexity_command(app), add_pull_command(app),
                                 add_list_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (const Subcommand& s : subs)
    if (s.app->parsed()) return s.run();
  return 1;
}

}  // namespace pagoda
