#!/usr/bin/env python3
"""Two Pagoda builds side by side, alternating rounds: did a change keep the speed?

  python3 bench/compare_builds.py --old OLD_BUILD --new build --rows gemma,1b-q4_0,1b-q4_k,7b-q4_0

Each round runs `pagoda bench -p P -n N -r 1` of both builds on each row, the order of the
two swapped every round so drift in the shared machine's bandwidth falls on both. The
table gives the median tokens/s of each build and the ratio new/old per test, with the
other load seen on the machine during the run. Rows and their models are those of
bench/compare_llamacpp.py (generated once into the cache, Gemma fetched). Both binaries
are copied into the cache first, so a rebuild meanwhile changes nothing.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_llamacpp as cl  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="the baseline build folder")
    ap.add_argument("--new", type=Path, default=cl.REPO / "build", help="the changed build folder")
    ap.add_argument("--rows", default="gemma,1b-q4_0,1b-q4_k,7b-q4_0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--json-out", type=Path)
    a = ap.parse_args()
    a.depth, a.pagoda_args = 0, ""
    bins = {"old": cl.snapshot_pagoda(a.old)[0], "new": cl.snapshot_pagoda(a.new)[0]}
    rows = [cl.ROWS[r] for r in a.rows.split(",")]
    models = {r.name: cl.make_model(r, a.new, regen=False, gen_threads=a.threads) for r in rows}
    results: dict = {r.name: {"old": {}, "new": {}} for r in rows}
    loads = []
    for rnd in range(a.rounds):
        for r in rows:
            order = ("old", "new") if rnd % 2 == 0 else ("new", "old")
            for which in order:
                load = cl.other_load(0.5)
                if load is not None:
                    loads.append(load)
                tps, _ = cl.run_pagoda(bins[which], models[r.name], a, timeout=3600)
                for test, v in tps.items():
                    results[r.name][which].setdefault(test, []).append(v)
                cl.log(f"round {rnd + 1} {r.name} {which}: " + ", ".join(f"{k} {v:.1f}" for k, v in tps.items()))
    # Paired ratios: each round's new run over the same round's old run, adjacent in time,
    # so slow drift of the shared machine cancels; their median is the headline, the
    # range says how noisy the machine was.
    print("| row | test | old t/s | new t/s | new/old of medians | median paired new/old | paired range | rounds |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for r in rows:
        for test in results[r.name]["old"]:
            olds, news = results[r.name]["old"][test], results[r.name]["new"].get(test, [])
            old, new = statistics.median(olds), statistics.median(news)
            paired = [n / o for o, n in zip(olds, news)]
            print(f"| {r.name} | {test} | {old:.1f} | {new:.1f} | {new / old:.3f} | {statistics.median(paired):.3f} | "
                  f"{min(paired):.2f}-{max(paired):.2f} | {a.rounds} |")
    if loads:
        print(f"\nother load during the run: median {statistics.median(loads):.2f} cores, max {max(loads):.2f}")
    if a.json_out:
        a.json_out.write_text(json.dumps({"results": results, "other_load": loads, "time": time.time(),
                                          "old": str(bins["old"]), "new": str(bins["new"])}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
