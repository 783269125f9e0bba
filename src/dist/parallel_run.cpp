#include "dist/parallel_run.h"

#include <csignal>

#include "base/log.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace pagoda {

namespace {
extern "C" void on_termination(int) { MpiComm::note_termination(); }
}  // namespace

Result<std::unique_ptr<ParallelRun>> ParallelRun::start(const ClusterOptions& options) {
  auto cluster = Cluster::join(options);
  if (!cluster) return cluster.status();
  if (cluster.value() == nullptr) return std::unique_ptr<ParallelRun>();
  return std::unique_ptr<ParallelRun>(new ParallelRun(std::move(cluster.value())));
}

ParallelRun::~ParallelRun() {
  // The workers wait for rank 0's next message: the end, unless the cluster is already
  // lost (then nobody would receive it and mpirun ends the job).
  if (comm_ != nullptr && comm_->lost()) {
    // A rank died or hangs: MPI_Finalize would wait for it forever. End the whole job.
    log_error("ending every rank: {}", comm_->lost_status().message());
    cluster_->abort(1);
  }
  if (is_root() && comm_ != nullptr) {
    Status st = comm_->send_stop();
    if (!st.is_ok()) log_warn("{}", st.message());
  }
}

Status ParallelRun::attach(const GgufFile& file, Model& model) {
  PAGODA_TRY(cluster_->check_same_file(file));
  comm_ = std::make_unique<MpiComm>(*cluster_, model.split());
  model.set_comm(comm_.get());
  return Status::ok();
}

Status ParallelRun::serve_steps(Model& model) {
  // mpirun hands a Ctrl-C or SIGTERM to every rank: rank 0 drains its requests, which
  // needs this rank while rank 0 still sends; once it stops sending, this rank ends.
  std::signal(SIGINT, on_termination);
  std::signal(SIGTERM, on_termination);
  std::unique_ptr<KvStorage> kv;
  StepPlan plan;
  std::vector<uint8_t> payload;
  std::vector<float> pooled;
  for (;;) {
    MessageKind kind = MessageKind::kStop;
    if (Status st = comm_->receive(kind, payload); !st.is_ok()) {
      if (comm_->lost()) cluster_->abort(1);  // rank 0 is gone: finalizing would wait for it
      return st;
    }
    switch (kind) {
      case MessageKind::kStop: return Status::ok();
      case MessageKind::kStats: PAGODA_TRY(comm_->report_stats()); break;
      case MessageKind::kSetup: {
        KvShape shape;
        int32_t blocks = 0;
        PAGODA_TRY(decode_setup(payload, shape, blocks));
        shape.n_kv_heads = model.kv_heads_held();  // rank 0 described its own heads
        auto storage = KvStorage::create(shape, blocks);
        if (!storage) return error("rank {}: {}", cluster_->rank(), storage.status().message());
        kv = std::move(storage.value());
        // As rank 0's engine does (Engine::prefault_kv): the stage's KV is resident from the
        // start, so a budget this machine cannot hold fails here rather than mid-request,
        // and every rank's memory is what `pagoda plan --tp/--pp` predicts.
        kv->prefault(static_cast<int32_t>(model.split().layers.begin), static_cast<int32_t>(model.split().layers.end));
        break;
      }
      case MessageKind::kStep: {
        if (kv == nullptr) return error("rank {}: a step arrived before the KV storage was described", cluster_->rank());
        PAGODA_TRY(decode_step(payload, plan));
        for (const KvCopy& c : plan.copies) {
          if (c.src < 0 || c.dst < 0 || c.src >= kv->num_blocks() || c.dst >= kv->num_blocks() || c.rows < 0 ||
              c.rows > kv->shape().block_size)
            return error("rank {}: rank 0 asked to copy KV block {} to {} ({} rows), outside the storage",
                         cluster_->rank(), c.src, c.dst, c.rows);
          kv->copy_block(c.src, c.dst, c.rows);
        }
        pooled.resize(static_cast<size_t>(plan.batch.n_pooled()) * static_cast<size_t>(model.config().n_embd));
        Status st = model.forward(plan.batch, *kv, nullptr, pooled.data());
        if (!st.is_ok()) return error("rank {}: {}", cluster_->rank(), st.message());
        break;
      }
    }
  }
}

}  // namespace pagoda
