#include "convert/output_type.h"

#include "quant/sparse24.h"
#include "quant/type_policy.h"

namespace pagoda {

OutputTypeChoice convert_output_type(std::string_view name, std::span<const int64_t> shape, DType target) {
  OutputTypeChoice c;
  if (shape.size() <= 1 || name.ends_with("_norm.weight") || name == "position_embd.weight" ||
      name == "token_types.weight" || !name.ends_with(".weight"))
    return c;  // F32
  c.type = fallback_type(target, shape[0]);
  if (c.type != target)
    c.note = fmt::format("{}: rows of {} values do not split into {} blocks; written as {}", name, shape[0],
                         dtype_name(target), dtype_name(c.type));
  return c;
}

Result<DType> parse_convert_type(std::string_view name, DType checkpoint_type) {
  if (name.empty() || name == "auto" || name == "AUTO")
    return checkpoint_type == DType::BF16 ? DType::BF16 : DType::F16;
  auto t = parse_quantize_type(name);
  if (!t || *t == DType::I8 || is_sparse24(*t))
    return error("--type '{}' is not one convert writes: auto, {}", name, convert_type_names());
  return *t;
}

std::string convert_type_names() {
  std::string all = quantize_type_names(), out;
  // The list without W8A8 (its scale tensors are Pagoda's own) and the 2:4 formats.
  size_t start = 0;
  while (start <= all.size()) {
    size_t end = all.find(", ", start);
    if (end == std::string::npos) end = all.size();
    const std::string item = all.substr(start, end - start);
    if (!item.empty() && item != "W8A8" && item.find("S24") == std::string::npos)
      out += (out.empty() ? "" : ", ") + item;
    start = end + 2;
  }
  return out;
}

}  // namespace pagoda
