#!/usr/bin/env python3
"""How right `pagoda plan` is: its predicted memory and speed against what the engine then
measures, configuration by configuration, in one run (issue 20's bars: peak RSS within
max(3%, 32 MiB) for every configuration; decode within 10% and prefill within 20% for 90%
of them).

  bench/plan_accuracy.py                       # every memory and speed row
  bench/plan_accuracy.py --rows gemma,qwen-0.5b --rounds 1   # a quick look
  bench/plan_accuracy.py --no-7b               # without the generated 7B shape (3.6 GiB)

Models: the rows of bench/compare_llamacpp.py (the three real models fetched by
scripts/fetch_model, generated 1B and 7B shapes written once into
$PAGODA_CACHE/bench-models/).

Memory, per configuration (model, context C, sequences B, KV dtype):
  predicted  pagoda plan -m M -c C --max-num-seqs B --kv-cache-dtype K --hardware none --json
             -> memory.total_bytes
  measured   peak RSS (its own VmHWM, `peak_rss_bytes` of its JSON) of
             pagoda bench throughput -m M -c C --max-num-seqs B --kv-cache-dtype K
               --num-prompts B --input-len L --output-len 8 --range-ratio 0
             with L = max(8, 512 / B) so a step reaches the 512-token chunk (the largest
             scratch), and the KV cache prefaulted by the benchmark (all of it resident).
Speed, per configuration (model, depth D, KV dtype), R rounds (--rounds) alternating which
goes first:
  predicted  pagoda plan -m M --depth D --prompt 512 --n-gen 128 --json (hardware auto:
             measured once per format, cached)
  measured   pagoda bench -m M -p 512 -n 128 -d D -r 1 --json (median over rounds)
With --reprobe, each round also runs `plan --remeasure` beside the measurement (alternating
which goes first) and the prediction is the median of those: on a host whose speed drifts
between rounds (a VM whose memory bandwidth moves 1.5x from minute to minute) a probe
cached at one moment cannot match measurements taken at others.
Reported: per row predicted, measured, error; the share of rows within the bars; the
other load seen (load average). JSON to --json-out (default
$PAGODA_CACHE/bench-results/plan-<time>.json).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_llamacpp as cl  # noqa: E402

MiB = 1 << 20

# (row, ctx, max_num_seqs, kv dtype)
MEMORY_ROWS = [
    ("gemma", 2048, 1, "f16"), ("gemma", 32768, 1, "f16"), ("gemma", 8192, 16, "int8"),
    ("qwen-0.5b", 2048, 1, "f16"), ("qwen-0.5b", 32768, 1, "int8"), ("qwen-0.5b", 4096, 64, "f16"),
    ("qwen-1.5b", 2048, 1, "f16"), ("qwen-1.5b", 16384, 8, "int8"), ("qwen-1.5b", 32768, 1, "f16"),
    ("1b-q4_0", 2048, 1, "f16"), ("1b-q4_0", 8192, 32, "int8"), ("1b-q8_0", 4096, 4, "f16"),
    ("7b-q4_0", 2048, 1, "f16"), ("7b-q4_0", 4096, 4, "int8"),
]
# (row, depth, kv dtype)
SPEED_ROWS = [
    ("gemma", 0, "f16"), ("gemma", 4096, "f16"), ("qwen-0.5b", 0, "f16"), ("qwen-0.5b", 4096, "f16"),
    ("qwen-0.5b", 8192, "int8"), ("qwen-1.5b", 0, "f16"), ("qwen-1.5b", 4096, "f16"),
    ("1b-q4_0", 0, "f16"), ("1b-q4_k", 0, "f16"), ("1b-q8_0", 0, "f16"), ("1b-f16", 0, "f16"),
    ("7b-q4_0", 0, "f16"),
]


def log(msg: str) -> None:
    print(f"[plan_accuracy {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], timeout: float) -> tuple[int, str, str, int]:
    """rc, stdout, stderr, 0."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return -9, out, err, 0
    return p.returncode, out, err, 0


def plan(pagoda: Path, model: Path, args: list[str], threads: int) -> dict:
    rc, out, err, _ = run([str(pagoda), "plan", "-m", str(model), "-t", str(threads), "--json", *args], 600)
    if rc != 0:
        raise RuntimeError(f"pagoda plan failed ({rc}): {err[-2000:]}")
    return json.loads(out)


def memory_rows(a, pagoda: Path, models: dict) -> list[dict]:
    rows = []
    for name, ctx, seqs, kv in MEMORY_ROWS:
        if name not in models:
            continue
        m = models[name]
        common = ["-c", str(ctx), "--max-num-seqs", str(seqs), "--kv-cache-dtype", kv]
        p = plan(pagoda, m, [*common, "--hardware", "none"], a.threads)
        predicted = p["memory"]["total_bytes"]
        input_len = max(8, 512 // seqs)
        cmd = [str(pagoda), "bench", "throughput", "-m", str(m), *common, "--num-prompts", str(seqs),
               "--input-len", str(input_len), "--output-len", "8", "--range-ratio", "0", "-t", str(a.threads),
               "--json"]
        load0 = os.getloadavg()[0]
        rc, out, err, _ = run(cmd, a.timeout)
        if rc != 0:
            log(f"memory {name} ctx {ctx} x{seqs} {kv}: bench throughput failed ({rc})")
            continue
        # Its own VmHWM: wait4's ru_maxrss starts from the parent's high-water mark.
        rss = json.loads(out)["peak_rss_bytes"]
        err_b = predicted - rss
        ok = abs(err_b) <= max(0.03 * rss, 32 * MiB)
        r = {"row": name, "ctx": ctx, "max_num_seqs": seqs, "kv": kv, "predicted_bytes": predicted,
             "measured_peak_rss_bytes": rss, "error_bytes": err_b, "error_pct": 100.0 * err_b / rss, "within": ok,
             "plan_memory": p["memory"], "loadavg_before": load0, "cmd": cmd}
        log(f"memory {name:10s} ctx {ctx:6d} x{seqs:<3d} {kv:4s}: predicted {predicted / MiB:8.1f} MiB, "
            f"measured {rss / MiB:8.1f} MiB ({r['error_pct']:+.1f}%, {err_b / MiB:+.1f} MiB) {'ok' if ok else 'OFF'}")
        rows.append(r)
    return rows


def speed_rows(a, pagoda: Path, models: dict) -> list[dict]:
    rows = []
    for name, depth, kv in SPEED_ROWS:
        if name not in models:
            continue
        m = models[name]
        ctx = depth + 512 + 128 + 64
        plan_args = ["--depth", str(depth), "--prompt", "512", "--n-gen", "128", "-c", str(ctx),
                     "--kv-cache-dtype", kv, "--max-num-seqs", "1"]
        pl = plan(pagoda, m, plan_args, a.threads)
        meas = {"pp": [], "tg": []}
        pred = {"pp": [], "tg": []}
        loads = []

        def predict() -> None:
            q = plan(pagoda, m, [*plan_args, "--remeasure"], a.threads)
            pred["pp"].append(q["speed"]["prefill_tok_s"])
            pred["tg"].append(q["speed"]["decode_tok_s"])

        for rnd in range(a.rounds):
            loads.append(os.getloadavg()[0])
            # A fresh probe each round, taken next to the measurement and alternating which
            # goes first, so that a host whose speed drifts between rounds moves both.
            if a.reprobe and rnd % 2 == 0:
                predict()
            cmd = [str(pagoda), "bench", "-m", str(m), "-p", "512", "-n", "128", "-d", str(depth), "-r", "1",
                   "-t", str(a.threads), "--json"]
            rc, out, err, _ = run(cmd, a.timeout)
            if rc != 0:
                log(f"speed {name}: pagoda bench failed ({rc}): {err[-500:]}")
                break
            for t in json.loads(out):
                meas["pp" if t["test"].startswith("pp") else "tg"].append(t["tokens_per_second_median"])
            if a.reprobe and rnd % 2 == 1:
                predict()
        if not meas["pp"] or not meas["tg"]:
            continue
        pp, tg = statistics.median(meas["pp"]), statistics.median(meas["tg"])
        ppp, tgp = pl["speed"]["prefill_tok_s"], pl["speed"]["decode_tok_s"]
        if a.reprobe:
            ppp, tgp = statistics.median(pred["pp"]), statistics.median(pred["tg"])
        r = {"row": name, "depth": depth, "kv": kv, "predicted_pp": ppp, "measured_pp": pp,
             "pp_error_pct": 100.0 * (ppp - pp) / pp, "predicted_tg": tgp, "measured_tg": tg,
             "tg_error_pct": 100.0 * (tgp - tg) / tg, "runs": meas, "predictions": pred, "cached_prediction": {"pp": pl["speed"]["prefill_tok_s"], "tg": pl["speed"]["decode_tok_s"]},
             "loadavg": loads,
             "decode_memory_bound_share": pl["speed"]["decode_memory_bound_share"], "hardware": pl["hardware"]}
        r["pp_within"] = abs(r["pp_error_pct"]) <= 20
        r["tg_within"] = abs(r["tg_error_pct"]) <= 10
        log(f"speed {name:10s} d{depth:<5d} {kv:4s}: pp {ppp:7.1f} vs {pp:7.1f} ({r['pp_error_pct']:+.1f}%), "
            f"tg {tgp:6.1f} vs {tg:6.1f} ({r['tg_error_pct']:+.1f}%); tg measured {[round(x, 1) for x in meas['tg']]}, "
            f"predicted {[round(x, 1) for x in pred['tg']]}")
        rows.append(r)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="all", help="model rows to use (comma-separated names of compare_llamacpp.py)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--build-dir", type=Path, default=cl.REPO / "build")
    p.add_argument("--reprobe", action="store_true",
                   help="probe the machine again each round (plan --remeasure), next to the measurement, and "
                        "compare the median prediction with the median measurement")
    p.add_argument("--no-7b", action="store_true", help="leave out the generated 7B shape")
    p.add_argument("--skip", default="", help="memory,speed: parts to leave out")
    p.add_argument("--json-out", type=Path)
    a = p.parse_args()
    pagoda = a.build_dir / "bin" / "pagoda"
    wanted = {r for r, *_ in MEMORY_ROWS} | {r for r, *_ in SPEED_ROWS}
    if a.rows != "all":
        wanted &= set(a.rows.split(","))
    if a.no_7b:
        wanted = {r for r in wanted if not r.startswith("7b")}
    models = {}
    for name in sorted(wanted):
        models[name] = cl.make_model(cl.ROWS[name], a.build_dir, False, a.threads)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = a.json_out or cl.RESULTS / f"plan-{stamp}.json"
    doc = {"args": {k: str(v) for k, v in vars(a).items()}, "machine": cl.machine_info(a.build_dir, a.build_dir)}
    skip = set(a.skip.split(","))
    doc["memory"] = [] if "memory" in skip else memory_rows(a, pagoda, models)
    doc["speed"] = [] if "speed" in skip else speed_rows(a, pagoda, models)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))

    if doc["memory"]:
        print("\n| model | ctx | seqs | KV | predicted MiB | peak RSS MiB | error |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for r in doc["memory"]:
            print(f"| {r['row']} | {r['ctx']} | {r['max_num_seqs']} | {r['kv']} | {r['predicted_bytes'] / MiB:.1f} | "
                  f"{r['measured_peak_rss_bytes'] / MiB:.1f} | {r['error_pct']:+.1f}% ({r['error_bytes'] / MiB:+.1f} MiB)"
                  f"{'' if r['within'] else ' **off**'} |")
        n = len(doc["memory"])
        print(f"\nmemory within max(3%, 32 MiB): {sum(r['within'] for r in doc['memory'])}/{n}")
    if doc["speed"]:
        print("\n| model | depth | KV | pp512 predicted | measured | error | tg128 predicted | measured | error |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in doc["speed"]:
            print(f"| {r['row']} | {r['depth']} | {r['kv']} | {r['predicted_pp']:.1f} | {r['measured_pp']:.1f} | "
                  f"{r['pp_error_pct']:+.1f}% | {r['predicted_tg']:.1f} | {r['measured_tg']:.1f} | "
                  f"{r['tg_error_pct']:+.1f}% |")
        n = len(doc["speed"])
        print(f"\nprefill within 20%: {sum(r['pp_within'] for r in doc['speed'])}/{n}; "
              f"decode within 10%: {sum(r['tg_within'] for r in doc['speed'])}/{n}")
    print(f"\nloadavg now {os.getloadavg()[0]:.2f}; JSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
