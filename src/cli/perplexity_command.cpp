// `pagoda perplexity -m MODEL -f TEXT [-c 512] [--chunks N] [--kl-base BASE.gguf] [--json]`:
// perplexity over a text file, and with --kl-base the KL divergence and top-1 agreement
// against a base model (usually the unquantized original of MODEL).
//
// The conventions are llama-perplexity's, so the numbers compare with it: the whole file
// (less one trailing newline) is tokenized once with BOS as the vocabulary asks; chunk i
// is tokens [i*c, (i+1)*c), its first token replaced by BOS when the model adds one;
// only the second half is scored (positions c/2 .. c-2 predicting the next token), so
// every scored token sees at least c/2 tokens of context; the text must hold at least
// 2*c tokens; PPL = e^(mean NLL) with error PPL * SE(mean NLL).
//
// Memory: a chunk's first half runs without logits, the scored half in pieces of at most
// 64 MiB of logits (64 positions for Gemma's 262k vocabulary), so peak memory is the
// weights, the KV cache of one chunk and one piece.
//
// --kl-base runs the base first and caches what KL needs (eval/kl_base_file.h) under
// $PAGODA_CACHE/kl-base (default ~/.cache/pagoda/kl-base), keyed by the base file's
// identity, the tokens, c and the chunk count; a later run reuses it.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "base/thread_pool.h"
#include "base/timer.h"
#include "cli/commands.h"
#include "cli/model_loader.h"
#include "eval/base_row.h"
#include "eval/kl_base_file.h"
#include "eval/running_stats.h"
#include "eval/token_scores.h"

namespace pagoda {
namespace {

constexpr auto fail = report_error;
constexpr size_t kLogitsBudget = size_t{64} << 20;

struct PplArgs {
  std::string model;
  std::string text;
  std::string kl_base;
  int32_t ctx = 512;
  int32_t chunks = -1;
  int32_t threads = 0;
  bool json = false;
} g_args;

// What to evaluate: the chunks of the text and which positions of each are scored.
struct Plan {
  std::vector<int32_t> tokens;  // the evaluated tokens: n_chunks * n_ctx of the text's
  int32_t n_ctx = 0;
  int32_t n_chunks = 0;
  int32_t bos = -1;             // put at each chunk's start; -1: the model adds no BOS
  int32_t first() const { return n_ctx / 2; }
  int32_t rows() const { return n_ctx - 1 - first(); }  // scored positions per chunk
  std::span<const int32_t> chunk(int32_t i) const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(i) * n_ctx, static_cast<size_t>(n_ctx));
  }
  // The token that scored row r of a chunk predicts.
  int32_t target(std::span<const int32_t> chunk, int32_t r) const { return chunk[static_cast<size_t>(first() + r + 1)]; }
};

size_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<size_t>(u.ru_maxrss) * 1024;  // KiB on Linux
}

// Progress goes to stderr, so stdout holds only the results (or the JSON).
void progress(const std::string& line) { fmt::print(stderr, "{}\n", line); }

// Runs the model over one chunk and hands the scored positions' logits to `on_piece`
// (first scored row, row count, rows of n_vocab floats), a piece at a time.
class ChunkRunner {
 public:
  ChunkRunner(Model& model, const Plan& plan) : model_(model), plan_(plan), kv_(model.make_cache(plan.n_ctx)) {
    const size_t row_bytes = static_cast<size_t>(model.config().n_vocab) * sizeof(float);
    piece_rows_ = static_cast<int32_t>(std::clamp<size_t>(kLogitsBudget / row_bytes, 1, static_cast<size_t>(plan.rows())));
    logits_.resize(static_cast<size_t>(piece_rows_) * model.config().n_vocab);
  }
  int32_t piece_rows() const { return piece_rows_; }

  Status run(int32_t chunk_index, const std::function<void(int32_t, int32_t, const float*)>& on_piece) {
    std::span<const int32_t> chunk = plan_.chunk(chunk_index);
    tokens_.assign(chunk.begin(), chunk.end());
    if (plan_.bos >= 0) tokens_[0] = plan_.bos;
    const int32_t first = plan_.first();
    std::span<const int32_t> toks(tokens_);
    // The KV cache is reused: each chunk rewrites positions from 0, and attention reads
    // only the positions up to the current one.
    Status st = model_.forward(toks.subspan(0, static_cast<size_t>(first)), 0, kv_, nullptr);
    if (!st) return st;
    for (int32_t r0 = 0; r0 < plan_.rows(); r0 += piece_rows_) {
      const int32_t n = std::min(piece_rows_, plan_.rows() - r0);
      st = model_.forward(toks.subspan(static_cast<size_t>(first + r0), static_cast<size_t>(n)), first + r0, kv_,
                          logits_.data(), /*all_logits=*/true);
      if (!st) return st;
      on_piece(r0, n, logits_.data());
    }
    return Status::ok();
  }

 private:
  Model& model_;
  const Plan& plan_;
  KvCache kv_;
  int32_t piece_rows_ = 1;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_;
};

std::string cache_dir() {
  if (const char* c = std::getenv("PAGODA_CACHE"); c != nullptr && *c != 0) return std::string(c) + "/kl-base";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != 0) return std::string(h) + "/.cache/pagoda/kl-base";
  return ".pagoda-cache/kl-base";
}

struct BaseCache {
  std::string path;
  bool reused = false;
  double seconds = 0;  // running the base (0 when reused)
};

// The vocabularies must match token for token, or comparing distributions means nothing.
Status check_vocab(const Model& model, const Tokenizer* tok, const LoadedModel& base) {
  const int32_t n = model.config().n_vocab, nb = base.model->config().n_vocab;
  if (n != nb)
    return error("vocabulary mismatch: the model has {} tokens, the base {} {}; KL divergence needs the same vocabulary",
                 n, g_args.kl_base, nb);
  if (tok != nullptr && base.tokenizer != nullptr) {
    const auto& a = tok->vocab().pieces;
    const auto& b = base.tokenizer->vocab().pieces;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      if (a[i] != b[i])
        return error("vocabulary mismatch: token {} is '{}' in the model but '{}' in the base {}", i, a[i], b[i],
                     g_args.kl_base);
  }
  return Status::ok();
}

bool header_matches(const KlBaseHeader& h, const Plan& plan, uint64_t key, int32_t n_vocab) {
  return h.key == key && h.n_ctx == static_cast<uint32_t>(plan.n_ctx) &&
         h.n_chunks == static_cast<uint32_t>(plan.n_chunks) && h.rows_per_chunk == static_cast<uint32_t>(plan.rows()) &&
         h.n_vocab == static_cast<uint32_t>(n_vocab) && h.tokens == plan.tokens;
}

// Finds the base's cached rows for this plan, or runs the base and writes them.
Result<BaseCache> ensure_base_cache(const Plan& plan, const Model& model, const Tokenizer* tok) {
  auto key = kl_base_key(g_args.kl_base, plan.tokens, plan.n_ctx, plan.n_chunks);
  if (!key) return key.status();
  BaseCache out;
  const std::string stem = std::filesystem::path(g_args.kl_base).stem().string();
  out.path = fmt::format("{}/{}-{:016x}.klbase", cache_dir(), stem, *key);
  if (std::filesystem::exists(out.path)) {
    auto r = KlBaseReader::open(out.path);
    if (r && header_matches(r->header(), plan, *key, model.config().n_vocab)) {
      out.reused = true;
      return out;
    }
    if (r && r->header().n_vocab != static_cast<uint32_t>(model.config().n_vocab))
      return error("vocabulary mismatch: the model has {} tokens, the base {} {}", model.config().n_vocab,
                   g_args.kl_base, r->header().n_vocab);
    progress(fmt::format("KL base cache {} is stale or damaged; recomputing", out.path));
  }
  auto base = load_model_with_tokenizer(g_args.kl_base, 0, /*require_tokenizer=*/false);
  if (!base) return error("cannot load the base model {}: {}", g_args.kl_base, base.status().message());
  if (Status st = check_vocab(model, tok, *base); !st) return st;
  Model& bm = *base->model;
  if (bm.config().n_ctx_train > 0 && plan.n_ctx > bm.config().n_ctx_train)
    return error("-c {} is larger than the base model's context ({} tokens)", plan.n_ctx, bm.config().n_ctx_train);

  KlBaseHeader h;
  h.n_vocab = static_cast<uint32_t>(bm.config().n_vocab);
  h.n_ctx = static_cast<uint32_t>(plan.n_ctx);
  h.n_chunks = static_cast<uint32_t>(plan.n_chunks);
  h.rows_per_chunk = static_cast<uint32_t>(plan.rows());
  h.key = *key;
  h.tokens = plan.tokens;
  auto writer = KlBaseWriter::create(out.path, h);
  if (!writer) return writer.status();
  Timer timer;
  ChunkRunner runner(bm, plan);
  std::vector<BaseRow> rows(static_cast<size_t>(runner.piece_rows()));
  ThreadPool& pool = ThreadPool::global();
  const int32_t V = bm.config().n_vocab;
  size_t sparse_rows = 0, bytes = 0;
  for (int32_t c = 0; c < plan.n_chunks; ++c) {
    std::span<const int32_t> chunk = plan.chunk(c);
    Status write_st = Status::ok();
    Status st = runner.run(c, [&](int32_t r0, int32_t n, const float* logits) {
      pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r)
          pack_base_row(std::span<const float>(logits + r * V, static_cast<size_t>(V)),
                        plan.target(chunk, r0 + static_cast<int32_t>(r)), rows[static_cast<size_t>(r)]);
      });
      for (int32_t r = 0; r < n && write_st; ++r) {
        write_st = writer->write_row(rows[static_cast<size_t>(r)]);
        sparse_rows += rows[static_cast<size_t>(r)].sparse;
        bytes += 24 + rows[static_cast<size_t>(r)].payload_bytes();
      }
    });
    if (!st) return st;
    if (!write_st) return write_st;
    progress(fmt::format("base [{}/{}] {:.1f} s", c + 1, plan.n_chunks, timer.seconds()));
  }
  if (Status st = writer->finish(); !st) return st;
  out.seconds = timer.seconds();
  progress(fmt::format("KL base: wrote {} ({:.1f} MiB, {} of {} rows sparse)", out.path, bytes / 1048576.0,
                       sparse_rows, static_cast<size_t>(plan.n_chunks) * plan.rows()));
  return out;
}

Result<std::string> read_text(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return error("cannot read the text file {}", path);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) return error("cannot read the text file {}", path);
  std::string text = ss.str();
  // llama.cpp's -f drops one trailing newline.
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

int run_perplexity() {
  Timer total;
  auto text = read_text(g_args.text);
  if (!text) return fail(text.status());
  auto loaded = load_model_with_tokenizer(g_args.model, g_args.threads, /*require_tokenizer=*/true);
  if (!loaded) return fail(loaded.status());
  Model& model = *loaded->model;
  const Tokenizer& tok = *loaded->tokenizer;
  const ModelConfig& cfg = model.config();
  const int32_t c = g_args.ctx;
  if (c < 4) return fail(error("-c {} is too small; perplexity needs a context of at least 4 tokens", c));
  if (cfg.n_ctx_train > 0 && c > cfg.n_ctx_train)
    return fail(error("-c {} is larger than the model's context ({} tokens)", c, cfg.n_ctx_train));

  const std::vector<int32_t> all = tok.encode(*text, /*add_special=*/true, /*parse_special=*/false);
  if (static_cast<int64_t>(all.size()) < 2LL * c)
    return fail(error("the text {} has {} tokens; -c {} needs at least {} (two chunks, as llama-perplexity); "
                      "use a longer text or a smaller -c",
                      g_args.text, all.size(), c, 2 * c));
  Plan plan;
  plan.n_ctx = c;
  const int32_t max_chunks = static_cast<int32_t>(all.size() / static_cast<size_t>(c));
  plan.n_chunks = g_args.chunks > 0 ? std::min(g_args.chunks, max_chunks) : max_chunks;
  plan.tokens.assign(all.begin(), all.begin() + static_cast<int64_t>(plan.n_chunks) * c);
  plan.bos = tok.vocab().add_bos ? tok.vocab().bos : -1;
  ThreadPool& pool = ThreadPool::global();
  progress(fmt::format("perplexity: {} tokens, {} chunks of {} ({} scored per chunk), {} threads", all.size(),
                       plan.n_chunks, c, plan.rows(), pool.num_threads()));

  std::optional<BaseCache> base;
  if (!g_args.kl_base.empty()) {
    auto b = ensure_base_cache(plan, model, &tok);
    if (!b) return fail(b.status());
    base = std::move(b.value());
    progress(fmt::format("KL base: {} {}", base->reused ? "reused" : "computed", base->path));
  }
  std::optional<KlBaseReader> reader;
  if (base) {
    auto r = KlBaseReader::open(base->path);
    if (!r) return fail(r.status());
    reader.emplace(std::move(r.value()));
  }

  Timer timer;
  ChunkRunner runner(model, plan);
  const int32_t V = cfg.n_vocab;
  const size_t piece = static_cast<size_t>(runner.piece_rows());
  std::vector<BaseRow> base_rows(base ? piece : 0);
  std::vector<RowComparison> results(piece);
  RunningMean nll, base_nll, kld;
  std::vector<float> klds;
  int64_t same_top = 0;
  nlohmann::json chunk_ppl = nlohmann::json::array();
  for (int32_t ci = 0; ci < plan.n_chunks; ++ci) {
    std::span<const int32_t> chunk = plan.chunk(ci);
    Status read_st = Status::ok();
    Status st = runner.run(ci, [&](int32_t r0, int32_t n, const float* logits) {
      for (int32_t r = 0; r < n && reader && read_st; ++r) read_st = reader->read_row(base_rows[static_cast<size_t>(r)]);
      if (!read_st) return;
      pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) {
          std::span<const float> row(logits + r * V, static_cast<size_t>(V));
          const int32_t target = plan.target(chunk, r0 + static_cast<int32_t>(r));
          RowComparison& out = results[static_cast<size_t>(r)];
          if (base) {
            out = compare_to_base(base_rows[static_cast<size_t>(r)], row, target);
          } else {
            out.nll = token_nll(row, target, summarize_row(row).log_norm);
          }
        }
      });
      // In row order, so the sums do not depend on the thread count.
      for (int32_t r = 0; r < n; ++r) {
        const RowComparison& x = results[static_cast<size_t>(r)];
        nll.add(x.nll);
        if (base) {
          base_nll.add(base_rows[static_cast<size_t>(r)].nll);
          kld.add(x.kld);
          klds.push_back(static_cast<float>(x.kld));
          same_top += x.same_top;
        }
      }
    });
    if (!st) return fail(st);
    if (!read_st) return fail(read_st);
    const ValueWithError ppl = perplexity_of(nll);
    chunk_ppl.push_back(ppl.value);
    std::string line = fmt::format("[{}/{}] PPL {:.4f}", ci + 1, plan.n_chunks, ppl.value);
    if (base)
      line += fmt::format("  KLD {:.6f}  top-1 {:.2f}%", kld.mean(), 100.0 * same_top / std::max<int64_t>(1, kld.count()));
    progress(fmt::format("{}  {:.1f} s", line, timer.seconds()));
  }
  const double seconds = timer.seconds();
  const ValueWithError ppl = perplexity_of(nll);
  if (!std::isfinite(ppl.value)) return fail(error("the model produced non-finite logits (PPL {})", ppl.value));
  const double rss_mib = peak_rss_bytes() / 1048576.0;

  nlohmann::json j;
  j["model"] = g_args.model;
  j["text"] = g_args.text;
  j["n_ctx"] = c;
  j["n_chunks"] = plan.n_chunks;
  j["text_tokens"] = all.size();
  j["scored_tokens"] = nll.count();
  j["threads"] = pool.num_threads();
  j["ppl"] = ppl.value;
  j["ppl_error"] = ppl.error;
  j["nll_mean"] = nll.mean();
  j["chunk_ppl"] = chunk_ppl;
  j["seconds"] = seconds;
  j["total_seconds"] = total.seconds();
  j["peak_rss_mib"] = rss_mib;
  if (base) {
    std::sort(klds.begin(), klds.end());
    const ValueWithError bppl = perplexity_of(base_nll);
    const ValueWithError top = proportion(same_top, kld.count());
    nlohmann::json k;
    k["base"] = g_args.kl_base;
    k["cache"] = base->reused ? "reused" : "computed";
    k["cache_file"] = base->path;
    k["base_seconds"] = base->seconds;
    k["base_ppl"] = bppl.value;
    k["base_ppl_error"] = bppl.error;
    k["ppl_ratio"] = std::exp(nll.mean() - base_nll.mean());
    k["kld_mean"] = kld.mean();
    k["kld_error"] = kld.standard_error();
    k["kld_median"] = quantile_sorted(klds, 0.5);
    k["kld_p99"] = quantile_sorted(klds, 0.99);
    k["kld_max"] = klds.empty() ? 0.0 : klds.back();
    k["top1_percent"] = 100.0 * top.value;
    k["top1_error_percent"] = 100.0 * top.error;
    j["kl"] = k;
  }
  if (g_args.json) {
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("perplexity of {} on {}: {} chunks of {}, {} tokens scored, {:.1f} s, peak RSS {:.0f} MiB\n",
             g_args.model, g_args.text, plan.n_chunks, c, nll.count(), seconds, rss_mib);
  fmt::print("PPL = {:.4f} +/- {:.5f}\n", ppl.value, ppl.error);
  if (base) {
    const auto& k = j["kl"];
    fmt::print("base PPL = {:.4f} +/- {:.5f} ({}; KL base {} {})\n", k["base_ppl"].get<double>(),
               k["base_ppl_error"].get<double>(), g_args.kl_base, k["cache"].get<std::string>(), base->path);
    fmt::print("PPL(model)/PPL(base) = {:.6f}\n", k["ppl_ratio"].get<double>());
    fmt::print("KLD = {:.6f} +/- {:.6f} (median {:.6f}, 99% {:.6f}, max {:.6f})\n", k["kld_mean"].get<double>(),
               k["kld_error"].get<double>(), k["kld_median"].get<double>(), k["kld_p99"].get<double>(),
               k["kld_max"].get<double>());
    fmt::print("top-1 agreement = {:.3f}% +/- {:.3f}%\n", k["top1_percent"].get<double>(),
               k["top1_error_percent"].get<double>());
  }
  return 0;
}

}  // namespace

Subcommand add_perplexity_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("perplexity", "Perplexity over a text file, and KL divergence against a base model");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("-m,--model", g_args.model, "GGUF model file")->required();
  sub->add_option("-f,--file", g_args.text, "Text file to evaluate (UTF-8)")->required();
  sub->add_option("-c,--ctx-size", g_args.ctx, "Tokens per chunk; the second half of each is scored");
  sub->add_option("--chunks", g_args.chunks, "Chunks to evaluate (default: all the text holds)");
  sub->add_option("-t,--threads", g_args.threads, "Threads (default: all cores)");
  sub->add_option("--kl-base", g_args.kl_base,
                  "Base model (e.g. the unquantized original) for KL divergence and top-1 agreement; its "
                  "log-probabilities are cached and reused");
  sub->add_flag("--json", g_args.json, "Print one JSON object with every number (progress stays on stderr)");
  return {"perplexity", sub, run_perplexity};
}

}  // namespace pagoda
