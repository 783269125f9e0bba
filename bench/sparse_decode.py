#!/usr/bin/env python3
"""2:4 sparse formats against their dense formats, side by side: decode and prefill speed.

  python3 bench/sparse_decode.py                       # 1B and 7B shapes, Q8_0 and Q4_0
  python3 bench/sparse_decode.py --shapes 1b --rounds 5 --pairs q8_0

For each shape (bench/compare_llamacpp.py's generated llama shapes: 1B = 2048 wide, 16
layers; 7B = 4096 wide, 32 layers) and dense format, the dense model is generated once
into the cache (random weights), and its 2:4 sparse copy written by
`pagoda quantize DENSE SPARSE --type T --sparsity 2:4 --allow-requantize` (magnitude; the
token embedding and output matrix stay dense, as every --sparsity file has them). Each
round runs `pagoda bench -p P -n N -r 1` on both, the order swapped every round so drift of
the shared machine's bandwidth falls on both. The table: median tokens/s, the ratio
sparse/dense (of the medians and paired per round), the weight bytes each decoded token
reads (every 2-D tensor but the token embedding, whose one row per token is negligible)
and their ratio, with the other load seen during the run. Random weights decode like
real ones: the speed depends on the bytes and the kernels, not the values.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_llamacpp as cl  # noqa: E402

SHAPES = {"1b": cl.SHAPE_1B, "7b": cl.SHAPE_7B}
SPARSE = {"q8_0": "Q8_0_S24", "q4_0": "Q4_0_S24"}


def decode_bytes(pagoda: Path, model: Path) -> int:
    """Bytes of the 2-D weights a decoded token reads: `pagoda inspect --all-tensors` sizes."""
    out = subprocess.run([str(pagoda), "inspect", "--all-tensors", str(model)], capture_output=True, text=True,
                         check=True).stdout
    units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    total = 0.0
    for m in re.finditer(r"^\s+(\S+)\s+\S+\s+\[([0-9, ]+)\]\s+([0-9.]+) (B|KiB|MiB|GiB)$", out, re.M):
        name, shape = m.group(1), [int(v) for v in m.group(2).split(",")]
        if name == "token_embd.weight" or sum(1 for v in shape if v > 1) < 2:
            continue
        total += float(m.group(3)) * units[m.group(4)]
    return int(total)


def sparse_model(pagoda: Path, dense: Path, typ: str) -> Path:
    dest = dense.with_name(dense.stem + "-s24.gguf")
    if cl.is_gguf(dest):
        return dest
    tmp = dest.with_name(dest.name + ".tmp.gguf")
    cmd = [str(pagoda), "quantize", str(dense), str(tmp), "--type", typ, "--sparsity", "2:4", "--allow-requantize"]
    cl.log(f"writing {dest.name} (once): {' '.join(cmd)}")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    tmp.replace(dest)
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=Path, default=cl.REPO / "build")
    ap.add_argument("--shapes", default="1b,7b")
    ap.add_argument("--pairs", default="q8_0,q4_0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("--json-out", type=Path)
    a = ap.parse_args()
    a.depth, a.pagoda_args = 0, ""
    pagoda = cl.snapshot_pagoda(a.build)[0]
    models = {}
    for shape in a.shapes.split(","):
        for pair in a.pairs.split(","):
            spec = cl.RowSpec(f"{shape}-{pair}", "gen", pair.upper(), SHAPES[shape])
            dense = cl.make_model(spec, a.build, regen=False, gen_threads=a.threads)
            models[(shape, pair)] = {"dense": dense, "sparse": sparse_model(a.build / "bin" / "pagoda", dense,
                                                                             pair.upper())}
    results: dict = {k: {"dense": {}, "sparse": {}} for k in models}
    loads = []
    for rnd in range(a.rounds):
        for key, paths in models.items():
            order = ("dense", "sparse") if rnd % 2 == 0 else ("sparse", "dense")
            for which in order:
                load = cl.other_load(0.5)
                if load is not None:
                    loads.append(load)
                tps, _ = cl.run_pagoda(pagoda, paths[which], a, timeout=3600)
                for test, v in tps.items():
                    results[key][which].setdefault(test, []).append(v)
                cl.log(f"round {rnd + 1} {key[0]} {key[1]} {which}: " + ", ".join(f"{k} {v:.1f}" for k, v in tps.items()))
    print("| shape | format | test | dense t/s | 2:4 t/s | 2:4/dense of medians | paired median (range) "
          "| decode bytes dense / 2:4 |")
    print("| --- | --- | --- | ---: | ---: | ---: | --- | --- |")
    table = []
    for key, paths in models.items():
        db, sb = decode_bytes(a.build / "bin" / "pagoda", paths["dense"]), decode_bytes(a.build / "bin" / "pagoda",
                                                                                          paths["sparse"])
        for test in results[key]["dense"]:
            d, s = results[key]["dense"][test], results[key]["sparse"].get(test, [])
            paired = [y / x for x, y in zip(d, s)]
            row = {"shape": key[0], "format": key[1], "test": test, "dense": statistics.median(d),
                   "sparse": statistics.median(s), "paired": paired, "bytes_dense": db, "bytes_sparse": sb}
            table.append(row)
            print(f"| {key[0]} | {key[1].upper()} vs {SPARSE[key[1]]} | {test} | {row['dense']:.1f} | {row['sparse']:.1f} "
                  f"| {row['sparse'] / row['dense']:.2f}x | {statistics.median(paired):.2f}x "
                  f"({min(paired):.2f}-{max(paired):.2f}) | {db / 2**20:.0f} / {sb / 2**20:.0f} MiB = {db / sb:.2f}x |")
    if loads:
        print(f"\nother load during the run: median {statistics.median(loads):.2f} cores, max {max(loads):.2f}; "
              f"{a.rounds} rounds, -p {a.n_prompt} -n {a.n_gen}, {a.threads} threads")
    if a.json_out:
        a.json_out.write_text(json.dumps({"rows": table, "other_load": loads, "time": time.time()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
