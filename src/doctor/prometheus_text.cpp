#include "doctor/prometheus_text.h"

#include <cstdlib>
#include <string>

namespace pagoda {

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':';
}

// `{k="v",...}` from s[i] = '{'; i ends past the '}'. False on a malformed set.
bool parse_labels(std::string_view s, size_t& i, std::vector<std::pair<std::string, std::string>>& out) {
  ++i;
  while (i < s.size() && s[i] != '}') {
    size_t k = i;
    while (i < s.size() && name_char(s[i])) ++i;
    std::string key(s.substr(k, i - k));
    if (key.empty() || i + 1 >= s.size() || s[i] != '=' || s[i + 1] != '"') return false;
    i += 2;
    std::string value;
    while (i < s.size() && s[i] != '"') {
      if (s[i] == '\\' && i + 1 < s.size()) {
        ++i;
        value += s[i] == 'n' ? '\n' : s[i];
      } else {
        value += s[i];
      }
      ++i;
    }
    if (i >= s.size()) return false;
    ++i;  // the closing quote
    out.emplace_back(std::move(key), std::move(value));
    if (i < s.size() && s[i] == ',') ++i;
  }
  if (i >= s.size()) return false;
  ++i;
  return true;
}

}  // namespace

MetricSamples MetricSamples::parse(std::string_view text) {
  MetricSamples m;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    MetricSample s;
    size_t i = 0;
    while (i < line.size() && name_char(line[i])) ++i;
    s.name = std::string(line.substr(0, i));
    if (s.name.empty()) continue;
    if (i < line.size() && line[i] == '{' && !parse_labels(line, i, s.labels)) continue;
    while (i < line.size() && line[i] == ' ') ++i;
    const std::string number(line.substr(i, line.find(' ', i) == std::string_view::npos ? std::string_view::npos
                                                                                        : line.find(' ', i) - i));
    if (number.empty()) continue;
    char* stop = nullptr;
    s.value = std::strtod(number.c_str(), &stop);  // also reads NaN, +Inf, -Inf
    if (stop == number.c_str()) continue;
    m.samples_.push_back(std::move(s));
  }
  return m;
}

std::optional<double> MetricSamples::sum(std::string_view name) const {
  std::optional<double> total;
  for (const MetricSample& s : samples_)
    if (s.name == name) total = total.value_or(0) + s.value;
  return total;
}

std::optional<double> MetricSamples::get(std::string_view name, std::string_view key, std::string_view value) const {
  for (const MetricSample& s : samples_) {
    if (s.name != name) continue;
    for (const auto& [k, v] : s.labels)
      if (k == key && v == value) return s.value;
  }
  return std::nullopt;
}

}  // namespace pagoda
