#include "text/unicode_class.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace pagoda {
namespace {

struct Range {
  uint32_t first, last;
  UnicodeClass cls;
};

constexpr Range kRanges[] = {
#include "text/unicode_table.inc"
};

constexpr std::array<UnicodeClass, 128> make_ascii() {
  std::array<UnicodeClass, 128> t{};
  for (const Range& r : kRanges) {
    for (uint32_t c = r.first; c <= r.last && c < 128; ++c) t[c] = r.cls;
  }
  return t;
}

constexpr std::array<UnicodeClass, 128> kAscii = make_ascii();

}  // namespace

UnicodeClass unicode_class(uint32_t cp) {
  if (cp < 128) return kAscii[cp];
  auto it = std::upper_bound(std::begin(kRanges), std::end(kRanges), cp,
                             [](uint32_t c, const Range& r) { return c < r.first; });
  if (it == std::begin(kRanges)) return UnicodeClass::kOther;
  --it;
  return cp <= it->last ? it->cls : UnicodeClass::kOther;
}

}  // namespace pagoda
