#include "model/weights.h"

#include "gguf/gguf_file.h"
#include "quant/formats.h"
#include "quant/w8a8.h"

namespace pagoda {

WeightView weight_rows(const WeightView& w, int64_t r0, int64_t n) {
  WeightView v = w;
  v.rows = n;
  v.data = w.data + static_cast<size_t>(r0) * w.row_stride;
  if (w.row_scales != nullptr) v.row_scales = w.row_scales + r0;
  v.packed = nullptr;
  return v;
}

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
  if (t->type == DType::I8) return w8a8_matrix(*t, rows, cols);
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

Result<std::vector<WeightView>> WeightBinder::experts(const std::string& name, int64_t n_expert, int64_t rows,
                                                      int64_t cols) {
  const GgufTensor* t = file_.find_tensor(name);
  if (t == nullptr) return error("{}: missing tensor {}", file_.path(), name);
  if (t->shape.size() != 3 || t->shape[0] != cols || t->shape[1] != rows || t->shape[2] != n_expert)
    return error("{}: tensor {} has shape {}, expected [{}, {}, {}] ({} experts of {} x {})", file_.path(), name,
                 fmt::join(t->shape, "x"), cols, rows, n_expert, n_expert, rows, cols);
  if (t->type == DType::I8)
    return error("{}: tensor {} is I8; W8A8 expert tensors are not supported (quantize experts to Q8_0 instead)",
                 file_.path(), name);
  if (!can_dequantize(t->type))
    return error("{}: tensor {} has type {}, which Pagoda cannot compute with", file_.path(), name,
                 dtype_name(t->type));
  std::vector<WeightView> out(static_cast<size_t>(n_expert));
  const size_t stride = row_bytes(t->type, cols);
  for (int64_t e = 0; e < n_expert; ++e) {
    WeightView& w = out[static_cast<size_t>(e)];
    w.type = t->type;
    w.rows = rows;
    w.cols = cols;
    w.row_stride = stride;
    w.data = t->data + static_cast<size_t>(e) * static_cast<size_t>(rows) * stride;
  }
  return out;
}

// An I8 matrix is W8A8 (src/quant/w8a8.h): its per-row scales sit in a companion tensor.
Result<WeightView> WeightBinder::w8a8_matrix(const GgufTensor& t, int64_t rows, int64_t cols) {
  const std::string scale_name = t.name + std::string(kW8A8ScaleSuffix);
  const GgufTensor* s = file_.find_tensor(scale_name);
  if (s == nullptr)
    return error("{}: tensor {} is I8 but its W8A8 row scales {} are missing (a W8A8 file holds an F32 [{}] "
                 "scale tensor beside each I8 matrix)",
                 file_.path(), t.name, scale_name, rows);
  if (s->type != DType::F32 || s->num_elements() != rows ||
      (s->shape.size() != 1 && !(s->shape.size() == 2 && s->shape[1] == 1)))
    return error("{}: W8A8 scale tensor {} is {} [{}], expected F32 [{}] (one scale per row of {})", file_.path(),
                 scale_name, dtype_name(s->type), fmt::join(s->shape, ", "), rows, t.name);
  if (reinterpret_cast<uintptr_t>(s->data) % alignof(float) != 0)
    return error("{}: W8A8 scale tensor {} is not 4-byte aligned", file_.path(), scale_name);
  if (cols > kW8A8MaxCols)
    return error("{}: W8A8 tensor {} has rows of {} values; at most {} fit the int32 dot product", file_.path(),
                 t.name, cols, kW8A8MaxCols);
  WeightView w;
  w.type = DType::I8;
  w.rows = rows;
  w.cols = cols;
  w.row_stride = static_cast<size_t>(cols);
  w.data = t.data;
  w.row_scales = reinterpret_cast<const float*>(s->data);
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
  // Copied out of the mapping even as F32: a few KiB read every step from the file would
  // keep the page-cache folios around them (hundreds of KiB of the matrices beside them)
  // mapped into the resident set.
  auto buf = std::make_unique<float[]>(n);
  dequantize_row(t->type, t->data, buf.get(), n);
  out_.owned.push_back(std::move(buf));
  return static_cast<const float*>(out_.owned.back().get());
}

}  // namespace pagoda
