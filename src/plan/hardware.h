// What this machine does per second with each weight format, the inputs of `pagoda plan`'s
// speed roofline: the bytes per second a one-token matmul (decode's GEMV) streams and the
// FLOP/s a 128-token matmul (prefill's GEMM) reaches, both through the engine's own kernels
// (repacked panels where the engine repacks), on the thread pool the engine would use. A
// probe, not a datasheet: it sees the memory system, the SIMD target and the other load
// the machine has now.
//
// Per format rates are the whole of a named profile. On this machine the probe also times
// the model's own matmul calls (a one-token call streaming copies of its matrices past the
// caches, so the per-call overheads of small matrices are in it; a 128-token call) and
// its attention (one query against a long context in cold KV memory, a chunk of queries),
// which the roofline of per-format rates gets wrong for small models and long contexts.
//
// Cost: about a quarter of a second per format (a 128 MiB matrix read several times, a
// 4096 x 4096 GEMM) and per call; results are cached per CPU and thread count in
// $PAGODA_CACHE/hardware/, so `--hardware auto` measures each once.
// Thread-safety: measure() uses the pool it is given; the rest are pure.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/attention/attention.h"
#include "plan/model_probe.h"
#include "tensor/dtype.h"

namespace pagoda {

class GgufFile;

struct FormatRate {
  DType type = DType::F32;
  double gemv_bytes_per_s = 0;  // weight bytes streamed per second, one token
  double gemm_flops = 0;        // 2 * rows * cols * tokens per second, 128 tokens
};

struct MatrixShape {
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  bool operator==(const MatrixShape&) const = default;
};

// One matmul call of a step as the decoder makes it: the matrices reading one input (Q, K
// and V; gate and up; matmul_shared_input) or a single one.
using MatmulCall = std::vector<MatrixShape>;

struct CallTiming {
  MatmulCall call;
  double gemv_s = 0;            // one token, the matrices cold (as in a decode step)
  double gemm_s_per_token = 0;  // 128 tokens, divided by 128
};

struct AttentionShape {
  int32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  KvType kv = KvType::kF16;
  bool operator==(const AttentionShape&) const = default;
};

// Seconds per layer: decode, one query per key of its context (KV cold); prefill, per
// query and key (a chunk of queries shares each key's load).
struct AttentionTiming {
  AttentionShape shape;
  double decode_s_per_key = 0;
  double prefill_s_per_query_key = 0;
};

// What the speed model of one model asks the probe for.
struct HardwareRequest {
  std::vector<DType> types;
  std::vector<MatmulCall> calls;
  std::vector<AttentionShape> attention;
  // The model's own step on a zero-weight copy of its shape (model_probe.h), when set;
  // output_call is the call whose timing stands for the part of a step outside the layers.
  const GgufFile* model_file = nullptr;
  MatmulCall output_call;
  bool stream = false;  // the plain read bandwidth (stream_bytes_per_s)
};

struct HardwareProfile {
  std::string name;  // "auto" when measured here, else the named profile
  std::string cpu;   // cpu_features_string() / the profile's description
  int threads = 0;
  std::vector<FormatRate> formats;
  std::vector<CallTiming> calls;           // measured profiles only
  std::vector<AttentionTiming> attention;  // measured profiles only
  std::vector<ModelTiming> models;         // measured profiles only: whole steps of model shapes
  // What a plain read of memory reaches on these threads (a sum over 256 MiB): the ceiling
  // a decode step's weight streaming is held against (`pagoda doctor`). Named profiles: their
  // GEMV bandwidth.
  double stream_bytes_per_s = 0;
  const CallTiming* timing(const MatmulCall& c) const;
  const AttentionTiming* timing(const AttentionShape& s) const;
  const ModelTiming* model_timing(const std::string& key) const;
  // The rate of `t`, or of the nearest measured format by bits per weight when t was not
  // measured (named profiles list a few).
  const FormatRate& rate(DType t) const;
};

// The plain read rate of memory on the pool's threads (bytes/s), once per `window_s`
// for `seconds`: on a host whose bandwidth moves from second to second (a VM sharing
// the host's memory channels with other guests), the spread of these is how far one
// run's decode speed can be from the next's. Costs `seconds` of every pool thread's time.
std::vector<double> sample_stream(ThreadPool& pool, double seconds, double window_s = 0.1);

// Measures what `want` names (duplicates ignored) on `pool`.
HardwareProfile measure_hardware(const HardwareRequest& want, ThreadPool& pool);

// The cached profile of this CPU and thread count holding everything `want` names,
// measuring (and caching) what is missing; `remeasure` ignores the cache.
Result<HardwareProfile> auto_hardware(const HardwareRequest& want, ThreadPool& pool, bool remeasure);

// The profile as plan --json and the cache write it (docs/plan.md).
nlohmann::json hardware_json(const HardwareProfile& h);

// Named profiles (bandwidth and compute of common machines, for planning one you are not
// on); null for an unknown name. named_profiles() lists them.
const HardwareProfile* named_profile(const std::string& name);
std::vector<std::string> named_profiles();

}  // namespace pagoda
