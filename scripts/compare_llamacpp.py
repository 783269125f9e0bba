#!/usr/bin/env python3
"""Greedy parity between Pagoda and llama.cpp: same GGUF, same prompt ids, N tokens.

  scripts/compare_llamacpp.py [--build-dir build] [--cases all|gemma|generated|stories] [-n 64]

For each case the prompt text is tokenized by llama.cpp (so both engines see the same
ids); llama.cpp (scripts/llamacpp_oracle.py, in process) and `pagoda run ... --temp 0
--ignore-eos` each generate N tokens and dump the logits row behind every token. When a
case has text, Pagoda is first run on the text itself (`-p`) and its tokenization is
checked against llama.cpp's; if they differ it is re-run on llama.cpp's ids, so the
tokenizer check and the model check stay separate.

Tokens are compared in order. At the first divergence the row that produced it still
has identical context on both sides and is compared; then Pagoda is restarted on the
prompt plus llama.cpp's tokens so far (teacher forcing), so all N rows are compared
under identical contexts even when a near tie flips one token early.

Columns
  tol      the logit tolerance of this case (see below)
  tok      Pagoda's own tokenization of the text == llama.cpp's ("ids": no text)
  same     leading generated tokens identical in the free run, of N
  div      first divergence ("-": none); ndiv: divergences over all N positions
  gap      at a divergence, how far below llama.cpp's best logit Pagoda's token is, as a
           fraction of llama.cpp's logit range (max over divergences). <= tol: a near
           tie that rounding can legitimately flip.
  d0 / r0  max |logit diff| on the first row, and that divided by the range
           (max - min) of llama.cpp's row
  dC / rC  the same, max over all compared rows
  top1     rows whose argmax agrees, of N

Pass criterion (per case): every row has max_i |pagoda_i - llama_i| <= tol * range(llama
row), and every token divergence is a near tie (gap <= tol); --strict-tokens fails on any
divergence at all.

Tolerances, measured on this machine (llama.cpp from llama-cpp-python 0.3.36, CPU):
  --tol (default 1e-2) for models whose weights are float (F32/F16/BF16). Observed: random
    llama/qwen2/gemma3 F32 models 1e-4; stories260K 1.4e-3; Gemma 3 270M dequantized to
    F32 7e-4. What is left is FP16 KV cache and FP16 Q/softmax in llama.cpp's attention and
    summation order. Real bugs (wrong RoPE pairing, missing norm weight, wrong attention
    scale, sliding window off by one) move logits by a sizeable fraction of the range.
  --tol-quant (default 1e-1) for quantized weights. llama.cpp quantizes the *activations*
    to 8 bits per block (Q8_0 / Q8_K) for every quantized matmul, and Gemma's activations
    are very sensitive to that: llama.cpp on the Q4_K_M file differs from llama.cpp on the
    same weights dequantized to F32 by 2-3% of the range, and merely switching llama.cpp's
    KV cache from F16 to F32 moves them 3.3%. Pagoda vs llama.cpp measured 2-7.5% there,
    random Q8_0 models 1e-2. The quantized cases therefore guard against gross errors;
    the dequantized-F32 Gemma cases (gemma3-270m-f32/*) check the architecture tightly,
    and quant kernels are better checked bit-for-bit against the `gguf` package.

Exit status: 0 all cases pass; 1 some case failed (tokens, logits, tokenizer, pagoda
error); 2 setup problem (no pagoda binary, nothing ran).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import llamacpp_oracle  # noqa: E402

CACHE = Path(os.environ.get("PAGODA_CACHE", Path.home() / ".cache" / "pagoda"))
SHARED_MODELS = Path(os.environ.get("PAGODA_SHARED_MODELS", "/work/shared/models"))

GEMMA_Q4KM = "gemma-3-270m-q4_k_m.gguf"
GEMMA_F32 = "gemma-3-270m-q4_k_m-dequant-f32.gguf"   # made from GEMMA_Q4KM by llama-quantize
GEMMA_PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
    # Gemma's chat format; exercises special-token parsing in both tokenizers.
    "<start_of_turn>user\nWrite a short poem about the moon.<end_of_turn>\n<start_of_turn>model\n",
]
GENERATED_PROMPT = "hello world the quick brown fox jumps over the lazy dog"

# Generated models: (arch, extra generator flags). Gemma 3 gets 6 layers so that the
# pattern "5 sliding-window layers, then 1 global" appears, Gemma 2 4 layers (local,
# global, local, global), and prompt + N > window. LongRoPE picks its factors by the
# context: llama.cpp's here is 256, Pagoda's (pagoda run) min(4096, the trained 2048).
GENERATED_ARCHS = [
    ("llama", []),
    ("qwen2", []),
    ("gemma3", ["--layers", "6", "--sliding-window", "16"]),
    ("gemma2", ["--layers", "4", "--sliding-window", "16"]),
    ("qwen3", []),
    ("granite", []),
    ("smollm3", ["--layers", "4"]),  # layer 3 is a NoPE layer
    ("llama", ["--rope-freqs"]),  # Llama 3.1's RoPE factors
    ("llama", ["--rope-scaling", "yarn", "--rope-factor", "4", "--rope-orig-ctx", "16"]),  # YaRN
    ("phi3", []),  # fused QKV and gate/up
    # Partial rotary and LongRoPE's long factors: both engines run past the original context
    # (llama.cpp's n_ctx 256, Pagoda's 2048 > 16)...
    ("phi3", ["--rope-dims", "12", "--longrope", "--rope-orig-ctx", "16"]),
    # ... and its short ones (256 and 2048 not above 2048).
    ("phi3", ["--longrope", "--rope-orig-ctx", "2048"]),
    ("starcoder2", []),  # LayerNorm with biases, biased matrices, ungated GELU MLP
    ("olmo2", []),  # no pre-norms, post-norms, QK-norm across all heads
    # OLMo 3 (olmo2 with a window): layers 0-2 local, 3 global; the local ones without the
    # linear RoPE scaling.
    ("olmo2", ["--layers", "4", "--sliding-window", "16", "--swa-pattern", "4", "--rope-scaling", "linear",
               "--rope-factor", "4"]),
    # Mixtures of experts: Mixtral (llama with experts, renormalized top-2), Qwen2-MoE
    # (shared expert with its sigmoid gate), Qwen3-MoE (renormalized, QK-norm), OLMoE
    # (top-k unnormalized, QK-norm over whole rows; llama.cpp wants as many KV heads as heads).
    ("llama", ["--experts", "4", "--experts-used", "2"]),
    ("qwen2moe", ["--experts", "4", "--experts-used", "2"]),
    ("qwen3moe", ["--experts", "8", "--experts-used", "3"]),
    ("olmoe", ["--experts", "8", "--experts-used", "4", "--kv-heads", "4"]),
]
# Weight formats of the generated models, with the shape flags each needs: K-quants
# quantize rows in blocks of 256, so Q4_K models are 256 wide (FFN 512, 4 heads of 64).
GENERATED_TYPES = [
    ("F32", []),
    ("Q8_0", []),
    ("Q4_K", ["--dim", "256", "--ff", "512", "--heads", "4", "--kv-heads", "2"]),
]
GENERATED_SEED = 7
FLOAT_TYPES = {"F32", "F16", "BF16"}


@dataclass
class Case:
    name: str
    group: str                      # gemma | generated | stories
    model: Path
    wtype: str                      # weight format shown in the table; decides the tolerance
    text: str | None = None         # tokenized by llama.cpp (add_special, parse_special)
    ids: list[int] | None = None    # used as is when there is no text
    make: list[str] | None = None   # pagoda-gen-model arguments (without -o)
    dequant_from: Path | None = None  # make `model` as an F32 copy of this file (llama-quantize)


@dataclass
class Result:
    case: Case
    status: str = "FAIL"
    notes: list[str] = field(default_factory=list)
    tol: float = 0.0
    prompt_len: int = 0
    tok: str = ""
    same: int = 0
    n: int = 0
    rows: int = 0
    div: int | None = None
    n_div: int = 0
    gap: float | None = None
    d0: float = float("nan")
    r0: float = float("nan")
    dc: float = float("nan")
    rc: float = float("nan")
    top1: str = ""
    llama_ids: list[int] = field(default_factory=list)
    pagoda_ids: list[int] = field(default_factory=list)
    llama_text: str = ""
    seconds: float = 0.0


def build_cases(which: str, gen_dir: Path, gemma_path: Path | None, gemma_f32: bool) -> list[Case]:
    cases: list[Case] = []
    if which in ("all", "gemma"):
        g = gemma_path or CACHE / "models" / GEMMA_Q4KM
        for i, p in enumerate(GEMMA_PROMPTS):
            cases.append(Case(f"gemma3-270m/p{i}", "gemma", g, "Q4_K_M", text=p))
        if gemma_f32:
            f = g.with_name(g.stem + "-dequant-f32.gguf") if gemma_path else CACHE / "models" / GEMMA_F32
            for i, p in enumerate(GEMMA_PROMPTS):
                cases.append(Case(f"gemma3-270m-f32/p{i}", "gemma", f, "F32", text=p, dequant_from=g))
    if which in ("all", "generated"):
        for arch, extra in GENERATED_ARCHS:
            name = arch + "".join(f"-{x.lstrip('-')}" for x in extra if x.startswith("--") and x != "--layers"
                                  and x != "--sliding-window" and x != "--experts-used" and x != "--kv-heads")
            for ty, shape in GENERATED_TYPES:
                out = gen_dir / f"gen-{name}-{ty}-s{GENERATED_SEED}.gguf"
                cases.append(Case(f"gen-{name}/{ty}", "generated", out, ty, text=GENERATED_PROMPT,
                                  make=["--arch", arch, "--type", ty, "--seed", str(GENERATED_SEED)] + shape + extra))
    if which in ("all", "stories"):
        # The stand-in vocabulary of stories260K has no byte tokens, so llama.cpp's
        # tokenizer aborts the whole process on most text (std::out_of_range in
        # llama_vocab::byte_to_token): this model is driven by ids only.
        s = SHARED_MODELS / "stories260K.gguf"
        cases.append(Case("stories260K/bos", "stories", s, "F32", ids=[1]))
        cases.append(Case("stories260K/ids", "stories", s, "F32", ids=[1, 403, 261, 378, 455, 296, 263, 370]))
    return cases


def make_dequant_f32(src: Path, dst: Path):
    """F32 copy of a quantized GGUF: same weights, exactly dequantized, so llama.cpp runs
    it without quantizing activations (a tight reference for the architecture)."""
    bin_dir, _ = llamacpp_oracle.find_llamacpp()
    q = bin_dir / "llama-quantize"
    if not q.exists():
        raise RuntimeError(f"{q} not found (scripts/build_llamacpp)")
    tmp = dst.with_name(dst.name + ".tmp")
    p = subprocess.run([str(q), "--allow-requantize", str(src), str(tmp), "F32", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=900)
    if p.returncode != 0:
        raise RuntimeError("llama-quantize failed: " + p.stderr.decode(errors="replace")[-300:])
    os.replace(tmp, dst)


def run_pagoda(pagoda: Path, model: Path, n: int, threads: int, workdir: Path,
               ids: list[int] | None = None, text: str | None = None, timeout: float = 900):
    ids_out = workdir / "pagoda_ids.json"
    logits_out = workdir / "pagoda_logits.f32"
    for f in (ids_out, logits_out):
        if f.exists():
            f.unlink()
    cmd = [str(pagoda), "run", "-m", str(model), "-n", str(n), "--temp", "0", "--ignore-eos",
           "-t", str(threads), "--no-stats", "--ids-out", str(ids_out), "--logits-out", str(logits_out)]
    if ids is not None:
        cmd += ["--prompt-ids", ",".join(map(str, ids))]
    else:
        cmd += ["-p", text]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if p.returncode != 0:
        tail = (p.stderr.decode(errors="replace").strip().splitlines() or ["(no stderr)"])[-1]
        raise RuntimeError(f"pagoda exited {p.returncode}: {tail}")
    j = json.loads(ids_out.read_text())
    raw = np.fromfile(logits_out, dtype=np.float32)
    gen = j["generated_ids"]
    if raw.size % max(len(gen), 1) != 0 or (gen and raw.size // len(gen) == 0):
        raise RuntimeError(f"pagoda logits: {raw.size} floats for {len(gen)} tokens")
    return j["prompt_ids"], gen, raw.reshape(len(gen), -1) if gen else raw.reshape(0, 0), cmd


def gap_of(row: np.ndarray, tok: int) -> float:
    """How far below llama.cpp's best logit Pagoda's token is, as a fraction of the range."""
    row = row.astype(np.float64)
    rng = max(row.max() - row.min(), 1e-30)
    return float((row.max() - row[tok]) / rng) if 0 <= tok < row.size else float("inf")


def compare_case(res: Result, prompt: list[int], l_ids, l_logits, first, rerun, tol: float,
                 strict: bool, max_resync: int):
    """first = (generated_ids, logits) of Pagoda's free run; rerun(ids, n) runs it again.

    Tokens are compared in order. At a divergence, row `div` still has identical context on
    both sides, so it is compared too; then Pagoda is restarted on prompt + llama.cpp's
    tokens up to and including position div (teacher forcing), so every one of the N rows
    is eventually compared under identical contexts."""
    n, n_vocab = l_logits.shape
    res.n = n
    res.llama_ids = list(l_ids)
    P = np.full((n, n_vocab), np.nan, dtype=np.float32)
    p_all: list[int] = []
    pos, (seg_ids, seg_logits) = 0, first
    divs: list[tuple[int, int, float]] = []      # (position, pagoda token, gap)
    while True:
        if seg_logits.ndim != 2 or seg_logits.shape[1] != n_vocab:
            raise RuntimeError(f"pagoda logits rows have {seg_logits.shape[-1] if seg_logits.size else 0} "
                               f"entries, llama.cpp's vocabulary has {n_vocab}")
        if len(seg_ids) != n - pos:
            raise RuntimeError(f"pagoda generated {len(seg_ids)} tokens, expected {n - pos}")
        k = 0
        while k < len(seg_ids) and seg_ids[k] == l_ids[pos + k]:
            k += 1
        rows = min(k + 1, len(seg_ids))
        P[pos:pos + rows] = seg_logits[:rows]
        p_all += list(seg_ids[:rows])
        if k == len(seg_ids):
            break
        divs.append((pos + k, seg_ids[k], gap_of(l_logits[pos + k], seg_ids[k])))
        pos += k + 1
        if pos >= n:
            break
        if len(divs) > max_resync:
            res.notes.append(f"more than {max_resync} divergences; rows {pos}.. not compared")
            break
        seg_ids, seg_logits = rerun(prompt + list(l_ids[:pos]), n - pos)

    res.pagoda_ids = p_all
    done = ~np.isnan(P[:, 0])
    a, b = P[done].astype(np.float64), l_logits[done].astype(np.float64)
    d = np.abs(a - b).max(axis=1)
    rel = d / np.maximum(b.max(axis=1) - b.min(axis=1), 1e-30)
    res.rows = int(done.sum())
    res.d0, res.r0 = float(d[0]), float(rel[0])
    res.dc, res.rc = float(d.max()), float(rel.max())
    res.top1 = f"{int((a.argmax(axis=1) == b.argmax(axis=1)).sum())}/{n}"
    res.same = divs[0][0] if divs else n
    res.div = divs[0][0] if divs else None
    res.n_div = len(divs)
    res.gap = max((g for _, _, g in divs), default=None)

    ok = True
    if not np.isfinite(a).all():
        res.notes.append("pagoda logits contain NaN/Inf")
        ok = False
    if res.rows < n:
        ok = False
    if res.rc > tol:
        bad = int(np.flatnonzero(done)[int(np.argmax(rel))])
        res.notes.append(f"logits out of tolerance: row {bad} max|d|={d.max():.4g} = {res.rc:.3g} of range > {tol}")
        ok = False
    for at, ptok, g in divs:
        near = g <= tol
        res.notes.append(f"tokens differ at {at}: llama.cpp {l_ids[at]} vs pagoda {ptok}; pagoda's token is "
                         f"{g:.2e} of the range below llama.cpp's best ({'near tie' if near else 'NOT a near tie'})")
        if strict or not near:
            ok = False
    res.status = "PASS" if ok else "FAIL"


def fmt_table(results: list[Result]) -> str:
    hdr = ["case", "type", "tol", "prompt", "tok", "same", "div", "ndiv", "gap", "d0", "r0", "dC", "rC",
           "top1", "s", "status"]
    rows = []
    f = lambda x: "-" if x is None or x != x else f"{x:.1e}"  # noqa: E731  (None/nan -> "-")
    for r in results:
        ran = r.status in ("PASS", "FAIL") and r.rows > 0
        rows.append([r.case.name, r.case.wtype, f"{r.tol:g}" if r.tol else "-", str(r.prompt_len or "-"),
                     r.tok or "-", f"{r.same}/{r.n}" if ran else "-",
                     "-" if r.div is None else str(r.div), str(r.n_div) if ran else "-", f(r.gap),
                     f(r.d0), f(r.r0), f(r.dc), f(r.rc), r.top1 or "-", f"{r.seconds:.1f}", r.status])
    w = [max(len(h), *(len(x[i]) for x in rows)) if rows else len(h) for i, h in enumerate(hdr)]
    line = lambda cells: "  ".join(c.ljust(w[i]) for i, c in enumerate(cells)).rstrip()  # noqa: E731
    return "\n".join([line(hdr), line(["-" * x for x in w])] + [line(x) for x in rows])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="/work/main/build", help="Pagoda build dir (bin/pagoda, bin/pagoda-gen-model)")
    ap.add_argument("--cases", default="all", choices=["all", "gemma", "generated", "stories"])
    ap.add_argument("-n", type=int, default=64, help="tokens to generate per case")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--tol", type=float, default=1e-2,
                    help="float-weight models: max |logit diff| as a fraction of llama.cpp's logit range per row")
    ap.add_argument("--tol-quant", type=float, default=1e-1, help="the same for quantized-weight models")
    ap.add_argument("--strict-tokens", action="store_true", help="fail on any token divergence, even a near tie")
    ap.add_argument("--max-resync", type=int, default=8, help="divergences after which a case stops (and fails)")
    ap.add_argument("--no-tokenizer-check", action="store_true",
                    help="feed Pagoda llama.cpp's ids only; do not run it on the text")
    ap.add_argument("--no-gemma-f32", action="store_true",
                    help="skip the Gemma cases on an F32-dequantized copy (1 GB, made once in the cache)")
    ap.add_argument("--kv-type", choices=["f16", "f32"], default="f16", help="llama.cpp KV cache type")
    ap.add_argument("--flash-attn", action="store_true", help="llama.cpp flash attention")
    ap.add_argument("--gemma-model", type=Path, help="Gemma 3 270M GGUF (default: the cache, scripts/fetch_model)")
    ap.add_argument("--gen-dir", type=Path, help="keep generated models here (default: a temp dir)")
    ap.add_argument("--oracle-only", action="store_true", help="run llama.cpp only (no Pagoda); print its tokens")
    ap.add_argument("--json-out", type=Path, help="write per-case results as JSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="print both continuations per case")
    a = ap.parse_args(argv)

    build = Path(a.build_dir)
    pagoda = build / "bin" / "pagoda"
    gen = build / "bin" / "pagoda-gen-model"
    if not a.oracle_only and not pagoda.exists():
        print(f"error: {pagoda} not found (build Pagoda, or pass --build-dir / --oracle-only)", file=sys.stderr)
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="pagoda_cmp_"))
    gen_dir = a.gen_dir or tmp
    gen_dir.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    oracle, oracle_model = None, None
    try:
        for case in build_cases(a.cases, gen_dir, a.gemma_model, not a.no_gemma_f32):
            res = Result(case, tol=a.tol if case.wtype in FLOAT_TYPES else a.tol_quant)
            results.append(res)
            t0 = time.time()
            try:
                if case.make is not None:
                    if not gen.exists():
                        res.status, res.notes = "SKIP", [f"{gen} not found"]
                        continue
                    p = subprocess.run([str(gen), *case.make, "-o", str(case.model)],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
                    if p.returncode != 0:
                        raise RuntimeError("pagoda-gen-model failed: " + p.stderr.decode(errors="replace").strip())
                if case.dequant_from is not None and not case.model.exists() and case.dequant_from.exists():
                    make_dequant_f32(case.dequant_from, case.model)
                if not case.model.exists():
                    res.status, res.notes = "SKIP", [f"{case.model} not found (scripts/fetch_model?)"]
                    continue
                if oracle_model != case.model:
                    if oracle is not None:
                        oracle.close()
                    oracle = llamacpp_oracle.Oracle(str(case.model), n_threads=a.threads,
                                                    kv_type=a.kv_type, flash_attn=a.flash_attn)
                    oracle_model = case.model
                ids = oracle.tokenize(case.text) if case.text is not None else list(case.ids)
                res.prompt_len = len(ids)
                l_ids, l_logits, _ = oracle.greedy(ids, a.n)
                res.llama_ids, res.n = l_ids, a.n
                res.llama_text = oracle.detokenize(l_ids)
                if a.oracle_only:
                    res.status = "ORACLE"
                    continue

                def rerun(prompt_ids, n, _case=case):
                    pp, gi, lg, _ = run_pagoda(pagoda, _case.model, n, a.threads, tmp, ids=prompt_ids)
                    if pp != prompt_ids:
                        raise RuntimeError("pagoda echoed different prompt ids than it was given")
                    return gi, lg

                first = None
                if case.text is not None and not a.no_tokenizer_check:
                    p_prompt, p_ids, p_logits, _ = run_pagoda(pagoda, case.model, a.n, a.threads, tmp, text=case.text)
                    if p_prompt == ids:
                        res.tok = "ok"
                        first = (p_ids, p_logits)
                    else:
                        res.tok = "DIFF"
                        k = next((i for i, (x, y) in enumerate(zip(p_prompt, ids)) if x != y),
                                 min(len(p_prompt), len(ids)))
                        res.notes.append(f"tokenizer differs at {k}: pagoda {p_prompt[k:k+4]} vs llama.cpp "
                                         f"{ids[k:k+4]} (lengths {len(p_prompt)} / {len(ids)})")
                else:
                    res.tok = "ids"
                if first is None:
                    first = rerun(ids, a.n)
                compare_case(res, ids, l_ids, l_logits, first, rerun, res.tol, a.strict_tokens, a.max_resync)
                if res.tok == "DIFF":
                    res.status = "FAIL"
            except Exception as e:  # one broken case must not hide the others
                res.status = "FAIL"
                res.notes.append(f"{type(e).__name__}: {e}")
            finally:
                res.seconds = time.time() - t0
    finally:
        if oracle is not None:
            oracle.close()
        if a.gen_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"greedy parity vs llama.cpp: n={a.n} threads={a.threads} tol={a.tol} (float weights), "
          f"{a.tol_quant} (quantized), as a fraction of the logit range; "
          f"llama.cpp kv={a.kv_type} flash_attn={'on' if a.flash_attn else 'off'}")
    print(fmt_table(results))
    for r in results:
        if r.notes or a.verbose or a.oracle_only:
            print(f"\n[{r.case.name}] {r.status}  ({r.case.model})")
            for n_ in r.notes:
                print(f"  - {n_}")
            if a.verbose or a.oracle_only or r.status == "FAIL":
                if r.llama_ids:
                    print(f"  llama.cpp ids[:16]: {r.llama_ids[:16]}")
                    print(f"  llama.cpp text    : {r.llama_text[:200]!r}")
                if r.pagoda_ids:
                    print(f"  pagoda ids[:16]   : {r.pagoda_ids[:16]}")

    if a.json_out:
        a.json_out.write_text(json.dumps([{
            "case": r.case.name, "model": str(r.case.model), "weights": r.case.wtype, "status": r.status,
            "notes": r.notes, "tol": r.tol, "prompt_len": r.prompt_len, "tokenizer": r.tok,
            "same": r.same, "n": r.n, "rows_compared": r.rows, "div": r.div, "n_div": r.n_div, "gap": r.gap,
            "d0": r.d0, "r0": r.r0, "dc": r.dc, "rc": r.rc, "top1": r.top1,
            "llama_ids": r.llama_ids, "pagoda_ids": r.pagoda_ids, "seconds": r.seconds,
        } for r in results], indent=1))

    ran = [r for r in results if r.status in ("PASS", "FAIL", "ORACLE")]
    if not ran:
        return 2
    return 1 if any(r.status == "FAIL" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
