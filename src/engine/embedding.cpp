#include "engine/embedding.h"

#include <cmath>

namespace pagoda {

Status normalize_embedding(std::span<float> v, int norm) {
  if (norm < -1) return error("embedding normalization {} is not one of -1 (none), 0 (int16 range), 1, 2, p > 2", norm);
  if (norm == -1) return Status::ok();
  // Sums in double: a 4096-wide vector's squares in float lose the last digits.
  double sum = 0.0;
  if (norm == 0) {
    for (float x : v) sum = std::max(sum, static_cast<double>(std::fabs(x)));
    sum /= 32760.0;
  } else if (norm == 1) {
    for (float x : v) sum += std::fabs(x);
  } else if (norm == 2) {
    for (float x : v) sum += static_cast<double>(x) * x;
    sum = std::sqrt(sum);
  } else {
    for (float x : v) sum += std::pow(std::fabs(static_cast<double>(x)), norm);
    sum = std::pow(sum, 1.0 / norm);
  }
  const float scale = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (float& x : v) x *= scale;
  return Status::ok();
}

}  // namespace pagoda
