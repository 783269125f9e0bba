#include "cli/parallel_options.h"

#include <CLI/CLI.hpp>

namespace pagoda {

void add_split_options(CLI::App& app, ParallelArgs& a) {
  app.add_option("--tp,--tensor-parallel-size", a.tp,
                 "Split each layer's heads and rows over this many processes (start with mpirun -np TP*PP); greedy "
                 "tokens are those of one process")
      ->check(CLI::Range(1, 64));
  app.add_option("--pp,--pipeline-parallel-size", a.pp, "Split the layers into this many pipeline stages (processes)")
      ->check(CLI::Range(1, 64));
  app.add_option("--sp,--sequence-parallel-size", a.sp,
                 "Split each step's tokens (a long prompt's prefill) over this many processes, each holding the whole "
                 "model; alone, not with --tp or --pp")
      ->check(CLI::Range(1, 64));
}

void add_parallel_options(CLI::App& app, ParallelArgs& a) {
  add_split_options(app, a);
  app.add_option("--dist-timeout", a.timeout_s,
                 "Seconds one transfer between processes may wait before the cluster counts as lost (a rank died "
                 "or hangs): rank 0 then fails its requests and exits")
      ->check(CLI::Range(0.1, 86400.0));
}

Result<std::unique_ptr<ParallelRun>> start_parallel(const ParallelArgs& a) {
  return ParallelRun::start(ClusterOptions{a.tp, a.pp, a.sp, a.timeout_s});
}

std::optional<int> attach_or_serve(ParallelRun* run, LoadedModel& loaded) {
  if (run == nullptr) return std::nullopt;
  if (Status st = run->attach(*loaded.file, *loaded.model); !st.is_ok()) return report_error(st);
  if (run->is_root()) return std::nullopt;
  Status st = run->serve_steps(*loaded.model);
  if (!st.is_ok()) return report_error(st);
  return 0;
}

}  // namespace pagoda
