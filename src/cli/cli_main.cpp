#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/cpu_features.h"
#include "base/printable.h"
#include "cli/commands.h"

namespace pagoda {

namespace {

// llama.cpp's multi-letter short flags, which CLI11 (one letter after a single dash) cannot
// name: each becomes its long form before parsing.
constexpr std::pair<std::string_view, std::string_view> kLlamaCppShortFlags[] = {
    {"-md", "--model-draft"},
};

}  // namespace

int cli_main(int argc, char** argv) {
  CLI::App app{"Pagoda: LLM inference engine for GGUF models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pagoda 0.1.0");
  std::vector<Subcommand> subs = {add_run_command(app), add_inspect_command(app), add_bench_command(app),
                                 add_serve_command(app), add_chat_command(app), add_quantize_command(app),
                                 add_perplexity_command(app), add_distill_dump_command(app), add_pull_command(app),
                                 add_list_command(app), add_plan_command(app), add_doctor_command(app),
                                 add_embed_command(app), add_rerank_command(app), add_convert_command(app),
                                 add_compress_command(app)};
  if (argc > 0) app.name(argv[0]);  // as parse(argc, argv) would, for the usage line
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {
    std::string_view a = argv[i];
    for (const auto& [from, to] : kLlamaCppShortFlags)
      if (a == from) a = to;
    args.emplace_back(a);  // CLI11 takes the arguments in reverse order
  }
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // The subcommands report their errors as Status; anything thrown past them (an
  // allocation the machine refuses, a library's exception) still ends as one error line
  // and exit code 1, never std::terminate's abort and core dump.
  try {
    for (const Subcommand& s : subs)
      if (s.app->parsed()) return s.run();
  } catch (const std::bad_alloc&) {
    std::fputs("error: out of memory\n", stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", printable(e.what(), 400).c_str());
    return 1;
  } catch (...) {
    std::fputs("error: unexpected failure\n", stderr);
    return 1;
  }
  return 1;
}

}  // namespace pagoda
