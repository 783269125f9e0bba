// Samples of a Prometheus text exposition (version 0.0.4, what a server's /metrics
// returns): `name{label="value",...} number` lines, comments and blank lines skipped. Enough
// of the format for `pagoda doctor --server` to read counters and gauges of Pagoda, vLLM
// or llama-server; timestamps are ignored.
//
// Cost: one pass over the text. Thread-safety: plain data.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda {

struct MetricSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

class MetricSamples {
 public:
  static MetricSamples parse(std::string_view text);
  // The sum over every sample of `name` (all label sets); nullopt when there is none.
  std::optional<double> sum(std::string_view name) const;
  // The sample of `name` whose label `key` is `value`.
  std::optional<double> get(std::string_view name, std::string_view key, std::string_view value) const;
  const std::vector<MetricSample>& samples() const { return samples_; }

 private:
  std::vector<MetricSample> samples_;
};

}  // namespace pagoda
