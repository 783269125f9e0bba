#include "engine/generator.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf_file.h"
#include "sampling/sampler.h"
#include "model/random_model.h"

namespace pagoda {
namespace {

struct Loaded {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};

Loaded load_tiny(ThreadPool& pool) {
  const auto path = (std::filesystem::temp_directory_path() / "pagoda_generator_test.gguf").string();
  RandomModelSpec s;
  EXPECT_TRUE(write_random_model(s, path).is_ok());
  Loaded l;
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.is_ok());
  l.file = std::make_unique<GgufFile>(std::move(f.value()));
  auto m = Model::load(*l.file, pool);
  EXPECT_TRUE(m.is_ok());
  l.model = std::move(m.value());
  auto t = Tokenizer::from_gguf(*l.file);
  EXPECT_TRUE(t.is_ok());
  l.tok = std::move(t.value());
  return l;
}

std::unique_ptr<Engine> make_engine(Loaded& l, int32_t ctx) {
  EngineConfig c;
  c.max_model_len = ctx;
  auto e = Engine::create(*l.model, l.tok.get(), c);
  EXPECT_TRUE(e.is_ok());
  return std::move(e.value());
}

TEST(Generator, GreedyIsDeterministicAndHonoursMaxTokens) {
  ThreadPool pool(2);
  Loaded l = load_tiny(pool);
  GenerateOptions o;
  o.max_tokens = 12;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  const std::vector<int32_t> prompt = {1, 300, 301};
  auto engine = make_engine(l, 64);
  auto a = generate(*engine, prompt, o, nullptr, true);
  auto b = generate(*engine, prompt, o, nullptr, false);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->tokens.size(), 12u);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->logits.size(), 12u * l.model->config().n_vocab);
  EXPECT_EQ(a->stats.stop_reason, "length");
  // Each kept logits row chose its token greedily.
  for (size_t i = 0; i < a->tokens.size(); ++i) {
    std::span<const float> row(a->logits.data() + i * l.model->config().n_vocab, l.model->config().n_vocab);
    EXPECT_EQ(argmax(row), a->tokens[i]);
  }
}

TEST(Generator, StopsWhenTheContextIsFull) {
  ThreadPool pool(1);
  Loaded l = load_tiny(pool);
  GenerateOptions o;
  o.max_tokens = -1;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  auto engine = make_engine(l, 10);
  auto r = generate(*engine, {1, 2, 3}, o, nullptr, false);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->stats.stop_reason, "context");
  EXPECT_EQ(r->tokens.size(), 7u);  // prompt and output together fill the 10-token context
}

TEST(Generator, RejectsPromptsThatDoNotFit) {
  ThreadPool pool(1);
  Loaded l = load_tiny(pool);
  auto engine = make_engine(l, 4);
  auto r = generate(*engine, {1, 2, 3, 4, 5}, GenerateOptions{}, nullptr, false);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("context"), std::string::npos);
  auto e = generate(*engine, {}, GenerateOptions{}, nullptr, false);
  EXPECT_FALSE(e.is_ok());
}

TEST(Generator, CallbackCanStopEarlyAndStreamsText) {
  ThreadPool pool(1);
  Loaded l = load_tiny(pool);
  GenerateOptions o;
  o.max_tokens = 50;
  o.ignore_eos = true;
  o.sampling.temperature = 0;
  auto engine = make_engine(l, 64);
  int calls = 0;
  auto r = generate(*engine, {1, 300}, o, [&](int32_t, const std::string&) { return ++calls < 5; },
                    false);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->tokens.size(), 5u);
  EXPECT_EQ(r->stats.stop_reason, "cancelled");
  EXPECT_FALSE(engine->has_work()) << "a cancelled request is aborted";
  EXPECT_EQ(engine->stats().used_blocks, 0);
}

}  // namespace
}  // namespace pagoda
