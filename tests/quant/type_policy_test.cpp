// The type policy of `pagoda quantize`: llama.cpp's rules for what is quantized, the
// fallback for rows that do not split into a format's blocks (row lengths of stories260K,
// 64 and 172, and of real models, 256 and 2048), and --keep rules.
#include <gtest/gtest.h>

#include <vector>

#include "quant/type_policy.h"
#include "quant/w8a8.h"

namespace pagoda {
namespace {

const std::vector<DType> kKQuants = {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
const std::vector<DType> kTargets = {DType::Q8_0, DType::Q6_K, DType::Q5_K, DType::Q4_K, DType::Q4_0,
                                     DType::Q3_K, DType::Q2_K, DType::Q5_1, DType::Q5_0, DType::Q4_1,
                                     DType::F16,  DType::BF16, DType::F32};

KeepRule keep(const char* spec) {
  auto r = parse_keep_rule(spec);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return std::move(r.value());
}

TEST(TypePolicy, RowsThatFitKeepTheirType) {
  for (int64_t cols : {256, 2048, 256 * 640})
    for (DType t : kTargets) EXPECT_EQ(fallback_type(t, cols), t) << dtype_name(t) << " cols " << cols;
}

TEST(TypePolicy, KQuantsFallBackToA32ValueFormatLikeLlamaQuantize) {
  // Rows of 64 (stories260K's width) and 640 (Gemma 3 270M's) fit 32 but not 256.
  for (int64_t cols : {64, 640}) {
    EXPECT_EQ(fallback_type(DType::Q2_K, cols), DType::Q4_0);
    EXPECT_EQ(fallback_type(DType::Q3_K, cols), DType::Q4_0);
    EXPECT_EQ(fallback_type(DType::Q4_K, cols), DType::Q5_0);
    EXPECT_EQ(fallback_type(DType::Q5_K, cols), DType::Q5_1);
    EXPECT_EQ(fallback_type(DType::Q6_K, cols), DType::Q8_0);
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::F16})
      EXPECT_EQ(fallback_type(t, cols), t);
  }
}

TEST(TypePolicy, RowsNoBlockDividesBecomeF16) {
  // 172 (stories260K's FFN width) is 4 * 43: no block format fits.
  for (DType t : kTargets) {
    const DType want = dtype_info(t).quantized ? DType::F16 : t;
    EXPECT_EQ(fallback_type(t, 172), want) << dtype_name(t);
  }
}

TEST(TypePolicy, OnlyWeightMatricesAreQuantized) {
  using S = std::vector<int64_t>;
  EXPECT_TRUE(tensor_allows_quantization("blk.0.attn_q.weight", S{64, 64}));
  EXPECT_TRUE(tensor_allows_quantization("token_embd.weight", S{64, 512}));
  EXPECT_TRUE(tensor_allows_quantization("output.weight", S{64, 512}));
  EXPECT_TRUE(tensor_allows_quantization("blk.0.ffn_up_exps.weight", S{64, 128, 8}));  // experts, 3-D
  EXPECT_FALSE(tensor_allows_quantization("blk.0.attn_norm.weight", S{64}));           // 1-D
  EXPECT_FALSE(tensor_allows_quantization("blk.0.attn_q.weight", S{64, 1}));           // 1-D for ggml
  EXPECT_FALSE(tensor_allows_quantization("blk.0.attn_q.weight", S{64, 1, 1, 1}));
  EXPECT_FALSE(tensor_allows_quantization("blk.0.attn_q.bias", S{64, 64}));            // not a weight
  EXPECT_FALSE(tensor_allows_quantization("blk.0.attn_q_norm.weight", S{64, 64}));     // norms never
  EXPECT_FALSE(tensor_allows_quantization("blk.0.ffn_gate_inp.weight", S{64, 8}));     // MoE router
  EXPECT_FALSE(tensor_allows_quantization("position_embd.weight", S{64, 512}));
  EXPECT_FALSE(tensor_allows_quantization("token_types.weight", S{64, 2}));
  EXPECT_FALSE(tensor_allows_quantization("blk.0.ssm_conv1d.weight", S{4, 64}));
  EXPECT_FALSE(tensor_allows_quantization("v.position_embd.weight", S{64, 64}));
}

TEST(TypePolicy, ChooseAppliesTargetFallbackAndKeepsOtherTensors) {
  const TypePolicy p(DType::Q4_K, {});
  const std::vector<int64_t> mat{2048, 64}, narrow{64, 512}, ffn{172, 64}, norm{64};
  TensorTypeChoice c = p.choose("blk.0.ffn_down.weight", mat, DType::F32);
  EXPECT_TRUE(c.quantizable);
  EXPECT_EQ(c.type, DType::Q4_K);
  EXPECT_FALSE(c.fell_back());
  c = p.choose("token_embd.weight", narrow, DType::F32);
  EXPECT_EQ(c.type, DType::Q5_0);
  EXPECT_EQ(c.wanted, DType::Q4_K);
  EXPECT_TRUE(c.fell_back());
  EXPECT_EQ(p.choose("blk.0.ffn_down.weight", ffn, DType::BF16).type, DType::F16);
  c = p.choose("blk.0.attn_norm.weight", norm, DType::F32);
  EXPECT_FALSE(c.quantizable);
  EXPECT_EQ(c.type, DType::F32);
  EXPECT_FALSE(c.fell_back());
  EXPECT_EQ(p.choose("blk.0.attn_norm.weight", norm, DType::F16).type, DType::F16);  // kept as it is
}

TEST(TypePolicy, KeepRulesFirstMatchWinsAndStillFallBack) {
  const TypePolicy p(DType::Q4_K, {keep("q8_0=output\\.weight|token_embd"), keep("F16=attn_"),
                                   keep("q6_k=.*")});
  const std::vector<int64_t> mat{256, 64}, narrow{64, 64}, norm{256};
  TensorTypeChoice c = p.choose("output.weight", mat, DType::F32);
  EXPECT_EQ(c.type, DType::Q8_0);
  EXPECT_EQ(c.keep_rule, 0);
  EXPECT_EQ(p.choose("token_embd.weight", mat, DType::F32).type, DType::Q8_0);
  c = p.choose("blk.1.attn_v.weight", mat, DType::F32);
  EXPECT_EQ(c.type, DType::F16);
  EXPECT_EQ(c.keep_rule, 1);
  // Matched anywhere in the name (regex_search), like llama-quantize's --tensor-type.
  EXPECT_EQ(p.choose("blk.1.ffn_up.weight", mat, DType::F32).type, DType::Q6_K);
  // A --keep type whose blocks do not fit falls back as the target would.
  c = p.choose("blk.1.ffn_up.weight", narrow, DType::F32);
  EXPECT_EQ(c.wanted, DType::Q6_K);
  EXPECT_EQ(c.type, DType::Q8_0);
  // Rules never touch tensors that are not quantized.
  c = p.choose("blk.1.attn_norm.weight", norm, DType::F32);
  EXPECT_EQ(c.type, DType::F32);
  EXPECT_EQ(c.keep_rule, -1);
}

TEST(TypePolicy, ParsesTypesCaseInsensitively) {
  EXPECT_EQ(*parse_quantize_type("q4_k"), DType::Q4_K);
  EXPECT_EQ(*parse_quantize_type("Q8_0"), DType::Q8_0);
  EXPECT_EQ(*parse_quantize_type("bf16"), DType::BF16);
  for (const char* bad : {"Q8_K", "Q8_1", "I32", "IQ4_NL", "q4", ""}) {
    auto r = parse_quantize_type(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("Q4_K"), std::string::npos) << r.status().message();  // lists choices
  }
  auto mix = parse_quantize_type("Q4_K_M");
  ASSERT_FALSE(mix.is_ok());
  EXPECT_NE(mix.status().message().find("--pure"), std::string::npos) << mix.status().message();
}

TEST(TypePolicy, KeepRuleErrorsSayWhatIsWrong) {
  for (const char* spec : {"q8_0", "=token_embd", "q8_0=", "q9_9=output", "q8_0=output(", "q8_0=[a-"}) {
    auto r = parse_keep_rule(spec);
    ASSERT_FALSE(r.is_ok()) << spec;
    EXPECT_NE(r.status().message().find(spec), std::string::npos) << r.status().message();
  }
  EXPECT_NE(parse_keep_rule("q8_0=(").status().message().find("regular expression"), std::string::npos);
}

TEST(TypePolicy, FileTypesAreLlamaCppsPureIds) {
  EXPECT_EQ(llama_file_type(DType::F32), 0u);
  EXPECT_EQ(llama_file_type(DType::F16), 1u);
  EXPECT_EQ(llama_file_type(DType::Q4_0), 2u);
  EXPECT_EQ(llama_file_type(DType::Q8_0), 7u);
  EXPECT_EQ(llama_file_type(DType::Q2_K), 10u);
  EXPECT_EQ(llama_file_type(DType::Q3_K), 11u);  // Q3_K_S
  EXPECT_EQ(llama_file_type(DType::Q4_K), 14u);  // Q4_K_S
  EXPECT_EQ(llama_file_type(DType::Q5_K), 16u);  // Q5_K_S
  EXPECT_EQ(llama_file_type(DType::Q6_K), 18u);
  EXPECT_EQ(llama_file_type(DType::BF16), 32u);
  for (DType t : kKQuants) EXPECT_TRUE(is_quantize_target(t));
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

TEST(TypePolicy, W8A8IsTheI8TargetAndFallsBackToF16OnlyPastTheInt32Limit) {
  auto t = parse_quantize_type("w8a8");
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(*t, DType::I8);
  EXPECT_EQ(quantize_type_name(DType::I8), "W8A8");
  EXPECT_EQ(quantize_type_name(DType::Q4_K), "Q4_K");
  EXPECT_EQ(fallback_type(DType::I8, 172), DType::I8);
  EXPECT_EQ(fallback_type(DType::I8, kW8A8MaxCols + 32), DType::F16);
  auto bad = parse_quantize_type("w4a4");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("W8A8"), std::string::npos) << "the error lists W8A8 among the choices";
}

}  // namespace
}  // namespace pagoda
