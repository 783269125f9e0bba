#include "plan/hardware.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/cpu_features.h"
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

// The median of `reps` timed calls after one untimed.
template <class F>
double median_seconds(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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
    const double s = median_seconds(7, [&] { matmul(m.view, x.data(), 1, y.data(), pool); });
    r.gemv_bytes_per_s = static_cast<double>(m.bytes()) / s;
  }
  {
    const int64_t rows = 4096, tokens = 128;
    ProbeMatrix m(t, rows, cols);
    std::vector<float> x(cols * tokens, 0.5f), y(rows * tokens);
    const double s = median_seconds(3, [&] { matmul(m.view, x.data(), tokens, y.data(), pool); });
    r.gemm_flops = 2.0 * rows * cols * tokens / s;
  }
  return r;
}

std::string cache_path(int threads) {
  std::string cpu = cpu_features_string();
  std::replace_if(cpu.begin(), cpu.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '-');
  return fmt::format("{}/hardware/{}-t{}.json", ModelCache::default_root(), cpu, threads);
}

json to_json(const HardwareProfile& h) {
  json f = json::array();
  for (const FormatRate& r : h.formats)
    f.push_back({{"type", std::string(dtype_name(r.type))}, {"gemv_bytes_per_s", r.gemv_bytes_per_s},
                 {"gemm_flops", r.gemm_flops}});
  return {{"name", h.name}, {"cpu", h.cpu}, {"threads", h.threads}, {"formats", f}};
}

HardwareProfile named(std::string name, std::string cpu, int threads, double gbs, double gflops) {
  HardwareProfile h;
  h.name = std::move(name);
  h.cpu = std::move(cpu);
  h.threads = threads;
  h.formats.push_back({DType::F16, gbs * 1e9, gflops * 1e9});
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

HardwareProfile measure_hardware(std::span<const DType> types, ThreadPool& pool) {
  HardwareProfile h;
  h.name = "auto";
  h.cpu = cpu_features_string();
  h.threads = pool.num_threads();
  for (DType t : types) {
    if (std::any_of(h.formats.begin(), h.formats.end(), [&](const FormatRate& r) { return r.type == t; })) continue;
    h.formats.push_back(measure_format(t, pool));
  }
  return h;
}

Result<HardwareProfile> auto_hardware(std::span<const DType> types, ThreadPool& pool, bool remeasure) {
  const std::string path = cache_path(pool.num_threads());
  HardwareProfile h;
  h.name = "auto";
  h.cpu = cpu_features_string();
  h.threads = pool.num_threads();
  if (!remeasure) {
    std::ifstream in(path);
    if (in) {
      try {
        const json j = json::parse(in);
        for (const json& f : j.at("formats")) {
          auto t = dtype_from_name(f.at("type").get<std::string>());
          if (t) h.formats.push_back({*t, f.at("gemv_bytes_per_s").get<double>(), f.at("gemm_flops").get<double>()});
        }
      } catch (const json::exception&) {
        h.formats.clear();  // a damaged cache is measured again
      }
    }
  }
  std::vector<DType> missing;
  for (DType t : types)
    if (std::none_of(h.formats.begin(), h.formats.end(), [&](const FormatRate& r) { return r.type == t; }))
      missing.push_back(t);
  if (missing.empty()) return h;
  for (const FormatRate& r : measure_hardware(missing, pool).formats) h.formats.push_back(r);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << to_json(h).dump(1) << "\n";
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
