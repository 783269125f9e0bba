// AWQ-style activation-aware scaling (Lin et al., 2023). A few input channels of a linear
// layer carry much larger activations than the rest, and rounding errors of their weights
// cost the most. Multiplying weight column c by s_c before quantizing (and the input by
// 1/s_c, folded into the operation that produces it: an RMSNorm's weight, or the rows of
// the up projection that feeds down) gives those columns finer effective steps. The scales
// are s_c = mean|x_c|^alpha, with alpha searched on calibration activations for the
// lowest output error of the quantized layer. alpha = 0 (no scaling, plain round to
// nearest) is always a candidate, so the search never does worse on its own data.
#pragma once

#include <functional>
#include <span>
#include <vector>

namespace pagoda {

// s_c = mean_abs[c]^alpha normalized to a geometric middle of 1 (sqrt(max * min)), so the
// weights keep their magnitude; channels never active get the smallest nonzero scale.
std::vector<float> awq_scales(std::span<const float> mean_abs, float alpha);

struct AwqChoice {
  float alpha = 0;
  double loss = 0;      // of the chosen scales
  double loss_rtn = 0;  // alpha = 0
  std::vector<float> scales;
};

// Tries alpha = 0, 1/grid, ..., (grid-1)/grid; loss(scales) is the caller's measure of the
// quantized output error with those scales (it quantizes and runs the layer).
AwqChoice awq_search(std::span<const float> mean_abs, int grid, const std::function<double(std::span<const float>)>& loss);

}  // namespace pagoda
