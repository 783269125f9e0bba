#!/usr/bin/env python3
"""Batched throughput, Pagoda vs llama.cpp's llama-batched-bench, side by side in one run.

  bench/compare_batching.py                                   # gemma and 1b-q4_0, npl 16,64, 3 rounds
  bench/compare_batching.py --rows gemma --npl 4 -p 32 -n 16 --rounds 1    # a quick look
  bench/compare_batching.py --rows 1b-q4_0 --npl 16,32,64 --json > raw.json

Rows are compare_llamacpp.py's (--rows, comma-separated; see --list-rows): `gemma` (Gemma
3 270M Q4_K_M from scripts/fetch_model), `1b-q4_0` etc. (random-weight `llama` files
generated once into $PAGODA_CACHE/bench-models/), or LABEL=PATH for any GGUF file.

The work, per row and parallel level N (--npl), with P = --n-prompt, T = --n-gen:
N sequences, each a prompt of P random tokens followed by T generated tokens, all N
decoded together, from an empty cache. Both engines evaluate exactly N*(P+T) tokens
through the model and produce N*(T+1) logit rows:
  llama.cpp  llama-batched-bench -m M -npp P -ntg T -npl N -c N*(P+T) -b B -ub U -t TH
                 --output-format jsonl -lv 4
             one batch of the N*P prompt tokens (split into ubatches of U), then T steps of
             N tokens each (random tokens, no sampling); F16 KV cache, N separate streams
             of P+T cells (llama.cpp pads each to a multiple of 256 cells and attends over
             whole 256-cell chunks, masked: keep P+T a multiple of 256, as the default 128+128
             is, or its attention does extra work); -lv 4 only makes it log its context,
             batch and KV sizes, which the script records.
  Pagoda     pagoda bench throughput -m M --num-prompts N --input-len P --output-len T+1
                 --range-ratio 0 -c P+T+1 --max-num-seqs N --max-num-batched-tokens U
                 --kv-cache-memory KV -t TH --json
             N requests queued at once, greedy, ignore EOS, continuous batching with
             chunked prefill under a per-step budget of U tokens. --output-len is T+1
             because the prefill of a prompt already yields its first output token: T+1
             outputs = P+T evaluated tokens per sequence, the same as llama.cpp's P+T.
             KV = llama.cpp's requested KV, 2 (K,V) x n_layer x N*(P+T) x kv_dim x 2 bytes
             (F16, as Pagoda's cache is), from the GGUF metadata. Pagoda's KV comes in blocks
             of 16 tokens: keep P+T a multiple of 16, or a sequence needs more than P+T
             slots, the N sequences do not fit and Pagoda preempts (the script warns, and
             the table counts preemptions).
B = min(2048, N*(P+T)), U = min(--ubatch (512), B): llama.cpp's defaults, capped at the
context as llama.cpp itself caps them; Pagoda's step budget is set to the same U.

Reported per engine (medians over --rounds; rounds alternate which engine goes first):
  total t/s   N*(P+T) / wall time of the timed work, for both engines. llama.cpp's wall
              time is T_PP + T_TG (its "T s"; its "S t/s"); Pagoda's is the engine loop
              of `bench throughput` ("seconds": first request added to last finished).
              Neither includes model loading; llama.cpp warms up with one 16-token batch,
              Pagoda does not warm up.
  S_TG        llama.cpp only: N*T / T_TG, the generation phase alone. Pagoda interleaves
              prefill chunks with decode steps (chunked prefill), so it has no separate
              generation phase to time; its column is output tokens / whole run
              (N*(T+1) / seconds), for information, not comparable to S_TG.

Exit status: 0 when every run worked (whichever engine is faster); 1 when some run failed
(the table says `error` there); 2 on a setup error; 130 on Ctrl-C.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_llamacpp as cl  # noqa: E402  (rows, models, processes, machine info)

REPO = cl.REPO
RESULTS = cl.RESULTS
DEFAULT_ROWS = "gemma,1b-q4_0"
LLAMA_BATCH = 2048


def log(msg: str) -> None:
    print(f"[batching] {msg}", file=sys.stderr, flush=True)


cl.log = log  # compare_llamacpp's helpers (models, quiet wait, binary snapshot) log through this


# ------------------------------------------------------------------------------- models
def kv_shape(path: Path) -> dict:
    """KV-cache geometry from the GGUF metadata (gguf package), cached beside the generated
    models by path, size and mtime (GGUFReader takes ~13 s on Gemma's vocabulary)."""
    st = path.stat()
    key = hashlib.sha256(f"kv|{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    cache = cl.MODEL_CACHE / ".sizes" / f"kv-{key}.json"
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    import gguf  # PyPI `gguf`; imported here so --help works without it

    r = gguf.GGUFReader(str(path))

    def meta(k: str, default=None):
        return cl.gguf_meta(r, k, default)

    arch = meta("general.architecture", "?")
    n_layer = int(meta(f"{arch}.block_count", 0) or 0)
    n_head = meta(f"{arch}.attention.head_count", 0) or 0
    n_kv = meta(f"{arch}.attention.head_count_kv", n_head) or n_head
    n_embd = int(meta(f"{arch}.embedding_length", 0) or 0)
    head0 = n_head[0] if isinstance(n_head, list) else n_head
    k_len = int(meta(f"{arch}.attention.key_length", (n_embd // head0) if head0 else 0) or 0)
    v_len = int(meta(f"{arch}.attention.value_length", k_len) or k_len)
    if isinstance(n_kv, list):  # per-layer KV head counts
        row = sum(int(n) * (k_len + v_len) for n in n_kv)
        kv_dim = max(int(n) for n in n_kv) * k_len
    else:
        row = n_layer * int(n_kv) * (k_len + v_len)
        kv_dim = int(n_kv) * k_len
    out = {"arch": arch, "n_layer": n_layer, "n_head_kv": n_kv, "key_length": k_len, "value_length": v_len,
           "kv_dim": kv_dim, "sliding_window": meta(f"{arch}.attention.sliding_window"),
           # F16 K and V of every layer for one token: 2 x n_layer x kv_dim x 2 bytes when uniform.
           "kv_bytes_per_token": row * 2, "file_bytes": st.st_size}
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(out))
    except OSError:
        pass
    return out


# ------------------------------------------------------------------------------ engines
def batch_sizes(n: int, p: int, t: int, ubatch: int) -> tuple[int, int, int]:
    ctx = n * (p + t)
    b = min(LLAMA_BATCH, ctx)
    return ctx, b, min(ubatch, b)


_MIB = re.compile(r"llama_kv_cache: size =\s*([0-9.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\)")


def parse_llama_log(err: str) -> dict:
    """What llama.cpp says about the context it made (needs -lv 4)."""
    info: dict[str, Any] = {}
    for key in ("n_ctx", "n_ctx_seq", "n_batch", "n_ubatch", "n_seq_max"):
        m = re.search(rf"llama_context: {key}\s+=\s+(\d+)", err)
        if m:
            info[key] = int(m.group(1))
    m = re.search(r"llama_context: kv_unified\s+=\s+(\w+)", err)
    if m:
        info["kv_unified"] = m.group(1) == "true"
    m = re.search(r"llama_context: flash_attn\s+=\s+(\w+)", err)
    if m:
        info["flash_attn_param"] = m.group(1)
    m = re.search(r"Flash Attention (enabled|disabled)", err)
    if m:
        info["flash_attn"] = m.group(1) == "enabled"
    caches = [{"mib": float(g[0]), "cells": int(g[1]), "layers": int(g[2]), "seqs": int(g[3])}
              for g in _MIB.findall(err)]
    if caches:
        info["kv_caches"] = caches
        info["kv_mib"] = round(sum(c["mib"] for c in caches), 3)
    return info


def run_llamacpp(bindir: Path, model: Path, n: int, a, timeout: float) -> tuple[dict, dict]:
    p, t = a.n_prompt, a.n_gen
    ctx, b, ub = batch_sizes(n, p, t, a.ubatch)
    cmd = [str(bindir / "llama-batched-bench"), "-m", str(model), "-npp", str(p), "-ntg", str(t), "-npl", str(n),
           "-c", str(ctx), "-b", str(b), "-ub", str(ub), "-t", str(a.threads), "--output-format", "jsonl",
           "-lv", "4", *shlex.split(a.llamacpp_args)]
    rec = cl.run_cmd(cmd, timeout)
    if rec["rc"] != 0:
        raise cl.RunFailed(f"llama-batched-bench exit {rec['rc']}{' (timeout)' if rec['timed_out'] else ''}: "
                           f"{cl.tail(rec['_stderr'], 5)}", rec)
    found = None
    for line in rec["_stdout"].splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if (e.get("pp"), e.get("tg"), e.get("pl")) == (p, t, n):
            found = e
    rec["llama_log"] = parse_llama_log(rec["_stderr"])
    if found is None:
        # batched-bench silently skips a configuration that does not fit its context.
        raise cl.RunFailed(f"no result line for pp={p} tg={t} pl={n} in llama-batched-bench's output "
                           f"(n_kv_max too small?): {cl.tail(rec['_stdout'], 3)}", rec)
    rec["parsed"] = found
    wall = float(found["t"])
    res = {
        "total_tps": n * (p + t) / wall if wall > 0 else None,
        "wall_s": wall,
        "s_tg": float(found["speed_tg"]),
        "s_pp": float(found["speed_pp"]),
        "s_total_reported": float(found["speed"]),
        "t_pp": float(found["t_pp"]),
        "t_tg": float(found["t_tg"]),
        "kv_mib": rec["llama_log"].get("kv_mib"),
    }
    return res, rec


def run_pagoda(pagoda: Path, model: Path, n: int, kv_bytes: int, a, timeout: float) -> tuple[dict, dict]:
    p, t = a.n_prompt, a.n_gen
    _ctx, _b, ub = batch_sizes(n, p, t, a.ubatch)
    cmd = [str(pagoda), "bench", "throughput", "-m", str(model), "--num-prompts", str(n), "--input-len", str(p),
           "--output-len", str(t + 1), "--range-ratio", "0", "-c", str(p + t + 1), "--max-num-seqs", str(n),
           "--max-num-batched-tokens", str(ub), "--kv-cache-memory", str(kv_bytes), "-t", str(a.threads),
           "--json", *shlex.split(a.pagoda_args)]
    rec = cl.run_cmd(cmd, timeout)
    if rec["rc"] != 0:
        raise cl.RunFailed(f"pagoda bench throughput exit {rec['rc']}{' (timeout)' if rec['timed_out'] else ''}: "
                           f"{cl.tail(rec['_stderr'], 5)}", rec)
    try:
        out = rec["_stdout"]
        j = json.loads(out[out.index("{"):])
        secs = float(j["seconds"])
        n_in, n_out = int(j["input_tokens"]), int(j["output_tokens"])
    except (ValueError, KeyError, TypeError) as ex:
        raise cl.RunFailed(f"pagoda bench throughput output not understood: {ex}", rec) from None
    rec["parsed"] = j
    if n_in != n * p or n_out != n * (t + 1):
        raise cl.RunFailed(f"pagoda ran other work than asked: {n_in} input / {n_out} output tokens, expected "
                           f"{n * p} / {n * (t + 1)}", rec)
    kv_tok = int(j.get("kv_blocks", 0)) * int(j.get("block_size", 0))
    # With sliding-window layer groups a block holds some layers only: the bytes are exact.
    kv_bytes = int(j["kv_bytes"]) if "kv_bytes" in j else None
    res = {
        "total_tps": n * (p + t) / secs if secs > 0 else None,
        "wall_s": secs,
        "output_tps": float(j["output_tokens_per_second"]),
        "total_tps_reported": float(j["total_tokens_per_second"]),
        "ttft_p50_ms": j.get("ttft_ms", {}).get("p50"),
        "ttft_p99_ms": j.get("ttft_ms", {}).get("p99"),
        "tpot_p50_ms": j.get("tpot_ms", {}).get("p50"),
        "kv_tokens": kv_tok,
        "kv_bytes": kv_bytes,
        "kv_usage_peak": j.get("kv_usage_peak"),
        "preemptions": j.get("preemptions"),
        "steps": j.get("steps"),
    }
    return res, rec


# ------------------------------------------------------------------------------- output
def med(vals: list) -> float | None:
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarize(cfg: dict) -> None:
    s: dict[str, Any] = {}
    for eng in ("llamacpp", "pagoda"):
        runs = [r for r in cfg["runs"] if r["engine"] == eng and "result" in r]
        vals = [r["result"]["total_tps"] for r in runs]
        e: dict[str, Any] = {"n": len(runs), "total_tps_values": vals, "total_tps": med(vals),
                             "spread_pct": cl.spread(vals), "wall_s": med([r["result"]["wall_s"] for r in runs])}
        if eng == "llamacpp":
            e["s_tg"] = med([r["result"]["s_tg"] for r in runs])
            e["s_pp"] = med([r["result"]["s_pp"] for r in runs])
            e["kv_mib"] = med([r["result"]["kv_mib"] for r in runs])
        else:
            e["output_tps"] = med([r["result"]["output_tps"] for r in runs])
            e["ttft_p50_ms"] = med([r["result"]["ttft_p50_ms"] for r in runs])
            e["ttft_p99_ms"] = med([r["result"]["ttft_p99_ms"] for r in runs])
            e["kv_usage_peak"] = max([r["result"]["kv_usage_peak"] or 0 for r in runs], default=None)
            e["preemptions_max"] = max([r["result"]["preemptions"] or 0 for r in runs], default=None)
            e["kv_tokens"] = max([r["result"]["kv_tokens"] for r in runs], default=None)
        s[eng] = e
    l, p = s["llamacpp"]["total_tps"], s["pagoda"]["total_tps"]
    s["ratio"] = p / l if l and p else None
    loads = [r.get("other_cpu_cores") for r in cfg["runs"] if r.get("other_cpu_cores") is not None]
    s["max_other_cpu_cores"] = max(loads) if loads else None
    cfg["summary"] = s


def f1(v: float | None, nd: int = 1) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def markdown(doc: dict) -> str:
    m = doc["machine"]
    a = doc["args"]
    out = [f"Pagoda {m['pagoda_describe']} ({m['pagoda_build_type'] or '?'} build) vs llama.cpp "
           f"llama-batched-bench (llama-cpp-python {m['llamacpp_python_version'] or '?'}, "
           f"{doc.get('llamacpp_version') or '?'}) | {m['cpu_model']} | {doc['threads']} threads | "
           f"P={a['n_prompt']} prompt + T={a['n_gen']} generated tokens per sequence | "
           f"{doc['rounds']} rounds, medians",
           "",
           "total t/s = N*(P+T) / wall time, both engines. S_TG = llama.cpp's generation phase alone; Pagoda "
           "output t/s = N*(T+1) / whole run (chunked prefill: no separate phase). Both for information only.",
           f"llama.cpp: -c N*(P+T), -b min({LLAMA_BATCH}, -c), -ub min({a['ubatch']}, -b), F16 KV. Pagoda: "
           f"--output-len T+1 (same N*(P+T) evaluated tokens), --max-num-batched-tokens = llama.cpp's -ub, "
           f"--kv-cache-memory = 2 x n_layer x N*(P+T) x kv_dim x 2 bytes (F16).",
           "",
           "| row | npl | llama.cpp total t/s | pagoda total t/s | pagoda/llama.cpp | llama.cpp S_TG t/s "
           "| pagoda output t/s | spread l/p | other cpu |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in doc["rows"]:
        if not row["configs"]:
            out.append(f"| {row['name']} | - | error | error | - | - | - | - | - |")
        for cfg in row["configs"]:
            s = cfg.get("summary")
            if not s:
                out.append(f"| {row['name']} | {cfg['npl']} | - | - | - | - | - | - | - |")
                continue
            l, p = s["llamacpp"], s["pagoda"]
            sp = "/".join("-" if x["spread_pct"] is None else f"{x['spread_pct']:.0f}%" for x in (l, p))
            oc = "-" if s["max_other_cpu_cores"] is None else f"{s['max_other_cpu_cores']:.2f}"
            ratio = "-" if s["ratio"] is None else f"{s['ratio']:.2f}x"
            lt = cl.fmt_tps(l["total_tps"]) if l["n"] else "error"
            pt = cl.fmt_tps(p["total_tps"]) if p["n"] else "error"
            out.append(f"| {row['name']} | {cfg['npl']} | {lt} | {pt} | {ratio} | {cl.fmt_tps(l.get('s_tg'))} | "
                       f"{cl.fmt_tps(p.get('output_tps'))} | {sp} | {oc} |")
    out.append("")
    out.append("| row | npl | llama.cpp -c / -b / -ub | pagoda step budget | KV MiB llama.cpp / pagoda | flash attn "
               "| llama.cpp T_PP + T_TG s | pagoda s | pagoda TTFT p50/p99 ms | pagoda KV peak | preemptions |")
    out.append("| --- | ---: | --- | ---: | --- | :---: | --- | ---: | --- | ---: | ---: |")
    for row in doc["rows"]:
        for cfg in row["configs"]:
            s = cfg.get("summary")
            if not s:
                continue
            l, p = s["llamacpp"], s["pagoda"]
            lruns = [r for r in cfg["runs"] if r["engine"] == "llamacpp" and "result" in r]
            fa = lruns[0].get("llama_log", {}).get("flash_attn") if lruns else None
            fa_s = "-" if fa is None else ("on" if fa else "off")
            tpp = med([r["result"]["t_pp"] for r in lruns])
            ttg = med([r["result"]["t_tg"] for r in lruns])
            peak = "-" if p.get("kv_usage_peak") is None else f"{100 * p['kv_usage_peak']:.0f}%"
            pre = "-" if p.get("preemptions_max") is None else str(p["preemptions_max"])
            out.append(
                f"| {row['name']} | {cfg['npl']} | {cfg['llama_ctx']} / {cfg['llama_b']} / {cfg['llama_ub']} | "
                f"{cfg['llama_ub']} | {f1(l.get('kv_mib'), 2)} / {cfg['pagoda_kv_bytes'] / 2**20:.2f} | {fa_s} | "
                f"{f1(tpp, 2)} + {f1(ttg, 2)} | {f1(p['wall_s'], 2)} | "
                f"{f1(p.get('ttft_p50_ms'), 0)} / {f1(p.get('ttft_p99_ms'), 0)} | {peak} | {pre} |")
    notes = doc.get("notes") or []
    if notes:
        out.append("")
        out += [f"- {n}" for n in notes]
    return "\n".join(out)


def add_notes(doc: dict, quiet_threshold: float) -> None:
    notes = []
    for row in doc["rows"]:
        for cfg in row["configs"]:
            s = cfg.get("summary")
            if not s:
                continue
            where = f"{row['name']} npl {cfg['npl']}"
            lk, pk = s["llamacpp"].get("kv_mib"), cfg["pagoda_kv_bytes"] / 2**20
            if lk and abs(lk - pk) > 0.01 * pk + 0.01:
                notes.append(f"{where}: llama.cpp allocated {lk:.2f} MiB of KV for the {cfg['kv_bytes'] / 2**20:.2f} "
                             f"MiB its -c asks for: it pads each sequence's stream to a multiple of 256 cells and "
                             f"attends over whole 256-cell chunks (masked), so its attention does extra work "
                             f"unless P+T is a multiple of 256. Pagoda got {pk:.2f} MiB.")
            if s["pagoda"].get("preemptions_max"):
                notes.append(f"{where}: Pagoda preempted sequences ({s['pagoda']['preemptions_max']}): its KV "
                             f"did not hold all {cfg['npl']} sequences at once; the work is not the same.")
            oc = s.get("max_other_cpu_cores")
            if oc is not None and oc > quiet_threshold:
                notes.append(f"{where}: other processes used up to {oc:.2f} cores during a run; llama.cpp "
                             f"collapses under contention, do not trust this ratio.")
    doc["notes"] = notes


def llamacpp_version(bindir: Path) -> str:
    try:
        p = subprocess.run([str(bindir / "llama-batched-bench"), "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = re.search(r"version: (.*)", p.stdout)
    return m.group(1).strip() if m else ""


def pagoda_block_size(args: str) -> int:
    """Pagoda's KV block size: 16 unless --pagoda-args sets --block-size."""
    words = shlex.split(args)
    for i, w in enumerate(words):
        if w == "--block-size" and i + 1 < len(words) and words[i + 1].isdigit():
            return int(words[i + 1])
        if w.startswith("--block-size=") and w.split("=", 1)[1].isdigit():
            return int(w.split("=", 1)[1])
    return 16


def main() -> int:
    signal.signal(signal.SIGINT, cl._interrupt)
    signal.signal(signal.SIGTERM, cl._interrupt)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build-dir", type=Path, default=REPO / "build", help="Pagoda build (default: %(default)s)")
    ap.add_argument("--rows", default=DEFAULT_ROWS,
                    help="comma-separated rows / groups / LABEL=PATH, as in compare_llamacpp.py (default: %(default)s)")
    ap.add_argument("--model", action="append", default=[], metavar="LABEL=PATH", help="add a row for a GGUF file")
    ap.add_argument("--npl", default="16,64", help="parallel sequences N, comma-separated (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per row and npl, one run of each engine per round")
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=128, help="prompt tokens per sequence P (default 128)")
    ap.add_argument("-n", "--n-gen", type=int, default=128, help="generated tokens per sequence T (default 128)")
    ap.add_argument("--ubatch", type=int, default=512,
                    help="llama.cpp -ub and Pagoda --max-num-batched-tokens (default 512; capped at N*(P+T))")
    ap.add_argument("--llamacpp-bin", type=Path, help="llama.cpp bin dir (default: scripts/build_llamacpp's)")
    ap.add_argument("--json", action="store_true",
                    help="print the raw results (the JSON document) on stdout; the table then goes to stderr")
    ap.add_argument("--json-out", type=Path, help="default: $PAGODA_CACHE/bench-results/batching-<time>.json")
    ap.add_argument("--md-out", type=Path, help="also write the markdown tables here")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds per engine run (default 0: one hour per GiB of model file, at least one hour)")
    ap.add_argument("--regen", action="store_true", help="regenerate the generated models")
    ap.add_argument("--llamacpp-args", default="", metavar="ARGS",
                    help="extra llama-batched-bench arguments, e.g. '-fa off' or '-kvu' (recorded in the JSON)")
    ap.add_argument("--pagoda-args", default="", metavar="ARGS",
                    help="extra `pagoda bench throughput` arguments; one starting with a dash needs '=', "
                         "e.g. --pagoda-args=--no-prefix-caching")
    ap.add_argument("--wait-quiet", type=float, default=300, metavar="S",
                    help="before each run, wait up to S seconds for other processes to use under "
                         "--quiet-threshold cores, then run anyway (default 300; 0: do not wait)")
    ap.add_argument("--quiet-threshold", type=float, default=0.15, metavar="CORES")
    ap.add_argument("--list-rows", action="store_true", help="print the rows and exit")
    a = ap.parse_args()

    if a.list_rows:
        for name, r in cl.ROWS.items():
            where = cl.gen_model_path(r) if r.kind == "gen" else "scripts/fetch_model"
            print(f"{name:12} {'(default) ' if name in DEFAULT_ROWS.split(',') else '          '}"
                  f"{r.qtype or 'Q4_K_M':6} {r.shape or r.note}  -> {where}")
        return 0
    try:
        npls = [int(x) for x in a.npl.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--npl: not a list of integers: {a.npl!r}")
    if (not npls or min(npls) < 1 or a.rounds < 1 or a.threads < 1 or a.n_prompt < 1 or a.n_gen < 1
            or a.ubatch < 1):
        ap.error("need --npl values >= 1, --rounds >= 1, --threads >= 1, -p/-n >= 1, --ubatch >= 1")

    try:
        rows = cl.parse_rows(a.rows, a.model)
        build = a.build_dir.resolve()
        if not (build / "bin" / "pagoda").exists():
            raise cl.SetupError(f"{build / 'bin' / 'pagoda'} missing: cmake --build {build} --target pagoda")
        if a.llamacpp_bin:
            llama_bin = a.llamacpp_bin.resolve()
        else:  # build (or find) llama-batched-bench only
            env = dict(os.environ,
                       LLAMACPP_TARGETS=os.environ.get("LLAMACPP_TARGETS", "llama llama-batched-bench"))
            llama_bin = Path(cl.last_line([str(REPO / "scripts" / "build_llamacpp")], "build_llamacpp", env=env))
        if not (llama_bin / "llama-batched-bench").exists():
            raise cl.SetupError(f"{llama_bin / 'llama-batched-bench'} missing "
                                f"(LLAMACPP_TARGETS=llama-batched-bench scripts/build_llamacpp)")
        machine = cl.machine_info(build, llama_bin)
        pagoda_exe, machine["pagoda_binary_sha256"] = cl.snapshot_pagoda(build)
        machine["pagoda_binary_used"] = str(pagoda_exe)
        if machine["pagoda_build_type"] not in ("Release", "RelWithDebInfo", ""):
            log(f"warning: {build} is a {machine['pagoda_build_type']} build; its numbers mean little")
        if machine["pagoda_dirty_files"]:
            log(f"note: the working tree has uncommitted changes ({len(machine['pagoda_dirty_files'])} files); "
                f"the binary may not match {machine['pagoda_commit'][:10]}")
        models: dict[str, Path] = {}
        shapes: dict[str, dict] = {}
        for r in rows:
            models[r.name] = cl.make_model(r, build, a.regen, os.cpu_count() or 1)
            try:
                shapes[r.name] = kv_shape(models[r.name])
            except Exception as e:  # noqa: BLE001
                raise cl.SetupError(f"{r.name}: cannot read the KV shape of {models[r.name]}: {e}") from None
            if not shapes[r.name]["kv_bytes_per_token"]:
                raise cl.SetupError(f"{r.name}: no KV shape in the metadata of {models[r.name]}")
    except cl.SetupError as e:
        log(f"error: {e}")
        return 2

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    json_out = a.json_out or RESULTS / f"batching-{stamp}.json"
    doc: dict[str, Any] = {
        "started": dt.datetime.now().isoformat(timespec="seconds"),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "threads": a.threads, "rounds": a.rounds, "npl": npls, "machine": machine,
        "llamacpp_version": llamacpp_version(llama_bin), "rows": [],
    }
    log(f"P={a.n_prompt} T={a.n_gen}, npl {npls}, {a.rounds} rounds, {a.threads} threads; llama.cpp -b "
        f"min({LLAMA_BATCH}, N*(P+T)) -ub min({a.ubatch}, -b), Pagoda --max-num-batched-tokens = the same -ub")
    block = pagoda_block_size(a.pagoda_args)
    errors = 0
    try:
        write_json_doc(doc, json_out)
        t_start = time.monotonic()
        n_cfg_total, n_cfg_done = len(rows) * len(npls), 0
        for r in rows:
            model, shape = models[r.name], shapes[r.name]
            row: dict[str, Any] = {"name": r.name, "model": str(model), "kv_shape": shape, "configs": []}
            doc["rows"].append(row)
            timeout = a.timeout or 3600 * max(1.0, model.stat().st_size / 2**30)
            for n in npls:
                ctx, b, ub = batch_sizes(n, a.n_prompt, a.n_gen, a.ubatch)
                kv_bytes = n * (a.n_prompt + a.n_gen) * shape["kv_bytes_per_token"]
                cfg: dict[str, Any] = {"npl": n, "n_prompt": a.n_prompt, "n_gen": a.n_gen, "llama_ctx": ctx,
                                       "llama_b": b, "llama_ub": ub, "kv_bytes": kv_bytes,
                                       "pagoda_kv_bytes": kv_bytes, "runs": []}
                row["configs"].append(cfg)
                cfg_t0 = time.monotonic()
                log(f"{r.name} npl {n}: {n} x ({a.n_prompt} + {a.n_gen}) tokens, -c {ctx} -b {b} -ub {ub}, "
                    f"KV {kv_bytes / 2**20:.2f} MiB ({kv_bytes} bytes)")
                if (a.n_prompt + a.n_gen) % block:
                    log(f"warning: P+T = {a.n_prompt + a.n_gen} is not a multiple of Pagoda's KV block "
                        f"({block} tokens): a sequence takes {-(-(a.n_prompt + a.n_gen) // block)} blocks, so "
                        f"{n} of them do not fit in N*(P+T) tokens of KV and Pagoda will preempt")
                for rnd in range(a.rounds):
                    order = ("llamacpp", "pagoda") if rnd % 2 == 0 else ("pagoda", "llamacpp")
                    for eng in order:
                        quiet = cl.wait_quiet(a.wait_quiet, a.quiet_threshold) if a.wait_quiet > 0 else {}
                        t0 = time.monotonic()
                        base = {"engine": eng, "round": rnd, "started": dt.datetime.now().isoformat(timespec="seconds"),
                                "loadavg_before": os.getloadavg(), **quiet}
                        try:
                            if eng == "llamacpp":
                                res, rec = run_llamacpp(llama_bin, model, n, a, timeout)
                                extra = f"S_TG {res['s_tg']:.1f}"
                            else:
                                res, rec = run_pagoda(pagoda_exe, model, n, kv_bytes, a, timeout)
                                extra = f"output {res['output_tps']:.1f}, preemptions {res['preemptions']}"
                                if res["kv_bytes"]:
                                    cfg["pagoda_kv_bytes"] = res["kv_bytes"]
                                elif res["kv_tokens"]:
                                    cfg["pagoda_kv_bytes"] = res["kv_tokens"] * shape["kv_bytes_per_token"]
                            rec = {**base, **rec, "result": res}
                            log(f"{r.name} npl {n} round {rnd + 1}/{a.rounds} {eng:8}: total {res['total_tps']:.1f} t/s "
                                f"({extra}; {res['wall_s']:.2f}s timed, {time.monotonic() - t0:.0f}s run, "
                                f"other cpu {rec.get('other_cpu_cores', '?')})")
                        except cl.RunFailed as e:
                            errors += 1
                            rec = {**base, **e.record, "error": str(e)}
                            rec["stderr_tail"] = cl.tail(rec.get("_stderr", ""), 30)
                            rec["stdout_tail"] = cl.tail(rec.get("_stdout", ""), 30)
                            log(f"{r.name} npl {n} round {rnd + 1}/{a.rounds} {eng}: ERROR {e}")
                        rec.pop("_stdout", None)
                        rec.pop("_stderr", None)
                        cfg["runs"].append(rec)
                        write_json_doc(doc, json_out)
                    if rnd == 0 and a.rounds > 1:
                        per_round = time.monotonic() - cfg_t0
                        log(f"{r.name} npl {n}: a round takes {per_round / 60:.1f} min; about "
                            f"{per_round * (a.rounds - 1) / 60:.0f} min left for this configuration")
                summarize(cfg)
                n_cfg_done += 1
                log(f"{r.name} npl {n}: done ({n_cfg_done}/{n_cfg_total} configurations, "
                    f"{(time.monotonic() - t_start) / 60:.1f} min so far)")
                write_json_doc(doc, json_out)
    except KeyboardInterrupt:
        doc["interrupted"] = True
        for row in doc["rows"]:
            for cfg in row["configs"]:
                if "summary" not in cfg and cfg["runs"]:
                    summarize(cfg)
        finish(doc, a, json_out)
        log(f"interrupted; partial results in {json_out}")
        return 130

    finish(doc, a, json_out)
    for row in doc["rows"]:
        for cfg in row["configs"]:
            for rec in cfg["runs"]:
                if "error" in rec:
                    log(f"{row['name']} npl {cfg['npl']} round {rec['round']} {rec['engine']}: {rec['error']}")
    log(f"every run: {json_out}")
    return 1 if errors else 0


def write_json_doc(doc: dict, path: Path) -> None:
    cl.write_json(doc, path)


def finish(doc: dict, a, json_out: Path) -> None:
    doc["finished"] = dt.datetime.now().isoformat(timespec="seconds")
    add_notes(doc, a.quiet_threshold)
    table = markdown(doc)
    doc["markdown"] = table
    write_json_doc(doc, json_out)
    if a.json:
        print(table, file=sys.stderr)
        print(json.dumps(doc, indent=1, default=str))
    else:
        print(table)
    if a.md_out:
        a.md_out.write_text(table + "\n")


if __name__ == "__main__":
    sys.exit(main())
