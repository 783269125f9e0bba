#!/usr/bin/env python3
"""Size, quality and speed of quantized formats for one model: the compression table.

  bench/quant_report.py --base ~/.cache/pagoda/models/gemma-3-270m-q4_k_m-dequant-f32.gguf
  bench/quant_report.py --base BASE.gguf --rows Q4_K:rtn,Q4_K:awq,Q4_K:gptq --chunks 8

For each row TYPE:METHOD (default: Q8_0 Q6_K Q5_K Q4_K Q4_0 Q3_K Q2_K by round to nearest,
Q4_K and Q3_K also by AWQ, GPTQ and AWQ+GPTQ, W8A8 by round to nearest and AWQ; --sparse:
Q8_0 and Q4_0 dense and 2:4 sparse by each pruning method, rows TYPE:2:4-PRUNE) it writes
the quantized file once
(`pagoda quantize BASE OUT --type TYPE --method METHOD [--calib CALIB]`, cached under
$PAGODA_CACHE/quant-report/, default ~/.cache/pagoda), then measures:
  size, bits/weight   file size; bits per weight over the 2-D weight tensors
  PPL                 `pagoda perplexity -m OUT -f TEXT -c CTX --chunks N --kl-base BASE --json`
  KLD, top-1          mean KL divergence (base || row) and top-1 agreement with the base
  pp, tg              `pagoda bench -m OUT -p 512 -n 128 -r R --json`, tokens/s (median of R)
The base itself is the first row (KLD 0 by definition).

Texts: the evaluation text is scripts/fetch_eval_text's (Botchan, Project Gutenberg #8868,
from the sentencepiece sdist on PyPI); perplexity scores its first N chunks. AWQ and GPTQ
calibrate on a held-out part of the same text: its last quarter, written to the cache,
which the evaluated chunks never reach (the script checks that).

The markdown table goes to stdout; every command and number to the JSON (--json-out).
Speed columns are single runs on a shared machine: quote them as rough, not as a benchmark
(bench/compare_llamacpp.py is the speed benchmark).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ROWS = ["Q8_0:rtn", "Q6_K:rtn", "Q5_K:rtn", "Q4_K:rtn", "Q4_K:awq", "Q4_K:gptq", "Q4_K:awq+gptq",
                "Q4_0:rtn", "Q3_K:rtn", "Q3_K:awq", "Q3_K:gptq", "Q3_K:awq+gptq", "Q2_K:rtn", "W8A8:rtn", "W8A8:awq"]

SPARSE_ROWS = [f"{t}:{m}" for t in ("Q8_0", "Q4_0") for m in ("rtn", "2:4-magnitude", "2:4-wanda", "2:4-sparsegpt")]


def cache_dir() -> Path:
    return Path(os.environ.get("PAGODA_CACHE", Path.home() / ".cache" / "pagoda"))


def run(cmd: list[str], log: list) -> str:
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    log.append({"cmd": cmd, "rc": p.returncode, "seconds": round(time.time() - t0, 2)})
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p.stdout


# Values and bytes per block of the formats gguf-py does not know: Pagoda's own (2:4 sparse).
PAGODA_FORMATS = {"Q8_0_S24": (64, 40), "Q4_0_S24": (64, 24)}


def weight_bits_from_inspect(path: Path, pagoda: Path) -> tuple[float, float]:
    """weight_bits for a file gguf-py cannot read (Pagoda's formats): the tensor list of
    `pagoda inspect --all-tensors`, sized by the format table (gguf-py's and PAGODA_FORMATS)."""
    import re
    import gguf
    out = subprocess.run([str(pagoda), "inspect", "--all-tensors", str(path)], capture_output=True, text=True,
                         check=True).stdout
    bits = n = lbits = ln = 0
    for m in re.finditer(r"^\s+(\S+)\s+(\S+)\s+\[([0-9, ]+)\]", out, re.M):
        name, typ, shape = m.group(1), m.group(2), [int(v) for v in m.group(3).split(",")]
        if sum(1 for v in shape if v > 1) < 2:
            continue
        elems = 1
        for v in shape:
            elems *= v
        if typ in PAGODA_FORMATS:
            block, size = PAGODA_FORMATS[typ]
        else:
            block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[typ]]
        b = elems // block * size * 8
        bits += b
        n += elems
        if name.startswith("blk."):
            lbits += b
            ln += elems
    return (bits / n if n else float("nan")), (lbits / ln if ln else float("nan"))


def weight_bits(path: Path, pagoda: Path) -> tuple[float, float]:
    """Bits per weight over all 2-D tensors, and over the layers' matrices only (blk.*:
    without the embedding table, which is most of a small model's weights)."""
    import gguf  # gguf-py: reads tensor types and sizes
    try:
        r = gguf.GGUFReader(str(path))
    except ValueError:  # a type id gguf-py does not know: Pagoda's own formats
        return weight_bits_from_inspect(path, pagoda)
    bits = n = lbits = ln = 0
    for t in r.tensors:
        if len(t.shape) >= 2 or t.tensor_type == gguf.GGMLQuantizationType.I8:
            bits += int(t.n_bytes) * 8
            n += int(t.n_elements)
            if t.name.startswith("blk."):
                lbits += int(t.n_bytes) * 8
                ln += int(t.n_elements)
        elif t.name.endswith(".weight.scale"):  # W8A8 row scales count with their matrix
            bits += int(t.n_bytes) * 8
            lbits += int(t.n_bytes) * 8 if t.name.startswith("blk.") else 0
    return (bits / n if n else float("nan")), (lbits / ln if ln else float("nan"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="unquantized GGUF (F32/F16/BF16)")
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    ap.add_argument("--rows", default=",".join(DEFAULT_ROWS), help="comma-separated TYPE:METHOD")
    ap.add_argument("--sparse", action="store_true", help="the 2:4 sparsity table: --rows " + ",".join(SPARSE_ROWS))
    ap.add_argument("--text", help="evaluation text (default: scripts/fetch_eval_text)")
    ap.add_argument("-c", "--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--calib-tokens", type=int, default=4096)
    ap.add_argument("--speed-reps", type=int, default=3, help="pagoda bench -r (0: skip the speed columns)")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", action="append", default=[],
                    help="TYPE=REGEX passed to every pagoda quantize (e.g. q8_0=^token_embd, as llama.cpp's "
                         "Q4_K_M keeps the embeddings at Q8_0); repeatable")
    ap.add_argument("--regen", action="store_true", help="re-quantize even when the cached file exists")
    ap.add_argument("--json-out")
    a = ap.parse_args()
    if a.sparse:
        a.rows = ",".join(SPARSE_ROWS)

    pagoda = Path(a.build_dir) / "bin" / "pagoda"
    if not pagoda.exists():
        print(f"error: {pagoda} not found; build first (scripts/build)", file=sys.stderr)
        return 2
    base = Path(a.base).expanduser()
    if not base.exists():
        print(f"error: base model {base} not found", file=sys.stderr)
        return 2
    log: list = []
    text = Path(a.text) if a.text else Path(run([str(ROOT / "scripts" / "fetch_eval_text")], log).strip())
    out_dir = cache_dir() / "quant-report" / base.stem
    out_dir.mkdir(parents=True, exist_ok=True)
    body = text.read_text(encoding="utf-8")
    calib = out_dir / "calibration.txt"
    calib.write_text(body[len(body) * 3 // 4:], encoding="utf-8")

    results = []

    def measure(label: str, method: str, path: Path) -> dict:
        row = {"row": label, "method": method, "file": str(path), "size_mib": path.stat().st_size / 2**20}
        row["bpw"], row["layer_bpw"] = weight_bits(path, pagoda)
        cmd = [str(pagoda), "perplexity", "-m", str(path), "-f", str(text), "-c", str(a.ctx), "--chunks",
               str(a.chunks), "-t", str(a.threads), "--json"]
        if path != base:
            cmd += ["--kl-base", str(base)]
        ppl = json.loads(run(cmd, log))
        row["ppl"], row["ppl_error"] = ppl["ppl"], ppl["ppl_error"]
        kl = ppl.get("kl") or {}
        row["kld"] = kl.get("kld_mean", 0.0)
        row["kld_error"] = kl.get("kld_error", 0.0)
        row["top1"] = kl.get("top1_percent", 100.0)
        if a.speed_reps > 0:
            out = run([str(pagoda), "bench", "-m", str(path), "-p", "512", "-n", "128", "-r", str(a.speed_reps), "-t",
                       str(a.threads), "--json"], log)
            for o in json.loads(out):
                key = "pp" if o["test"].startswith("pp") else "tg"
                row[key] = o["tokens_per_second_median"]
        results.append(row)
        print(f"  {label:12} {method:5} ppl {row['ppl']:.3f}  kld {row['kld']:.5f}  top1 {row['top1']:.2f}%",
              file=sys.stderr, flush=True)
        return row

    print(f"base {base.name}: measuring", file=sys.stderr)
    measure("base", "-", base)
    for spec in a.rows.split(","):
        typ, _, method = spec.partition(":")
        method = method or "rtn"
        # TYPE:2:4-PRUNE: the 2:4 sparse counterpart of TYPE, pruned by PRUNE (magnitude,
        # wanda, sparsegpt), e.g. Q8_0:2:4-wanda.
        prune = method.split("-", 1)[1] if method.startswith("2:4-") else None
        tag = ("-keep-" + hashlib.sha1("\n".join(a.keep).encode()).hexdigest()[:8]) if a.keep else ""
        out = out_dir / f"{typ.lower()}-{method.replace('+', '-').replace(':', '')}{tag}.gguf"
        if a.regen or not out.exists():
            cmd = [str(pagoda), "quantize", str(base), str(out), "--type", typ, "-t", str(a.threads)]
            cmd += ["--sparsity", "2:4", "--prune", prune] if prune else ["--method", method]
            for k in a.keep:
                cmd += ["--keep", k]
            if method != "rtn" and prune != "magnitude":
                cmd += ["--calib", str(calib), "--calib-tokens", str(a.calib_tokens), "--calib-ctx", str(a.ctx)]
            print(f"quantize {typ} {method}", file=sys.stderr, flush=True)
            run(cmd, log)
        measure(typ, method, out)

    base_row = results[0]
    kept = f"; every row with --keep {' --keep '.join(a.keep)}" if a.keep else ""
    print(f"\n{base.name}, evaluation text {text.name}: {a.chunks} chunks of {a.ctx} tokens (second halves scored)"
          f"{kept}\n")
    print("| format | method | bits/weight (layers) | size MiB | PPL | PPL vs base | mean KLD | top-1 % | pp512 t/s "
          "| tg128 t/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        dppl = 100.0 * (r["ppl"] / base_row["ppl"] - 1.0)
        print(f"| {r['row']} | {r['method']} | {r['bpw']:.2f} ({r['layer_bpw']:.2f}) | {r['size_mib']:.1f} | {r['ppl']:.3f} +/- {r['ppl_error']:.3f} "
              f"| {dppl:+.2f}% | {r['kld']:.5f} +/- {r['kld_error']:.5f} | {r['top1']:.2f} | {r.get('pp', float('nan')):.1f} "
              f"| {r.get('tg', float('nan')):.1f} |")
    json_out = Path(a.json_out) if a.json_out else cache_dir() / "bench-results" / f"quant-report-{int(time.time())}.json"
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps({"base": str(base), "text": str(text), "ctx": a.ctx, "chunks": a.chunks,
                                    "rows": results, "commands": log}, indent=1))
    print(f"\n(JSON: {json_out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
