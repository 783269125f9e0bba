#include "dist/mpi_comm.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/system_memory.h"
#include "dist/handles.h"
#include "kv/kv_storage.h"

namespace pagoda {
namespace {

constexpr int kTagActivations = 11;
constexpr int kTagLogits = 12;

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_terminating{false};
static_assert(std::atomic<bool>::is_always_lock_free);

}  // namespace

void MpiComm::note_termination() { g_terminating.store(true, std::memory_order_relaxed); }

MpiComm::MpiComm(Cluster& cluster, const ParallelSplit& split) : cluster_(cluster), split_(split) {}

Status MpiComm::wait(void* requests, int n, const char* what, bool idle) {
  auto* reqs = static_cast<MPI_Request*>(requests);
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cluster_.timeout_s()));
  for (int64_t spins = 0;; ++spins) {
    int done = 0;
    if (MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      lost_ = error("the cluster is lost: {} failed (a rank died or its link broke)", what);
      return lost_;
    }
    if (done) break;
    // Spin briefly (a peer a few microseconds behind), then yield on every poll: a TCP
    // transfer's packets are moved by the kernel's softirq work, which a spinning rank on
    // every core delays by a scheduler tick (4 ms per gather measured over a veth pair
    // with 4000 spins first; 47 us yielding); idle workers and more ranks than cores must
    // not starve the rank doing the work either.
    if (spins < 64) continue;
    const auto now = Clock::now();
    if (!idle && g_terminating.load(std::memory_order_relaxed) && now - t0 > std::chrono::milliseconds(500)) {
      lost_ = error("the cluster is lost: asked to stop while {} made no progress", what);
      return lost_;
    }
    if (!idle && now > deadline) {
      // The requests are left pending (a collective's cannot be cancelled): the cluster is
      // lost, and the process ends the job (ParallelRun's destructor) without finalizing.
      lost_ = error("the cluster is lost: {} waited {:.0f} s for a rank that did not answer (it died or hangs; "
                    "--dist-timeout sets the wait)",
                    what, cluster_.timeout_s());
      return lost_;
    }
    if (now - t0 < std::chrono::milliseconds(2)) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(now - t0 < std::chrono::milliseconds(200) ? 50 : 500));
  }
  comm_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  return Status::ok();
}

Status MpiComm::broadcast(MessageKind kind, const std::vector<uint8_t>& payload) {
  if (lost()) return lost_;
  MPI_Comm world = cluster_.handles().world;
  int64_t header[2] = {static_cast<int64_t>(kind), static_cast<int64_t>(payload.size())};
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibcast(header, 2, MPI_INT64_T, 0, world, &req);
  PAGODA_TRY(wait(&req, 1, "sending the step"));
  bytes_sent_ += static_cast<int64_t>(sizeof header) * (cluster_.size() - 1);
  if (payload.empty()) return Status::ok();
  MPI_Ibcast(const_cast<uint8_t*>(payload.data()), static_cast<int>(payload.size()), MPI_BYTE, 0, world, &req);
  PAGODA_TRY(wait(&req, 1, "sending the step"));
  bytes_sent_ += static_cast<int64_t>(payload.size()) * (cluster_.size() - 1);
  return Status::ok();
}

Status MpiComm::receive(MessageKind& kind, std::vector<uint8_t>& payload) {
  if (lost()) return lost_;
  MPI_Comm world = cluster_.handles().world;
  int64_t header[2] = {0, 0};
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibcast(header, 2, MPI_INT64_T, 0, world, &req);
  PAGODA_TRY(wait(&req, 1, "waiting for rank 0", /*idle=*/true));
  if (header[0] < 1 || header[0] > 4 || header[1] < 0 || header[1] > (int64_t{1} << 31) - 1)
    return lost_ = error("rank 0 sent a message this rank cannot read (kind {}, {} bytes)", header[0], header[1]);
  kind = static_cast<MessageKind>(header[0]);
  payload.resize(static_cast<size_t>(header[1]));
  if (payload.empty()) return Status::ok();
  MPI_Ibcast(payload.data(), static_cast<int>(payload.size()), MPI_BYTE, 0, world, &req);
  return wait(&req, 1, "receiving the step");
}

Status MpiComm::send_stop() { return broadcast(MessageKind::kStop, {}); }

Status MpiComm::report_stats() {
  double mine[3] = {static_cast<double>(bytes_sent_), comm_seconds_, static_cast<double>(peak_resident_bytes())};
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Igather(mine, 3, MPI_DOUBLE, nullptr, 3, MPI_DOUBLE, 0, cluster_.handles().world, &req);
  PAGODA_TRY(wait(&req, 1, "reporting traffic counters"));
  reset_counters();
  return Status::ok();
}

Result<std::vector<MpiComm::RankStats>> MpiComm::rank_stats() {
  PAGODA_TRY(broadcast(MessageKind::kStats, {}));
  double mine[3] = {static_cast<double>(bytes_sent_), comm_seconds_, static_cast<double>(peak_resident_bytes())};
  std::vector<double> all(static_cast<size_t>(cluster_.size()) * 3);
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Igather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, 0, cluster_.handles().world, &req);
  PAGODA_TRY(wait(&req, 1, "collecting traffic counters"));
  std::vector<RankStats> out(static_cast<size_t>(cluster_.size()));
  for (size_t r = 0; r < out.size(); ++r)
    out[r] = RankStats{static_cast<int64_t>(all[3 * r]), all[3 * r + 1], static_cast<int64_t>(all[3 * r + 2])};
  reset_counters();
  return out;
}

Status MpiComm::begin_step(const Batch& batch, KvStorage& kv) {
  if (!setup_sent_) {
    // Every rank makes its storage with rank 0's blocks (its own heads of them), and
    // repeats rank 0's copy-on-write copies from here on.
    PAGODA_TRY(broadcast(MessageKind::kSetup, encode_setup(kv.shape(), kv.num_blocks())));
    kv.set_copy_listener([this](BlockId src, BlockId dst, int32_t rows) { pending_copies_.push_back({src, dst, rows}); });
    setup_sent_ = true;
  }
  Status st = broadcast(MessageKind::kStep, encode_step(pending_copies_, batch));
  pending_copies_.clear();
  return st;
}

Status MpiComm::gather_columns(const float* mine, int64_t rows, std::span<const int64_t> counts, float* out) {
  if (lost()) return lost_;
  // Rank r's block is rows x counts[r]: the layout of blocks of counts[r] "rows" of width rows.
  const int64_t total = row_layout(counts, rows);
  staging_.resize(static_cast<size_t>(rows * total));
  MPI_Request req = MPI_REQUEST_NULL;
  const size_t me = static_cast<size_t>(split_.tp_rank);
  MPI_Iallgatherv(mine, counts_[me], MPI_FLOAT, staging_.data(), counts_.data(), displs_.data(), MPI_FLOAT,
                  cluster_.handles().stage, &req);
  PAGODA_TRY(wait(&req, 1, "a gather between tensor-parallel ranks"));
  bytes_sent_ += static_cast<int64_t>(counts_[me]) * 4 * static_cast<int64_t>(counts.size() - 1);
  interleave_columns(rows, counts, total, out);
  return Status::ok();
}

void MpiComm::interleave_columns(int64_t rows, std::span<const int64_t> counts, int64_t total, float* out) const {
  int64_t col = 0;
  const float* src = staging_.data();
  for (int64_t c : counts) {
    for (int64_t t = 0; t < rows; ++t)
      std::memcpy(out + t * total + col, src + t * c, static_cast<size_t>(c) * sizeof(float));
    col += c;
    src += rows * c;
  }
}

int64_t MpiComm::row_layout(std::span<const int64_t> counts, int64_t width) {
  counts_.resize(counts.size());
  displs_.resize(counts.size());
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    counts_[r] = static_cast<int>(counts[r] * width);
    displs_[r] = static_cast<int>(total * width);
    total += counts[r];
  }
  return total;
}

Status MpiComm::gather_rows(const float* mine, std::span<const int64_t> counts, int64_t width, float* out) {
  if (lost()) return lost_;
  row_layout(counts, width);
  const size_t me = static_cast<size_t>(split_.sp_rank);
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Iallgatherv(mine, counts_[me], MPI_FLOAT, out, counts_.data(), displs_.data(), MPI_FLOAT,
                  cluster_.handles().world, &req);
  PAGODA_TRY(wait(&req, 1, "a gather of keys and values between sequence-parallel ranks"));
  bytes_sent_ += static_cast<int64_t>(counts_[me]) * 4 * static_cast<int64_t>(counts.size() - 1);
  return Status::ok();
}

Status MpiComm::gather_rows_to_root(const float* mine, std::span<const int64_t> counts, int64_t width, float* out) {
  if (lost()) return lost_;
  row_layout(counts, width);
  const size_t me = static_cast<size_t>(split_.sp_rank);
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Igatherv(mine, counts_[me], MPI_FLOAT, out, counts_.data(), displs_.data(), MPI_FLOAT, 0,
               cluster_.handles().world, &req);
  PAGODA_TRY(wait(&req, 1, "sending logits rows to rank 0"));
  if (me != 0) bytes_sent_ += static_cast<int64_t>(counts_[me]) * 4;
  return Status::ok();
}

Status MpiComm::send_next(const float* x, int64_t n) {
  if (lost()) return lost_;
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Isend(x, static_cast<int>(n), MPI_FLOAT, split_.world_rank(split_.pp_rank + 1, split_.tp_rank),
            kTagActivations, cluster_.handles().world, &req);
  PAGODA_TRY(wait(&req, 1, "sending activations to the next stage"));
  bytes_sent_ += n * 4;
  return Status::ok();
}

Status MpiComm::recv_prev(float* x, int64_t n) {
  if (lost()) return lost_;
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Irecv(x, static_cast<int>(n), MPI_FLOAT, split_.world_rank(split_.pp_rank - 1, split_.tp_rank),
            kTagActivations, cluster_.handles().world, &req);
  return wait(&req, 1, "receiving activations from the previous stage");
}

Status MpiComm::collect_logits(const float* mine, int64_t rows, std::span<const int64_t> counts, float* out) {
  if (lost()) return lost_;
  MPI_Comm world = cluster_.handles().world;
  const int32_t last = split_.pp_size - 1;
  if (!split_.root()) {
    MPI_Request req = MPI_REQUEST_NULL;
    const int64_t n = rows * counts[static_cast<size_t>(split_.tp_rank)];
    MPI_Isend(mine, static_cast<int>(n), MPI_FLOAT, 0, kTagLogits, world, &req);
    PAGODA_TRY(wait(&req, 1, "sending logits to rank 0"));
    bytes_sent_ += n * 4;
    return Status::ok();
  }
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  staging_.resize(static_cast<size_t>(rows * total));
  std::vector<MPI_Request> reqs;
  int64_t at = 0;
  for (size_t t = 0; t < counts.size(); ++t) {
    const int src = split_.world_rank(last, static_cast<int32_t>(t));
    float* dst = staging_.data() + at;
    if (src == 0) std::memcpy(dst, mine, static_cast<size_t>(rows * counts[t]) * sizeof(float));
    else {
      reqs.push_back(MPI_REQUEST_NULL);
      MPI_Irecv(dst, static_cast<int>(rows * counts[t]), MPI_FLOAT, src, kTagLogits, world, &reqs.back());
    }
    at += rows * counts[t];
  }
  PAGODA_TRY(wait(reqs.data(), static_cast<int>(reqs.size()), "receiving logits from the last stage"));
  interleave_columns(rows, counts, total, out);
  return Status::ok();
}

}  // namespace pagoda
