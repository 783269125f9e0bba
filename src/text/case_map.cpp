#include "text/case_map.h"

#include <utf8proc.h>

#include "text/utf8.h"

namespace pagoda::text {
namespace {

constexpr uint32_t kSharpS = 0xdf;          // ß: upper and title case are "SS" / "Ss"
constexpr uint32_t kCapitalIWithDot = 0x130;  // İ: lower case is "i" + U+0307

bool valid(uint32_t cp) { return cp <= 0x10ffff; }

}  // namespace

uint32_t to_upper(uint32_t cp) { return valid(cp) ? static_cast<uint32_t>(utf8proc_toupper(cp)) : cp; }
uint32_t to_lower(uint32_t cp) { return valid(cp) ? static_cast<uint32_t>(utf8proc_tolower(cp)) : cp; }
uint32_t to_title(uint32_t cp) { return valid(cp) ? static_cast<uint32_t>(utf8proc_totitle(cp)) : cp; }

bool is_cased(uint32_t cp) {
  if (!valid(cp)) return false;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT: return true;
    default: return to_upper(cp) != cp || to_lower(cp) != cp;
  }
}

bool has_lower_form(uint32_t cp) { return to_lower(cp) != cp; }
bool has_upper_form(uint32_t cp) { return cp == kSharpS || to_upper(cp) != cp; }

void append_upper(std::string& out, uint32_t cp) {
  if (cp == kSharpS) {
    out += "SS";
    return;
  }
  utf8::append(out, to_upper(cp));
}

void append_lower(std::string& out, uint32_t cp) {
  if (cp == kCapitalIWithDot) {
    out += "i\xcc\x87";
    return;
  }
  utf8::append(out, to_lower(cp));
}

void append_title(std::string& out, uint32_t cp) {
  if (cp == kSharpS) {
    out += "Ss";
    return;
  }
  utf8::append(out, to_title(cp));
}

}  // namespace pagoda::text
