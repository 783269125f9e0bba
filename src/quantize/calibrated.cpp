#include "quantize/calibrated.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <tuple>
#include <regex>

#include "kernels/matmul/matmul.h"
#include "model/arch_spec.h"
#include "quant/awq.h"
#include "quant/block_grid.h"
#include "quant/formats.h"
#include "quant/quantize_matrix.h"
#include "quant/sparse24.h"
#include "quant/w8a8.h"

namespace pagoda {
namespace {

constexpr int kAwqGrid = 20;

// Kernel-aligned storage for a matrix quantized during the search.
struct AlignedBytes {
  explicit AlignedBytes(size_t n) : p(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64))) {}
  ~AlignedBytes() { std::free(p); }
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  uint8_t* p;
};

WeightView view_of(DType t, int64_t rows, int64_t cols, const void* data) {
  WeightView w;
  w.type = t;
  w.rows = rows;
  w.cols = cols;
  w.row_stride = row_bytes(t, cols);
  w.data = static_cast<const uint8_t*>(data);
  return w;
}

std::string layer_tensor(int32_t layer, const char* what) { return fmt::format("blk.{}.{}.weight", layer, what); }

}  // namespace

bool layer_matrix_input(const std::string& name, int32_t* layer, LinearInput* input) {
  static const std::regex re(
      R"(blk\.(\d+)\.(attn_q|attn_k|attn_v|attn_qkv|attn_output|ffn_gate|ffn_up|ffn_down|ffn_gate_shexp|ffn_up_shexp|ffn_down_shexp)\.weight)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return false;
  *layer = std::stoi(m[1].str());
  const std::string w = m[2].str();
  *input = w == "attn_output"                          ? LinearInput::kAttentionOutput
           : w.starts_with("ffn_down")                   ? LinearInput::kFfnDown
           : w.starts_with("ffn_gate") || w.starts_with("ffn_up") ? LinearInput::kFfn
                                                          : LinearInput::kAttention;
  return true;
}

bool expert_matrix_input(const std::string& name, int32_t* layer, LinearInput* input) {
  static const std::regex re(R"(blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return false;
  *layer = std::stoi(m[1].str());
  *input = m[2].str() == "down" ? LinearInput::kFfnDown : LinearInput::kFfn;
  return true;
}

std::vector<float> tensor_as_float(const GgufTensor& t) {
  const int64_t cols = t.shape.empty() ? 0 : t.shape[0];
  const int64_t rows = cols > 0 ? t.num_elements() / cols : 0;
  std::vector<float> out(static_cast<size_t>(t.num_elements()));
  const size_t rb = row_bytes(t.type, cols);
  for (int64_t r = 0; r < rows; ++r) dequantize_row(t.type, t.data + static_cast<size_t>(r) * rb, out.data() + r * cols, cols);
  return out;
}

Result<std::unique_ptr<CalibratedQuantizer>> CalibratedQuantizer::create(QuantMethod method, Prune prune,
                                                                         const GgufFile& source,
                                                                         const TensorTypeFn& type_of,
                                                                         const CalibrationOptions& options,
                                                                         ThreadPool& pool) {
  std::unique_ptr<CalibratedQuantizer> q(new CalibratedQuantizer(method, prune, pool));
  if (method == QuantMethod::kRtn && prune == Prune::kMagnitude) return q;
  CalibrationOptions o = options;
  o.hessian = method == QuantMethod::kGptq || method == QuantMethod::kAwqGptq || prune == Prune::kSparseGpt;
  o.samples = method == QuantMethod::kAwq || method == QuantMethod::kAwqGptq;
  auto st = collect_calibration(source, o, pool);
  if (!st) return st.status();
  q->stats_ = std::move(st.value());
  q->report_.push_back(fmt::format("calibration: {} tokens of {} in {:.1f} s", q->stats_.tokens, options.text_path,
                                   q->stats_.seconds));
  if (o.hessian) q->report_experts();
  if (o.samples) {
    if (Status s = q->run_awq(source, type_of); !s.is_ok()) return s;
  }
  return q;
}

void CalibratedQuantizer::report_experts() {
  for (size_t l = 0; l < stats_.experts.size(); ++l) {
    std::vector<int64_t> seen;
    for (const auto& e : stats_.experts[l]) seen.push_back(e[static_cast<size_t>(LinearInput::kFfn)].tokens);
    if (seen.empty()) continue;
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    const auto none = std::count(seen.begin(), seen.end(), int64_t{0});
    report_.push_back(fmt::format("GPTQ: layer {:2}: {} experts calibrated on the tokens routed to each: min {}, median {}, "
                                  "max {} tokens{}",
                                  l, seen.size(), sorted.front(), sorted[sorted.size() / 2], sorted.back(),
                                  none > 0 ? fmt::format("; {} saw none and are rounded to nearest", none) : std::string()));
  }
}

Result<const GptqFactor*> CalibratedQuantizer::factor(InputStats& in, const std::tuple<int32_t, int32_t, int32_t>& key,
                                                      const std::string& name) {
  const int64_t cols = in.cols;
  auto it = factors_.find(key);
  if (it == factors_.end()) {
    if (auto sc = awq_scales_.find(key); sc != awq_scales_.end()) {
      // The matrix was scaled by s per input channel and its input divided by s.
      const std::vector<float>& s = sc->second;
      for (int64_t i = 0; i < cols; ++i)
        for (int64_t j = 0; j < cols; ++j) in.hessian[static_cast<size_t>(i * cols + j)] /= s[static_cast<size_t>(i)] * s[static_cast<size_t>(j)];
      awq_scales_.erase(sc);
    }
    auto f = gptq_factor(in.hessian.data(), cols);
    if (!f) return error("{}: {}", name, f.status().message());
    std::vector<float>().swap(in.hessian);  // the factor replaces it
    it = factors_.emplace(key, std::move(f.value())).first;
  }
  return &it->second;
}

Status CalibratedQuantizer::gptq(InputStats& in, const std::tuple<int32_t, int32_t, int32_t>& key, const std::string& name,
                                 const float* w, int64_t rows, DType t, void* dst) {
  auto f = factor(in, key, name);
  if (!f) return f.status();
  work_.assign(w, w + rows * in.cols);  // GPTQ moves the values it has not quantized yet
  gptq_quantize(t, **f, work_.data(), rows, dst, pool_);
  return Status::ok();
}

Status CalibratedQuantizer::prune_sparse(InputStats& in, const std::tuple<int32_t, int32_t, int32_t>& key,
                                         const std::string& name, const float* w, int64_t rows, DType t, void* dst) {
  const int64_t cols = in.cols;
  work_.assign(w, w + rows * cols);
  if (prune_ == Prune::kSparseGpt) {
    auto f = factor(in, key, name);
    if (!f) return f.status();
    sparsegpt_quantize_2_4(t, **f, work_.data(), rows, dst, pool_);
    return Status::ok();
  }
  {
    std::vector<float> norm(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c) norm[static_cast<size_t>(c)] = static_cast<float>(std::sqrt(in.sq_sum[static_cast<size_t>(c)]));
    pool_.parallel_for(rows, 16, [&](int64_t r0, int64_t r1, int) {
      std::vector<float> score(static_cast<size_t>(cols));
      std::vector<uint8_t> keep(static_cast<size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) {
        float* wr = work_.data() + r * cols;
        for (int64_t c = 0; c < cols; ++c) score[static_cast<size_t>(c)] = std::fabs(wr[c]) * norm[static_cast<size_t>(c)];
        s24_select(score.data(), cols, keep.data());
        s24_apply(keep.data(), wr, cols);
      }
    });
  }
  quantize_matrix(t, work_.data(), rows, cols, dst, pool_);
  return Status::ok();
}

const std::vector<float>* CalibratedQuantizer::replacement(const std::string& name) const {
  auto it = replaced_.find(name);
  return it == replaced_.end() ? nullptr : &it->second;
}

// One AWQ group: matrices reading one input (rows x in.cols floats each, to be written in
// their types) and the tensor producing that input (a norm vector of in.cols values, or
// in.cols rows of a matrix) with its optional bias. Searches the channel scales on the
// input's sample, applies them (matrices times s, fold and bias divided by s) and returns
// the scales (empty: alpha 0, nothing changed) and the share of the loss saved.
std::vector<float> CalibratedQuantizer::search_group(const InputStats& in, const std::vector<AwqMatrix>& mats,
                                                     std::span<float> fold, bool fold_rows, std::span<float> bias,
                                                     double* saved) {
  const int64_t cols = in.cols, n = in.sample_count;
  // Reference outputs of the unquantized matrices on the sample.
  std::vector<std::vector<float>> ref(mats.size());
  for (size_t i = 0; i < mats.size(); ++i) {
    ref[i].resize(static_cast<size_t>(n * mats[i].rows));
    matmul(view_of(DType::F32, mats[i].rows, cols, mats[i].data), in.sample.data(), n, ref[i].data(), pool_);
  }
  std::vector<float> xs(in.sample.size()), ws, y, row_scales;
  auto loss = [&](std::span<const float> s) {
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < cols; ++c) xs[static_cast<size_t>(t * cols + c)] = in.sample[static_cast<size_t>(t * cols + c)] / s[static_cast<size_t>(c)];
    double total = 0;
    for (size_t i = 0; i < mats.size(); ++i) {
      const int64_t r = mats[i].rows;
      ws.resize(static_cast<size_t>(r * cols));
      for (int64_t k = 0; k < r; ++k)
        for (int64_t c = 0; c < cols; ++c) ws[static_cast<size_t>(k * cols + c)] = mats[i].data[k * cols + c] * s[static_cast<size_t>(c)];
      const DType type = mats[i].type;
      const size_t rb = row_bytes(type, cols);
      AlignedBytes q(rb * static_cast<size_t>(r));
      row_scales.resize(static_cast<size_t>(r));
      pool_.parallel_for(r, 8, [&](int64_t r0, int64_t r1, int) {
        for (int64_t k = r0; k < r1; ++k) {
          const float* src = ws.data() + k * cols;
          uint8_t* dst = q.p + static_cast<size_t>(k) * rb;
          if (type == DType::I8) row_scales[static_cast<size_t>(k)] = quantize_row_w8a8(src, reinterpret_cast<int8_t*>(dst), cols);
          else quantize_row(type, src, dst, cols);
        }
      });
      WeightView view = view_of(type, r, cols, q.p);
      if (type == DType::I8) view.row_scales = row_scales.data();  // W8A8
      y.resize(static_cast<size_t>(n * r));
      matmul(view, xs.data(), n, y.data(), pool_);
      for (size_t k = 0; k < y.size(); ++k) {
        const double d = static_cast<double>(y[k]) - ref[i][k];
        total += d * d;
      }
    }
    return total;
  };
  const std::vector<float> mean_abs = in.mean_abs();
  AwqChoice choice = awq_search(mean_abs, kAwqGrid, loss);
  *saved = choice.loss_rtn > 0 ? 1.0 - choice.loss / choice.loss_rtn : 0.0;
  last_alpha_ = choice.alpha;
  if (choice.alpha == 0.0f) return {};
  const std::vector<float>& sc = choice.scales;
  for (const AwqMatrix& m : mats)
    for (int64_t k = 0; k < m.rows; ++k)
      for (int64_t c = 0; c < cols; ++c) m.data[k * cols + c] *= sc[static_cast<size_t>(c)];
  if (fold_rows) {
    const int64_t fold_cols = static_cast<int64_t>(fold.size()) / cols;
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t j = 0; j < fold_cols; ++j) fold[static_cast<size_t>(c * fold_cols + j)] /= sc[static_cast<size_t>(c)];
  } else {
    for (int64_t c = 0; c < cols; ++c) fold[static_cast<size_t>(c)] /= sc[static_cast<size_t>(c)];
  }
  // Channel c of the input is the fold's row (or norm value) c plus its bias c: a
  // LayerNorm's bias or a biased V's scales with it.
  for (int64_t c = 0; c < static_cast<int64_t>(bias.size()); ++c) bias[static_cast<size_t>(c)] /= sc[static_cast<size_t>(c)];
  return choice.scales;
}

Status CalibratedQuantizer::run_awq(const GgufFile& source, const TensorTypeFn& type_of) {
  const std::string arch = source.get_string("general.architecture").value_or("llama");
  const int64_t n_head = source.get_int(arch + ".attention.head_count").value_or(0);
  const int64_t n_head_kv = source.get_int(arch + ".attention.head_count_kv").value_or(n_head);
  const ArchSpec* spec = find_arch(arch);
  if (spec == nullptr) return error("AWQ: architecture '{}' is not supported ({})", arch, arch_names());
  std::vector<AwqGroupSpec> groups = awq_groups(*spec, n_head, n_head_kv);
  const bool moe = !stats_.experts.empty();
  if (moe) {
    std::erase_if(groups, [](const AwqGroupSpec& g) { return g.input == LinearInput::kFfn || g.input == LinearInput::kFfnDown; });
    report_.push_back(fmt::format("AWQ: {}'s experts' gate/up share their input norm with the router and every other "
                                  "expert, so no scale folds there: they are {}; each expert's down is searched on "
                                  "the tokens routed to it and folds into that expert's up",
                                  arch, method_ == QuantMethod::kAwqGptq ? "left to GPTQ" : "rounded to nearest"));
  }
  if (spec->tensors.no_pre_norms)
    report_.push_back(fmt::format("AWQ: {} has no norm before q,k,v and gate,up (they read the residual stream), so no "
                                  "scale can fold there: those matrices are {}",
                                  arch, method_ == QuantMethod::kAwqGptq ? "left to GPTQ" : "rounded to nearest"));

  auto current = [&](const std::string& name) -> std::vector<float>* {
    auto it = replaced_.find(name);
    if (it != replaced_.end()) return &it->second;
    const GgufTensor* t = source.find_tensor(name);
    if (t == nullptr) return nullptr;
    return &(replaced_[name] = tensor_as_float(*t));
  };
  auto writable = [&](const GgufTensor* t, int64_t cols, DType* type) {
    *type = type_of(*t);
    return (can_quantize(*type) || *type == DType::I8) && cols % dtype_info(*type).block_size == 0;
  };
  double saved_sum = 0;
  int searched = 0;
  for (size_t l = 0; l < stats_.layers.size(); ++l) {
    const auto layer = static_cast<int32_t>(l);
    for (const AwqGroupSpec& g : groups) {
      const InputStats& in = stats_.layers[l][static_cast<size_t>(g.input)];
      const int64_t cols = in.cols, n = in.sample_count;
      if (cols == 0 || n == 0) continue;
      std::vector<AwqMatrix> mats;
      for (const char* m : g.mats) {
        const GgufTensor* t = source.find_tensor(layer_tensor(layer, m));
        DType type{};
        if (t == nullptr || t->shape.empty() || t->shape[0] != cols || !writable(t, cols, &type)) break;
        std::vector<float>* w = current(t->name);
        mats.push_back({w->data(), static_cast<int64_t>(w->size()) / cols, type});
      }
      std::vector<float>* fold = current(fmt::format("blk.{}.{}.weight", layer, g.fold));
      if (mats.size() != g.mats.size() || fold == nullptr) continue;
      const auto fold_size = static_cast<int64_t>(fold->size());
      if (g.fold_rows ? fold_size % cols != 0 : fold_size != cols) continue;
      std::vector<float>* bias = current(fmt::format("blk.{}.{}.bias", layer, g.fold));
      if (bias != nullptr && static_cast<int64_t>(bias->size()) != cols)
        return error("AWQ: blk.{}.{}.bias has {} values for {} input channels", layer, g.fold, bias->size(), cols);
      double saved = 0;
      std::vector<float> s = search_group(in, mats, *fold, g.fold_rows,
                                          bias != nullptr ? std::span<float>(*bias) : std::span<float>(), &saved);
      saved_sum += saved;
      ++searched;
      report_.push_back(fmt::format("layer {:2} {:7}: alpha {:.2f}, calibration output error {:+.1f}% vs round to nearest",
                                    layer, g.label, last_alpha_, -100.0 * saved));
      if (!s.empty() && method_ == QuantMethod::kAwqGptq) awq_scales_[{layer, static_cast<int32_t>(g.input), -1}] = std::move(s);
    }
    if (!moe) continue;
    // Each expert's down, on the rows routed to it, folding into the rows of its own up.
    const GgufTensor* down = source.find_tensor(layer_tensor(layer, "ffn_down_exps"));
    const GgufTensor* up = source.find_tensor(layer_tensor(layer, "ffn_up_exps"));
    auto& experts = stats_.experts[l];
    DType type{};
    if (down == nullptr || up == nullptr || down->shape.size() != 3 || experts.empty() ||
        !writable(down, down->shape[0], &type))
      continue;
    const int64_t F = down->shape[0], E = down->shape[1];
    std::vector<float>* wd = current(down->name);
    std::vector<float>* wu = current(up->name);
    double layer_saved = 0;
    int layer_searched = 0;
    for (size_t e = 0; e < experts.size(); ++e) {
      const InputStats& in = experts[e][static_cast<size_t>(LinearInput::kFfnDown)];
      if (in.cols != F || in.sample_count == 0) continue;
      const size_t off_d = e * static_cast<size_t>(E * F), off_u = e * static_cast<size_t>(F * E);
      double saved = 0;
      std::vector<float> s = search_group(in, {{wd->data() + off_d, E, type}}, std::span<float>(wu->data() + off_u, static_cast<size_t>(F * E)),
                                          true, {}, &saved);
      layer_saved += saved;
      ++layer_searched;
      if (!s.empty() && method_ == QuantMethod::kAwqGptq)
        awq_scales_[{layer, static_cast<int32_t>(LinearInput::kFfnDown), static_cast<int32_t>(e)}] = std::move(s);
    }
    if (layer_searched > 0) {
      saved_sum += layer_saved;
      searched += layer_searched;
      report_.push_back(fmt::format("layer {:2} down x {} experts: calibration output error {:+.1f}% vs round to nearest "
                                    "(mean over experts)",
                                    layer, layer_searched, -100.0 * layer_saved / layer_searched));
    }
  }
  if (searched > 0)
    report_.push_back(fmt::format("AWQ: {} groups searched, mean calibration output error {:+.1f}% vs round to nearest",
                                  searched, -100.0 * saved_sum / searched));
  if (method_ == QuantMethod::kAwq) {
    stats_.layers.clear();  // nothing more needs the statistics
    stats_.experts.clear();
  } else {
    for (auto& layer : stats_.layers)
      for (InputStats& in : layer) in.sample = {};
    for (auto& layer : stats_.experts)
      for (auto& e : layer)
        for (InputStats& in : e) in.sample = {};
  }
  return Status::ok();
}

Result<bool> CalibratedQuantizer::quantize(const std::string& name, const float* w, int64_t rows, int64_t cols,
                                           DType t, void* dst) {
  const bool sparse = is_sparse24(t) && prune_ != Prune::kMagnitude;
  if (!sparse && ((method_ != QuantMethod::kGptq && method_ != QuantMethod::kAwqGptq) || !has_block_grid(t) ||
                  cols % dtype_info(t).block_size != 0))
    return false;
  if (cols % dtype_info(t).block_size != 0) return false;
  // The method for a matrix of this input: GPTQ's, or the sparse format's pruning.
  auto run = [&](InputStats& in, const std::tuple<int32_t, int32_t, int32_t>& key, const float* wm, int64_t r,
                 void* d) { return sparse ? prune_sparse(in, key, name, wm, r, t, d) : gptq(in, key, name, wm, r, t, d); };
  int32_t layer = 0;
  LinearInput input{};
  if (expert_matrix_input(name, &layer, &input) && layer >= 0 && static_cast<size_t>(layer) < stats_.experts.size()) {
    // Each expert's slice on the tokens routed to it; one that saw none rounds to nearest.
    auto& experts = stats_.experts[static_cast<size_t>(layer)];
    const auto n_expert = static_cast<int64_t>(experts.size());
    if (n_expert == 0 || rows % n_expert != 0) return false;
    const int64_t r = rows / n_expert;
    const size_t slice_bytes = row_bytes(t, cols) * static_cast<size_t>(r);
    for (int64_t e = 0; e < n_expert; ++e) {
      InputStats& in = experts[static_cast<size_t>(e)][static_cast<size_t>(input)];
      const float* we = w + e * r * cols;
      void* de = static_cast<uint8_t*>(dst) + static_cast<size_t>(e) * slice_bytes;
      if (in.cols != cols || in.tokens == 0) {
        quantize_matrix(t, we, r, cols, de, pool_);
        continue;
      }
      PAGODA_TRY(run(in, {layer, static_cast<int32_t>(input), static_cast<int32_t>(e)}, we, r, de));
    }
    return true;
  }
  if (!layer_matrix_input(name, &layer, &input) || layer < 0 || static_cast<size_t>(layer) >= stats_.layers.size())
    return false;
  InputStats& in = stats_.layers[static_cast<size_t>(layer)][static_cast<size_t>(input)];
  if (in.cols != cols) return false;
  PAGODA_TRY(run(in, {layer, static_cast<int32_t>(input), -1}, w, rows, dst));
  return true;
}

}  // namespace pagoda
