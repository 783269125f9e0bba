// The flags of a model run over several processes (run, serve, bench throughput) and the
// steps every such command takes: start the cluster before loading, load this rank's
// shard, and on ranks other than 0 serve rank 0's steps instead of running the command.
#pragma once

#include <memory>
#include <optional>

#include "base/status.h"
#include "cli/model_loader.h"
#include "dist/parallel_run.h"

namespace CLI {
class App;
}

namespace pagoda {

struct ParallelArgs {
  int32_t tp = 1;
  int32_t pp = 1;
  int32_t sp = 1;
  double timeout_s = 60;
};

void add_parallel_options(CLI::App& app, ParallelArgs& args);
// --tp/--pp/--sp only: the split a command describes without running it (plan).
void add_split_options(CLI::App& app, ParallelArgs& args);

// Null for one process.
Result<std::unique_ptr<ParallelRun>> start_parallel(const ParallelArgs& args);

// After the model loaded with run's place: checks the ranks agree and attaches the
// transport. On a rank other than 0 it then serves steps and returns the process's exit
// code; on rank 0 (or with no run) nullopt, and the command goes on.
std::optional<int> attach_or_serve(ParallelRun* run, LoadedModel& loaded);

}  // namespace pagoda
