// The processes one model runs over (`mpirun -np N pagoda ... --tp T --pp P`, N = T x P):
// MPI started with the thread level the engine's own thread needs, the communicator of
// this rank's pipeline stage (its tensor-parallel group), and the checks every rank
// makes before the first step (same world size as asked, same model file). Rank 0 runs
// the command (HTTP, tokenizer, scheduler, sampling); every other rank runs
// run_worker (worker.h). One Cluster per process, created before the model is loaded
// and destroyed last (it finalizes MPI). Not thread-safe: MPI is called from one thread
// at a time (the engine's).
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "model/parallel.h"

namespace pagoda {

class GgufFile;
struct ModelConfig;

struct ClusterOptions {
  int32_t tp = 1;
  int32_t pp = 1;
  int32_t sp = 1;
  // How long one transfer or collective may wait for its peers before the step fails (a
  // rank that died or hangs); 0: the default, 60 s.
  double timeout_s = 0;
};

class Cluster {
 public:
  // Null when the options ask for one process; an error when they ask for more but this
  // process was not started by mpirun with exactly tp x pp x sp ranks.
  static Result<std::unique_ptr<Cluster>> join(const ClusterOptions& options);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }
  const ClusterOptions& options() const { return options_; }
  double timeout_s() const { return options_.timeout_s > 0 ? options_.timeout_s : 60.0; }
  // The split of this rank for a model of config c.
  Result<ParallelSplit> split_for(const ModelConfig& c) const;
  // Every rank calls it after loading: fails on all of them unless every rank opened the
  // same file (size and a hash of its header and tensor table).
  Status check_same_file(const GgufFile& file);
  // Ends this process now with `code`, which makes mpirun end the other ranks: what is left
  // when a rank is lost, since finalizing would wait for it.
  [[noreturn]] void abort(int code);

  // The MPI handles (cluster.cpp); mpi_comm.cpp and worker.cpp read them.
  struct Handles;
  Handles& handles() const { return *handles_; }

 private:
  Cluster();
  ClusterOptions options_;
  int32_t rank_ = 0;
  int32_t size_ = 1;
  std::unique_ptr<Handles> handles_;
};

}  // namespace pagoda
