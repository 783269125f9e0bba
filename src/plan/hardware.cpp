#include "plan/hardware.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/cpu_features.h"
#include "base/log.h"
#include "base/system_memory.h"
#include "hub/model_cache.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/packed_weights.h"

namespace pagoda {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double bits_per_weight(DType t) {
  const DTypeInfo& i = dtype_info(t);
  return 8.0 * static_cast<double>(i.type_size) / static_cast<double>(i.block_size);
}

// A rows x cols matrix of zeros in format t (every format decodes zero bytes to zeros: its
// scales are zero), repacked where the engine would repack it. Zeros cost the kernels
// what any values cost: they have no data-dependent branches.
struct ProbeMatrix {
  AlignedBuffer rows_buf, panels;
  WeightView view;
  ProbeMatrix(DType t, int64_t rows, int64_t cols) : rows_buf(row_bytes(t, cols) * rows) {
    view.type = t;
    view.rows = rows;
    view.cols = cols;
    view.row_stride = row_bytes(t, cols);
    std::fill(rows_buf.data(), rows_buf.data() + rows_buf.size(), uint8_t{0});
    view.data = rows_buf.data();
    if (packed_kernels(t) != nullptr) {
      panels = AlignedBuffer(packed_bytes(t, rows, cols));
      const int64_t n_panels = (rows + kPanelRows - 1) / kPanelRows;
      pack_panels(t, view.data, view.row_stride, rows, cols, 0, n_panels, panels.data());
      view.packed = panels.data();
    }
  }
  size_t bytes() const { return view.packed != nullptr ? packed_bytes(view.type, view.rows, view.cols) : rows_buf.size(); }
};

// The fastest of `reps` timed calls after one untimed: what the machine does when nothing
// else takes its cores or its memory bandwidth (a median would carry whatever other load
// the probe happened to meet into the cache for good).
template <class F>
double best_seconds(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t.front();
}

FormatRate measure_format(DType t, ThreadPool& pool) {
  FormatRate r;
  r.type = t;
  const int64_t cols = 4096;
  {
    // 128 MiB: far past any cache, as a model's weights are.
    const int64_t rows = std::max<int64_t>(kPanelRows, ((int64_t{128} << 20) / row_bytes(t, cols)) / kPanelRows * kPanelRows);
    ProbeMatrix m(t, rows, cols);
    std::vector<float> x(cols, 0.5f), y(rows);
    const double s = best_seconds(7, [&] { matmul(m.view, x.data(), 1, y.data(), pool); });
    r.gemv_bytes_per_s = static_cast<double>(m.bytes()) / s;
  }
  {
    const int64_t rows = 4096, tokens = 128;
    ProbeMatrix m(t, rows, cols);
    std::vector<float> x(cols * tokens, 0.5f), y(rows * tokens);
    const double s = best_seconds(5, [&] { matmul(m.view, x.data(), tokens, y.data(), pool); });
    r.gemm_flops = 2.0 * rows * cols * tokens / s;
  }
  return r;
}

// One pass of the pool's threads over buf, each summing its slice as 8 interleaved
// streams into its slot of sums (kept, so the loop is not optimized away).
void stream_pass(const std::vector<uint64_t>& buf, std::vector<uint64_t>& sums, ThreadPool& pool) {
  using Vec = uint64_t __attribute__((vector_size(32)));
  constexpr int kStreams = 8;
  pool.parallel_for(static_cast<int64_t>(buf.size()), 1 << 16, [&](int64_t b, int64_t e, int t) {
    const size_t per = static_cast<size_t>(e - b) / (4 * kStreams);  // vectors per stream
    const uint64_t* base = buf.data() + b;
    Vec acc[kStreams] = {};
    for (size_t i = 0; i < per; ++i)
      for (int k = 0; k < kStreams; ++k) {
        Vec x;
        std::memcpy(&x, base + (static_cast<size_t>(k) * per + i) * 4, sizeof x);
        acc[k] += x;
      }
    uint64_t total = 0;
    for (const Vec& a : acc) total += a[0] + a[1] + a[2] + a[3];
    sums[static_cast<size_t>(t) * 8] += total;
  }, 1);
}

constexpr size_t kStreamWords = (size_t{256} << 20) / sizeof(uint64_t);

// Bytes per second the pool's threads read memory at: each sums its slice of a 256 MiB
// buffer (past any cache) as 8 interleaved streams, the fastest of several passes. One
// stream per thread reads 15-20% below what the prefetchers give several (a GEMV's panel
// rows are several): measured 20 against 24-26 GB/s on 2 Zen 5 threads.
double measure_stream(ThreadPool& pool) {
  std::vector<uint64_t> buf(kStreamWords, 1);
  std::vector<uint64_t> sums(static_cast<size_t>(pool.num_threads()) * 8, 0);
  const double s = best_seconds(5, [&] { stream_pass(buf, sums, pool); });
  uint64_t total = 0;
  for (uint64_t v : sums) total += v;
  if (total == 0) return 0;
  return static_cast<double>(kStreamWords * sizeof(uint64_t)) / s;
}

}  // namespace

std::vector<double> sample_stream(ThreadPool& pool, double seconds, double window_s) {
  std::vector<uint64_t> buf(kStreamWords, 1);
  std::vector<uint64_t> sums(static_cast<size_t>(pool.num_threads()) * 8, 0);
  stream_pass(buf, sums, pool);  // the pages faulted in, untimed
  std::vector<double> rates;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    int passes = 0;
    double dt = 0;
    do {
      stream_pass(buf, sums, pool);
      ++passes;
      dt = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (dt < window_s);
    rates.push_back(static_cast<double>(passes) * static_cast<double>(kStreamWords * sizeof(uint64_t)) / dt);
  }
  uint64_t total = 0;
  for (uint64_t v : sums) total += v;
  if (total == 0) return {};
  return rates;
}

namespace {

// A call timed as the engine runs it: one token through `copies` copies of its matrices in
// turn (together past the last-level cache, as a model's matrices are to one another), and
// 128 tokens. The bytes are zeros, panels where the engine packs: the kernels cost the
// same for any values.
CallTiming measure_call(const MatmulCall& call, ThreadPool& pool) {
  CallTiming r;
  r.call = call;
  if (call.empty()) return r;
  std::vector<size_t> offset;
  size_t stride = 0;
  for (const MatrixShape& s : call) {
    offset.push_back(stride);
    const bool packed = packed_kernels(s.type) != nullptr;
    const size_t bytes = packed ? packed_bytes(s.type, s.rows, s.cols) : row_bytes(s.type, s.cols) * s.rows;
    stride += (bytes + 4095) / 4096 * 4096;
  }
  const int64_t copies = std::clamp<int64_t>(static_cast<int64_t>((size_t{192} << 20) / stride), 1, 4096);
  AlignedBuffer buf(stride * static_cast<size_t>(copies));
  if (buf.data() == nullptr) return r;
  std::fill(buf.data(), buf.data() + buf.size(), uint8_t{0});
  const int64_t cols = call.front().cols, tokens = 128;
  std::vector<std::vector<WeightView>> views(copies);
  for (int64_t i = 0; i < copies; ++i)
    for (size_t m = 0; m < call.size(); ++m) {
      const MatrixShape& s = call[m];
      WeightView v;
      v.type = s.type;
      v.rows = s.rows;
      v.cols = s.cols;
      v.row_stride = row_bytes(s.type, s.cols);
      uint8_t* p = buf.data() + static_cast<size_t>(i) * stride + offset[m];
      v.data = p;
      if (packed_kernels(s.type) != nullptr) v.packed = p;
      views[i].push_back(v);
    }
  std::vector<float> x(cols * tokens, 0.5f);
  std::vector<std::vector<float>> y(call.size());
  std::vector<float*> ys;
  for (size_t m = 0; m < call.size(); ++m) {
    y[m].resize(call[m].rows * tokens);
    ys.push_back(y[m].data());
  }
  auto run = [&](int64_t i, int64_t n) {
    std::vector<const WeightView*> ws;
    for (const WeightView& v : views[i]) ws.push_back(&v);
    if (ws.size() == 1)
      matmul(*ws[0], x.data(), n, ys[0], pool);
    else
      matmul_shared_input(ws, x.data(), n, ys, pool);
  };
  r.gemv_s = best_seconds(5, [&] {
               for (int64_t i = 0; i < copies; ++i) run(i, 1);
             }) / static_cast<double>(copies);
  r.gemm_s_per_token = best_seconds(5, [&] { run(0, tokens); }) / tokens;
  return r;
}

// Attention of shape s over a 4096-token context: one query against it in each of enough
// layers' KV that they are past the caches together (decode), then 64 queries at its end
// (a prefill chunk), through the engine's paged kernel.
AttentionTiming measure_attention(const AttentionShape& s, ThreadPool& pool) {
  AttentionTiming r;
  r.shape = s;
  const int32_t ctx = 4096, block = 16, chunk = 64;
  const int64_t row = kv_row_bytes(s.kv, s.n_kv_heads, s.head_dim);
  const size_t layer_bytes = static_cast<size_t>(row) * ctx;
  const int64_t layers = std::clamp<int64_t>(static_cast<int64_t>((size_t{96} << 20) / (2 * layer_bytes)), 1, 64);
  AlignedBuffer k(layer_bytes * layers), v(layer_bytes * layers);
  if (k.data() == nullptr || v.data() == nullptr) return r;
  std::fill(k.data(), k.data() + k.size(), uint8_t{0});
  std::fill(v.data(), v.data() + v.size(), uint8_t{0});
  std::vector<int32_t> table(ctx / block);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  AttentionParams p;
  p.n_heads = s.n_heads;
  p.n_kv_heads = s.n_kv_heads;
  p.head_dim = s.head_dim;
  p.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int64_t qd = static_cast<int64_t>(s.n_heads) * s.head_dim;
  std::vector<float> q(qd * chunk, 0.5f), out(qd * chunk);
  auto kv_at = [&](int64_t l) {
    PagedKv kv;
    kv.k = k.data() + l * layer_bytes;
    kv.v = v.data() + l * layer_bytes;
    kv.row_stride = row;
    kv.block_stride = row * block;
    kv.block_shift = 4;
    kv.type = s.kv;
    return kv;
  };
  {
    const AttnSeq seq{0, 1, ctx - 1, table.data()};
    const double t = best_seconds(5, [&] {
      for (int64_t l = 0; l < layers; ++l) attention_paged(q.data(), {&seq, 1}, kv_at(l), p, out.data(), pool);
    });
    r.decode_s_per_key = t / static_cast<double>(layers) / ctx;
  }
  {
    const AttnSeq seq{0, chunk, ctx - chunk, table.data()};
    const double t = best_seconds(5, [&] { attention_paged(q.data(), {&seq, 1}, kv_at(0), p, out.data(), pool); });
    r.prefill_s_per_query_key = t / (static_cast<double>(chunk) * (ctx - chunk / 2));
  }
  return r;
}

std::string kv_name(KvType t) { return t == KvType::kF16 ? "f16" : "int8"; }

std::string cache_path(int threads) {
  std::string cpu = cpu_features_string();
  std::replace_if(cpu.begin(), cpu.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '-');
  return fmt::format("{}/hardware/{}-t{}.json", ModelCache::default_root(), cpu, threads);
}

}  // namespace

json hardware_json(const HardwareProfile& h) {
  json f = json::array();
  for (const FormatRate& r : h.formats)
    f.push_back({{"type", std::string(dtype_name(r.type))}, {"gemv_bytes_per_s", r.gemv_bytes_per_s},
                 {"gemm_flops", r.gemm_flops}});
  json sh = json::array();
  for (const CallTiming& t : h.calls) {
    json parts = json::array();
    for (const MatrixShape& m : t.call)
      parts.push_back({{"type", std::string(dtype_name(m.type))}, {"rows", m.rows}, {"cols", m.cols}});
    sh.push_back({{"matrices", parts}, {"gemv_s", t.gemv_s}, {"gemm_s_per_token", t.gemm_s_per_token}});
  }
  json at = json::array();
  for (const AttentionTiming& t : h.attention)
    at.push_back({{"n_heads", t.shape.n_heads}, {"n_kv_heads", t.shape.n_kv_heads}, {"head_dim", t.shape.head_dim},
                  {"kv", kv_name(t.shape.kv)}, {"decode_s_per_key", t.decode_s_per_key},
                  {"prefill_s_per_query_key", t.prefill_s_per_query_key}});
  json md = json::array();
  for (const ModelTiming& t : h.models)
    md.push_back({{"key", t.key}, {"kv", kv_name(t.kv)}, {"n_layer", t.n_layer}, {"layers", t.layers},
                  {"decode_keys", t.decode_keys}, {"decode_s", t.decode_s}, {"prefill_tokens", t.prefill_tokens},
                  {"prefill_s", t.prefill_s}, {"output_s", t.output_s}, {"deep_keys", t.deep_keys},
                  {"deep_decode_s", t.deep_decode_s}, {"deep_prefill_keys", t.deep_prefill_keys},
                  {"deep_prefill_s", t.deep_prefill_s}});
  return {{"name", h.name}, {"cpu", h.cpu}, {"threads", h.threads}, {"stream_bytes_per_s", h.stream_bytes_per_s},
          {"formats", f}, {"calls", sh}, {"attention", at}, {"models", md}};
}

namespace {

HardwareProfile named(std::string name, std::string cpu, int threads, double gbs, double gflops) {
  HardwareProfile h;
  h.name = std::move(name);
  h.cpu = std::move(cpu);
  h.threads = threads;
  h.formats.push_back({DType::F16, gbs * 1e9, gflops * 1e9});
  h.stream_bytes_per_s = gbs * 1e9;
  return h;
}

// Sustained figures (not peaks): stream bandwidth a GEMV reaches, GEMM FLOP/s of 4-8-bit
// weights through an int8 dot-product path.
const std::vector<HardwareProfile>& profiles() {
  static const std::vector<HardwareProfile> p = {
      named("laptop-ddr5-8c", "8-core laptop, dual-channel DDR5-5600, AVX2", 8, 60, 400),
      named("desktop-ddr5-16c", "16-core desktop, dual-channel DDR5-6000, AVX-512 VNNI", 16, 70, 1500),
      named("server-12ch-ddr5-64c", "64-core server socket, 12-channel DDR5-4800, AVX-512 VNNI", 64, 350, 6000),
      named("apple-m2-max", "Apple M2 Max (12 CPU cores, 400 GB/s unified memory)", 12, 200, 900),
  };
  return p;
}

}  // namespace

const FormatRate& HardwareProfile::rate(DType t) const {
  const FormatRate* best = &formats.front();
  for (const FormatRate& r : formats) {
    if (r.type == t) return r;
    if (std::abs(bits_per_weight(r.type) - bits_per_weight(t)) < std::abs(bits_per_weight(best->type) - bits_per_weight(t)))
      best = &r;
  }
  return *best;
}

const CallTiming* HardwareProfile::timing(const MatmulCall& c) const {
  for (const CallTiming& t : calls)
    if (t.call == c) return &t;
  return nullptr;
}

const AttentionTiming* HardwareProfile::timing(const AttentionShape& s) const {
  for (const AttentionTiming& t : attention)
    if (t.shape == s) return &t;
  return nullptr;
}

const ModelTiming* HardwareProfile::model_timing(const std::string& key) const {
  for (const ModelTiming& t : models)
    if (t.key == key) return &t;
  return nullptr;
}

namespace {

// What of `want` h does not hold yet.
HardwareRequest missing_from(const HardwareProfile& h, const HardwareRequest& want) {
  HardwareRequest m;
  for (DType t : want.types)
    if (std::none_of(h.formats.begin(), h.formats.end(), [&](const FormatRate& r) { return r.type == t; }) &&
        std::find(m.types.begin(), m.types.end(), t) == m.types.end())
      m.types.push_back(t);
  for (const MatmulCall& c : want.calls)
    if (h.timing(c) == nullptr && std::find(m.calls.begin(), m.calls.end(), c) == m.calls.end())
      m.calls.push_back(c);
  for (const AttentionShape& s : want.attention)
    if (h.timing(s) == nullptr && std::find(m.attention.begin(), m.attention.end(), s) == m.attention.end())
      m.attention.push_back(s);
  m.stream = want.stream && h.stream_bytes_per_s <= 0;
  return m;
}

void read_cache(const json& j, HardwareProfile& h) {
  h.stream_bytes_per_s = j.value("stream_bytes_per_s", 0.0);
  for (const json& f : j.at("formats")) {
    auto t = dtype_from_name(f.at("type").get<std::string>());
    if (t) h.formats.push_back({*t, f.at("gemv_bytes_per_s").get<double>(), f.at("gemm_flops").get<double>()});
  }
  for (const json& f : j.value("calls", json::array())) {
    MatmulCall c;
    for (const json& m : f.at("matrices")) {
      auto t = dtype_from_name(m.at("type").get<std::string>());
      if (!t) break;
      c.push_back({*t, m.at("rows").get<int64_t>(), m.at("cols").get<int64_t>()});
    }
    if (c.size() == f.at("matrices").size())
      h.calls.push_back({c, f.at("gemv_s").get<double>(), f.at("gemm_s_per_token").get<double>()});
  }
  for (const json& f : j.value("models", json::array())) {
    ModelTiming t;
    t.key = f.at("key").get<std::string>();
    t.kv = f.at("kv").get<std::string>() == "int8" ? KvType::kI8 : KvType::kF16;
    t.n_layer = f.at("n_layer").get<int32_t>();
    t.layers = f.at("layers").get<int32_t>();
    t.decode_keys = f.at("decode_keys").get<int32_t>();
    t.decode_s = f.at("decode_s").get<double>();
    t.prefill_tokens = f.at("prefill_tokens").get<int32_t>();
    t.prefill_s = f.at("prefill_s").get<double>();
    t.output_s = f.at("output_s").get<double>();
    t.deep_keys = f.value("deep_keys", 0);
    t.deep_decode_s = f.value("deep_decode_s", 0.0);
    t.deep_prefill_keys = f.value("deep_prefill_keys", 0);
    t.deep_prefill_s = f.value("deep_prefill_s", 0.0);
    if (t.layers > 0 && t.n_layer >= t.layers && t.prefill_tokens > 0) h.models.push_back(std::move(t));
  }
  for (const json& f : j.value("attention", json::array())) {
    const AttentionShape s{f.at("n_heads").get<int32_t>(), f.at("n_kv_heads").get<int32_t>(),
                           f.at("head_dim").get<int32_t>(), f.at("kv").get<std::string>() == "int8" ? KvType::kI8 : KvType::kF16};
    h.attention.push_back({s, f.at("decode_s_per_key").get<double>(), f.at("prefill_s_per_query_key").get<double>()});
  }
}

}  // namespace

HardwareProfile measure_hardware(const HardwareRequest& want, ThreadPool& pool) {
  HardwareProfile h;
  h.name = "auto";
  h.cpu = cpu_features_string();
  h.threads = pool.num_threads();
  const HardwareRequest todo = missing_from(h, want);
  for (DType t : todo.types) h.formats.push_back(measure_format(t, pool));
  for (const MatmulCall& c : todo.calls) h.calls.push_back(measure_call(c, pool));
  for (const AttentionShape& s : todo.attention) h.attention.push_back(measure_attention(s, pool));
  if (todo.stream) h.stream_bytes_per_s = measure_stream(pool);
  return h;
}

Result<HardwareProfile> auto_hardware(const HardwareRequest& want, ThreadPool& pool, bool remeasure) {
  const std::string path = cache_path(pool.num_threads());
  HardwareProfile h;
  h.name = "auto";
  h.cpu = cpu_features_string();
  h.threads = pool.num_threads();
  if (!remeasure) {
    std::ifstream in(path);
    if (in) {
      try {
        read_cache(json::parse(in), h);
      } catch (const json::exception&) {
        h.formats.clear();  // a damaged cache is measured again
        h.calls.clear();
        h.attention.clear();
        h.models.clear();
        h.stream_bytes_per_s = 0;
      }
    }
  }
  const HardwareRequest todo = missing_from(h, want);
  const std::string key = want.model_file != nullptr ? model_shape_key(*want.model_file) : std::string();
  const bool model_todo = !key.empty() && h.model_timing(key) == nullptr;
  if (todo.types.empty() && todo.calls.empty() && todo.attention.empty() && !todo.stream && !model_todo) return h;
  HardwareProfile fresh = measure_hardware(todo, pool);
  h.formats.insert(h.formats.end(), fresh.formats.begin(), fresh.formats.end());
  h.calls.insert(h.calls.end(), fresh.calls.begin(), fresh.calls.end());
  h.attention.insert(h.attention.end(), fresh.attention.begin(), fresh.attention.end());
  if (todo.stream) h.stream_bytes_per_s = fresh.stream_bytes_per_s;
  if (model_todo) {
    // At most a quarter of the memory available, and no more than 1 GiB: past that the
    // copy has fewer layers than the model and its step is scaled per layer.
    const size_t cap = std::min<size_t>(size_t{1} << 30, available_memory_bytes() / 4);
    const CallTiming* out = h.timing(want.output_call);
    auto t = time_model_shape(*want.model_file, KvType::kF16, out != nullptr ? out->gemv_s : 0.0, cap,
                              std::filesystem::path(path).parent_path().string(), pool);
    // A shape the copy cannot reproduce keeps the per-call roofline; nothing is cached for
    // it, so every plan of it tries again and says so.
    if (t) h.models.push_back(std::move(*t));
    else log_warn("plan: the model's step could not be timed on a copy of its shape ({}); speed is the sum of its "
                  "calls", t.status().message());
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << hardware_json(h).dump(1) << "\n";
    if (!out) return error("cannot write the hardware profile cache {}", tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return error("cannot write the hardware profile cache {}: {}", path, ec.message());
  return h;
}

const HardwareProfile* named_profile(const std::string& name) {
  for (const HardwareProfile& p : profiles())
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> named_profiles() {
  std::vector<std::string> n;
  for (const HardwareProfile& p : profiles()) n.push_back(p.name);
  return n;
}

}  // namespace pagoda
