#include "text/unicode_props.h"

#include <utf8proc.h>

namespace pagoda::text {

namespace {
utf8proc_category_t category(uint32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); }
}  // namespace

bool is_whitespace(uint32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85 || cp == 0x2028 || cp == 0x2029) return true;
  return category(cp) == UTF8PROC_CATEGORY_ZS;
}

bool is_control(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN: return true;
    default: return false;
  }
}

bool is_punctuation(uint32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
    return true;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: return true;
    default: return false;
  }
}

bool is_nonspacing_mark(uint32_t cp) { return category(cp) == UTF8PROC_CATEGORY_MN; }

bool is_cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void append_nfd(std::vector<uint32_t>& out, uint32_t cp) {
  utf8proc_int32_t buf[16];
  int boundclass = 0;
  const utf8proc_ssize_t n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 16,
                                                      UTF8PROC_DECOMPOSE, &boundclass);
  if (n <= 0 || n > 16) {
    out.push_back(cp);
    return;
  }
  for (utf8proc_ssize_t i = 0; i < n; ++i) out.push_back(static_cast<uint32_t>(buf[i]));
}

}  // namespace pagoda::text
