// What rank 0 tells the other ranks, one message at a time, as bytes: the KV storage to
// create (once, before the first step), each step's plan (the KV block copies since the
// last step, then the batch: tokens, and per sequence its positions, block tables, logits
// rows, pooling and text-pair segment), or the end. Encoding and decoding are pure
// functions; decode checks every length against the bytes it has and fails on a message it
// cannot read whole.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kv/kv_storage.h"
#include "model/batch.h"

namespace pagoda {

// kStats: every rank reports its traffic counters to rank 0 (MpiComm::rank_stats).
enum class MessageKind : int64_t { kSetup = 1, kStep = 2, kStop = 3, kStats = 4 };

struct KvCopy {
  BlockId src = 0, dst = 0;
  int32_t rows = 0;
};

struct StepPlan {
  std::vector<KvCopy> copies;
  Batch batch;
  // The block tables the batch's sequences point into (BatchSeq::tables spans them).
  std::vector<std::vector<std::vector<BlockId>>> tables;
};

std::vector<uint8_t> encode_setup(const KvShape& shape, int32_t num_blocks);
Status decode_setup(std::span<const uint8_t> bytes, KvShape& shape, int32_t& num_blocks);

std::vector<uint8_t> encode_step(std::span<const KvCopy> copies, const Batch& batch);
// Fills plan (its batch's tables point into plan.tables: keep plan alive while it runs).
Status decode_step(std::span<const uint8_t> bytes, StepPlan& plan);

}  // namespace pagoda
