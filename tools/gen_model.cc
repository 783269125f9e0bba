// pagoda-gen-model: writes a GGUF model with random weights for any supported
// architecture, size and tensor format. Tests use tiny ones; benchmarks use 1B- and
// 7B-shaped ones (decode speed does not depend on the values). Weights are drawn from a
// seeded counter-based generator per tensor row, so the same flags give the same file
// and rows can be produced in parallel. The vocabulary is SentencePiece-style (byte
// fallback tokens plus letters) so any text tokenizes and llama.cpp loads the file.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "quant/formats.h"

namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Standard normal by Box-Muller from two uniforms.
void fill_normal(uint64_t seed, float* out, int64_t n, float stddev, float mean) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(splitmix(s) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(splitmix(s) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = mean + stddev * static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) out[i + 1] = mean + stddev * static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
}

struct Args {
  std::string arch = "llama";
  std::string type = "F32";
  std::string out;
  int dim = 64;
  int layers = 2;
  int heads = 4;
  int kv_heads = 2;
  int head_dim = 0;
  int ff = 128;
  int vocab = 512;
  int ctx = 2048;
  int sliding_window = 16;
  uint64_t seed = 42;
  int threads = 0;
};

std::vector<std::string> make_vocab(int n, std::vector<int32_t>& types, std::vector<float>& scores) {
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    pieces.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
  }
  const std::string space = "\xe2\x96\x81";
  for (char ch = 'a'; ch <= 'z' && static_cast<int>(pieces.size()) < n; ++ch) {
    pieces.push_back(std::string(1, ch));
    types.push_back(1);
    if (static_cast<int>(pieces.size()) < n) {
      pieces.push_back(space + std::string(1, ch));
      types.push_back(1);
    }
  }
  for (int i = static_cast<int>(pieces.size()); i < n; ++i) {
    pieces.push_back(fmt::format("[{}]", i));
    types.push_back(1);
  }
  pieces.resize(n);
  types.resize(n);
  scores.resize(n);
  for (int i = 0; i < n; ++i) scores[i] = -static_cast<float>(i);
  return pieces;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pagoda;
  Args a;
  CLI::App app{"Write a random-weight GGUF model"};
  app.add_option("--arch", a.arch, "llama | qwen2 | gemma3")->check(CLI::IsMember({"llama", "qwen2", "gemma3"}));
  app.add_option("--type", a.type, "Format of the 2-D weights: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, ...");
  app.add_option("-o,--output", a.out, "Output GGUF path")->required();
  app.add_option("--dim", a.dim, "Embedding width");
  app.add_option("--layers", a.layers, "Number of layers");
  app.add_option("--heads", a.heads, "Query heads");
  app.add_option("--kv-heads", a.kv_heads, "Key/value heads (GQA when fewer than --heads)");
  app.add_option("--head-dim", a.head_dim, "Per-head width (default dim / heads)");
  app.add_option("--ff", a.ff, "Feed-forward width");
  app.add_option("--vocab", a.vocab, "Vocabulary size (>= 262)");
  app.add_option("--ctx", a.ctx, "Trained context length to record");
  app.add_option("--sliding-window", a.sliding_window, "Gemma 3 sliding window");
  app.add_option("--seed", a.seed, "Seed of the weights");
  app.add_option("-t,--threads", a.threads, "Threads");
  CLI11_PARSE(app, argc, argv);

  auto type = dtype_from_name(a.type);
  if (!type || !can_quantize(*type)) {
    fmt::print(stderr, "error: --type {} is not a format Pagoda can write\n", a.type);
    return 1;
  }
  if (a.vocab < 262) {
    fmt::print(stderr, "error: --vocab must be at least 262 (3 specials + 256 byte tokens + letters)\n");
    return 1;
  }
  if (a.head_dim == 0) a.head_dim = a.dim / a.heads;
  if (a.heads % a.kv_heads != 0) {
    fmt::print(stderr, "error: --heads must be a multiple of --kv-heads\n");
    return 1;
  }
  const int64_t bs = dtype_info(*type).block_size;
  const int q_dim = a.heads * a.head_dim, kv_dim = a.kv_heads * a.head_dim;
  for (int64_t cols : {static_cast<int64_t>(a.dim), static_cast<int64_t>(a.ff), static_cast<int64_t>(q_dim)}) {
    if (cols % bs != 0) {
      fmt::print(stderr, "error: row width {} is not a multiple of {}'s block size {}\n", cols, a.type, bs);
      return 1;
    }
  }
  if (a.threads > 0) ThreadPool::set_default_threads(a.threads);

  GgufWriter w;
  const std::string p = a.arch + ".";
  w.set_string("general.architecture", a.arch);
  w.set_string("general.name", fmt::format("pagoda-random-{}-{}", a.arch, a.type));
  w.set_u32("general.file_type", 0);
  w.set_u32(p + "context_length", a.ctx);
  w.set_u32(p + "embedding_length", a.dim);
  w.set_u32(p + "block_count", a.layers);
  w.set_u32(p + "feed_forward_length", a.ff);
  w.set_u32(p + "attention.head_count", a.heads);
  w.set_u32(p + "attention.head_count_kv", a.kv_heads);
  w.set_u32(p + "attention.key_length", a.head_dim);
  w.set_u32(p + "attention.value_length", a.head_dim);
  w.set_u32(p + "rope.dimension_count", a.head_dim);
  w.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_f32(p + "rope.freq_base", a.arch == "gemma3" ? 1000000.0f : 10000.0f);
  if (a.arch == "gemma3") w.set_u32(p + "attention.sliding_window", a.sliding_window);
  std::vector<int32_t> types;
  std::vector<float> scores;
  auto pieces = make_vocab(a.vocab, types, scores);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string("tokenizer.ggml.pre", "default");
  w.set_string_array("tokenizer.ggml.tokens", pieces);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", true);

  uint64_t tensor_seed = a.seed * 1000003ull;
  // A matrix [rows x cols] in the chosen format, N(0, scale / sqrt(cols)).
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float scale) {
    const uint64_t seed = ++tensor_seed;
    const DType t = *type;
    w.add_tensor(name, {cols, rows}, t, [=](uint8_t* dst) {
      const size_t rb = row_bytes(t, cols);
      ThreadPool::global().parallel_for(rows, 16, [&](int64_t r0, int64_t r1, int) {
        std::vector<float> row(cols);
        for (int64_t r = r0; r < r1; ++r) {
          fill_normal(seed * 0x100000001b3ull + static_cast<uint64_t>(r), row.data(), cols,
                      scale / std::sqrt(static_cast<float>(cols)), 0.0f);
          quantize_row(t, row.data(), dst + static_cast<size_t>(r) * rb, cols);
        }
      });
    });
  };
  // Norm weights near 1, biases near 0: F32 vectors as converters write them.
  auto vec = [&](const std::string& name, int64_t n, float mean, float stddev) {
    const uint64_t seed = ++tensor_seed;
    w.add_tensor(name, {n}, DType::F32, [=](uint8_t* dst) {
      fill_normal(seed, reinterpret_cast<float*>(dst), n, stddev, mean);
    });
  };
  matrix("token_embd.weight", a.vocab, a.dim, std::sqrt(static_cast<float>(a.dim)));
  vec("output_norm.weight", a.dim, 1.0f, 0.1f);
  if (a.arch != "gemma3") matrix("output.weight", a.vocab, a.dim, 4.0f);
  for (int l = 0; l < a.layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    vec(b + "attn_norm.weight", a.dim, 1.0f, 0.1f);
    matrix(b + "attn_q.weight", q_dim, a.dim, 1.0f);
    matrix(b + "attn_k.weight", kv_dim, a.dim, 1.0f);
    matrix(b + "attn_v.weight", kv_dim, a.dim, 1.0f);
    matrix(b + "attn_output.weight", a.dim, q_dim, 1.0f);
    if (a.arch == "qwen2") {
      vec(b + "attn_q.bias", q_dim, 0.0f, 0.1f);
      vec(b + "attn_k.bias", kv_dim, 0.0f, 0.1f);
      vec(b + "attn_v.bias", kv_dim, 0.0f, 0.1f);
    }
    if (a.arch == "gemma3") {
      vec(b + "attn_q_norm.weight", a.head_dim, 1.0f, 0.1f);
      vec(b + "attn_k_norm.weight", a.head_dim, 1.0f, 0.1f);
      vec(b + "post_attention_norm.weight", a.dim, 1.0f, 0.1f);
      vec(b + "post_ffw_norm.weight", a.dim, 1.0f, 0.1f);
    }
    vec(b + "ffn_norm.weight", a.dim, 1.0f, 0.1f);
    matrix(b + "ffn_gate.weight", a.ff, a.dim, 1.0f);
    matrix(b + "ffn_up.weight", a.ff, a.dim, 1.0f);
    matrix(b + "ffn_down.weight", a.dim, a.ff, 1.0f);
  }
  Status st = w.write(a.out);
  if (!st) {
    fmt::print(stderr, "error: {}\n", st.message());
    return 1;
  }
  fmt::print("wrote {}\n", a.out);
  return 0;
}
