"""Independent numpy oracle for Pagoda's forward pass (float64, no KV cache, no speed).

It shares nothing with the C++ code: the GGUF file is read with the `gguf` package's
GGUFReader and every tensor is dequantized with `gguf.quants.dequantize`, except Pagoda's
own W8A8 matrices (an I8 tensor times the F32 row scales of "<name>.scale"). The
architectures follow llama.cpp's definitions (src/models/llama.cpp, qwen2.cpp, qwen3.cpp, gemma3.cpp,
gemma2.cpp, phi3.cpp, starcoder2.cpp, olmo2.cpp and the hparams in src/llama-model.cpp):

  llama   RMSNorm; RoPE of llama.cpp's "norm" mode, rotating ADJACENT pairs
          (x[2i], x[2i+1]) by pos * base^(-2i/n_rot); SwiGLU FFN silu(gate) * up;
          output.weight if present, else tied to token_embd.
  qwen2   llama + biases on attn_q / attn_k / attn_v; NEOX RoPE, rotating (x[i], x[i+n_rot/2]).
  qwen3   llama + per-head RMSNorm of q and k (attn_q_norm / attn_k_norm) before NEOX RoPE.
  granite llama + embeddings times granite.embedding_scale, q.k times granite.attention.scale,
          attention and FFN outputs times granite.residual_scale, logits / granite.logit_scale.
  smollm3 llama without RoPE in every 4th layer (layers 3, 7, ...).
  gemma3  embeddings * sqrt(n_embd); per-head RMSNorm of q and k (attn_q_norm / attn_k_norm)
          after the projection and before RoPE; NEOX RoPE; layer il is a sliding-window layer
          when il % 6 < 5 (rope base 10000, query at p sees keys j with p - j < window), the
          others are global (rope base {arch}.rope.freq_base); scale 1/sqrt(head_dim);
          post_attention_norm on the attention output and post_ffw_norm on the FFN output,
          each before its residual add; GeGLU FFN with tanh-approximated GELU; tied output.
  gemma2  gemma3 without the q/k norms: layer il is a sliding-window layer when il % 2 == 0
          (same RoPE base as the global layers, {arch}.rope.freq_base or 10000); q.k times
          1/sqrt(head_dim) (1/sqrt(n_embd / n_head) for the 46-layer 27B), then soft-capped,
          s = c * tanh(s / c) with c = gemma2.attn_logit_softcapping, before the mask and
          softmax; the logits soft-capped likewise by gemma2.final_logit_softcapping; output
          tied unless output.weight exists.
  phi3    llama with NEOX RoPE over the first rope.dimension_count dims of each head; q, k, v
          from one attn_qkv matrix (rows: q, then k, then v) and gate, up from one ffn_up
          matrix (gate rows first); LongRoPE: pair i's frequency divided by
          rope_factors_long[i] when the context exceeds rope.scaling.original_context_length,
          else by rope_factors_short[i], and cos / sin times rope.scaling.attn_factor;
          attention.sliding_window ignored, as llama.cpp does.
  starcoder2 LayerNorm (x - mean) / sqrt(var + eps) * w + b for attn_norm, ffn_norm and
          output_norm (eps = starcoder2.attention.layer_norm_epsilon); biases on q, k, v,
          attn_output, ffn_up and ffn_down; ungated MLP ffn_down(gelu(ffn_up(x))); NEOX RoPE;
          output tied unless output.weight exists.
  olmo2   llama without attn_norm and ffn_norm (attention and FFN read the residual itself),
          post_attention_norm on the attention output and post_ffw_norm on the FFN output
          before each residual add; RMSNorm of q and of k over their whole rows (all heads
          together: attn_q_norm of n_head * head_dim values, attn_k_norm of
          n_head_kv * head_dim) before NEOX RoPE; its own output.weight. With
          olmo2.attention.sliding_window (OLMo 3) layer il is a sliding-window layer when
          sliding_window_pattern[il] (a number n: il % n < n - 1; absent: n = 4), rotated
          with the same base and no scaling (freq_scale 1, no YaRN, attn_factor 1).

  MoE     (llama with {arch}.expert_count: Mixtral; qwen2moe; qwen3moe; olmoe) the FFN is a
          mixture of experts (llama.cpp's build_moe_ffn with softmax gating): router
          ffn_gate_inp, softmax, the expert_used_count most probable experts weighted by their
          probabilities, renormalized to sum 1 for llama and qwen3moe (not for qwen2moe and
          olmoe); each expert is a SwiGLU FFN, expert e's matrices slice e of the 3-D
          ffn_{gate,up,down}_exps tensors (width expert_feed_forward_length for the Qwen
          MoEs, feed_forward_length otherwise). qwen2moe adds a shared SwiGLU expert
          (ffn_*_shexp) times sigmoid(ffn_gate_inp_shexp . x); its attention is qwen2's
          (biases, NEOX). qwen3moe's attention is qwen3's; olmoe's has olmo2's whole-row q/k
          norms but keeps the pre-norms, NEOX RoPE.

Usage:
    model = ReferenceModel("model.gguf")      # n_ctx=...: the context LongRoPE chooses by
    logits = model.forward([1, 2, 3])      # float64 [n_tokens, n_vocab], one row per position

ReferenceModel(path, f16_attention=True) models llama.cpp's CPU numerics that Pagoda follows
on purpose: q, k and v rounded to FP16 right before attention (an FP16 KV cache, q rounded
for q.k), softmax probabilities rounded to FP16 before the V product, and GELU evaluated on
FP16 inputs with an FP16 result (ggml's GELU table; ggml_gelu=True alone keeps only that).
Everything else stays float64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize


@dataclass
class HParams:
    arch: str
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    eps: float
    rope_base: float
    rope_scale: float  # llama.cpp freq_scale = 1 / rope.scaling.factor (linear scaling only)
    n_rot: int
    sliding_window: int  # 0 = none
    yarn: tuple | None = None  # (first corrected pair, last, attention factor)
    # Granite's multipliers (llama.cpp's f_embedding_scale, f_attention_scale,
    # f_residual_scale, f_logit_scale; 0 = not applied).
    embedding_scale: float = 0.0
    attention_scale: float = 0.0
    residual_scale: float = 0.0
    logit_scale: float = 0.0
    # rope.scaling.attn_factor (cos and sin times it; YaRN folds it into its own factor)
    # and rope.scaling.original_context_length (LongRoPE's switch to the long factors).
    rope_attn_factor: float = 1.0
    orig_ctx: int = 0
    n_ctx_train: int = 0
    # Gemma 2's soft caps (llama.cpp's f_attn_logit_softcapping, f_final_logit_softcapping;
    # 0 = not applied).
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    # olmo2's (OLMo 3's) sliding-window layers, one flag per layer; None = none.
    swa_layers: tuple | None = None
    # Mixture of experts: experts per layer and per token (0: dense), each expert's width,
    # the shared expert's (qwen2moe; 0: none), whether the selected weights are renormalized.
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    expert_norm: bool = False


def _field(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def read_hparams(reader: GGUFReader) -> HParams:
    arch = _field(reader, "general.architecture")
    if arch not in ("llama", "qwen2", "gemma3", "qwen3", "granite", "smollm3", "gemma2", "phi3", "starcoder2",
                    "olmo2", "qwen2moe", "qwen3moe", "olmoe"):
        raise ValueError(f"reference: architecture {arch!r} not supported")
    g = lambda key, default=None: _field(reader, f"{arch}.{key}", default)  # noqa: E731
    n_embd, n_head = int(g("embedding_length")), int(g("attention.head_count"))
    head_dim = int(g("attention.key_length", n_embd // n_head))
    scaling = g("rope.scaling.type", "linear")
    factor = g("rope.scaling.factor", 0.0)
    if scaling not in ("none", "linear", "yarn"):
        raise ValueError(f"reference: rope scaling {scaling!r} not supported")
    n_rot = int(g("rope.dimension_count", head_dim))
    rope_base = float(g("rope.freq_base", 10000.0))
    scale = 1.0 / factor if (factor and scaling != "none") else 1.0
    yarn = None
    if scaling == "yarn":
        # YaRN as llama.cpp applies it: the correction range of pairs, the ramp between
        # extrapolated and interpolated angles, and the magnitude 1 + 0.1 ln(factor) (times
        # rope.scaling.attn_factor) on cos and sin.
        orig = int(g("rope.scaling.original_context_length", g("context_length")))
        def corr_dim(n_rots):
            return n_rot * math.log(orig / (n_rots * 2 * math.pi)) / (2 * math.log(rope_base))
        lo, hi = max(0.0, math.floor(corr_dim(32.0))), min(n_rot - 1.0, math.ceil(corr_dim(1.0)))
        yarn = (lo, hi, float(g("rope.scaling.attn_factor", 1.0)) * (1.0 + 0.1 * math.log(factor)))
    n_layer = int(g("block_count"))
    swa_layers = None
    if arch == "olmo2" and int(g("attention.sliding_window", 0)) > 0:
        pattern = g("attention.sliding_window_pattern", 4)
        if isinstance(pattern, (list, tuple)):
            swa_layers = tuple(bool(v) for v in pattern)
        else:
            swa_layers = tuple(int(pattern) == 0 or il % int(pattern) < int(pattern) - 1 for il in range(n_layer))
    n_ff = int(g("feed_forward_length"))
    n_expert, n_used = int(g("expert_count", 0)), int(g("expert_used_count", 0))
    n_ff_exp = n_ff
    if arch in ("qwen2moe", "qwen3moe"):
        n_ff_exp = int(g("expert_feed_forward_length", n_ff // max(1, n_used)))
    return HParams(
        n_expert=n_expert,
        n_expert_used=n_used,
        n_ff_exp=n_ff_exp,
        n_ff_shexp=int(g("expert_shared_feed_forward_length", n_ff)) if arch == "qwen2moe" else 0,
        expert_norm=arch in ("llama", "qwen3moe"),
        arch=arch,
        swa_layers=swa_layers,
        n_embd=n_embd,
        n_layer=n_layer,
        n_ff=int(g("feed_forward_length")),
        n_head=n_head,
        n_head_kv=int(g("attention.head_count_kv", n_head)),
        head_dim=head_dim,
        eps=float(g("attention.layer_norm_epsilon") if arch == "starcoder2"
                  else g("attention.layer_norm_rms_epsilon", 1e-5)),
        rope_base=rope_base,
        rope_scale=scale,
        n_rot=n_rot,
        yarn=yarn,
        sliding_window=int(g("attention.sliding_window", 0)),
        embedding_scale=float(g("embedding_scale", 0.0)),
        attention_scale=float(g("attention.scale", 0.0)),
        residual_scale=float(g("residual_scale", 0.0)),
        logit_scale=float(g("logit_scale", 0.0)),
        attn_softcap=float(g("attn_logit_softcapping", 0.0)) if arch == "gemma2" else 0.0,
        final_softcap=float(g("final_logit_softcapping", 0.0)) if arch == "gemma2" else 0.0,
        rope_attn_factor=float(g("rope.scaling.attn_factor", 1.0)),
        orig_ctx=int(g("rope.scaling.original_context_length", g("context_length", 4096))),
        n_ctx_train=int(g("context_length", 4096)),
    )


def load_tensors(reader: GGUFReader) -> dict[str, np.ndarray]:
    """Every tensor, dequantized to float64, in numpy order: a GGUF [ne0, ne1] matrix
    becomes shape (ne1, ne0), i.e. (n_out, n_in) for a weight, (n_vocab, n_embd) for token_embd."""
    out = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape))
        if t.tensor_type == GGMLQuantizationType.I8:
            out[t.name] = np.asarray(t.data, dtype=np.float64).reshape(shape)
        else:
            out[t.name] = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(shape)
    # W8A8 (a Pagoda format): value = int8 quant * the scale of its row.
    for name in [n for n in out if n.endswith(".weight.scale")]:
        base = name[: -len(".scale")]
        if base in out and out[base].ndim == 2:
            out[base] = out[base] * out.pop(name)[:, None]
    return out


# ---- blocks -----------------------------------------------------------------------------

def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean(x)) / sqrt(var(x) + eps) * w + b over the last axis (population variance)."""
    d = x - np.mean(x, axis=-1, keepdims=True)
    return d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + eps) * w + b


def rope(x: np.ndarray, pos: np.ndarray, n_rot: int, base: float, scale: float, neox: bool,
         factors=None, yarn=None, attn_factor: float = 1.0) -> np.ndarray:
    """x: [T, heads, head_dim]; rotates the first n_rot dims of each head, the rest pass through.
    Pair i (i < n_rot/2) turns by angle pos * scale * base^(-2i/n_rot) / factors[i] (factors:
    the rope_freqs tensor or LongRoPE's, 1 without one); the pair is (x[2i], x[2i+1]) in
    llama.cpp's normal mode and (x[i], x[i + n_rot/2]) in NEOX mode. cos and sin are
    multiplied by attn_factor (by YaRN's magnitude instead, which includes it)."""
    half = n_rot // 2
    extrap = pos[:, None] * base ** (-2.0 * np.arange(half) / n_rot)  # [T, half]
    if factors is not None:
        extrap = extrap / factors[None, :half]
    theta, mscale = scale * extrap, attn_factor
    if yarn is not None:
        lo, hi, attn = yarn
        ramp = 1.0 - np.clip((np.arange(half) - lo) / max(0.001, hi - lo), 0.0, 1.0)
        theta = theta * (1.0 - ramp) + extrap * ramp
        mscale = attn
    cos, sin = mscale * np.cos(theta)[:, None, :], mscale * np.sin(theta)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_rot]
        out[..., :half], out[..., half:n_rot] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2], out[..., 1:n_rot:2] = a * cos - b * sin, a * sin + b * cos
    return out


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, pos: np.ndarray, scale: float,
              window: int = 0, f16_probs: bool = False, softcap: float = 0.0) -> np.ndarray:
    """q: [T, n_head, hd], k/v: [T, n_kv, hd]. Causal; with window > 0 a query at p sees only
    keys at j with p - j < window. Query head h reads kv head h // (n_head / n_kv) (GQA).
    softcap > 0: scores become softcap * tanh(score / softcap) before the mask."""
    T, n_head, hd = q.shape
    group = n_head // k.shape[1]
    diff = pos[:, None] - pos[None, :]  # query pos - key pos
    visible = diff >= 0
    if window > 0:
        visible &= diff < window
    out = np.empty_like(q)
    for h in range(n_head):
        s = (q[:, h, :] @ k[:, h // group, :].T) * scale
        if softcap > 0:
            s = softcap * np.tanh(s / softcap)
        s = np.where(visible, s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        if f16_probs:  # llama.cpp (and Pagoda) multiply FP16 values by FP16 probabilities
            p = p.astype(np.float32).astype(np.float16).astype(np.float64)
        out[:, h, :] = p @ v[:, h // group, :]
    return out


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_ggml(x: np.ndarray) -> np.ndarray:
    """GELU as ggml's CPU backend evaluates it (and Pagoda follows): the input rounded to
    FP16, the tanh GELU of that rounded to FP16; exactly x above 10 and 0 below -10."""
    h = x.astype(np.float32).astype(np.float16).astype(np.float64)
    g = gelu_tanh(h).astype(np.float32).astype(np.float16).astype(np.float64)
    return np.where(x >= 10.0, x, np.where(x <= -10.0, 0.0, g))


# ---- the model --------------------------------------------------------------------------

class ReferenceModel:
    def __init__(self, path, f16_attention: bool = False, n_ctx: int | None = None, ggml_gelu: bool | None = None):
        self.f16_attention = f16_attention
        self.forced_routing, self.route_margin, self.route_flips = None, float("inf"), []
        self.ggml_gelu = f16_attention if ggml_gelu is None else ggml_gelu
        reader = GGUFReader(str(path))
        self.hp = read_hparams(reader)
        self.w = load_tensors(reader)
        self.n_vocab = self.w["token_embd.weight"].shape[0]
        self._split_fused()
        # LongRoPE: the long factors when the context exceeds the original one (llama.cpp's
        # n_ctx_seq > n_ctx_orig_yarn); the context defaults to the trained one.
        n_ctx = self.hp.n_ctx_train if n_ctx is None else n_ctx
        key = "rope_factors_long.weight" if n_ctx > self.hp.orig_ctx else "rope_factors_short.weight"
        self.rope_factors = self.w.get(key, self.w.get("rope_freqs.weight"))

    def _split_fused(self):
        """Fused matrices into the separate ones: attn_qkv's rows are q's, k's, then v's;
        phi3's ffn_up holds the gate's rows, then up's."""
        hp = self.hp
        q_dim, kv_dim = hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim
        for il in range(hp.n_layer):
            p = f"blk.{il}."
            qkv = self.w.pop(p + "attn_qkv.weight", None)
            if qkv is not None:
                assert qkv.shape[0] == q_dim + 2 * kv_dim
                self.w[p + "attn_q.weight"] = qkv[:q_dim]
                self.w[p + "attn_k.weight"] = qkv[q_dim:q_dim + kv_dim]
                self.w[p + "attn_v.weight"] = qkv[q_dim + kv_dim:]
            if hp.arch == "phi3":
                up = self.w[p + "ffn_up.weight"]
                assert up.shape[0] == 2 * hp.n_ff and p + "ffn_gate.weight" not in self.w
                self.w[p + "ffn_gate.weight"], self.w[p + "ffn_up.weight"] = up[:hp.n_ff], up[hp.n_ff:]

    def expert_linear(self, x: np.ndarray, name: str, e: int) -> np.ndarray:
        """x times expert e's matrix of a 3-D expert tensor."""
        return x @ self.w[name + ".weight"][e].T

    def linear(self, x: np.ndarray, name: str) -> np.ndarray:
        y = x @ self.w[name + ".weight"].T
        bias = self.w.get(name + ".bias")
        return y if bias is None else y + bias

    def is_swa_layer(self, il: int) -> bool:
        if self.hp.arch == "gemma2":
            return il % 2 == 0
        if self.hp.arch == "olmo2":
            return self.hp.swa_layers is not None and self.hp.swa_layers[il]
        return self.hp.arch == "gemma3" and self.hp.sliding_window > 0 and il % 6 < 5

    def attention_block(self, x: np.ndarray, il: int, pos: np.ndarray) -> np.ndarray:
        hp, p = self.hp, f"blk.{il}."
        T = x.shape[0]
        q = self.linear(x, p + "attn_q").reshape(T, hp.n_head, hp.head_dim)
        k = self.linear(x, p + "attn_k").reshape(T, hp.n_head_kv, hp.head_dim)
        v = self.linear(x, p + "attn_v").reshape(T, hp.n_head_kv, hp.head_dim)
        if hp.arch in ("gemma3", "qwen3", "qwen3moe"):
            q = rms_norm(q, self.w[p + "attn_q_norm.weight"], hp.eps)
            k = rms_norm(k, self.w[p + "attn_k_norm.weight"], hp.eps)
        if hp.arch in ("olmo2", "olmoe"):  # one norm over all heads together
            q = rms_norm(q.reshape(T, -1), self.w[p + "attn_q_norm.weight"], hp.eps).reshape(q.shape)
            k = rms_norm(k.reshape(T, -1), self.w[p + "attn_k_norm.weight"], hp.eps).reshape(k.shape)
        swa = self.is_swa_layer(il)
        # gemma3's local layers have their own base; gemma2's use the global RoPE.
        base, scale = (10000.0, 1.0) if swa and hp.arch == "gemma3" else (hp.rope_base, hp.rope_scale)
        neox = hp.arch in ("qwen2", "gemma3", "qwen3", "gemma2", "phi3", "starcoder2", "olmo2", "qwen2moe",
                           "qwen3moe", "olmoe")
        if not (hp.arch == "smollm3" and (il + 1) % 4 == 0):  # SmolLM3: every 4th layer is NoPE
            factors = None if swa else self.rope_factors
            yarn = None if swa else hp.yarn
            attn_factor = hp.rope_attn_factor
            if swa and hp.arch == "olmo2":  # OLMo 3's local layers: no scaling at all
                scale, attn_factor = 1.0, 1.0
            q = rope(q, pos, hp.n_rot, base, scale, neox, factors, yarn, attn_factor)
            k = rope(k, pos, hp.n_rot, base, scale, neox, factors, yarn, attn_factor)
        if self.f16_attention:
            q, k, v = (t.astype(np.float16).astype(np.float64) for t in (q, k, v))
        kq_scale = hp.attention_scale or 1.0 / math.sqrt(hp.head_dim)
        if hp.arch == "gemma2" and hp.n_layer == 46:  # Gemma 2 27B: query_pre_attn_scalar
            kq_scale = 1.0 / math.sqrt(hp.n_embd // hp.n_head)
        o = attention(q, k, v, pos, kq_scale, hp.sliding_window if swa else 0,
                      f16_probs=self.f16_attention, softcap=hp.attn_softcap)
        return self.linear(o.reshape(T, hp.n_head * hp.head_dim), p + "attn_output")

    def moe_block(self, x: np.ndarray, il: int) -> np.ndarray:
        """Softmax routing over ffn_gate_inp, each token's n_expert_used most probable experts
        (first index on ties), their probabilities as weights (renormalized to sum 1 for llama
        and qwen3moe, the sum clamped below at 2^-14), each expert a SwiGLU FFN from its slice
        of the 3-D ffn_{gate,up,down}_exps; qwen2moe adds its shared expert times
        sigmoid(ffn_gate_inp_shexp . x). Records each token's choice in self.routing."""
        hp, p, w = self.hp, f"blk.{il}.", self.w
        logits = x @ w[p + "ffn_gate_inp.weight"].T
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        sel = np.argsort(-probs, axis=1, kind="stable")[:, :hp.n_expert_used]
        if self.forced_routing is not None:
            sel = self._follow_routing(il, logits, sel)
        weights = np.take_along_axis(probs, sel, axis=1)
        if hp.expert_norm:
            weights = weights / np.maximum(weights.sum(axis=1, keepdims=True), 6.103515625e-5)
        self.routing.setdefault(il, []).extend(sel.tolist())
        out = np.zeros_like(x)
        for e in range(hp.n_expert):
            tokens, slot = np.nonzero(sel == e)
            if tokens.size == 0:
                continue
            xe = x[tokens]
            h = silu(self.expert_linear(xe, p + "ffn_gate_exps", e)) * self.expert_linear(xe, p + "ffn_up_exps", e)
            out[tokens] += weights[tokens, slot][:, None] * self.expert_linear(h, p + "ffn_down_exps", e)
        if hp.n_ff_shexp:
            shared = self.linear(silu(self.linear(x, p + "ffn_gate_shexp")) * self.linear(x, p + "ffn_up_shexp"),
                                 p + "ffn_down_shexp")
            s = 1.0 / (1.0 + np.exp(-(x @ w[p + "ffn_gate_inp_shexp.weight"])))
            out += shared * s[:, None]
        return out

    def _follow_routing(self, il: int, logits: np.ndarray, sel: np.ndarray) -> np.ndarray:
        """The engine's own expert choices (self.forced_routing[il], one row of ids per
        position) where they differ from the oracle's only by a near tie: every expert the
        engine chose that the oracle did not is within self.route_margin (in router logits)
        of the oracle's k-th best. Each such position is appended to self.route_flips; any
        other difference raises, since it is a routing bug, not rounding."""
        forced = np.asarray(self.forced_routing[il][:sel.shape[0]], dtype=np.int64)
        if forced.shape != sel.shape:
            raise AssertionError(f"layer {il}: engine routing has shape {forced.shape}, oracle {sel.shape}")
        for t in range(sel.shape[0]):
            extra = set(forced[t].tolist()) - set(sel[t].tolist())
            if not extra:
                continue
            kth = logits[t, sel[t]].min()
            gap = max(kth - logits[t, e] for e in extra)
            if gap > self.route_margin:
                raise AssertionError(f"layer {il} position {t}: engine chose experts {forced[t].tolist()}, oracle "
                                     f"{sel[t].tolist()}; expert(s) {sorted(extra)} are {gap:.4g} router logits below "
                                     f"the oracle's k-th (margin {self.route_margin:.4g})")
            self.route_flips.append((il, t, float(gap)))
        return forced

    def ffn_block(self, x: np.ndarray, il: int) -> np.ndarray:
        p = f"blk.{il}."
        if self.hp.n_expert:
            return self.moe_block(x, il)
        gelu = gelu_ggml if self.ggml_gelu else gelu_tanh
        up = self.linear(x, p + "ffn_up")
        if self.hp.arch == "starcoder2":  # no gate: down(gelu(up))
            return self.linear(gelu(up), p + "ffn_down")
        gate = self.linear(x, p + "ffn_gate")
        act = gelu(gate) if self.hp.arch in ("gemma3", "gemma2") else silu(gate)
        return self.linear(act * up, p + "ffn_down")

    def norm(self, x: np.ndarray, name: str) -> np.ndarray:
        """A pre-norm or the output norm: LayerNorm with its bias (starcoder2), else RMSNorm;
        olmo2 has no pre-norms (x itself)."""
        if self.hp.arch == "olmo2" and name != "output_norm":
            return x
        w = self.w[name + ".weight"]
        if self.hp.arch == "starcoder2":
            return layer_norm(x, w, self.w[name + ".bias"], self.hp.eps)
        return rms_norm(x, w, self.hp.eps)

    def layer(self, x: np.ndarray, il: int, pos: np.ndarray) -> np.ndarray:
        hp, w, p = self.hp, self.w, f"blk.{il}."
        a = self.attention_block(self.norm(x, p + "attn_norm"), il, pos)
        if hp.arch in ("gemma3", "gemma2", "olmo2"):
            a = rms_norm(a, w[p + "post_attention_norm.weight"], hp.eps)
        if hp.residual_scale:
            a = a * hp.residual_scale
        x = x + a
        f = self.ffn_block(self.norm(x, p + "ffn_norm"), il)
        if hp.arch in ("gemma3", "gemma2", "olmo2"):
            f = rms_norm(f, w[p + "post_ffw_norm.weight"], hp.eps)
        if hp.residual_scale:
            f = f * hp.residual_scale
        return x + f

    def forward(self, ids, routing=None, route_margin: float = float("inf")) -> np.ndarray:
        """Logits (float64, [len(ids), n_vocab]) of every position, positions 0..len-1.
        routing: an engine's MoE choices ([layer][position][k ids]) to follow where they
        differ from the oracle's by at most route_margin router logits (_follow_routing)."""
        self.forced_routing, self.route_margin, self.route_flips = routing, route_margin, []
        ids = np.asarray(ids, dtype=np.int64)
        self.routing = {}  # MoE: layer -> each position's selected experts
        if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= self.n_vocab:
            raise ValueError("reference: token ids must be a non-empty list within the vocabulary")
        pos = np.arange(ids.size, dtype=np.float64)
        x = self.w["token_embd.weight"][ids]
        if self.hp.arch in ("gemma3", "gemma2"):
            x = x * math.sqrt(self.hp.n_embd)
        if self.hp.embedding_scale:
            x = x * self.hp.embedding_scale
        for il in range(self.hp.n_layer):
            x = self.layer(x, il, pos)
        x = self.norm(x, "output_norm")
        logits = self.linear(x, "output" if "output.weight" in self.w else "token_embd")  # else tied
        if self.hp.final_softcap:
            logits = self.hp.final_softcap * np.tanh(logits / self.hp.final_softcap)
        return logits / self.hp.logit_scale if self.hp.logit_scale else logits

    def greedy(self, prompt, n: int) -> list[int]:
        """n greedy tokens after prompt (full recompute each step; first index wins ties)."""
        ids = list(prompt)
        for _ in range(n):
            ids.append(int(np.argmax(self.forward(ids)[-1])))
        return ids[len(prompt):]
