#!/usr/bin/env python3
"""What structured output costs: decode throughput of C concurrent JSON-schema-constrained
requests against the same requests unconstrained, on Pagoda and on llama.cpp's
llama-server side by side (issue 18's bar: Pagoda constrained >= 0.9x unconstrained with
16 requests on Gemma 3 270M, whose 262k-token vocabulary makes every mask wide).

  bench/structured_output_cost.py                     # Gemma 3 270M, 16 requests, 3 rounds
  bench/structured_output_cost.py --rounds 1 --max-tokens 64   # a quick look

The workload, per engine and mode: C (--concurrency) /v1/completions requests at once,
each the same short prompt asking for a list of people, --max-tokens tokens, temperature
0.8 with seed i for request i, ignore_eos (so unconstrained requests run to max_tokens),
and, constrained, the field both servers take for a schema, `json_schema`: an array of at
least 100 {name, age, city} objects, which no request can finish within max_tokens, so
both modes produce the same number of tokens. Throughput = completion tokens / wall time
of the batch (the prompts are a few tokens: prefill is one short step). Each round starts
each server fresh, sends one warm-up request per mode (the grammar is compiled and cached
then, as a server that serves one schema many times would have it), then runs
unconstrained and constrained batches in an order that alternates with the round, as does
which engine goes first. Pagoda's /metrics gives the mask time per constrained token
(pagoda:structured_output_mask_seconds: mean exact, p50/p99 interpolated in its buckets).

Servers: `pagoda serve -m M -t TH --max-num-seqs C -c CTX` (engine `pagoda-noff`: the
same with --no-grammar-fast-forward, tokens the grammar forces sampled one by one) and `llama-server -m M -t TH
-np C -c C*CTX --no-webui` (CTX 512). Reported: medians over rounds, the ratio
constrained/unconstrained per engine, the load average seen. JSON to --json-out
(default $PAGODA_CACHE/bench-results/structured-<time>.json).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_llamacpp as cl  # noqa: E402
import compare_serving as cs  # noqa: E402

SCHEMA = {"type": "array", "minItems": 100, "items": {
    "type": "object", "additionalProperties": False, "required": ["name", "age", "city"],
    "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0,
                                                                          "maximum": 120},
                   "city": {"type": "string", "maxLength": 24}}}}
PROMPT = "Here is a JSON list of 100 people with their name, age and city:\n"


def log(msg: str) -> None:
    print(f"[structured] {msg}", file=sys.stderr, flush=True)


def post(base: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def batch(base: str, constrained: bool, a) -> dict:
    def one(i: int) -> int:
        body = {"prompt": PROMPT, "max_tokens": a.max_tokens, "temperature": 0.8, "seed": 1000 + i,
                "ignore_eos": True}
        if constrained:
            body["json_schema"] = SCHEMA
        r = post(base, body, a.timeout)
        text = r["choices"][0]["text"]
        if constrained and not text.lstrip().startswith("["):
            raise RuntimeError(f"a constrained reply does not start a JSON array: {text[:80]!r}")
        return int(r["usage"]["completion_tokens"])
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(a.concurrency) as pool:
        tokens = list(pool.map(one, range(a.concurrency)))
    wall = time.monotonic() - t0
    return {"tokens": sum(tokens), "wall_s": wall, "tok_s": sum(tokens) / wall, "per_request": tokens}


def mask_histogram(base: str) -> dict:
    """Bucket bounds -> cumulative counts, plus sum and count, of pagoda's mask histogram."""
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    h = {"buckets": [], "sum": 0.0, "count": 0}
    for line in text.splitlines():
        if line.startswith("pagoda:structured_output_mask_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            h["buckets"].append((float("inf") if le == "+Inf" else float(le), int(float(line.split()[-1]))))
        elif line.startswith("pagoda:structured_output_mask_seconds_sum"):
            h["sum"] = float(line.split()[-1])
        elif line.startswith("pagoda:structured_output_mask_seconds_count"):
            h["count"] = int(float(line.split()[-1]))
    return h


def quantile(h: dict, q: float) -> float | None:
    """histogram_quantile as Prometheus computes it: linear within the bucket."""
    if h["count"] == 0:
        return None
    rank, prev_le, prev_c = q * h["count"], 0.0, 0
    for le, c in h["buckets"]:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_c) / max(1, c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def diff(after: dict, before: dict) -> dict:
    b = dict(before["buckets"])
    return {"buckets": [(le, c - b.get(le, 0)) for le, c in after["buckets"]], "sum": after["sum"] - before["sum"],
            "count": after["count"] - before["count"]}


def run_engine(engine: str, a, model: Path, llama_bin: Path, pagoda: Path, rnd: int, logs: Path) -> dict:
    port = cs.free_port()
    if engine.startswith("pagoda"):
        cmd = [str(pagoda), "serve", "-m", str(model), "-t", str(a.threads), "--max-num-seqs", str(a.concurrency),
               "-c", str(a.ctx), "--host", "127.0.0.1", "--port", str(port)]
        if engine == "pagoda-noff":
            cmd.append("--no-grammar-fast-forward")
    else:
        cmd = [str(llama_bin / "llama-server"), "-m", str(model), "-t", str(a.threads), "-np", str(a.concurrency),
               "-c", str(a.concurrency * a.ctx), "--host", "127.0.0.1", "--port", str(port), "--no-webui"]
    server = cs.Server(engine, cmd, port, logs / f"{engine}-round{rnd}.log")
    out: dict = {"cmd": cmd}
    try:
        out["start_s"] = server.start(a.timeout)
        for constrained in (False, True):  # warm-up: the schema compiled once, as a busy server has it
            body = {"prompt": PROMPT, "max_tokens": 4, "temperature": 0}
            if constrained:
                body["json_schema"] = SCHEMA
            post(server.base, body, a.timeout)
        order = (False, True) if rnd % 2 == 0 else (True, False)
        for constrained in order:
            before = mask_histogram(server.base) if engine.startswith("pagoda") else None
            load0 = os.getloadavg()[0]
            r = batch(server.base, constrained, a)
            r["loadavg_1m_before"] = load0
            if before is not None and constrained:
                h = diff(mask_histogram(server.base), before)
                r["mask"] = {"count": h["count"], "mean_s": h["sum"] / h["count"] if h["count"] else None,
                             "p50_s": quantile(h, 0.5), "p99_s": quantile(h, 0.99)}
            out["constrained" if constrained else "unconstrained"] = r
            log(f"round {rnd} {engine:8s} {'constrained' if constrained else 'unconstrained':13s} "
                f"{r['tok_s']:7.1f} tok/s ({r['tokens']} tokens in {r['wall_s']:.1f} s)")
    finally:
        server.stop()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=cl.CACHE / "models" / "gemma-3-270m-q4_k_m.gguf")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=192)
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--build-dir", type=Path, default=cl.REPO / "build")
    p.add_argument("--llamacpp-bin", type=Path, help="folder with llama-server (default: scripts/build_llamacpp's)")
    p.add_argument("--engines", default="pagoda,llamacpp")
    p.add_argument("--json-out", type=Path)
    a = p.parse_args()
    if not a.model.exists():
        log(f"{a.model} missing: scripts/fetch_model fetches Gemma 3 270M")
        return 2
    pagoda = a.build_dir / "bin" / "pagoda"
    engines = a.engines.split(",")
    llama_bin = a.llamacpp_bin
    if "llamacpp" in engines and llama_bin is None:
        env = dict(os.environ, LLAMACPP_TARGETS=os.environ.get("LLAMACPP_TARGETS", "llama llama-server"))
        llama_bin = Path(cl.last_line([str(cl.REPO / "scripts" / "build_llamacpp")], "build_llamacpp", env=env))
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    json_out = a.json_out or cl.RESULTS / f"structured-{stamp}.json"
    logs = json_out.with_suffix("").with_name(json_out.stem + "-logs")
    doc = {"args": {k: str(v) for k, v in vars(a).items()}, "schema": SCHEMA, "prompt": PROMPT,
           "machine": cl.machine_info(a.build_dir, llama_bin or a.build_dir), "rounds": []}
    for rnd in range(a.rounds):
        order = engines if rnd % 2 == 0 else list(reversed(engines))
        doc["rounds"].append({e: run_engine(e, a, a.model, llama_bin, pagoda, rnd, logs) for e in order})
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(doc, indent=1))
    print(f"\n{a.concurrency} concurrent requests x {a.max_tokens} tokens, {a.model.name}, {a.rounds} rounds "
          f"(medians)\n")
    print("| engine | unconstrained tok/s | constrained tok/s | constrained / unconstrained | mask p50 | mask p99 | mask mean |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    summary = {}
    for e in engines:
        u = statistics.median(r[e]["unconstrained"]["tok_s"] for r in doc["rounds"])
        c = statistics.median(r[e]["constrained"]["tok_s"] for r in doc["rounds"])
        ratio = statistics.median(r[e]["constrained"]["tok_s"] / r[e]["unconstrained"]["tok_s"] for r in doc["rounds"])
        masks = [r[e]["constrained"].get("mask") for r in doc["rounds"] if r[e]["constrained"].get("mask")]
        def ms(key):
            vals = [m[key] for m in masks if m.get(key) is not None]
            return f"{statistics.median(vals) * 1e3:.3f} ms" if vals else "n/a"
        summary[e] = {"unconstrained_tok_s": u, "constrained_tok_s": c, "ratio": ratio}
        print(f"| {cs.ENGINE_NAMES.get(e, e)} | {u:.1f} | {c:.1f} | {ratio:.3f} | {ms('p50_s')} | {ms('p99_s')} | "
              f"{ms('mean_s')} |")
    doc["summary"] = summary
    json_out.write_text(json.dumps(doc, indent=1))
    print(f"\nloadavg now {os.getloadavg()[0]:.2f}; JSON: {json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
