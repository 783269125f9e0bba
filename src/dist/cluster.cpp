#include "dist/cluster.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/log.h"
#include "dist/handles.h"
#include "gguf/gguf_file.h"
#include "model/config.h"

namespace pagoda {

Cluster::Cluster() : handles_(std::make_unique<Handles>()) {}

Result<std::unique_ptr<Cluster>> Cluster::join(const ClusterOptions& options) {
  if (options.tp < 1 || options.pp < 1 || options.sp < 1)
    return error("--tp, --pp and --sp must be at least 1 (got {}, {} and {})", options.tp, options.pp, options.sp);
  if (options.sp > 1 && (options.tp > 1 || options.pp > 1))
    return error("--sp runs alone: it cannot be combined with --tp or --pp");
  const int32_t want = options.tp * options.pp * options.sp;
  if (want == 1) return std::unique_ptr<Cluster>();
  const std::string flags = options.sp > 1 ? fmt::format("--sp {}", options.sp)
                                           : fmt::format("--tp {} --pp {}", options.tp, options.pp);
  // Without mpirun, MPI_Init would make a world of one and every check below would read
  // as a size mismatch; say how to start it instead.
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr &&
      std::getenv("PMIX_RANK") == nullptr)
    return error("{} runs over {} processes: start it with `mpirun -np {} pagoda ...`", flags, want, want);
  int provided = 0;
  // The engine calls MPI from its own thread (the server's loop), never two threads at once.
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return error("MPI_Init_thread failed");
  std::unique_ptr<Cluster> c(new Cluster());
  c->options_ = options;
  if (provided < MPI_THREAD_SERIALIZED)
    return error("this MPI library gives thread level {}; Pagoda needs MPI_THREAD_SERIALIZED", provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_dup(MPI_COMM_WORLD, &c->handles_->world);
  MPI_Comm_set_errhandler(c->handles_->world, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->handles_->world, &c->rank_);
  MPI_Comm_size(c->handles_->world, &c->size_);
  if (c->size_ != want) return error("{} needs {} processes, but mpirun started {}", flags, want, c->size_);
  // Stages are consecutive groups of tp ranks (ParallelSplit::world_rank).
  MPI_Comm_split(c->handles_->world, c->rank_ / options.tp, c->rank_ % options.tp, &c->handles_->stage);
  MPI_Comm_set_errhandler(c->handles_->stage, MPI_ERRORS_RETURN);
  if (c->rank_ != 0) set_log_level(LogLevel::kWarn);  // one process reports
  return c;
}

Cluster::~Cluster() {
  if (handles_->stage != MPI_COMM_NULL) MPI_Comm_free(&handles_->stage);
  if (handles_->world != MPI_COMM_NULL) MPI_Comm_free(&handles_->world);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void Cluster::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  // Not MPI_Abort: when mpirun is already ending the job (a rank died) it can wait on it
  // until mpirun's SIGKILL. A rank that exits non-zero makes mpirun end the others
  // (orte_abort_on_non_zero_status, on by default), a hung one included.
  std::_Exit(code);
}

Result<ParallelSplit> Cluster::split_for(const ModelConfig& c) const {
  return plan_split(c, options_.tp, options_.pp, rank_, options_.sp);
}

Status Cluster::check_same_file(const GgufFile& file) {
  // The header and tensor table say which tensors lie where with which shapes and types;
  // with the size they tell apart any two files a user would mix up.
  uint64_t mine[2] = {static_cast<uint64_t>(file.file_size()), 0};
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  for (const auto& [key, value] : file.metadata()) XXH3_64bits_update(st, key.data(), key.size());
  for (const GgufTensor& t : file.tensors()) {
    XXH3_64bits_update(st, t.name.data(), t.name.size());
    const uint64_t where[3] = {t.offset, t.nbytes, static_cast<uint64_t>(t.type)};
    XXH3_64bits_update(st, where, sizeof where);
  }
  mine[1] = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  std::vector<uint64_t> all(static_cast<size_t>(size_) * 2);
  if (MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, handles_->world) != MPI_SUCCESS)
    return error("the ranks could not compare their model files (MPI_Allgather failed)");
  for (int32_t r = 1; r < size_; ++r)
    if (all[static_cast<size_t>(r) * 2] != all[0] || all[static_cast<size_t>(r) * 2 + 1] != all[1])
      return error("rank {} opened a different model file than rank 0 ({} bytes against {}): every rank must load "
                   "the same file",
                   r, all[static_cast<size_t>(r) * 2], all[0]);
  return Status::ok();
}

}  // namespace pagoda
