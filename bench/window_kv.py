#!/usr/bin/env python3
"""Sliding-window layers holding only their window (the default) against every layer
keeping every position (--disable-hybrid-kv-cache-manager), on one long-context workload.

  bench/window_kv.py                      # Gemma 3 270M, 2 rounds (~4 min on 2 cores)
  bench/window_kv.py --rounds 3 --kv-cache-memory 300M --input-len 4096

Each run is `pagoda bench throughput --json`: --num-prompts requests of --input-len tokens
queued at once, each generating --output-len tokens (greedy, EOS ignored), in a KV budget
too small for all of them at once, so the number of sequences that fit decides the time.
Rounds alternate the order of the two runs; the table quotes medians. Before the runs,
`pagoda inspect` gives the KV one sequence of --ctx-size positions needs either way.

A model without sliding-window layers runs the same both ways (nothing is released).
Exit status 0 when every run worked, 1 when one failed, 2 on a setup error.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from continuous_vs_static import ROOT, default_model, med, run_bench  # noqa: E402

RUNS = {"windowed": [], "every position": ["--disable-hybrid-kv-cache-manager"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build")
    ap.add_argument("--model", type=Path, default=default_model())
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv-cache-memory", default="150M")
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--input-len", type=int, default=2048)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--ctx-size", type=int, default=32768, help="context of the one-sequence KV estimate")
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    pagoda = a.build_dir / "bin" / "pagoda"
    if not pagoda.exists():
        print(f"{pagoda} not found: build first (scripts/build)", file=sys.stderr)
        return 2
    if not a.model.exists():
        print(f"{a.model} not found (scripts/fetch_model fetches the default model)", file=sys.stderr)
        return 2

    p = subprocess.run([str(pagoda), "inspect", str(a.model), "-c", str(a.ctx_size)], capture_output=True, text=True)
    line = next((x for x in p.stdout.splitlines() if x.startswith("memory at ctx")), "")
    print(line or f"inspect printed no memory line (exit {p.returncode})")
    m = re.search(r"KV cache ([0-9.]+ [KMGT]?i?B) .*?, ([0-9.]+ [KMGT]?i?B) for all positions", line)
    if m:
        print(f"one sequence of {a.ctx_size} positions: {m.group(1)} windowed, {m.group(2)} keeping every position")

    ctx = a.input_len + a.output_len
    common = ["-m", str(a.model), "--num-prompts", str(a.num_prompts), "--input-len", str(a.input_len),
              "--range-ratio", "0", "--output-len", str(a.output_len), "-c", str(ctx), "-t", str(a.threads),
              "--kv-cache-memory", a.kv_cache_memory]
    results: dict[str, list[dict]] = {name: [] for name in RUNS}
    failed = False
    for r in range(a.rounds):
        order = list(RUNS) if r % 2 == 0 else list(reversed(RUNS))
        for name in order:
            j = run_bench(pagoda, common + RUNS[name], a.timeout)
            if j is None:
                failed = True
                continue
            results[name].append(j)
            print(f"round {r + 1}/{a.rounds} {name}: {j['seconds']:.2f} s, {j['preemptions']} preemptions",
                  file=sys.stderr)

    print(f"\n{a.num_prompts} requests of {a.input_len} + {a.output_len} tokens, {a.kv_cache_memory} of KV, "
          f"{a.threads} threads; medians of {a.rounds} rounds")
    print("| KV of sliding-window layers | time s | requests/s | output tok/s | TTFT p99 s | KV blocks "
          "| preemptions |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, js in results.items():
        if not js:
            continue
        print(f"| {name} | {med([j['seconds'] for j in js]):.2f} | {med([j['requests_per_second'] for j in js]):.3f} "
              f"| {med([j['output_tokens_per_second'] for j in js]):.1f} "
              f"| {med([j['ttft_ms']['p99'] for j in js]) / 1000:.1f} | {js[0]['kv_blocks']} "
              f"| {med([j['preemptions'] for j in js]):.0f} |")
    if all(results.values()):
        w, e = (med([j["seconds"] for j in results[n]]) for n in RUNS)
        print(f"\nwindowed vs every position: {e / w:.2f}x throughput")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
