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

}  // namespace pagoda
