#include "convert/convert.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "base/fp16.h"
#include "base/printable.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "convert/output_type.h"
#include "convert/tensor_transforms.h"
#include "gguf/gguf_writer.h"
#include "quant/formats.h"
#include "quant/quantize_matrix.h"
#include "quant/type_policy.h"

namespace pagoda {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // ggml's GGML_QNT_VERSION, as gguf-py writes it

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A failure inside the writer's fill callback; the writer turns it into its Status and
// removes the unfinished file.
class TensorFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Matrices written in another type than asked, by (type written, name): one note per
// type, not one per matrix (a 384-wide model falls back in every layer).
using Fallbacks = std::map<std::pair<DType, std::string>, int>;

std::vector<std::string> fallback_notes(const Fallbacks& f, DType target) {
  std::map<DType, std::vector<std::string>> by_type;
  for (const auto& [key, n] : f) by_type[key.first].push_back(key.second);
  std::vector<std::string> out;
  for (const auto& [type, names] : by_type)
    out.push_back(fmt::format("{} matri{} ({}{}) ha{} rows that {} blocks do not divide; written as {}", names.size(),
                              names.size() == 1 ? "x" : "ces", names.front(), names.size() > 1 ? ", ..." : "",
                              names.size() == 1 ? "s" : "ve", dtype_name(target), dtype_name(type)));
  return out;
}

Status plan_source(const ConvertContext& c, const HfArch& arch, const HfVocab& vocab, DType target,
                   const SafetensorsTensor& t, ConvertPlan& plan, Fallbacks& fallbacks) {
  auto mapped = arch.map_tensor(c, vocab, t.name);
  if (!mapped) return error("{}: {}", c.dir, mapped.status().message());
  if (!mapped->has_value()) {
    plan.notes.push_back(
        fmt::format("left out {} (not used by the {} architecture)", printable(t.name, 200), arch.gguf_name));
    return Status::ok();
  }
  PlannedTensor p;
  p.map = std::move(**mapped);
  p.name = p.map.name;
  p.source = &t;
  if (!t.readable)
    return error("{}: tensor '{}' is {}; only F32, F16 and BF16 weights are converted", c.dir, printable(t.name, 200),
                 t.dtype);
  if (t.shape.empty() || t.shape.size() > 4)
    return error("{}: tensor '{}' has {} dimensions", c.dir, printable(t.name, 200), t.shape.size());
  std::vector<int64_t> hf_shape = t.shape;
  for (int64_t d : hf_shape)
    if (d <= 0) return error("{}: tensor '{}' is empty ({})", c.dir, printable(t.name, 200), shape_text(t.shape));
  if (p.map.keep_rows >= 0) {
    if (hf_shape.size() != 2) return error("{}: tensor '{}' is not a matrix", c.dir, printable(t.name, 200));
    if (p.map.keep_rows == 0) return error("{}: tensor '{}' would keep no rows", c.dir, printable(t.name, 200));
    hf_shape[0] = std::min(hf_shape[0], p.map.keep_rows);
  }
  if (p.map.transform == TensorTransform::kRopePermute) {
    const int64_t heads = p.map.permute_heads;
    if (heads <= 0 || hf_shape[0] % heads != 0 || (hf_shape[0] / heads) % 2 != 0)
      return error("{}: tensor '{}' ({} rows) does not split into {} heads of an even number of rows", c.dir,
                   printable(t.name, 200), hf_shape[0], heads);
  }
  p.shape.assign(hf_shape.rbegin(), hf_shape.rend());
  const OutputTypeChoice choice = convert_output_type(p.name, p.shape, target);
  p.type = choice.type;
  if (choice.type != target && !choice.note.empty()) ++fallbacks[{choice.type, p.name}];
  plan.in_bytes += t.nbytes;
  plan.tensors.push_back(std::move(p));
  return Status::ok();
}

}  // namespace

Result<ConvertPlan> plan_conversion(const ConvertContext& c, const HfArch& arch, const HfVocab& vocab, DType target) {
  ConvertPlan plan;
  plan.arch = &arch;
  plan.target = target;
  Fallbacks fallbacks;
  for (const SafetensorsTensor& t : c.weights.tensors())
    PAGODA_TRY(plan_source(c, arch, vocab, target, t, plan, fallbacks));
  for (std::string& note : fallback_notes(fallbacks, target)) plan.notes.push_back(std::move(note));
  if (arch.extra_tensors != nullptr) {
    auto extra = arch.extra_tensors(c);
    if (!extra) return extra.status();
    for (GeneratedTensor& g : *extra) {
      PlannedTensor p;
      p.name = g.name;
      p.map.name = g.name;
      p.shape = {static_cast<int64_t>(g.values.size())};
      p.type = DType::F32;
      p.generated = std::move(g.values);
      plan.tensors.push_back(std::move(p));
    }
  }
  if (plan.tensors.empty())
    return error("{}: no tensor of the checkpoint maps to the {} architecture", c.dir, arch.gguf_name);
  std::set<std::string> names;
  for (PlannedTensor& p : plan.tensors) {
    if (!names.insert(p.name).second) return error("{}: two checkpoint tensors map to '{}'", c.dir, p.name);
    if (p.type != DType::F32 && !can_quantize(p.type))
      return error("{}: tensor '{}': Pagoda cannot write {}", c.dir, p.name, dtype_name(p.type));
    p.out_bytes = row_bytes(p.type, p.shape[0]) * static_cast<size_t>(elements(p.shape) / p.shape[0]);
    plan.out_bytes += p.out_bytes;
  }
  return plan;
}

Status tensor_values(const PlannedTensor& p, ThreadPool& pool, std::vector<float>& out) {
  const int64_t n = elements(p.shape);
  out.resize(static_cast<size_t>(n));
  if (p.source == nullptr) {
    std::memcpy(out.data(), p.generated.data(), static_cast<size_t>(n) * sizeof(float));
    return Status::ok();
  }
  const SafetensorsTensor& t = *p.source;
  if (!t.readable || static_cast<size_t>(n) * dtype_info(t.type).type_size > t.nbytes)
    return error("tensor '{}': its data does not cover the planned shape", t.name);
  const uint8_t* src = t.data;
  float* dst = out.data();
  pool.parallel_for(n, 1 << 16, [&](int64_t i0, int64_t i1, int) {
    switch (t.type) {
      case DType::F32:
        std::memcpy(dst + i0, src + i0 * 4, static_cast<size_t>(i1 - i0) * 4);
        break;
      case DType::F16:
        for (int64_t i = i0; i < i1; ++i) {
          uint16_t h;
          std::memcpy(&h, src + i * 2, 2);
          dst[i] = fp16_to_fp32(h);
        }
        break;
      default:  // BF16: the only other readable type
        for (int64_t i = i0; i < i1; ++i) {
          uint16_t h;
          std::memcpy(&h, src + i * 2, 2);
          dst[i] = bf16_to_fp32(h);
        }
        break;
    }
  });
  switch (p.map.transform) {
    case TensorTransform::kNone:
      break;
    case TensorTransform::kAddOne:
      add_one(out.data(), n);
      break;
    case TensorTransform::kRopePermute: {
      const int64_t rows = p.shape.back();  // HF's outermost dimension
      const std::vector<float> in = out;
      rope_permute_rows(in.data(), out.data(), rows, n / rows, p.map.permute_heads);
      break;
    }
  }
  return Status::ok();
}

Result<ConvertSummary> convert_hf_model(const ConvertOptions& o, ThreadPool& pool,
                                        const std::function<void(const std::string&)>& progress) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(o.hf_dir, ec)) return error("{}: no such folder", o.hf_dir);
  if (!fs::is_directory(o.hf_dir, ec)) return error("{}: not a folder (give the Hugging Face model folder)", o.hf_dir);
  if (fs::is_directory(o.output, ec)) return error("the output {} is a directory; give a file name", o.output);
  auto config = HfConfig::read(o.hf_dir);
  if (!config) return config.status();
  const std::string hf_class = config->architecture();
  if (hf_class.empty()) return error("{}: 'architectures' is missing; supported: {}", config->path(), hf_class_names());
  const HfArch* arch = find_hf_arch(hf_class);
  if (arch == nullptr)
    return error("{}: architecture '{}' is not supported; supported: {}", config->path(), printable(hf_class, 80),
                 hf_class_names());
  auto weights = SafetensorsSet::open_dir(o.hf_dir);
  if (!weights) return weights.status();
  const ConvertContext ctx{o.hf_dir, *config, *weights};
  auto vocab = read_hf_vocab(o.hf_dir, *config, arch->vocab);
  if (!vocab) return vocab.status();

  DType checkpoint_type = DType::F32;
  for (const SafetensorsTensor& t : weights->tensors())
    if (t.readable) {
      checkpoint_type = t.type;
      break;
    }
  auto target = parse_convert_type(o.type, checkpoint_type);
  if (!target) return target.status();

  GgufWriter w;
  w.set_string("general.architecture", std::string(arch->gguf_name));
  w.set_string("general.type", "model");
  std::string name = o.name;
  if (name.empty()) name = fs::absolute(o.hf_dir, ec).lexically_normal().filename().string();
  if (name.empty()) name = fs::absolute(o.hf_dir, ec).lexically_normal().parent_path().filename().string();
  if (!name.empty()) w.set_string("general.name", name);
  PAGODA_TRY(arch->write_metadata(ctx, *vocab, w));
  w.set_u32("general.file_type", llama_file_type(*target));
  w.set_u32("general.quantization_version", kQuantizationVersion);
  write_vocab(*vocab, w);

  auto plan_or = plan_conversion(ctx, *arch, *vocab, *target);
  if (!plan_or) return plan_or.status();
  const ConvertPlan& plan = *plan_or;
  for (const std::string& note : vocab->notes) progress("note: " + note);
  for (const std::string& note : plan.notes) progress("note: " + note);

  std::vector<float> values;  // one tensor's floats, reused
  const size_t n = plan.tensors.size();
  const int width = static_cast<int>(fmt::format("{}", n).size());
  for (size_t i = 0; i < n; ++i) {
    const PlannedTensor& p = plan.tensors[i];
    w.add_tensor(p.name, p.shape, p.type, [&, i](uint8_t* dst) {
      const PlannedTensor& tp = plan.tensors[i];
      Timer timer;
      Status st = tensor_values(tp, pool, values);
      if (!st) throw TensorFailed(st.message());
      const int64_t cols = tp.shape[0], rows = elements(tp.shape) / cols;
      if (tp.type == DType::F32)
        std::memcpy(dst, values.data(), values.size() * sizeof(float));
      else
        quantize_matrix(tp.type, values.data(), rows, cols, dst, pool);
      if (tp.source != nullptr) weights->drop_pages(*tp.source);  // read once
      progress(fmt::format("[{:>{}}/{}] {:<28} {:>4} -> {:<4} {:<16} {:.2f} s", i + 1, width, n, tp.name,
                           tp.source ? tp.source->dtype : std::string("F32"), dtype_name(tp.type), shape_text(tp.shape),
                           timer.seconds()));
    });
  }
  PAGODA_TRY(w.write(o.output));
  return ConvertSummary{std::string(arch->gguf_name), *target, n, plan.in_bytes, plan.out_bytes};
}

}  // namespace pagoda
