// Every architecture `pagoda convert` takes. A new one is a file hf_arch_<name>.cpp
// defining its HfArch, plus one line here.
#include "convert/hf_arch.h"

namespace pagoda {

extern const HfArch kHfArchBert;
extern const HfArch kHfArchLlama;
extern const HfArch kHfArchQwen2;
extern const HfArch kHfArchQwen3;
extern const HfArch kHfArchGemma3;

const std::vector<const HfArch*>& hf_archs() {
  static const std::vector<const HfArch*> archs = {&kHfArchBert, &kHfArchLlama, &kHfArchQwen2, &kHfArchQwen3,
                                                   &kHfArchGemma3};
  return archs;
}

const HfArch* find_hf_arch(std::string_view hf_class) {
  for (const HfArch* a : hf_archs())
    for (std::string_view c : a->hf_classes)
      if (c == hf_class) return a;
  return nullptr;
}

std::string hf_class_names() {
  std::string out;
  for (const HfArch* a : hf_archs())
    for (std::string_view c : a->hf_classes) {
      if (!out.empty()) out += ", ";
      out += c;
    }
  return out;
}

}  // namespace pagoda
