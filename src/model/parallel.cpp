#include "model/parallel.h"

#include "model/arch_spec.h"
#include "model/config.h"
#include "model/weights.h"

namespace pagoda {
namespace {

// n rows in `parts` contiguous ranges as even as possible, each a multiple of `align`
// rows (but the last) where n allows: repacked matrices are read in panels of 16 rows,
// and a slice that starts inside a panel would compute its rows through another body.
std::vector<Range> split_rows(int64_t n, int32_t parts, int64_t align) {
  if (n < parts * align) align = 1;
  const int64_t units = (n + align - 1) / align;
  std::vector<Range> out;
  for (int32_t p = 0; p < parts; ++p)
    out.push_back(Range{std::min(n, units * p / parts * align), std::min(n, units * (p + 1) / parts * align)});
  return out;
}

Range split_one(int64_t n, int32_t parts, int32_t p) { return split_rows(n, parts, 1)[static_cast<size_t>(p)]; }

// The query and KV heads tensor rank t holds. With at least as many KV heads as ranks,
// each rank takes whole groups (its KV heads and every query head reading them); with
// fewer, each KV head is held by tp / n_kv ranks, which split its group's query heads.
Result<std::pair<Range, Range>> heads_of(const ModelConfig& c, int32_t tp, int32_t t) {
  const int32_t n_kv = c.n_head_kv, g = c.n_head / c.n_head_kv;
  if (n_kv >= tp) {
    const Range kv = split_one(n_kv, tp, t);
    return std::pair{Range{kv.begin * g, kv.end * g}, kv};
  }
  if (tp % n_kv != 0)
    return error("--tp {}: the model has {} KV heads, and {} ranks cannot share them evenly (use a divisor or a "
                 "multiple of {})",
                 tp, n_kv, tp, n_kv);
  const int32_t m = tp / n_kv;
  if (g < m)
    return error("--tp {}: the model has {} query heads, fewer than the {} ranks (at most {} ranks)", tp, c.n_head, tp,
                 c.n_head);
  const int32_t kvh = t / m;
  const Range q = split_one(g, m, t % m);
  return std::pair{Range{kvh * g + q.begin, kvh * g + q.end}, Range{kvh, kvh + 1}};
}

}  // namespace

Result<ParallelSplit> plan_split(const ModelConfig& c, int32_t tp, int32_t pp, int32_t rank, int32_t sp) {
  if (tp < 1 || pp < 1 || sp < 1) return error("--tp, --pp and --sp must be at least 1 (got {}, {} and {})", tp, pp, sp);
  if (sp > 1 && (tp > 1 || pp > 1)) return error("--sp runs alone: it cannot be combined with --tp or --pp");
  if (rank < 0 || rank >= tp * pp * sp) return error("rank {} is outside the {} ranks", rank, tp * pp * sp);
  ParallelSplit s;
  if (sp > 1) {
    if (!c.causal) return error("--sp {}: an encoder's sequences run whole in one process", sp);
    auto whole = plan_split(c, 1, 1, 0);
    if (!whole) return whole.status();
    s = std::move(whole.value());
    s.sp_size = sp;
    s.sp_rank = rank;
    return s;
  }
  s.tp_size = tp;
  s.pp_size = pp;
  s.tp_rank = rank % tp;
  s.pp_rank = rank / tp;
  if (pp > c.n_layer) return error("--pp {}: the model has only {} layers", pp, c.n_layer);
  s.layers = split_one(c.n_layer, pp, s.pp_rank);
  if (tp > 1) {
    if (c.arch->tensors.qk_norm_full)
      return error("--tp {}: {} normalizes Q and K over all heads at once, which a split by heads cannot do; use --pp",
                   tp, c.arch_name);
    const int64_t ff = c.is_moe() ? c.n_ff_exp : c.n_ff;
    if (c.n_embd < tp || ff < tp) return error("--tp {}: the model is too narrow to split {} ways", tp, tp);
  }
  for (int32_t t = 0; t < tp; ++t) {
    auto heads = heads_of(c, tp, t);
    if (!heads) return heads.status();
    if (t == s.tp_rank) {
      s.q_heads = heads->first;
      s.kv_heads = heads->second;
    }
    s.attn.push_back(Range{heads->first.begin * c.head_dim, heads->first.end * c.head_dim});
  }
  s.embd = split_rows(c.n_embd, tp, 16);
  s.ffn = split_rows(c.n_ff, tp, 16);
  s.vocab = split_rows(c.n_vocab, tp, 16);
  s.ffn_exp = split_rows(c.n_ff_exp, tp, 16);
  s.ffn_shexp = split_rows(c.n_ff_shexp, tp, 16);
  return s;
}

void split_weights(const ParallelSplit& s, const ModelConfig& c, ModelWeights& w) {
  const int64_t hd = c.head_dim;
  const size_t t = static_cast<size_t>(s.tp_rank);
  auto rows = [](WeightView& v, const Range& r) {
    if (!v.empty()) v = weight_rows(v, r.begin, r.size());
  };
  for (int32_t l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    if (l < s.layers.begin || l >= s.layers.end) {
      // Another stage's layer: its matrices are never read here (its norms are small
      // copies and stay).
      for (WeightView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down, &L.router, &L.gate_shexp,
                            &L.up_shexp, &L.down_shexp})
        *v = WeightView{};
      L.gate_exps.clear();
      L.up_exps.clear();
      L.down_exps.clear();
      continue;
    }
    if (!s.tensor_parallel()) continue;
    const Range q{s.q_heads.begin * hd, s.q_heads.end * hd};
    const Range kv{s.kv_heads.begin * hd, s.kv_heads.end * hd};
    rows(L.wq, q);
    rows(L.wk, kv);
    rows(L.wv, kv);
    if (L.bq != nullptr) L.bq += q.begin;
    if (L.bk != nullptr) L.bk += kv.begin;
    if (L.bv != nullptr) L.bv += kv.begin;
    rows(L.wo, s.embd[t]);
    rows(L.gate, s.ffn[t]);
    rows(L.up, s.ffn[t]);
    if (L.b_gate != nullptr) L.b_gate += s.ffn[t].begin;
    if (L.b_up != nullptr) L.b_up += s.ffn[t].begin;
    rows(L.down, s.embd[t]);
    // Experts: each split like the dense FFN; the router stays whole.
    for (WeightView& v : L.gate_exps) rows(v, s.ffn_exp[t]);
    for (WeightView& v : L.up_exps) rows(v, s.ffn_exp[t]);
    for (WeightView& v : L.down_exps) rows(v, s.embd[t]);
    rows(L.gate_shexp, s.ffn_shexp[t]);
    rows(L.up_shexp, s.ffn_shexp[t]);
    rows(L.down_shexp, s.embd[t]);
  }
  if (s.tensor_parallel() && !w.output.empty()) w.output = weight_rows(w.output, s.vocab[t].begin, s.vocab[t].size());
  if (!s.last_stage()) w.output = WeightView{};
}

}  // namespace pagoda
