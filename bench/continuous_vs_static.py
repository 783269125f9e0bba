#!/usr/bin/env python3
"""Continuous vs static batching on one mixed-length workload, and why the ratio is what it is.

  bench/continuous_vs_static.py                       # Gemma 3 270M, 3 rounds (~15 min on 2 cores)
  bench/continuous_vs_static.py --rounds 1 --static-seqs 16 --curve 1,16,48
  bench/continuous_vs_static.py --model other.gguf --json-out /tmp/cvs.json

Every run is `pagoda bench throughput --json` on the same generated workload (default: 128
requests queued at once, prompts of 128 tokens, outputs drawn from an exponential with mean
128 clamped to 16-512, greedy, EOS ignored, 180 MiB of FP16 KV, 2 threads):
  static      --scheduler static --max-num-seqs S  for each S in --static-seqs: a batch is
              admitted whole into a KV rectangle and runs until its longest request ends
              (finished rows computed as padding). The best S is the baseline.
  continuous  --scheduler continuous --max-num-seqs C  for each C in --continuous-seqs.
  prefill     as many prompts of the same length with one output token each (continuous):
              the prefill work, which both schedulers do alike.
Rounds alternate the order of the runs; the table quotes medians.

Then the decode step cost against the number of sequences in the step (--curve): N requests
all running together (--max-num-seqs N, 1 GiB of KV, every prompt prefilled in the first
step), each decoding 128 tokens after a prompt of --input-len + --output-len / 2 tokens, so
that the attention reads as many positions as the workload's decodes do on average (an
exponential's tokens sit at half its mean squared over its mean into the output, i.e. at
its mean); TPOT p50 is the time of one step of N decodes. On a GPU that cost is nearly flat in N
(decode reads the weights once per step, memory bound), so packing more sequences into a
step is nearly free and continuous batching wins by its occupancy. On a CPU of two cores the
step is compute bound past a handful of sequences and costs about the same per sequence
whatever the batch, so continuous batching wins by the padding it does not compute and
little else, and the shared prefill dilutes that. The script prints the bound this implies:
  ideal continuous time = prefill + output tokens x (cheapest ms per sequence on the curve)
  bound = best static time / ideal continuous time
which no scheduler can beat on this machine, whatever its overheads. It is optimistic: it
prices every token at the cheapest batch, while the KV budget caps the batch (180 MiB holds
~35 of these sequences) and the last requests drain in small batches.

Exit status 0 when every run worked, 1 when one failed, 2 on a setup error.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def default_model() -> Path:
    cache = Path(os.environ.get("PAGODA_CACHE", Path.home() / ".cache" / "pagoda"))
    return cache / "models" / "gemma-3-270m-q4_k_m.gguf"


def run_bench(pagoda: Path, args: list[str], timeout: float) -> dict | None:
    cmd = [str(pagoda), "bench", "throughput", *args, "--json"]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"timed out: {' '.join(cmd)}", file=sys.stderr)
        return None
    if p.returncode != 0:
        print(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}", file=sys.stderr)
        return None
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        print(f"no JSON from: {' '.join(cmd)}\n{p.stdout[-2000:]}", file=sys.stderr)
        return None


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=str(ROOT / "build"))
    ap.add_argument("--model", default=str(default_model()))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv-cache-memory", default="180M")
    ap.add_argument("--num-prompts", type=int, default=128)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128, help="mean of the exponential")
    ap.add_argument("--output-min", type=int, default=16)
    ap.add_argument("--output-max", type=int, default=512)
    ap.add_argument("--ctx-size", type=int, default=1024)
    ap.add_argument("--static-seqs", default="8,16,64")
    ap.add_argument("--continuous-seqs", default="48")
    ap.add_argument("--curve", default="1,8,16,32,48,64", help="sequences per step for the cost curve ('' skips it)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json-out")
    a = ap.parse_args()
    if not ints(a.continuous_seqs) or not ints(a.static_seqs):
        ap.error("--static-seqs and --continuous-seqs need at least one value each")

    pagoda = Path(a.build_dir) / "bin" / "pagoda"
    model = Path(a.model)
    if not pagoda.exists():
        print(f"no {pagoda}: build first (ninja -C build pagoda)", file=sys.stderr)
        return 2
    if not model.exists():
        print(f"no model at {model}: scripts/fetch_model fetches the default one", file=sys.stderr)
        return 2

    workload = ["-m", str(model), "--num-prompts", str(a.num_prompts), "--input-len", str(a.input_len),
                "-c", str(a.ctx_size), "-t", str(a.threads), "--kv-cache-memory", a.kv_cache_memory]
    outputs = ["--output-dist", "exp", "--output-len", str(a.output_len), "--output-min", str(a.output_min),
               "--output-max", str(a.output_max)]
    configs = [(f"static {s}", workload + outputs + ["--scheduler", "static", "--max-num-seqs", str(s)])
               for s in ints(a.static_seqs)]
    configs += [(f"continuous {c}", workload + outputs + ["--scheduler", "continuous", "--max-num-seqs", str(c)])
                for c in ints(a.continuous_seqs)]
    configs.append(("prefill", workload + ["--output-len", "1", "--range-ratio", "0",
                                           "--max-num-seqs", str(max(ints(a.continuous_seqs)))]))
    results: dict[str, list[dict]] = {name: [] for name, _ in configs}
    failed = False
    for r in range(a.rounds):
        order = configs if r % 2 == 0 else list(reversed(configs))
        for name, args in order:
            res = run_bench(pagoda, args, a.timeout)
            print(f"round {r + 1}/{a.rounds} {name}: "
                  + (f"{res['seconds']:.2f} s, {res['requests_per_second']:.2f} req/s" if res else "error"),
                  file=sys.stderr, flush=True)
            if res is None:
                failed = True
            else:
                results[name].append(res)

    curve: dict[int, list[dict]] = {}
    curve_prompt = a.input_len + a.output_len // 2
    for n in ints(a.curve):
        args = ["-m", str(model), "--num-prompts", str(n), "--input-len", str(curve_prompt), "--range-ratio", "0",
                "--output-len", "128", "-c", str(curve_prompt + 144), "-t", str(a.threads),
                "--kv-cache-memory", "1G", "--max-num-seqs", str(n),
                "--max-num-batched-tokens", str(n * curve_prompt)]
        for _ in range(a.rounds):
            res = run_bench(pagoda, args, a.timeout)
            if res is None:
                failed = True
            else:
                curve.setdefault(n, []).append(res)

    def col(name: str, key: str) -> float:
        return med([x[key] for x in results[name]])

    def pct(name: str, key: str, p: str) -> float:
        return med([x[key][p] for x in results[name]])

    print("| run | time s | req/s | output tok/s | TTFT p99 s | TPOT p50 ms | steps | KV waste steady | preemptions |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, _ in configs:
        if not results[name]:
            print(f"| {name} | error | | | | | | | |")
            continue
        print(f"| {name} | {col(name, 'seconds'):.2f} | {col(name, 'requests_per_second'):.2f} | "
              f"{col(name, 'output_tokens_per_second'):.1f} | {pct(name, 'ttft_ms', 'p99') / 1000:.1f} | "
              f"{pct(name, 'tpot_ms', 'p50'):.2f} | {col(name, 'steps'):.0f} | "
              f"{100 * col(name, 'kv_waste_steady'):.2f}% | {col(name, 'preemptions'):.0f} |")
    statics = [n for n, _ in configs if n.startswith("static") and results[n]]
    conts = [n for n, _ in configs if n.startswith("continuous") and results[n]]
    summary: dict = {"runs": results, "curve": {str(k): v for k, v in curve.items()}}
    if statics and conts:
        best_s = min(statics, key=lambda n: col(n, "seconds"))
        best_c = min(conts, key=lambda n: col(n, "seconds"))
        ts, tc = col(best_s, "seconds"), col(best_c, "seconds")
        print(f"\ncontinuous vs static (best of each): {ts / tc:.2f}x throughput ({best_c} vs {best_s}); "
              f"p99 TTFT {pct(best_c, 'ttft_ms', 'p99') / 1000:.1f} s vs {pct(best_s, 'ttft_ms', 'p99') / 1000:.1f} s")
        summary.update(best_static=best_s, best_continuous=best_c, ratio=ts / tc)
        if results["prefill"] and col("prefill", "seconds") < tc:
            tp = col("prefill", "seconds")
            print(f"prefill alone {tp:.2f} s; without it the decode phase runs {(ts - tp) / (tc - tp):.2f}x faster")
            summary.update(prefill_seconds=tp, decode_ratio=(ts - tp) / (tc - tp))
            if curve:
                per_row = {n: med([x["tpot_ms"]["p50"] for x in v]) / n for n, v in curve.items()}
                print("\n| sequences per step | step ms (TPOT p50) | ms per sequence |")
                print("| ---: | ---: | ---: |")
                for n in sorted(per_row):
                    print(f"| {n} | {per_row[n] * n:.2f} | {per_row[n]:.3f} |")
                cheapest = min(per_row.values())
                out_tokens = col(best_c, "output_tokens")
                ideal = tp + out_tokens * cheapest / 1000
                print(f"\nideal continuous time = {tp:.2f} s prefill + {out_tokens:.0f} tokens x {cheapest:.3f} ms = "
                      f"{ideal:.2f} s; bound on the ratio = {ts:.2f} / {ideal:.2f} = {ts / ideal:.2f}x "
                      f"(measured {ts / tc:.2f}x)")
                summary.update(ideal_continuous_seconds=ideal, bound=ts / ideal)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(summary, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
