#include "eval/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <sstream>

#include "base/log.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "eval/base_row.h"
#include "eval/kl_base_file.h"
#include "eval/token_scores.h"
#include "gguf/gguf_file.h"
#include "model/kv_cache.h"

namespace pagoda {
namespace {

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

void note(const PerplexityOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

// Runs the model over one chunk and hands the scored positions' logits to `on_piece`
// (first scored row, row count, rows of n_vocab floats), a piece at a time.
class ChunkRunner {
 public:
  ChunkRunner(Model& model, const Plan& plan, size_t logits_budget)
      : model_(model), plan_(plan), kv_(model.make_cache(plan.n_ctx)) {
    // llama-perplexity's context is -c: what LongRoPE chooses its factors by.
    model_.set_context_length(plan.n_ctx);
    const size_t row_bytes = static_cast<size_t>(model.config().n_vocab) * sizeof(float);
    piece_rows_ = static_cast<int32_t>(std::clamp<size_t>(logits_budget / row_bytes, 1, static_cast<size_t>(plan.rows())));
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

// The base model with the file its weights point into, and its tokenizer when usable.
struct BaseModel {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Result<BaseModel> load_base(const std::string& path, ThreadPool& pool) {
  auto file = GgufFile::open(path);
  if (!file) return error("cannot load the base model {}: {}", path, file.status().message());
  BaseModel out;
  out.file = std::make_unique<GgufFile>(std::move(file.value()));
  auto model = Model::load(*out.file, pool);
  if (!model) return error("cannot load the base model {}: {}", path, model.status().message());
  out.model = std::move(model.value());
  // Without a tokenizer only the vocabulary sizes can be compared.
  auto tok = Tokenizer::from_gguf(*out.file);
  if (tok) out.tokenizer = std::move(tok.value());
  else log_warn("no usable tokenizer ({}); output is printed as token ids", tok.status().message());
  return out;
}

struct BaseCache {
  std::string path;
  bool reused = false;
  double seconds = 0;  // running the base (0 when reused)
  uint64_t bytes = 0;  // rows written
};

// The vocabularies must match token for token, or comparing distributions means nothing.
Status check_vocab(const Model& model, const Tokenizer& tok, const BaseModel& base, const std::string& base_path) {
  const int32_t n = model.config().n_vocab, nb = base.model->config().n_vocab;
  if (n != nb)
    return error("vocabulary mismatch: the model has {} tokens, the base {} {}; KL divergence needs the same vocabulary",
                 n, base_path, nb);
  if (base.tokenizer != nullptr) {
    const auto& a = tok.vocab().pieces;
    const auto& b = base.tokenizer->vocab().pieces;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      if (a[i] != b[i])
        return error("vocabulary mismatch: token {} is '{}' in the model but '{}' in the base {}", i, a[i], b[i],
                     base_path);
  }
  return Status::ok();
}

bool header_matches(const KlBaseHeader& h, const Plan& plan, uint64_t key, int32_t n_vocab) {
  return h.key == key && h.n_ctx == static_cast<uint32_t>(plan.n_ctx) &&
         h.n_chunks == static_cast<uint32_t>(plan.n_chunks) && h.rows_per_chunk == static_cast<uint32_t>(plan.rows()) &&
         h.n_vocab == static_cast<uint32_t>(n_vocab) && h.tokens == plan.tokens;
}

// Runs the base over every chunk and writes its packed rows to `out.path`: every token
// above kMinLogProb, or with top_k > 0 the top_k most likely and the tail's mass.
Status write_base_cache(Model& bm, const Plan& plan, uint64_t key, const PerplexityOptions& o, BaseCache& out,
                        int32_t top_k = 0, uint64_t vocab_hash = 0) {
  KlBaseHeader h;
  h.top_k = static_cast<uint32_t>(std::max(top_k, 0));
  h.vocab_hash = vocab_hash;
  h.n_vocab = static_cast<uint32_t>(bm.config().n_vocab);
  h.n_ctx = static_cast<uint32_t>(plan.n_ctx);
  h.n_chunks = static_cast<uint32_t>(plan.n_chunks);
  h.rows_per_chunk = static_cast<uint32_t>(plan.rows());
  h.key = key;
  h.tokens = plan.tokens;
  auto writer = KlBaseWriter::create(out.path, h);
  if (!writer) return writer.status();
  Timer timer;
  ChunkRunner runner(bm, plan, o.logits_budget_bytes);
  std::vector<BaseRow> rows(static_cast<size_t>(runner.piece_rows()));
  ThreadPool& pool = bm.pool();
  const int32_t V = bm.config().n_vocab;
  size_t sparse_rows = 0, bytes = 0;
  for (int32_t c = 0; c < plan.n_chunks; ++c) {
    std::span<const int32_t> chunk = plan.chunk(c);
    Status write_st = Status::ok();
    Status st = runner.run(c, [&](int32_t r0, int32_t n, const float* logits) {
      pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) {
          std::span<const float> row(logits + r * V, static_cast<size_t>(V));
          const int32_t target = plan.target(chunk, r0 + static_cast<int32_t>(r));
          if (top_k > 0) pack_top_k_row(row, target, top_k, rows[static_cast<size_t>(r)]);
          else pack_base_row(row, target, rows[static_cast<size_t>(r)]);
        }
      });
      for (int32_t r = 0; r < n && write_st; ++r) {
        write_st = writer->write_row(rows[static_cast<size_t>(r)]);
        sparse_rows += rows[static_cast<size_t>(r)].sparse;
        bytes += 24 + rows[static_cast<size_t>(r)].payload_bytes() + (top_k > 0 ? 2 * sizeof(float) : 0);
      }
    });
    if (!st) return st;
    if (!write_st) return write_st;
    note(o, fmt::format("base [{}/{}] {:.1f} s", c + 1, plan.n_chunks, timer.seconds()));
  }
  if (Status st = writer->finish(); !st) return st;
  out.seconds = timer.seconds();
  out.bytes = bytes;
  if (top_k > 0)
    note(o, fmt::format("wrote {} ({:.2f} MiB, {} rows of the top {} tokens)", out.path, bytes / 1048576.0,
                        static_cast<size_t>(plan.n_chunks) * plan.rows(), top_k));
  else
    note(o, fmt::format("KL base: wrote {} ({:.1f} MiB, {} of {} rows sparse)", out.path, bytes / 1048576.0,
                        sparse_rows, static_cast<size_t>(plan.n_chunks) * plan.rows()));
  return Status::ok();
}

// A distillation dump given as --kl-base: its rows are the base, for exactly this plan's
// tokens and this vocabulary.
Result<BaseCache> open_dump(const Plan& plan, const Model& model, const Tokenizer& tok, const PerplexityOptions& o) {
  auto r = KlBaseReader::open(o.kl_base);
  if (!r) return r.status();
  const KlBaseHeader& h = r->header();
  const int32_t V = model.config().n_vocab;
  if (h.n_vocab != static_cast<uint32_t>(V) || (h.top_k > 0 && h.vocab_hash != vocabulary_hash(tok.vocab().pieces)))
    return error("vocabulary mismatch: {} was written by a model of another vocabulary ({} tokens; this model has {}); "
                 "KL divergence needs the same vocabulary",
                 o.kl_base, h.n_vocab, V);
  if (h.n_ctx != static_cast<uint32_t>(plan.n_ctx) || h.n_chunks != static_cast<uint32_t>(plan.n_chunks))
    return error("{} holds {} chunks of {} tokens; run with -c {} --chunks {}", o.kl_base, h.n_chunks, h.n_ctx, h.n_ctx,
                 h.n_chunks);
  if (h.tokens != plan.tokens)
    return error("{} was written for another text (its tokens differ from {}'s)", o.kl_base, o.text_name);
  BaseCache out;
  out.path = o.kl_base;
  out.reused = true;
  return out;
}

// Finds the base's cached rows for this plan, or runs the base and writes them.
Result<BaseCache> ensure_base_cache(const Plan& plan, const Model& model, const Tokenizer& tok,
                                    const PerplexityOptions& o) {
  if (is_kl_base_file(o.kl_base)) return open_dump(plan, model, tok, o);
  auto key = kl_base_key(o.kl_base, plan.tokens, plan.n_ctx, plan.n_chunks);
  if (!key) return key.status();
  BaseCache out;
  const std::string stem = std::filesystem::path(o.kl_base).stem().string();
  const std::string dir = o.cache_dir.empty() ? default_kl_base_cache_dir() : o.cache_dir;
  out.path = fmt::format("{}/{}-{:016x}.klbase", dir, stem, *key);
  if (std::filesystem::exists(out.path)) {
    auto r = KlBaseReader::open(out.path);
    if (r && header_matches(r->header(), plan, *key, model.config().n_vocab)) {
      out.reused = true;
      return out;
    }
    if (r && r->header().n_vocab != static_cast<uint32_t>(model.config().n_vocab))
      return error("vocabulary mismatch: the model has {} tokens, the base {} {}", model.config().n_vocab, o.kl_base,
                   r->header().n_vocab);
    note(o, fmt::format("KL base cache {} is stale or damaged; recomputing", out.path));
  }
  auto base = load_base(o.kl_base, model.pool());
  if (!base) return base.status();
  if (Status st = check_vocab(model, tok, *base, o.kl_base); !st) return st;
  Model& bm = *base->model;
  if (bm.config().n_ctx_train > 0 && plan.n_ctx > bm.config().n_ctx_train)
    return error("-c {} is larger than the base model's context ({} tokens)", plan.n_ctx, bm.config().n_ctx_train);
  if (Status st = write_base_cache(bm, plan, *key, o, out); !st) return st;
  return out;
}

// The running sums over every scored position, in position order.
struct Tally {
  RunningMean nll, base_nll, kld;
  std::vector<float> klds;
  int64_t same_top = 0;
  std::vector<double> chunk_ppl;
};

// Scores every chunk of the model against the plan (and the base's rows, with `reader`).
Status score_chunks(Model& model, const Plan& plan, KlBaseReader* reader, const PerplexityOptions& o, Tally& t) {
  Timer timer;
  ChunkRunner runner(model, plan, o.logits_budget_bytes);
  ThreadPool& pool = model.pool();
  const int32_t V = model.config().n_vocab;
  const size_t piece = static_cast<size_t>(runner.piece_rows());
  std::vector<BaseRow> base_rows(reader ? piece : 0);
  std::vector<RowComparison> results(piece);
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
          if (reader) {
            out = compare_to_base(base_rows[static_cast<size_t>(r)], row, target);
          } else {
            out.nll = token_nll(row, target, summarize_row(row).log_norm);
          }
        }
      });
      // In row order, so the sums do not depend on the thread count.
      for (int32_t r = 0; r < n; ++r) {
        const RowComparison& x = results[static_cast<size_t>(r)];
        t.nll.add(x.nll);
        if (reader) {
          t.base_nll.add(base_rows[static_cast<size_t>(r)].nll);
          t.kld.add(x.kld);
          t.klds.push_back(static_cast<float>(x.kld));
          t.same_top += x.same_top;
        }
      }
    });
    if (!st) return st;
    if (!read_st) return read_st;
    const ValueWithError ppl = perplexity_of(t.nll);
    t.chunk_ppl.push_back(ppl.value);
    std::string line = fmt::format("[{}/{}] PPL {:.4f}", ci + 1, plan.n_chunks, ppl.value);
    if (reader)
      line += fmt::format("  KLD {:.6f}  top-1 {:.2f}%", t.kld.mean(),
                          100.0 * t.same_top / std::max<int64_t>(1, t.kld.count()));
    note(o, fmt::format("{}  {:.1f} s", line, timer.seconds()));
  }
  return Status::ok();
}

KlResult kl_result(const BaseCache& base, Tally& t) {
  std::sort(t.klds.begin(), t.klds.end());
  KlResult k;
  k.cache_file = base.path;
  k.cache_reused = base.reused;
  k.base_seconds = base.seconds;
  k.base_ppl = perplexity_of(t.base_nll);
  k.ppl_ratio = std::exp(t.nll.mean() - t.base_nll.mean());
  k.kld = {t.kld.mean(), t.kld.standard_error()};
  k.kld_median = quantile_sorted(t.klds, 0.5);
  k.kld_p99 = quantile_sorted(t.klds, 0.99);
  k.kld_max = t.klds.empty() ? 0.0 : t.klds.back();
  k.top1 = proportion(t.same_top, t.kld.count());
  return k;
}

// The chunks of the text for -c / --chunks, as llama-perplexity cuts them (`all`: every
// token of the text).
Result<Plan> make_plan(const Model& model, const Tokenizer& tok, std::string_view text, const PerplexityOptions& o,
                       std::vector<int32_t>& all) {
  const ModelConfig& cfg = model.config();
  const int32_t c = o.ctx;
  if (c < 4) return error("-c {} is too small; perplexity needs a context of at least 4 tokens", c);
  if (cfg.n_ctx_train > 0 && c > cfg.n_ctx_train)
    return error("-c {} is larger than the model's context ({} tokens)", c, cfg.n_ctx_train);
  all = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (static_cast<int64_t>(all.size()) < 2LL * c)
    return error("the text {} has {} tokens; -c {} needs at least {} (two chunks, as llama-perplexity); "
                 "use a longer text or a smaller -c",
                 o.text_name, all.size(), c, 2 * c);
  Plan plan;
  plan.n_ctx = c;
  const int32_t max_chunks = static_cast<int32_t>(all.size() / static_cast<size_t>(c));
  plan.n_chunks = o.chunks > 0 ? std::min(o.chunks, max_chunks) : max_chunks;
  plan.tokens.assign(all.begin(), all.begin() + static_cast<int64_t>(plan.n_chunks) * c);
  plan.bos = tok.vocab().add_bos ? tok.vocab().bos : -1;
  return plan;
}

}  // namespace

Result<DistillDumpResult> write_distill_dump(Model& model, const Tokenizer& tok, std::string_view text,
                                             const std::string& teacher_path, const std::string& out_path,
                                             int32_t top_k, const PerplexityOptions& o) {
  if (top_k < 1 || top_k > model.config().n_vocab)
    return error("--top-k {} must be in 1..{} (the vocabulary)", top_k, model.config().n_vocab);
  std::vector<int32_t> all;
  auto plan = make_plan(model, tok, text, o, all);
  if (!plan) return plan.status();
  auto key = kl_base_key(teacher_path, plan->tokens, plan->n_ctx, plan->n_chunks);
  if (!key) return key.status();
  note(o, fmt::format("distill-dump: {} tokens, {} chunks of {} ({} scored per chunk), top {}", all.size(),
                      plan->n_chunks, plan->n_ctx, plan->rows(), top_k));
  BaseCache out;
  out.path = out_path;
  if (Status st = write_base_cache(model, *plan, *key, o, out, top_k, vocabulary_hash(tok.vocab().pieces)); !st)
    return st;
  DistillDumpResult r;
  r.n_ctx = plan->n_ctx;
  r.n_chunks = plan->n_chunks;
  r.rows = static_cast<int64_t>(plan->n_chunks) * plan->rows();
  r.file_bytes = std::filesystem::file_size(out_path);
  r.full_logits_bytes = static_cast<uint64_t>(r.rows) * static_cast<uint64_t>(model.config().n_vocab) * sizeof(float);
  r.seconds = out.seconds;
  return r;
}

Result<PerplexityResult> compute_perplexity(Model& model, const Tokenizer& tok, std::string_view text,
                                            const PerplexityOptions& o) {
  const int32_t c = o.ctx;
  std::vector<int32_t> all;
  auto planned = make_plan(model, tok, text, o, all);
  if (!planned) return planned.status();
  const Plan& plan = *planned;
  const int threads = model.pool().num_threads();
  note(o, fmt::format("perplexity: {} tokens, {} chunks of {} ({} scored per chunk), {} threads", all.size(),
                      plan.n_chunks, c, plan.rows(), threads));

  std::optional<BaseCache> base;
  std::optional<KlBaseReader> reader;
  if (!o.kl_base.empty()) {
    auto b = ensure_base_cache(plan, model, tok, o);
    if (!b) return b.status();
    base = std::move(b.value());
    note(o, fmt::format("KL base: {} {}", base->reused ? "reused" : "computed", base->path));
    auto r = KlBaseReader::open(base->path);
    if (!r) return r.status();
    reader.emplace(std::move(r.value()));
  }

  Timer timer;
  Tally t;
  if (Status st = score_chunks(model, plan, reader ? &*reader : nullptr, o, t); !st) return st;
  PerplexityResult out;
  out.seconds = timer.seconds();
  out.ppl = perplexity_of(t.nll);
  if (!std::isfinite(out.ppl.value)) return error("the model produced non-finite logits (PPL {})", out.ppl.value);
  out.n_ctx = c;
  out.n_chunks = plan.n_chunks;
  out.text_tokens = all.size();
  out.scored_tokens = t.nll.count();
  out.threads = threads;
  out.nll_mean = t.nll.mean();
  out.chunk_ppl = std::move(t.chunk_ppl);
  if (base) out.kl = kl_result(*base, t);
  return out;
}

Result<std::string> read_perplexity_text(const std::string& path) {
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

std::string default_kl_base_cache_dir() {
  if (const char* c = std::getenv("PAGODA_CACHE"); c != nullptr && *c != 0) return std::string(c) + "/kl-base";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != 0) return std::string(h) + "/.cache/pagoda/kl-base";
  return ".pagoda-cache/kl-base";
}

}  // namespace pagoda
