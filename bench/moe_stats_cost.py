#!/usr/bin/env python3
"""What the always-on expert statistics cost: decode speed of one MoE model with them on and
off (PAGODA_MOE_STATS=0), the same binary, alternating rounds, medians.

  bench/moe_stats_cost.py [--build build] [--model PATH] [--rounds 8] [-n 128] [-t 2]

The default model is compare_llamacpp.py's mixtral-q4_k row (generated once). Each round
runs `pagoda bench -p 0 -n N -r 3 --json` once with the statistics on and once off, in
alternating order; the cost is 1 - median(on) / median(off), with the per-round ratios'
spread and the other CPU load seen. The issue's bar: at most 1% of decode time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_llamacpp as cl  # noqa: E402


def tg(pagoda: Path, model: Path, n: int, threads: int, on: bool) -> float:
    env = dict(os.environ, PAGODA_MOE_STATS="1" if on else "0")
    r = subprocess.run([str(pagoda), "bench", "-m", str(model), "-p", "0", "-n", str(n), "-r", "3", "-t", str(threads),
                        "--json"], capture_output=True, text=True, env=env, timeout=1800, check=True)
    return float(json.loads(r.stdout)[0]["tokens_per_second_median"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=Path, default=cl.REPO / "build")
    ap.add_argument("--model", type=Path)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    model = a.model or cl.make_model(cl.ROWS["mixtral-q4_k"], a.build, False, a.threads)
    pagoda = a.build / "bin" / "pagoda"
    on, off, ratios, load = [], [], [], []
    for r in range(a.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        got = {}
        for flag in order:
            got[flag] = tg(pagoda, model, a.n, a.threads, flag)
            load.append(cl.other_load(0.5) or 0.0)
        on.append(got[True])
        off.append(got[False])
        ratios.append(got[True] / got[False])
        print(f"round {r + 1}/{a.rounds}: on {got[True]:.2f}  off {got[False]:.2f} tok/s  ratio {ratios[-1]:.4f}",
              file=sys.stderr)
    m_on, m_off = statistics.median(on), statistics.median(off)
    print(json.dumps({"model": str(model), "rounds": a.rounds, "n_gen": a.n, "threads": a.threads,
                      "tg_on_median": m_on, "tg_off_median": m_off, "cost": 1.0 - m_on / m_off,
                      "round_ratios": ratios, "max_other_load": max(load)}, indent=2))
    print(f"expert statistics cost {100 * (1 - m_on / m_off):+.2f}% of decode speed (on {m_on:.2f}, off {m_off:.2f} "
          f"tok/s; round ratios {min(ratios):.4f}..{max(ratios):.4f}; other load up to {max(load):.2f} cores)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
