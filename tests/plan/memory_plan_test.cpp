// The plan's memory parts are the engine's and the loader's own numbers: what repacking
// will do equals what it does, the KV cache equals what Engine::create allocates, and the
// parts add up.
#include "plan/memory_plan.h"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/thread_pool.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul/packed_weights.h"
#include "model/model.h"
#include "model/parallel.h"
#include "model/random_model.h"
#include "plan_test_util.h"
#include "model/weight_packing.h"

namespace pagoda {
namespace {

using plan_test::write_model;

RandomModelSpec spec(const char* arch, DType type) {
  RandomModelSpec s;
  s.arch = arch;
  s.type = type;
  s.dim = 256;  // K-quant blocks are 256 values
  s.ff = 512;
  s.vocab = 1024;
  return s;
}

TEST(MemoryPlan, PredictedPackingIsWhatLoadingDoes) {
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::F32}) {
    for (const char* arch : {"llama", "gemma3", "phi3"}) {
      const std::string path = write_model(std::string(arch) + ".gguf", spec(arch, t));
      auto f = GgufFile::open(path);
      ASSERT_TRUE(f.is_ok()) << f.status().message();
      ThreadPool pool(2);
      auto plain = Model::load(*f, pool, /*repack=*/false);
      ASSERT_TRUE(plain.is_ok()) << plain.status().message();
      const PackingReport predicted = plan_packing(*f, (*plain)->weights());
      auto packed = Model::load(*f, pool, /*repack=*/true);
      ASSERT_TRUE(packed.is_ok());
      const PackingReport done = (*packed)->packing();
      EXPECT_EQ(predicted.matrices, done.matrices) << arch << " " << dtype_name(t);
      EXPECT_EQ(predicted.bytes, done.bytes) << arch << " " << dtype_name(t);
      EXPECT_EQ(predicted.dropped_file_bytes, done.dropped_file_bytes) << arch << " " << dtype_name(t);
      if (packed_kernels(t) == nullptr) {
        EXPECT_EQ(done.matrices, 0);
      }
    }
  }
}

TEST(MemoryPlan, KvCacheIsWhatTheEngineAllocates) {
  const std::string path = write_model("kv.gguf", spec("gemma3", DType::Q8_0));  // sliding-window layers too
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok());
  ThreadPool pool(2);
  auto model = Model::load(*f, pool, /*repack=*/false);
  ASSERT_TRUE(model.is_ok());
  for (KvType kv : {KvType::kF16, KvType::kI8}) {
    for (int32_t seqs : {1, 7}) {
      for (int32_t len : {100, 1000}) {
        EngineConfig ec;
        ec.kv_type = kv;
        ec.max_model_len = len;
        ec.scheduler.max_num_seqs = seqs;
        auto plan = plan_memory(*f, **model, ec, /*available=*/0);
        ASSERT_TRUE(plan.is_ok()) << plan.status().message();
        auto engine = Engine::create(**model, nullptr, ec);
        ASSERT_TRUE(engine.is_ok()) << engine.status().message();
        EXPECT_EQ(plan->kv.bytes, (*engine)->kv_storage().bytes());
        EXPECT_EQ(plan->kv.blocks, (*engine)->block_pool().num_blocks());
        EXPECT_EQ(plan->kv.max_model_len, (*engine)->max_model_len());
        EXPECT_EQ(plan->total(), plan->weights_resident + plan->kv.bytes + plan->model_scratch +
                                     plan->engine_scratch + plan->runtime);
      }
    }
  }
}

TEST(MemoryPlan, ResidentWeightsLeaveOutTheUntiedEmbeddingAndCountPanels) {
  const std::string path = write_model("w.gguf", spec("llama", DType::Q8_0));
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok());
  ThreadPool pool(1);
  auto model = Model::load(*f, pool, /*repack=*/false);
  ASSERT_TRUE(model.is_ok());
  auto plan = plan_memory(*f, **model, EngineConfig{}, 0);
  ASSERT_TRUE(plan.is_ok());
  const GgufTensor* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  const bool tied = f->find_tensor("output.weight") == nullptr;
  EXPECT_EQ(plan->embedding_lookup, tied ? 0 : emb->nbytes);
  EXPECT_EQ(plan->weights_resident,
            plan->weights_file - plan->vectors_file - plan->embedding_lookup - plan->dropped + plan->packed +
                plan->converted);
  EXPECT_GT(plan->model_scratch, 0u);
  EXPECT_EQ(plan->engine_scratch, Engine::scratch_bytes((*model)->config(), EngineConfig{}));
}

// Resident bytes of this process's mappings of `path` (smaps).
size_t mapped_rss(const std::string& path) {
  std::ifstream in("/proc/self/smaps");
  size_t kb = 0;
  bool in_file = false;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos &&
        line.find(' ') < line.find(':'))
      in_file = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    else if (in_file && line.rfind("Rss:", 0) == 0)
      kb += std::stoull(line.substr(4));
  }
  return kb * 1024;
}

// The plan counts no file page of a packed model: the load lets them all go (packed
// matrices, vectors copied out, metadata).
TEST(MemoryPlan, APackedModelKeepsNoFilePageResidentAfterTheLoad) {
  const std::string path = std::filesystem::canonical(write_model("r.gguf", spec("llama", DType::Q8_0))).string();
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok());
  ThreadPool pool(1);
  auto unpacked = Model::load(*f, pool, false);
  ASSERT_TRUE(unpacked.is_ok());
  auto plan = plan_memory(*f, **unpacked, EngineConfig{}, 0);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_GT(mapped_rss(path), 0u);  // the unpacked load read the file's vectors
  auto model = Model::load(*f, pool);
  ASSERT_TRUE(model.is_ok());
  if ((*model)->packing().matrices == 0) GTEST_SKIP() << "no packed kernels on this CPU";
  EXPECT_EQ(mapped_rss(path), 0u);
  EXPECT_EQ(plan->weights_resident, plan->packed + plan->converted);
}

TEST(MemoryPlan, ABudgetTheMachineCannotGiveIsRefusedAsTheEngineRefusesIt) {
  const std::string path = write_model("b.gguf", spec("llama", DType::F32));
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok());
  ThreadPool pool(1);
  auto model = Model::load(*f, pool, false);
  ASSERT_TRUE(model.is_ok());
  EngineConfig ec;
  ec.kv_cache_bytes = size_t{1} << 40;
  auto plan = plan_memory(*f, **model, ec, /*available=*/size_t{1} << 30);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.status().message().find("--kv-cache-memory"), std::string::npos) << plan.status().message();
}

// A split model's ranks hold the whole model's matrices between them, each once: their
// panels (and, for formats left row-major, their file rows) add up to the whole's, and
// their KV caches to the whole cache. One rank's shard is what loading it packs.
TEST(MemoryPlan, RanksOfASplitModelAddUpToTheWhole) {
  for (DType t : {DType::Q8_0, DType::F32}) {
    RandomModelSpec s = spec("llama", t);
    s.layers = 4;
    s.heads = 4;
    s.kv_heads = 2;
    const std::string path = write_model(std::string("split-") + std::string(dtype_name(t)) + ".gguf", s);
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    ThreadPool pool(2);
    auto whole = Model::load(*f, pool, /*repack=*/false);
    ASSERT_TRUE(whole.is_ok()) << whole.status().message();
    EngineConfig config;
    config.max_model_len = 1024;
    config.scheduler.max_num_seqs = 2;
    auto all = plan_memory(*f, **whole, config, 0);
    ASSERT_TRUE(all.is_ok()) << all.status().message();
    const size_t whole_matrices = matrix_resident_bytes(*f, (*whole)->weights());
    for (auto [tp, pp] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
      size_t kv = 0, matrices = 0;
      for (int32_t r = 0; r < tp * pp; ++r) {
        auto shard = Model::load(*f, pool, /*repack=*/false, ParallelRank{tp, pp, r});
        ASSERT_TRUE(shard.is_ok()) << shard.status().message();
        auto m = plan_rank_memory(*f, **whole, **shard, config, 0);
        ASSERT_TRUE(m.is_ok()) << m.status().message();
        kv += m->kv.bytes;
        const size_t mine = matrix_resident_bytes(*f, (*shard)->weights(), /*split=*/true);
        matrices += mine;
        EXPECT_EQ(m->weights_resident, all->weights_resident - whole_matrices + mine);
        EXPECT_EQ(m->engine_scratch, r == 0 ? all->engine_scratch : 0u);
        auto packed = Model::load(*f, pool, /*repack=*/true, ParallelRank{tp, pp, r});
        ASSERT_TRUE(packed.is_ok());
        EXPECT_EQ(m->packed, (*packed)->packing().bytes) << tp << "x" << pp << " rank " << r;
      }
      EXPECT_EQ(kv, all->kv.bytes) << tp << "x" << pp;
      // Panels start on 16-row boundaries in every rank: a split matrix's panels may hold
      // a few more padded rows than the whole one's, never fewer.
      EXPECT_GE(matrices, whole_matrices) << tp << "x" << pp;
      EXPECT_LE(matrices, whole_matrices + whole_matrices / 50) << tp << "x" << pp;
    }
  }
}

}  // namespace
}  // namespace pagoda
