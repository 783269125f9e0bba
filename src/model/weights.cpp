#include "model/weights.h"

#include "gguf/gguf_file.h"
#include "quant/formats.h"

namespace pagoda {

bool WeightBinder::has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

Result<WeightView> WeightBinder::matrix(const std::string& name, int64_t rows, int64_t cols, bool required) {
  const GgufTensor* t = file_.find_tensor(name);
  if (t == nullptr) {
    if (required) return error("{}: missing tensor {}", file_.path(), name);
    return WeightView{};
  }
  if (t->shape.size() != 2 || t->shape[0] != cols || t->shape[1] != rows)
    return error("{}: tensor {} has shape {}, expected [{}, {}]", file_.path(), name, fmt::join(t->shape, "x"), cols,
                 rows);
  if (!can_dequantize(t->type))
    return error("{}: tensor {} has type {}, which Pagoda cannot compute with", file_.path(), name,
                 dtype_name(t->type));
  WeightView w;
  w.type = t->type;
  w.rows = rows;
  w.cols = cols;
  w.row_stride = row_bytes(t->type, cols);
  w.data = t->data;
  return w;
}

Result<const float*> WeightBinder::vector(const std::string& name, int64_t n, bool required) {
  const GgufTensor* t = file_.find_tensor(name);
  if (t == nullptr) {
    if (required) return error("{}: missing tensor {}", file_.path(), name);
    return static_cast<const float*>(nullptr);
  }
  if (t->num_elements() != n || (t->shape.size() != 1 && !(t->shape.size() == 2 && t->shape[1] == 1)))
    return error("{}: tensor {} has {} values, expected a vector of {}", file_.path(), name, t->num_elements(), n);
  if (!can_dequantize(t->type))
    return error("{}: tensor {} has unsupported type {}", file_.path(), name, dtype_name(t->type));
  if (t->type == DType::F32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0)
    return reinterpret_cast<const float*>(t->data);
  auto buf = std::make_unique<float[]>(n);
  dequantize_row(t->type, t->data, buf.get(), n);
  out_.owned.push_back(std::move(buf));
  return static_cast<const float*>(out_.owned.back().get());
}

}  // namespace pagoda
