// One thing `pagoda doctor` found wrong with a setup: what it saw, why it matters, the
// change that fixes it, and the measured numbers behind it. Findings are plain data that
// the checks (src/doctor/checks.h) append and the CLI prints as text or JSON; the ids and
// JSON keys are stable (docs/doctor.md).
//
// Thread-safety: plain data.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pagoda {

enum class Severity {
  kInfo,     // worth knowing, nothing is broken
  kWarning,  // slower, costlier or worse output than this setup could give
  kError,    // it will fail: does not fit, will not stop, ...
};

const char* severity_name(Severity s);

struct Finding {
  std::string id;  // "<check>.<what>", e.g. "memory.does_not_fit"
  Severity severity = Severity::kWarning;
  std::string what, why, fix;
  nlohmann::json data = nlohmann::json::object();  // the numbers the finding rests on
};

nlohmann::json finding_json(const Finding& f);

// Appends a finding (the checks' one way to report).
void add_finding(std::vector<Finding>& out, std::string id, Severity s, std::string what, std::string why,
                 std::string fix, nlohmann::json data = nlohmann::json::object());

}  // namespace pagoda
