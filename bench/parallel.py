#!/usr/bin/env python3
"""Tensor and pipeline parallelism on one box: `pagoda bench throughput` as one process with
T threads against the same model split over processes with mpirun (--tp, --pp), in
alternating rounds. Per configuration: output tokens/s, its ratio to one process, the
bytes every rank sent per token, the largest share of the run a rank spent waiting in
transfers, and each rank's peak RSS.

  bench/parallel.py -m MODEL.gguf [--streams 1 8] [--rounds 3] [--threads 2]
  scripts/netns_cluster up 1000 && bench/parallel.py -m MODEL.gguf --mpirun "scripts/netns_cluster mpirun" \
      --mpi-args ""   (two hosts with 1 ms between them; docs/parallel.md)

Other load: the cores other processes kept busy during each run (/proc/stat minus this
script's children), the maximum over the rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MPI_ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1"}


def busy_seconds() -> float:
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def children_seconds() -> float:
    t = os.times()
    return t.children_user + t.children_system


def run(cmd: list[str], env) -> tuple[dict, float]:
    b0, c0 = busy_seconds(), children_seconds()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr[-3000:]}")
    b1, c1 = busy_seconds(), children_seconds()
    j = json.loads(r.stdout)
    return j, max(0.0, (b1 - b0) - (c1 - c0)) / j["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--pagoda", default=str(REPO / "build" / "bin" / "pagoda"))
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--modes", nargs="+", default=["one", "tp2", "pp2"],
                    help="one (one process), tpN, ppN, tpNppM, spN")
    ap.add_argument("--threads", type=int, default=2, help="threads of the one process (each rank gets threads/ranks)")
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mpirun", default="mpirun", help="the launcher, e.g. 'scripts/netns_cluster mpirun' (two hosts)")
    ap.add_argument("--mpi-args", default="--bind-to core", help="extra mpirun arguments (hosts, transports)")
    ap.add_argument("--prefix", default="", help="command prefix for every run (e.g. ip netns exec NS)")
    ap.add_argument("--json-out")
    a = ap.parse_args()

    def command(mode: str, streams: int) -> list[str]:
        work = [a.pagoda, "bench", "throughput", "-m", a.model, "--num-prompts", str(streams), "--input-len",
                str(a.input_len), "--output-len", str(a.output_len), "--max-num-seqs", str(max(streams, 1)), "--json"]
        prefix = shlex.split(a.prefix)
        if mode == "one":
            return prefix + work + ["-t", str(a.threads)]
        tp = int(mode.split("tp")[1].split("pp")[0]) if "tp" in mode else 1
        pp = int(mode.split("pp")[1]) if "pp" in mode else 1
        sp = int(mode.split("sp")[1]) if "sp" in mode else 1
        ranks = tp * pp * sp
        return prefix + [*shlex.split(a.mpirun), "-np", str(ranks), *shlex.split(a.mpi_args)] + work + \
            ["-t", str(max(1, a.threads // ranks)), "--tp", str(tp), "--pp", str(pp), "--sp", str(sp)]

    runs = []
    for rnd in range(a.rounds):
        for streams in a.streams:
            for mode in a.modes:
                j, other = run(command(mode, streams), MPI_ENV)
                par = j.get("parallel", {})
                row = {"round": rnd, "mode": mode, "streams": streams, "tok_s": j["output_tokens_per_second"],
                       "tpot_p50_ms": j["tpot_ms"]["p50"], "ttft_p50_ms": j["ttft_ms"]["p50"], "other_cores": other,
                       "bytes_per_token": par.get("bytes_sent_per_token", 0.0),
                       "comm_share": par.get("comm_share_max", 0.0),
                       "rss_mib": [r["peak_rss_bytes"] / 2**20 for r in par["ranks"]] if par
                       else [j["peak_rss_bytes"] / 2**20]}
                runs.append(row)
                print(f"round {rnd} {mode:8s} {streams:2d} streams {row['tok_s']:8.2f} tok/s  "
                      f"TTFT {row['ttft_p50_ms']:8.1f} ms  "
                      f"comm {100 * row['comm_share']:5.1f}%  {row['bytes_per_token'] / 1024:8.1f} KiB/token  "
                      f"RSS {'/'.join(f'{x:.0f}' for x in row['rss_mib'])} MiB  other {other:.2f}", flush=True)
    print()
    print("| streams | mode | tok/s (median) | vs one process | TTFT p50 ms (median) | KiB sent per token | comm share "
          "| peak RSS per rank (MiB) | other load (cores, max) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    summary = []
    for streams in a.streams:
        base = statistics.median(r["tok_s"] for r in runs if r["mode"] == "one" and r["streams"] == streams) \
            if "one" in a.modes else None
        for mode in a.modes:
            rs = [r for r in runs if r["mode"] == mode and r["streams"] == streams]
            med = statistics.median(r["tok_s"] for r in rs)
            row = {"streams": streams, "mode": mode, "tok_s": med, "ratio": med / base if base else None,
                   "bytes_per_token": statistics.median(r["bytes_per_token"] for r in rs),
                   "comm_share": statistics.median(r["comm_share"] for r in rs),
                   "ttft_ms": statistics.median(r["ttft_p50_ms"] for r in rs),
                   "rss_mib": rs[-1]["rss_mib"], "other_cores": max(r["other_cores"] for r in rs)}
            summary.append(row)
            ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "-"
            print(f"| {streams} | {mode} | {med:.2f} | {ratio} | {row['ttft_ms']:.1f} | {row['bytes_per_token'] / 1024:.1f} | "
                  f"{100 * row['comm_share']:.1f}% | {' / '.join(f'{x:.0f}' for x in row['rss_mib'])} | "
                  f"{row['other_cores']:.2f} |")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"runs": runs, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
