#include "plan/model_probe.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace pagoda {

namespace {

using Clock = std::chrono::steady_clock;

// "blk.N." tensors belong to layer N (llama.cpp's naming, which every architecture here
// uses); -1 for the rest (embeddings, the output head, final norms).
int32_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return -1;
  int32_t l = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    l = l * 10 + (name[i] - '0');
  }
  return l;
}

uint64_t fnv1a(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// The copy's metadata: the file's, with block_count = layers and every per-layer array
// (as many entries as the model has layers) cut to the copy's layers; the vocabulary's
// arrays are left out (the forward pass reads no tokenizer).
GgufWriter shadow_writer(const GgufFile& file, const std::string& arch, int32_t n_layer, int32_t layers) {
  GgufWriter w(file.alignment());
  const std::string block_count = arch + ".block_count";
  for (const auto& [key, value] : file.metadata()) {
    if (key == "general.alignment") continue;
    if (key.rfind("tokenizer.", 0) == 0) continue;
    if (key == block_count) {
      w.set_u32(key, static_cast<uint32_t>(layers));
      continue;
    }
    if (const GgufArray* a = value.as_array(); a != nullptr && static_cast<int64_t>(a->values.size()) == n_layer) {
      auto cut = std::make_shared<GgufArray>();
      cut->elem_type = a->elem_type;
      cut->values.assign(a->values.begin(), a->values.begin() + layers);
      GgufValue v = value;
      v.v = cut;
      w.set(key, std::move(v));
      continue;
    }
    w.set(key, value);
  }
  return w;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::string model_shape_key(const GgufFile& file) {
  uint64_t h = 0xcbf29ce484222325ull;
  if (const auto arch = file.get_string("general.architecture")) h = fnv1a(h, arch->data(), arch->size());
  for (const GgufTensor& t : file.tensors()) {
    h = fnv1a(h, t.name.data(), t.name.size());
    const int32_t type = static_cast<int32_t>(t.type);
    h = fnv1a(h, &type, sizeof type);
    for (int64_t d : t.shape) h = fnv1a(h, &d, sizeof d);
  }
  // The hyperparameters that shape a step without shaping a tensor (heads, windows).
  for (const auto& [key, value] : file.metadata()) {
    if (key.rfind("tokenizer.", 0) == 0 || key.rfind("general.", 0) == 0) continue;
    h = fnv1a(h, key.data(), key.size());
    if (auto i = value.as_int()) h = fnv1a(h, &*i, sizeof *i);
    else if (auto f = value.as_float()) h = fnv1a(h, &*f, sizeof *f);
  }
  return fmt::format("{:016x}", h);
}

Result<ModelTiming> time_model_shape(const GgufFile& file, KvType kv_type, double output_s, size_t max_bytes,
                                     const std::string& scratch_dir, ThreadPool& pool) {
  const auto arch = file.get_string("general.architecture");
  if (!arch) return error("{}: no general.architecture", file.path());
  const auto n_layer_meta = file.get_int(*arch + ".block_count");
  if (!n_layer_meta || *n_layer_meta < 1) return error("{}: no {}.block_count", file.path(), *arch);
  const int32_t n_layer = static_cast<int32_t>(*n_layer_meta);
  // The copy's layers: all of them when the model fits max_bytes, else as many as do
  // beside the tensors outside the layers.
  size_t outside = 0;
  std::vector<size_t> layer_bytes(static_cast<size_t>(n_layer), 0);
  for (const GgufTensor& t : file.tensors()) {
    const int32_t l = layer_of(t.name);
    if (l < 0 || l >= n_layer) outside += t.nbytes;
    else layer_bytes[static_cast<size_t>(l)] += t.nbytes;
  }
  int32_t layers = 0;
  for (size_t used = outside; layers < n_layer && used + layer_bytes[static_cast<size_t>(layers)] <= max_bytes; ++layers)
    used += layer_bytes[static_cast<size_t>(layers)];
  layers = std::max(layers, 1);

  GgufWriter w = shadow_writer(file, *arch, n_layer, layers);
  for (const GgufTensor& t : file.tensors()) {
    const int32_t l = layer_of(t.name);
    if (l >= layers) continue;
    const size_t n = t.nbytes;
    w.add_tensor(t.name, t.shape, t.type, [n](uint8_t* dst) { std::memset(dst, 0, n); });
  }
  std::error_code ec;
  std::filesystem::create_directories(scratch_dir, ec);
  const std::string path = fmt::format("{}/shape-probe-{}.gguf", scratch_dir, ::getpid());
  struct Remove {
    std::string p;
    ~Remove() {
      std::error_code e;
      std::filesystem::remove(p, e);
    }
  } remove{path};
  if (Status st = w.write(path); !st) return st;
  auto copy = GgufFile::open(path);
  if (!copy) return copy.status();
  auto model_r = Model::load(*copy, pool, /*repack=*/true);
  if (!model_r) return model_r.status();
  Model& model = **model_r;
  const ModelConfig& c = model.config();
  if (!c.causal || !c.has_lm_head) return error("{}: only a decoder's step is timed", file.path());

  ModelTiming r;
  r.key = model_shape_key(file);
  r.kv = kv_type;
  r.n_layer = n_layer;
  r.layers = layers;
  r.output_s = output_s;
  constexpr int32_t kCached = 16, kSteps = 32, kChunk = 512;
  // The deep context: 4096 tokens, or what the model's context leaves room for. Its keys
  // are the cache's own zeros, written first so they are memory of their own (pages never
  // written would all read the one zero page, from the cache).
  const int32_t deep = std::min(4096, (c.n_ctx_train > 0 ? c.n_ctx_train : 4096) - kChunk - kSteps - 16);
  KvCache kv(c.n_layer, std::max(deep, 0) + kChunk + kSteps + 16, c.n_head_kv, c.head_dim, kv_type);
  if (!kv.ok()) return error("cannot reserve the probe's KV cache");
  kv.storage().prefault();
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  std::vector<int32_t> tokens(static_cast<size_t>(kChunk), 1);
  // Prefill: one chunk after `cached` tokens, the median of three (after one untimed).
  auto prefill = [&](int32_t cached) -> Result<double> {
    std::vector<double> t;
    for (int i = 0; i < 4; ++i) {
      const auto t0 = Clock::now();
      if (Status st = model.forward(std::span<const int32_t>(tokens), cached, kv, logits.data(), false); !st) return st;
      if (i > 0) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return median(t);
  };
  // Decode: one token at a time after `cached`, as a generation's steps run. The mean of a
  // run of steps, as a generation's rate is (a slow step counts); the median of three such
  // runs over the same positions, as the cached number is used for good: a single run
  // caught in a slow second of this shared machine put Gemma 3's decode 17% low.
  auto decode = [&](int32_t cached) -> Result<double> {
    std::vector<double> runs;
    for (int run = 0; run < 3; ++run) {
      double total = 0;
      for (int32_t i = 0; i < kSteps + 2; ++i) {
        const auto t0 = Clock::now();
        if (Status st = model.forward(std::span<const int32_t>(tokens).first(1), cached + i, kv, logits.data(), false);
            !st)
          return st;
        if (i >= 2) total += std::chrono::duration<double>(Clock::now() - t0).count();
      }
      runs.push_back(total / kSteps);
    }
    return median(runs);
  };
  // Both timings at one depth: the prefill after prefill_at tokens, the decode after decode_at.
  struct Timings {
    double prefill_s, decode_s;
  };
  auto both = [&](int32_t prefill_at, int32_t decode_at) -> Result<Timings> {
    auto p = prefill(prefill_at);
    if (!p) return p.status();
    auto d = decode(decode_at);
    if (!d) return d.status();
    return Timings{*p, *d};
  };
  auto near = both(0, kCached);
  if (!near) return near.status();
  r.prefill_tokens = kChunk;
  r.prefill_s = near->prefill_s;
  r.decode_keys = kCached + 2 + kSteps / 2;
  r.decode_s = near->decode_s;
  if (deep >= 1024) {
    auto far = both(deep, deep);
    if (!far) return far.status();
    r.deep_prefill_keys = deep;
    r.deep_prefill_s = far->prefill_s;
    r.deep_keys = deep + 2 + kSteps / 2;
    r.deep_decode_s = far->decode_s;
  }
  return r;
}

}  // namespace pagoda
