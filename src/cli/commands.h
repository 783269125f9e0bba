// The `pagoda` command: one subcommand per file (run, inspect, ...). Each returns the
// process exit code; errors are printed as one clear line, never a crash.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace pagoda {

int cli_main(int argc, char** argv);

// Each registers its subcommand on the app, its options bound to an arguments object
// that `run` owns (so nothing lives in static storage); run it when app->parsed().
struct Subcommand {
  const char* name;
  CLI::App* app;
  std::function<int()> run;
};
Subcommand add_run_command(CLI::App& app);
Subcommand add_inspect_command(CLI::App& app);
Subcommand add_bench_command(CLI::App& app);
Subcommand add_serve_command(CLI::App& app);
Subcommand add_chat_command(CLI::App& app);
Subcommand add_quantize_command(CLI::App& app);
Subcommand add_perplexity_command(CLI::App& app);
Subcommand add_distill_dump_command(CLI::App& app);
Subcommand add_pull_command(CLI::App& app);
Subcommand add_list_command(CLI::App& app);
Subcommand add_plan_command(CLI::App& app);
Subcommand add_doctor_command(CLI::App& app);
Subcommand add_convert_command(CLI::App& app);
Subcommand add_embed_command(CLI::App& app);
Subcommand add_rerank_command(CLI::App& app);
Subcommand add_compress_command(CLI::App& app);
// `pagoda bench throughput` and `pagoda bench serve`, nested under bench.
Subcommand add_bench_throughput_command(CLI::App& bench);
Subcommand add_bench_serve_command(CLI::App& bench);

}  // namespace pagoda
