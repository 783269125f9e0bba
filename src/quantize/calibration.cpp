#include "quantize/calibration.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <sstream>

#include "base/system_memory.h"
#include "base/timer.h"
#include "kernels/matmul/matmul.h"
#include "model/kv_cache.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {
namespace {

// H += x^T x for n rows of x, through the F32 matrix kernels: with xt = x^T viewed as a
// [cols x n] weight matrix, matmul(xt, rows of xt) yields the [cols x cols] Gram matrix.
void add_gram(const float* x, int64_t n, int64_t cols, std::vector<float>& xt, std::vector<float>& gram,
              std::vector<float>& h, ThreadPool& pool) {
  xt.resize(static_cast<size_t>(n * cols));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < cols; ++c) xt[static_cast<size_t>(c * n + t)] = x[t * cols + c];
  WeightView w;
  w.type = DType::F32;
  w.rows = cols;
  w.cols = n;
  w.row_stride = static_cast<size_t>(n) * sizeof(float);
  w.data = reinterpret_cast<const uint8_t*>(xt.data());
  gram.resize(static_cast<size_t>(cols * cols));
  matmul(w, xt.data(), cols, gram.data(), pool);
  for (size_t i = 0; i < gram.size(); ++i) h[i] += gram[i];
}

}  // namespace

std::vector<float> InputStats::mean_abs() const {
  std::vector<float> m(abs_sum.size());
  for (size_t c = 0; c < m.size(); ++c) m[c] = tokens > 0 ? static_cast<float>(abs_sum[c] / static_cast<double>(tokens)) : 0.0f;
  return m;
}

Result<CalibrationStats> collect_calibration(const GgufFile& file, const CalibrationOptions& o, ThreadPool& pool) {
  Timer timer;
  std::ifstream in(o.text_path, std::ios::binary);
  if (!in) return error("cannot read the calibration text {}", o.text_path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto tok = Tokenizer::from_gguf(file);
  if (!tok) return error("calibration needs the model's tokenizer: {}", tok.status().message());
  auto model = Model::load(file, pool);
  if (!model) return model.status();
  Model& m = **model;
  const ModelConfig& c = m.config();
  const int32_t ctx = std::max(2, std::min(o.ctx, c.n_ctx_train > 0 ? c.n_ctx_train : o.ctx));
  std::vector<int32_t> ids = (*tok)->encode(ss.str(), /*add_special=*/false, /*parse_special=*/false);
  const int32_t bos = (*tok)->vocab().bos;
  const int32_t per_chunk = ctx - (bos >= 0 ? 1 : 0);
  const int64_t chunks = std::min<int64_t>(static_cast<int64_t>(ids.size()) / per_chunk, std::max(1, o.max_tokens / ctx));
  if (chunks < 1)
    return error("the calibration text {} has {} tokens; one chunk of {} is needed (--calib a longer text)", o.text_path,
                 ids.size(), per_chunk);

  CalibrationStats st;
  st.layers.resize(static_cast<size_t>(c.n_layer));
  if (c.is_moe()) {
    st.experts.assign(static_cast<size_t>(c.n_layer), std::vector<std::array<InputStats, kNumLinearInputs>>(
                                                           static_cast<size_t>(c.n_expert)));
    if (o.hessian) {
      // A Hessian per expert and input: say so before running rather than run out of memory.
      const double per_layer = static_cast<double>(c.n_expert) *
                               (static_cast<double>(c.n_embd) * c.n_embd + static_cast<double>(c.n_ff_exp) * c.n_ff_exp);
      const double need = per_layer * c.n_layer * sizeof(float);
      const double avail = static_cast<double>(available_memory_bytes());
      if (avail > 0 && need > 0.8 * avail)
        return error("GPTQ on this model keeps a Hessian per expert and input: {:.1f} GiB, and {:.1f} GiB of memory is "
                     "available; use --method awq or rtn",
                     need / (1 << 30), avail / (1 << 30));
    }
  }
  const int64_t total = chunks * ctx;
  // Keep every stride-th token row (up to sample_rows) as AWQ's evaluation set.
  const int64_t stride = std::max<int64_t>(1, total / std::max(1, o.sample_rows));
  int64_t chunk_base = 0;  // token index of the current forward call's first row
  std::vector<float> xt, gram;
  m.set_activation_observer([&](int32_t layer, LinearInput input, const float* x, int64_t n, int64_t cols,
                                int32_t expert) {
    InputStats& s = expert < 0 ? st.layers[static_cast<size_t>(layer)][static_cast<size_t>(input)]
                               : st.experts[static_cast<size_t>(layer)][static_cast<size_t>(expert)][static_cast<size_t>(input)];
    if (s.cols == 0) {
      s.cols = cols;
      s.abs_sum.assign(static_cast<size_t>(cols), 0.0);
      s.sq_sum.assign(static_cast<size_t>(cols), 0.0);
      if (o.hessian) s.hessian.assign(static_cast<size_t>(cols * cols), 0.0f);
      if (o.samples && expert < 0) s.sample.reserve(static_cast<size_t>(o.sample_rows * cols));
    }
    s.tokens += n;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t ch = 0; ch < cols; ++ch) {
        const double v = x[t * cols + ch];
        s.abs_sum[static_cast<size_t>(ch)] += std::fabs(v);
        s.sq_sum[static_cast<size_t>(ch)] += v * v;
      }
    if (o.samples && expert < 0)
      for (int64_t t = 0; t < n && s.sample_count < o.sample_rows; ++t)
        if ((chunk_base + t) % stride == 0) {
          s.sample.insert(s.sample.end(), x + t * cols, x + (t + 1) * cols);
          ++s.sample_count;
        }
    // An expert's down input (AWQ searches each expert's down on its own rows): its first
    // routed rows, at most a quarter of the layers' sample each, so 64 experts x 16 layers
    // stay within memory.
    if (o.samples && expert >= 0 && input == LinearInput::kFfnDown)
      for (int64_t t = 0; t < n && s.sample_count < std::max(1, o.sample_rows / 4); ++t) {
        s.sample.insert(s.sample.end(), x + t * cols, x + (t + 1) * cols);
        ++s.sample_count;
      }
    if (o.hessian) add_gram(x, n, cols, xt, gram, s.hessian, pool);
  });
  KvCache kv = m.make_cache(ctx);
  const bool tty = isatty(fileno(stderr)) != 0;
  std::vector<int32_t> chunk;
  for (int64_t i = 0; i < chunks; ++i) {
    chunk.clear();
    if (bos >= 0) chunk.push_back(bos);
    chunk.insert(chunk.end(), ids.begin() + i * per_chunk, ids.begin() + (i + 1) * per_chunk);
    chunk_base = i * ctx;
    if (Status s = m.forward(chunk, 0, kv, nullptr); !s.is_ok()) return s;
    st.tokens += static_cast<int64_t>(chunk.size());
    if (tty) fmt::print(stderr, "\rcalibration: chunk {}/{} ({} tokens, {:.1f} s)", i + 1, chunks, st.tokens, timer.seconds());
  }
  if (tty) fmt::print(stderr, "\n");
  m.set_activation_observer(nullptr);
  st.seconds = timer.seconds();
  return st;
}

}  // namespace pagoda
