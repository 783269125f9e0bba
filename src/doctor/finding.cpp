#include "doctor/finding.h"

namespace pagoda {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "warning";
}

nlohmann::json finding_json(const Finding& f) {
  return {{"id", f.id}, {"severity", severity_name(f.severity)}, {"what", f.what}, {"why", f.why}, {"fix", f.fix},
          {"data", f.data}};
}

void add_finding(std::vector<Finding>& out, std::string id, Severity s, std::string what, std::string why,
                 std::string fix, nlohmann::json data) {
  out.push_back({std::move(id), s, std::move(what), std::move(why), std::move(fix), std::move(data)});
}

}  // namespace pagoda
