#include "tokenizer/text_pair.h"

namespace pagoda {

TextPair encode_text_pair(const Tokenizer& tok, std::string_view first, std::string_view second) {
  const Vocab& v = tok.vocab();
  // llama.cpp falls back to the separator when the vocabulary names no EOS.
  const int32_t eos = v.eos >= 0 ? v.eos : v.sep;
  TextPair p;
  if (v.add_bos && v.bos >= 0) p.ids.push_back(v.bos);
  const std::vector<int32_t> a = tok.encode(first, /*add_special=*/false, /*parse_special=*/true);
  p.ids.insert(p.ids.end(), a.begin(), a.end());
  if (v.add_eos && eos >= 0) p.ids.push_back(eos);
  if (v.add_sep && v.sep >= 0) p.ids.push_back(v.sep);
  p.second = static_cast<int32_t>(p.ids.size());
  const std::vector<int32_t> b = tok.encode(second, /*add_special=*/false, /*parse_special=*/true);
  p.ids.insert(p.ids.end(), b.begin(), b.end());
  if (v.add_eos && eos >= 0) p.ids.push_back(eos);
  return p;
}

}  // namespace pagoda
