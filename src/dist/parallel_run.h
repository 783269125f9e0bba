// One command's model run over several processes: the cluster, this rank's place in it,
// the model's transport, and what the ranks other than 0 do (load the same model's
// shard, then run the steps rank 0 sends until it says stop). A command that supports
// --tp/--pp starts one before loading the model, attaches the model, and hands ranks other
// than 0 to serve_steps; on rank 0 the destructor tells the others to stop. Its lifetime
// must enclose the model's use; one per process, used from one thread at a time.
#pragma once

#include <memory>

#include "base/status.h"
#include "dist/cluster.h"
#include "dist/mpi_comm.h"
#include "model/parallel.h"

namespace pagoda {

class GgufFile;
class Model;

class ParallelRun {
 public:
  // Null for one process (tp x pp = 1).
  static Result<std::unique_ptr<ParallelRun>> start(const ClusterOptions& options);
  ~ParallelRun();

  bool is_root() const { return cluster_->rank() == 0; }
  ParallelRank place() const {
    return ParallelRank{cluster_->options().tp, cluster_->options().pp, cluster_->rank(), cluster_->options().sp};
  }
  // Checks (on every rank) that all loaded the same file, then gives the model its transport.
  Status attach(const GgufFile& file, Model& model);
  // Ranks other than 0: runs rank 0's steps until it stops them or the cluster is lost.
  Status serve_steps(Model& model);
  MpiComm& comm() { return *comm_; }

 private:
  explicit ParallelRun(std::unique_ptr<Cluster> cluster) : cluster_(std::move(cluster)) {}
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<MpiComm> comm_;
};

}  // namespace pagoda
