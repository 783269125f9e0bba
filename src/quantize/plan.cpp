#include "quantize/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "quant/formats.h"

namespace pagoda {

Result<QuantizePlan> plan_quantization(const GgufFile& file, const TypePolicy& policy, bool allow_requantize) {
  if (auto splits = file.get_int("split.count"); splits && *splits > 1)
    return error("{} is part {} of a split model ({} files); merge it first (llama-gguf-split --merge)", file.path(),
                 file.get_int("split.no").value_or(0) + 1, *splits);
  QuantizePlan plan;
  for (const GgufTensor& t : file.tensors()) {
    TensorPlan p;
    p.source = &t;
    p.choice = policy.choose(t.name, t.shape, t.type);
    p.type = p.choice.type;
    p.convert = p.type != t.type;
    p.cols = t.shape.empty() ? 1 : t.shape[0];
    p.rows = p.cols > 0 ? t.num_elements() / p.cols : 0;
    p.out_bytes = p.convert ? row_bytes(p.type, p.cols) * static_cast<size_t>(p.rows) : t.nbytes;
    if (p.convert && p.type == DType::I8) p.out_bytes += static_cast<size_t>(p.rows) * sizeof(float);  // W8A8 scales
    if (p.convert) {
      if (!can_dequantize(t.type))
        return error("tensor '{}' is {}, which cannot be converted to {}", t.name, dtype_name(t.type),
                     dtype_name(p.type));
      if (dtype_info(t.type).quantized && !allow_requantize)
        return error("tensor '{}' is already quantized ({}); quantizing it again to {} compounds the error. "
                     "Start from an F32/F16/BF16 model, or pass --allow-requantize to do it anyway",
                     t.name, dtype_name(t.type), dtype_name(p.type));
    }
    plan.in_bytes += t.nbytes;
    plan.out_bytes += p.out_bytes;
    plan.params += t.num_elements();
    plan.tensors.push_back(p);
  }
  return plan;
}

std::vector<std::string> plan_notes(const QuantizePlan& plan, const TypePolicy& policy) {
  std::vector<std::string> notes;
  // (wanted, written, row length) -> count and the first tensor, in first-seen order.
  struct Group {
    int count = 0;
    std::string example;
    size_t order = 0;
  };
  std::map<std::tuple<uint32_t, uint32_t, int64_t>, Group> fallbacks;
  std::vector<int> keep_hits(policy.keep_rules().size(), 0);
  for (const TensorPlan& p : plan.tensors) {
    if (p.choice.keep_rule >= 0) ++keep_hits[static_cast<size_t>(p.choice.keep_rule)];
    if (!p.choice.fell_back()) continue;
    Group& g = fallbacks[{static_cast<uint32_t>(p.choice.wanted), static_cast<uint32_t>(p.type), p.cols}];
    if (g.count++ == 0) {
      g.example = p.source->name;
      g.order = fallbacks.size();
    }
  }
  std::vector<std::pair<size_t, std::string>> ordered;
  for (const auto& [key, g] : fallbacks) {
    const auto [wanted, written, cols] = key;
    const DType w = static_cast<DType>(wanted);
    ordered.emplace_back(
        g.order, fmt::format("note: {} {} with rows of {} values ({}{}) do not split into {} blocks of {}; written as "
                             "{}, as llama-quantize does",
                             g.count, g.count == 1 ? "tensor" : "tensors", cols, g.example, g.count > 1 ? ", ..." : "",
                             dtype_name(w), dtype_info(w).block_size, dtype_name(static_cast<DType>(written))));
  }
  std::sort(ordered.begin(), ordered.end());
  for (auto& [order, line] : ordered) notes.push_back(std::move(line));
  for (size_t i = 0; i < keep_hits.size(); ++i)
    if (keep_hits[i] == 0)
      notes.push_back(fmt::format("warning: --keep {}='{}' matched no weight matrix",
                                  dtype_name(policy.keep_rules()[i].type), policy.keep_rules()[i].pattern));
  return notes;
}

}  // namespace pagoda
