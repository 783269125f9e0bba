// ModelComm (model/parallel.h) over MPI: gathers within a stage, the residual stream
// between stages, the logits back to rank 0, and rank 0's step messages (step_message.h)
// to every rank. Each call waits with a deadline (Cluster::timeout_s): a peer that died
// or hangs fails the call, and every later one at once (the cluster is then lost: rank 0
// fails its requests and exits). Waits spin briefly, then yield and sleep, so an idle
// worker or an oversubscribed machine does not burn a core. One thread at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/cluster.h"
#include "dist/step_message.h"
#include "model/parallel.h"

namespace pagoda {

class MpiComm final : public ModelComm {
 public:
  MpiComm(Cluster& cluster, const ParallelSplit& split);

  Status begin_step(const Batch& batch, KvStorage& kv) override;
  Status gather_columns(const float* mine, int64_t rows, std::span<const int64_t> counts, float* out) override;
  Status send_next(const float* x, int64_t n) override;
  Status recv_prev(float* x, int64_t n) override;
  Status collect_logits(const float* mine, int64_t rows, std::span<const int64_t> counts, float* out) override;
  Status gather_rows(const float* mine, std::span<const int64_t> counts, int64_t width, float* out) override;
  Status gather_rows_to_root(const float* mine, std::span<const int64_t> counts, int64_t width, float* out) override;
  int64_t bytes_sent() const override { return bytes_sent_; }
  double comm_seconds() const override { return comm_seconds_; }
  void reset_counters() {
    bytes_sent_ = 0;
    comm_seconds_ = 0;
  }

  // Per rank, what it sent and how long it waited in transfers since the last reset.
  struct RankStats {
    int64_t bytes_sent = 0;
    double comm_seconds = 0;
    int64_t peak_rss_bytes = 0;  // the process's peak resident memory so far
  };
  // Rank 0: every rank's counters (the others answer between steps), and resets them.
  Result<std::vector<RankStats>> rank_stats();
  // The other ranks: answer rank_stats.
  Status report_stats();

  // Rank 0: tells every other rank to stop (they return from run_worker).
  Status send_stop();
  // The other ranks: the next message from rank 0, waiting without a deadline (a worker
  // idles until rank 0 has work).
  Status receive(MessageKind& kind, std::vector<uint8_t>& payload);
  // The process was asked to end (mpirun passes SIGTERM on to every rank, and sends it when
  // a rank died): from then on a transfer within a step that made no progress for half a
  // second fails, so rank 0 fails its requests at once when a peer is gone, while steps
  // that progress (rank 0 draining) go on and an idle worker waits for rank 0's stop.
  // Async-signal-safe.
  static void note_termination();
  // Whether a call failed: the cluster is lost and every call fails from here on.
  bool lost() const { return !lost_.is_ok(); }
  const Status& lost_status() const { return lost_; }

 private:
  Status broadcast(MessageKind kind, const std::vector<uint8_t>& payload);
  // Waits for the requests (deadline: the cluster's timeout; none when idle), failing the
  // cluster when they do not complete.
  Status wait(void* requests, int n, const char* what, bool idle = false);
  // counts_ and displs_ for rows x width blocks; the total rows.
  int64_t row_layout(std::span<const int64_t> counts, int64_t width);
  // staging_'s rank-major blocks (rank r's: rows x counts[r]) as token-major rows of
  // `total` columns into out.
  void interleave_columns(int64_t rows, std::span<const int64_t> counts, int64_t total, float* out) const;

  Cluster& cluster_;
  ParallelSplit split_;
  bool setup_sent_ = false;
  std::vector<KvCopy> pending_copies_;
  std::vector<float> staging_;
  std::vector<int> counts_, displs_;
  int64_t bytes_sent_ = 0;
  double comm_seconds_ = 0;
  Status lost_ = Status::ok();
};

}  // namespace pagoda
