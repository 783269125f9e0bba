#!/usr/bin/env python3
"""End-to-end speed, Pagoda vs llama.cpp, side by side in one run, with a decode roofline.

  bench/compare_llamacpp.py                                  # all rows, 5 rounds, 2 threads
  bench/compare_llamacpp.py --rows gemma,1b-q4_0 --rounds 1  # quick check
  bench/compare_llamacpp.py --list-rows

Rows (--rows, comma-separated; `all` is every row, `1b` every 1B row, `real` the three real models):
  gemma     Gemma 3 270M Q4_K_M (scripts/fetch_model: pagoda pull gemma-3-270m)
  qwen-0.5b, qwen-1.5b
            Qwen2.5-Coder 0.5B / 1.5B Instruct Q4_K_M (pagoda pull qwen2.5-coder-*-instruct)
  1b-q4_0, 1b-q4_k, 1b-q8_0, 1b-f16
            generated random-weight `llama`, dim 2048, 16 layers, 32 heads, 8 KV heads,
            ff 5632, vocab 32000 (TinyLlama-1.1B's shape)
  7b-q4_0   generated `llama`, dim 4096, 32 layers, 32 heads, 32 KV heads, ff 11008,
            vocab 32000 (Llama-2-7B's shape, 3.6 GiB); slow, about half of a full run
  7b-q4_0-gqa  the same with 8 KV heads (not in `all`)
  olmoe-q4_k  generated `olmoe`, OLMoE-1B-7B's shape: dim 2048, 16 layers, 16 heads and KV
            heads, 64 experts of ff 1024, 8 per token, vocab 50304 (3.9 GiB; not in `all`)
  mixtral-q4_k  generated `llama` with 8 experts of ff 3584, 2 per token, dim 1024, 16
            layers, 16 heads, 4 KV heads, vocab 32000 (a quarter-width Mixtral; not in `all`)
  moe       both MoE rows
  LABEL=PATH   any other GGUF file (--rows or --model)
Generated models are written once by <build>/bin/pagoda-gen-model into
$PAGODA_CACHE/bench-models/ (default ~/.cache/pagoda/bench-models/); --regen rewrites them.
Decode speed does not depend on the weight values, so random weights are fine.

Per row, R rounds (--rounds, default 5); each round runs each engine once, in alternating
order (round 0: llama.cpp first, round 1: Pagoda first, ...), so slow drift of the machine
hits both alike:
  llama.cpp  llama-bench -m M -p P -n N -t T -r 1 -o json     (scripts/build_llamacpp)
  Pagoda     <build>/bin/pagoda bench -m M -p P -n N -r 1 -t T --json
Both do one untimed warm-up per test, then one timed repetition; pp = one forward pass of
P tokens from an empty cache, tg = N single-token steps from an empty cache (with -d D,
both engines get -d D: the cache first holds D tokens of context, untimed). The table
quotes the median over the rounds per engine and test.

Roofline (decode): read bandwidth B is measured by bench/bandwidth.cc (compiled by this
script into the cache; T threads sum a 1 GiB buffer with AVX2 loads, in passes with and
without software prefetch, the better median counts): once at the start (5 passes of
each), and again before every round of every row (3 of each);
a row's ceiling uses the median of its rounds' values, because on a shared machine the
bandwidth moves by tens of percent within minutes (--bw-once: the start's value only). Bytes of weights read per generated token W = every tensor of the
file except token_embd.weight, which is only gathered one row per token, unless there is
no output.weight (tied embeddings: then token_embd is the output matrix and read in
full every token), and of an MoE model's 3-D expert tensors only the expert_used_count /
expert_count share a token's experts take, plus the FP16 KV cache read per token (about D + (N+1)/2 positions on
average; under 1% of W for every row here at D = 0, recorded in the JSON as
kv_bytes_per_token_avg). Ceiling = B / W tokens/s; each engine's tg is quoted as % of it.

Columns:
  llama.cpp, pagoda   median tokens/s over the rounds
  ratio               pagoda / llama.cpp (> 1: Pagoda is faster)
  ceiling             B / W (tg only)
  % ceil              engine's tg / ceiling
  spread              (max - min) / median over the rounds, llama.cpp / pagoda
  other cpu           most CPU (in cores) used by other processes during any of this
                      row's runs (from /proc/stat minus our child's rusage, plus steal);
                      above ~0.1 the numbers are noisy

The JSON (--json-out; default $PAGODA_CACHE/bench-results/compare-<time>.json) holds
every individual run (command, wall time, parsed output, other-CPU load), the per-row
medians, the bandwidth samples, lscpu, the thread count, Pagoda's git commit and build
type, and llama.cpp's version. It is rewritten after every run, so an interrupted run
keeps what it measured.

Exit status: 0 when every run of every row worked (whichever engine is faster: this is
a report); 1 when some run failed (the others are still reported); 2 on a setup error
(binary missing, model cannot be made, bandwidth program does not build).
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("PAGODA_CACHE", Path.home() / ".cache" / "pagoda"))
MODEL_CACHE = CACHE / "bench-models"
BIN_CACHE = CACHE / "bench-bin"
RESULTS = CACHE / "bench-results"
BANDWIDTH_SRC = REPO / "bench" / "bandwidth.cc"
BANDWIDTH_FLAGS = ["-O3", "-march=native", "-std=c++17", "-pthread"]

SHAPE_1B = dict(dim=2048, layers=16, heads=32, kv_heads=8, ff=5632, vocab=32000)
SHAPE_7B = dict(dim=4096, layers=32, heads=32, kv_heads=32, ff=11008, vocab=32000)
SHAPE_7B_GQA = dict(SHAPE_7B, kv_heads=8)
# Mixtures of experts: OLMoE-1B-7B's shape (64 experts, 8 per token, 6.9B parameters, 1.3B
# active) and a smaller Mixtral (llama with 8 experts, 2 per token; Mixtral-8x7B's ratios at
# a quarter of its width, 1.5B parameters, 0.45B active).
SHAPE_OLMOE = dict(arch="olmoe", dim=2048, layers=16, heads=16, kv_heads=16, ff=1024, vocab=50304, experts=64,
                   experts_used=8)
SHAPE_MIXTRAL = dict(arch="llama", dim=1024, layers=16, heads=16, kv_heads=4, ff=3584, vocab=32000, experts=8,
                     experts_used=2)


@dataclass
class RowSpec:
    name: str
    kind: str                      # "fetch" (Gemma), "gen" (pagoda-gen-model), "file"
    qtype: str = ""
    shape: dict = field(default_factory=dict)
    path: Path | None = None
    note: str = ""
    catalog: str = ""              # "fetch": the catalog name pagoda pull fetches


ROWS: dict[str, RowSpec] = {
    "gemma": RowSpec("gemma", "fetch", note="Gemma 3 270M Q4_K_M (scripts/fetch_model)", catalog="gemma-3-270m"),
    "qwen-0.5b": RowSpec("qwen-0.5b", "fetch", note="Qwen2.5-Coder 0.5B Instruct Q4_K_M",
                         catalog="qwen2.5-coder-0.5b-instruct"),
    "qwen-1.5b": RowSpec("qwen-1.5b", "fetch", note="Qwen2.5-Coder 1.5B Instruct Q4_K_M",
                         catalog="qwen2.5-coder-1.5b-instruct"),
    "1b-q4_0": RowSpec("1b-q4_0", "gen", "Q4_0", SHAPE_1B),
    "1b-q4_k": RowSpec("1b-q4_k", "gen", "Q4_K", SHAPE_1B),
    "1b-q8_0": RowSpec("1b-q8_0", "gen", "Q8_0", SHAPE_1B),
    "1b-f16": RowSpec("1b-f16", "gen", "F16", SHAPE_1B),
    "7b-q4_0": RowSpec("7b-q4_0", "gen", "Q4_0", SHAPE_7B),
    "7b-q4_0-gqa": RowSpec("7b-q4_0-gqa", "gen", "Q4_0", SHAPE_7B_GQA),
    "olmoe-q4_k": RowSpec("olmoe-q4_k", "gen", "Q4_K", SHAPE_OLMOE),
    "mixtral-q4_k": RowSpec("mixtral-q4_k", "gen", "Q4_K", SHAPE_MIXTRAL),
}
ALL_ROWS = ["gemma", "qwen-0.5b", "qwen-1.5b", "1b-q4_0", "1b-q4_k", "1b-q8_0", "1b-f16", "7b-q4_0"]
ROW_GROUPS = {"all": ALL_ROWS, "1b": ["1b-q4_0", "1b-q4_k", "1b-q8_0", "1b-f16"], "moe": ["olmoe-q4_k", "mixtral-q4_k"],
              "real": ["gemma", "qwen-0.5b", "qwen-1.5b"]}


class SetupError(Exception):
    """Something the whole run needs is missing; exit 2."""


def log(msg: str) -> None:
    print(f"[compare] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- processes
class RunFailed(Exception):
    def __init__(self, msg: str, record: dict):
        super().__init__(msg)
        self.record = record


def _proc_stat() -> tuple[float, float] | None:
    """(busy, steal) seconds of all CPUs since boot, or None off Linux."""
    try:
        with open("/proc/stat") as f:
            parts = f.readline().split()
    except OSError:
        return None
    if not parts or parts[0] != "cpu":
        return None
    v = [int(x) for x in parts[1:]] + [0] * 10
    user, nice, system, _idle, _iowait, irq, softirq, steal, guest, guest_nice = v[:10]
    hz = os.sysconf("SC_CLK_TCK")
    # guest time is already counted in user on Linux.
    return (user + nice + system + irq + softirq) / hz, steal / hz


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_cmd(cmd: list[str], timeout: float, env: dict | None = None) -> dict:
    """Runs cmd in its own process group; returns a record with stdout, stderr, rc, wall
    time and the CPU that *other* processes used meanwhile. Kills the group on timeout or
    Ctrl-C."""
    st0, ch0, t0 = _proc_stat(), _children_cpu(), time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
    except OSError as e:  # e.g. the binary is being relinked right now
        return {"cmd": " ".join(shlex.quote(c) for c in cmd), "rc": -1, "wall_s": 0.0, "timed_out": False,
                "_stdout": "", "_stderr": f"cannot start: {e}"}
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    wall = time.monotonic() - t0
    st1, ch1 = _proc_stat(), _children_cpu()
    rec: dict[str, Any] = {"cmd": " ".join(shlex.quote(c) for c in cmd), "rc": proc.returncode,
                           "wall_s": round(wall, 3), "timed_out": timed_out}
    if st0 and st1 and wall > 0:
        busy = (st1[0] - st0[0]) - (ch1 - ch0)
        # Clamped: on runs under a second the 10 ms tick granularity dominates.
        rec["other_cpu_cores"] = round(min(float(os.cpu_count() or 1), max(0.0, busy) / wall), 3)
        rec["steal_cores"] = round((st1[1] - st0[1]) / wall, 3)
    rec["_stdout"], rec["_stderr"] = out, err
    return rec


def tail(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def last_line(cmd: list[str], what: str, env: dict | None = None, timeout: float = 7200) -> str:
    """Runs a setup script; returns the last line of its stdout. Its stderr (progress) is
    shown only when it fails."""
    log(f"{what}: {' '.join(cmd)}")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                       env=env)
    lines = [l for l in p.stdout.strip().splitlines() if l.strip()]
    if p.returncode != 0 or not lines:
        raise SetupError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{tail(p.stderr, 30)}")
    return lines[-1].strip()


def other_load(seconds: float = 1.0) -> float | None:
    """CPU cores busy over `seconds` while we run nothing (so: other processes + steal)."""
    a = _proc_stat()
    time.sleep(seconds)
    b = _proc_stat()
    if not a or not b:
        return None
    return ((b[0] - a[0]) + (b[1] - a[1])) / seconds


def wait_quiet(max_wait: float, threshold: float) -> dict:
    """Waits (up to max_wait seconds) until other processes use under `threshold` cores."""
    t0 = time.monotonic()
    load = other_load()
    warned = False
    while load is not None and load >= threshold and time.monotonic() - t0 < max_wait:
        if not warned:
            log(f"waiting for a quiet machine: other processes use {load:.2f} cores "
                f"(threshold {threshold}, up to {max_wait:.0f}s)")
            warned = True
        time.sleep(4)
        load = other_load()
    waited = time.monotonic() - t0
    if load is not None and load >= threshold:
        log(f"still busy after {waited:.0f}s ({load:.2f} cores); running anyway")
    return {"waited_s": round(waited, 1), "other_cpu_cores_before": None if load is None else round(load, 3)}


# ------------------------------------------------------------------------------- models
def gen_model_path(spec: RowSpec) -> Path:
    s = spec.shape
    experts = f"-x{s['experts']}k{s['experts_used']}" if s.get("experts") else ""
    return MODEL_CACHE / (f"{s.get('arch', 'llama')}-d{s['dim']}-l{s['layers']}-h{s['heads']}-kv{s['kv_heads']}"
                          f"-ff{s['ff']}-v{s['vocab']}{experts}-{spec.qtype.lower()}.gguf")


def is_gguf(p: Path) -> bool:
    try:
        with open(p, "rb") as f:
            return f.read(4) == b"GGUF" and p.stat().st_size > 1 << 20
    except OSError:
        return False


def make_model(spec: RowSpec, build: Path, regen: bool, gen_threads: int) -> Path:
    if spec.kind == "file":
        assert spec.path is not None
        if not is_gguf(spec.path):
            raise SetupError(f"{spec.name}: {spec.path} is not a GGUF file")
        return spec.path
    if spec.kind == "fetch":
        p = Path(last_line([str(REPO / "scripts" / "fetch_model"), spec.catalog], "fetch_model"))
        if not is_gguf(p):
            raise SetupError(f"fetch_model printed {p}, which is not a GGUF file")
        return p
    dest = gen_model_path(spec)
    if is_gguf(dest) and not regen:
        return dest
    gen = build / "bin" / "pagoda-gen-model"
    if not gen.exists():
        raise SetupError(f"{gen} missing: ninja -C {build} pagoda-gen-model")
    MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    s = spec.shape
    cmd = [str(gen), "--arch", s.get("arch", "llama"), "--type", spec.qtype, "--dim", str(s["dim"]),
           "--layers", str(s["layers"]), "--heads", str(s["heads"]), "--kv-heads", str(s["kv_heads"]),
           "--ff", str(s["ff"]), "--vocab", str(s["vocab"]), "-t", str(gen_threads), "-o", str(tmp)]
    if s.get("experts"):
        cmd += ["--experts", str(s["experts"]), "--experts-used", str(s["experts_used"])]
    log(f"{spec.name}: generating {dest.name} (once): {' '.join(cmd)}")
    t0 = time.monotonic()
    rec = run_cmd(cmd, timeout=3 * 3600)
    if rec["rc"] != 0 or not is_gguf(tmp):
        tmp.unlink(missing_ok=True)
        raise SetupError(f"{spec.name}: pagoda-gen-model failed (exit {rec['rc']}):\n{tail(rec['_stderr'])}")
    os.replace(tmp, dest)
    log(f"{spec.name}: wrote {dest} ({dest.stat().st_size / 2**30:.2f} GiB) in {time.monotonic() - t0:.0f}s")
    return dest


def weight_bytes(path: Path, n_gen: int, depth: int = 0) -> dict:
    """Bytes of weights read per generated token, from the tensor table (gguf package).
    Cached beside the generated models, keyed by path, size and mtime: GGUFReader parses
    every metadata array and takes ~10 s on Gemma's 262k-entry vocabulary."""
    st = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{n_gen}|{depth}|swa".encode()).hexdigest()[:16]
    cache = MODEL_CACHE / ".sizes" / f"{key}.json"
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    import gguf  # PyPI `gguf`; imported here so --help works without it

    r = gguf.GGUFReader(str(path))
    by_type: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for t in r.tensors:
        sizes[t.name] = int(t.n_bytes)
        by_type[t.tensor_type.name] = by_type.get(t.tensor_type.name, 0) + int(t.n_bytes)
    total = sum(sizes.values())
    tied = "output.weight" not in sizes
    embd = sizes.get("token_embd.weight", 0)
    per_token = total if tied else total - embd

    def meta(key: str, default=None):
        return gguf_meta(r, key, default)

    arch = meta("general.architecture", "?")
    # A token reads only its experts: expert_used_count of expert_count slices of each
    # 3-D expert tensor.
    n_expert, n_used = meta(f"{arch}.expert_count", 0) or 0, meta(f"{arch}.expert_used_count", 0) or 0
    expert_bytes = sum(v for k, v in sizes.items() if k.endswith("_exps.weight"))
    if n_expert:
        per_token -= expert_bytes - expert_bytes * n_used // n_expert
    n_layer = meta(f"{arch}.block_count", 0) or 0
    n_head = meta(f"{arch}.attention.head_count", 0) or 0
    n_kv = meta(f"{arch}.attention.head_count_kv", n_head) or n_head
    n_embd = meta(f"{arch}.embedding_length", 0) or 0
    k_len = meta(f"{arch}.attention.key_length", (n_embd // n_head) if n_head else 0) or 0
    v_len = meta(f"{arch}.attention.value_length", k_len) or k_len
    kv_heads = n_kv if isinstance(n_kv, list) else [n_kv] * n_layer  # per-layer KV head counts
    # F16 cache; a tg run of n tokens after d tokens of context reads on average
    # d + (n + 1) / 2 positions per token, except in sliding-window layers (Gemma 3: five
    # of every six), which read at most the window.
    window = meta(f"{arch}.attention.sliding_window", 0) or 0
    seen = depth + (n_gen + 1) / 2
    kv_avg = 0
    for il, n in enumerate(kv_heads):
        local = arch == "gemma3" and window > 0 and il % 6 < 5
        kv_avg += n * (k_len + v_len) * 2 * (min(window, seen) if local else seen)
    kv_avg = int(kv_avg)
    out = {"tensor_bytes": total, "token_embd_bytes": embd, "tied_embeddings": tied,
           "weight_bytes_per_token": per_token, "bytes_by_type": by_type, "arch": arch,
           "expert_tensor_bytes": expert_bytes, "experts": n_expert, "experts_used": n_used,
           "n_layer": n_layer, "n_head_kv": n_kv, "kv_bytes_per_token_avg": kv_avg,
           "file_bytes": st.st_size}
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(out))
    except OSError:
        pass
    return out


# ---------------------------------------------------------------------------- bandwidth
def build_bandwidth() -> Path:
    cxx = os.environ.get("CXX", "g++")
    src = BANDWIDTH_SRC.read_bytes()
    h = hashlib.sha256(src + " ".join([cxx] + BANDWIDTH_FLAGS).encode()).hexdigest()[:12]
    exe = BIN_CACHE / f"bandwidth-{h}"
    if exe.exists():
        return exe
    BIN_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(exe.name + ".tmp")
    cmd = [cxx, *BANDWIDTH_FLAGS, str(BANDWIDTH_SRC), "-o", str(tmp)]
    log(f"building {exe}: {' '.join(cmd)}")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise SetupError(f"bandwidth.cc does not build:\n{tail(p.stdout)}")
    os.replace(tmp, exe)
    return exe


def measure_bandwidth(threads: int, mib: int, reps: int) -> dict:
    exe = build_bandwidth()
    rec = run_cmd([str(exe), "--threads", str(threads), "--mib", str(mib), "--reps", str(reps), "--json"],
                  timeout=600)
    if rec["rc"] != 0:
        raise SetupError(f"bandwidth failed (exit {rec['rc']}): {tail(rec['_stderr'])}")
    res = json.loads(rec["_stdout"])
    res["other_cpu_cores"] = rec.get("other_cpu_cores")
    res["cmd"] = rec["cmd"]
    return res


# ------------------------------------------------------------------------------ engines
def parse_json_array(text: str) -> list:
    """The JSON array on stdout, tolerating log lines before it."""
    text = text.strip()
    try:
        v = json.loads(text)
    except ValueError:
        i = text.find("\n[")
        if not text.startswith("[") and i < 0:
            raise
        v = json.loads(text[i + 1:] if not text.startswith("[") else text)
    if not isinstance(v, list):
        raise ValueError("expected a JSON array")
    return v


def run_llamacpp(bindir: Path, model: Path, a, timeout: float) -> tuple[dict, dict]:
    cmd = [str(bindir / "llama-bench"), "-m", str(model), "-p", str(a.n_prompt), "-n", str(a.n_gen),
           *(["-d", str(a.depth)] if a.depth else []),
           "-t", str(a.threads), "-r", "1", "-o", "json", *shlex.split(a.llamacpp_args)]
    rec = run_cmd(cmd, timeout)
    if rec["rc"] != 0:
        raise RunFailed(f"llama-bench exit {rec['rc']}{' (timeout)' if rec['timed_out'] else ''}: "
                        f"{tail(rec['_stderr'], 5)}", rec)
    tps: dict[str, float] = {}
    try:
        for e in parse_json_array(rec["_stdout"]):
            n_p, n_g = int(e.get("n_prompt", 0)), int(e.get("n_gen", 0))
            name = f"pp{n_p}" if n_g == 0 else (f"tg{n_g}" if n_p == 0 else f"pp{n_p}+tg{n_g}")
            if int(e.get("n_depth", 0) or 0) > 0:
                name += f" @ d{int(e['n_depth'])}"  # pagoda bench's name for the same test
            samples = e.get("samples_ts") or [e["avg_ts"]]
            tps[name] = float(statistics.median(samples))
        rec["parsed"] = parse_json_array(rec["_stdout"])
    except (ValueError, KeyError, TypeError) as ex:
        raise RunFailed(f"llama-bench output not understood: {ex}", rec) from None
    return tps, rec


def snapshot_pagoda(build: Path) -> tuple[Path, str]:
    """Copies bin/pagoda into the cache under its content hash, so every round runs the same
    binary even when someone relinks the build meanwhile. Falls back to the original when
    the copy does not run (e.g. it needs libraries from the build tree)."""
    src = build / "bin" / "pagoda"
    h = hashlib.sha256(src.read_bytes()).hexdigest()
    dst = BIN_CACHE / f"pagoda-{h[:16]}"
    if not dst.exists():
        BIN_CACHE.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + ".tmp")
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
    p = subprocess.run([str(dst), "bench", "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if p.returncode != 0:
        log(f"warning: a copy of {src} does not run; using it in place (do not rebuild meanwhile)")
        return src, h
    return dst, h


def run_pagoda(pagoda: Path, model: Path, a, timeout: float) -> tuple[dict, dict]:
    cmd = [str(pagoda), "bench", "-m", str(model), "-p", str(a.n_prompt), "-n", str(a.n_gen),
           *(["-d", str(a.depth)] if a.depth else []),
           "-r", "1", "-t", str(a.threads), "--json", *shlex.split(a.pagoda_args)]
    rec = run_cmd(cmd, timeout)
    if rec["rc"] != 0:
        raise RunFailed(f"pagoda bench exit {rec['rc']}{' (timeout)' if rec['timed_out'] else ''}: "
                        f"{tail(rec['_stderr'], 5)}", rec)
    tps: dict[str, float] = {}
    try:
        parsed = parse_json_array(rec["_stdout"])
        for e in parsed:
            runs = e.get("runs") or [e["tokens_per_second_median"]]
            tps[e["test"]] = float(statistics.median(runs))
        rec["parsed"] = parsed
    except (ValueError, KeyError, TypeError) as ex:
        raise RunFailed(f"pagoda bench output not understood: {ex}", rec) from None
    return tps, rec


# ------------------------------------------------------------------------------ context
def sh(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine_info(build: Path, llama_bin: Path) -> dict:
    lscpu = sh(["lscpu"])
    fields = {l.split(":", 1)[0].strip(): l.split(":", 1)[1].strip() for l in lscpu.splitlines() if ":" in l}
    cpu = fields.get("Model name") or platform.processor() or "?"
    if "CPU family" in fields:  # "AMD EPYC" alone says little under a hypervisor
        cpu += f" (family {fields['CPU family']}, model {fields.get('Model', '?')})"
    cmake_cache = build / "CMakeCache.txt"
    build_type = ""
    if cmake_cache.exists():
        for l in cmake_cache.read_text(errors="replace").splitlines():
            if l.startswith("CMAKE_BUILD_TYPE:"):
                build_type = l.split("=", 1)[1]
    pagoda_bin = build / "bin" / "pagoda"
    version_file = llama_bin.parent / "VERSION"
    llc = 0
    for key in ("L3 cache", "L2 cache"):
        v = fields.get(key, "").split("(")[0].split()
        if len(v) == 2 and v[1] in ("KiB", "MiB", "GiB"):
            llc = int(float(v[0]) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[v[1]])
            break
    return {
        "cpu_model": cpu,
        "llc_bytes": llc,
        "lscpu": lscpu,
        "nproc": os.cpu_count(),
        "uname": " ".join(platform.uname()),
        "mem_total_kib": next((int(l.split()[1]) for l in Path("/proc/meminfo").read_text().splitlines()
                               if l.startswith("MemTotal")), None) if Path("/proc/meminfo").exists() else None,
        "pagoda_commit": sh(["git", "rev-parse", "HEAD"], REPO),
        "pagoda_describe": sh(["git", "describe", "--always", "--dirty"], REPO),
        "pagoda_dirty_files": [l[3:] for l in sh(["git", "status", "--porcelain", "--untracked-files=no"],
                                                 REPO).splitlines()],
        "pagoda_build_dir": str(build),
        "pagoda_build_type": build_type,
        "pagoda_binary_mtime": dt.datetime.fromtimestamp(pagoda_bin.stat().st_mtime).isoformat()
        if pagoda_bin.exists() else None,
        "llamacpp_bin": str(llama_bin),
        "llamacpp_python_version": version_file.read_text().strip() if version_file.exists() else "",
        "env": {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GOMP_", "GGML_", "PAGODA_", "LLAMA_"))},
    }


# ------------------------------------------------------------------------------- output
def fmt_tps(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if v >= 100 else f"{v:.2f}"


def fmt_pct(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}%" if v >= 10 else f"{v:.1f}%"


def spread(vals: list[float]) -> float | None:
    if len(vals) < 2:
        return None
    m = statistics.median(vals)
    return (max(vals) - min(vals)) / m * 100 if m > 0 else None


def summarize_row(row: dict, tests: list[str], bw_gbps: float | None) -> None:
    row["summary"] = {}
    for test in tests:
        s: dict[str, Any] = {}
        for eng in ("llamacpp", "pagoda"):
            vals = [r["tps"][test] for r in row["runs"] if r["engine"] == eng and test in r.get("tps", {})]
            s[eng] = {"median": statistics.median(vals) if vals else None, "n": len(vals), "values": vals,
                      "spread_pct": spread(vals)}
        l, p = s["llamacpp"]["median"], s["pagoda"]["median"]
        s["ratio"] = p / l if l and p else None
        if row.get("bandwidth_gbps"):
            bw_gbps = statistics.median(row["bandwidth_gbps"])
            s["bandwidth_gbps"] = bw_gbps
        if test.startswith("tg") and bw_gbps and row.get("weights"):
            w = row["weights"]
            ceil = bw_gbps * 1e9 / (w["weight_bytes_per_token"] + w["kv_bytes_per_token_avg"])
            s["ceiling_tps"] = ceil
            s["llamacpp_pct_ceiling"] = l / ceil * 100 if l else None
            s["pagoda_pct_ceiling"] = p / ceil * 100 if p else None
        loads = [r.get("other_cpu_cores") for r in row["runs"] if r.get("other_cpu_cores") is not None]
        s["max_other_cpu_cores"] = max(loads) if loads else None
        row["summary"][test] = s


def markdown(doc: dict, tests: list[str]) -> str:
    m = doc["machine"]
    bw = doc.get("bandwidth") or {}
    out = []
    out.append(f"Pagoda {m['pagoda_describe']} ({m['pagoda_build_type'] or '?'} build) vs llama.cpp "
               f"(llama-cpp-python {m['llamacpp_python_version'] or '?'}, build "
               f"{doc.get('llamacpp_build_commit') or '?'}) | {m['cpu_model']} | {doc['threads']} threads | "
               f"{doc['rounds']} rounds, medians | read bandwidth {bw.get('median_gbps', 0):.1f} GB/s")
    out.append("")
    out.append("| row | test | llama.cpp t/s | pagoda t/s | pagoda/llama.cpp | ceiling t/s | llama.cpp % ceil "
               "| pagoda % ceil | spread l/p | other cpu |")
    out.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in doc["rows"]:
        if "summary" not in row:
            out.append(f"| {row['name']} | - | error | error | - | - | - | - | - | - |")
            continue
        for test in tests:
            s = row["summary"][test]
            l, p = s["llamacpp"], s["pagoda"]
            sp = "/".join("-" if x["spread_pct"] is None else f"{x['spread_pct']:.0f}%" for x in (l, p))
            oc = s["max_other_cpu_cores"]
            ratio = "-" if s["ratio"] is None else f"{s['ratio']:.2f}x"
            out.append(
                f"| {row['name']} | {test} | {fmt_tps(l['median']) if l['n'] else 'error'} | "
                f"{fmt_tps(p['median']) if p['n'] else 'error'} | "
                f"{ratio} | "
                f"{fmt_tps(s.get('ceiling_tps'))} | {fmt_pct(s.get('llamacpp_pct_ceiling'))} | "
                f"{fmt_pct(s.get('pagoda_pct_ceiling'))} | {sp} | {'-' if oc is None else f'{oc:.2f}'} |")
    out.append("")
    llc = m.get("llc_bytes") or 0
    out.append("| row | model | file GiB | weights read/token MiB | tied embd | KV read/token MiB (avg) "
               "| bandwidth GB/s (rounds) | note |")
    out.append("| --- | --- | ---: | ---: | :---: | ---: | --- | --- |")
    for row in doc["rows"]:
        w = row.get("weights")
        if not w:
            out.append(f"| {row['name']} | {Path(row.get('model') or '?').name} | - | - | - | - | - | no tensor sizes |")
            continue
        bw_row = row.get("bandwidth_gbps") or []
        bws = (f"{statistics.median(bw_row):.1f} ({', '.join(f'{b:.0f}' for b in bw_row)})" if bw_row
               else f"{bw.get('median_gbps', 0):.1f} (start)")
        out.append(f"| {row['name']} | {Path(row['model']).name} | {w['file_bytes'] / 2**30:.2f} | "
                   f"{w['weight_bytes_per_token'] / 2**20:.1f} | {'yes' if w['tied_embeddings'] else 'no'} | "
                   f"{w['kv_bytes_per_token_avg'] / 2**20:.2f} | {bws} | "
                   f"{'fits in the last-level cache: ceiling not meaningful' if llc and w['weight_bytes_per_token'] < 4 * llc else ''} |")
    return "\n".join(out)


def write_json(doc: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    os.replace(tmp, path)


# --------------------------------------------------------------------------------- main
def parse_rows(spec: str, extra: list[str]) -> list[RowSpec]:
    rows: list[RowSpec] = []
    for item in [x.strip() for x in spec.split(",") if x.strip()] + list(extra):
        if "=" in item:
            label, path = item.split("=", 1)
            rows.append(RowSpec(label, "file", path=Path(path).expanduser()))
        elif item in ROW_GROUPS:
            rows += [ROWS[r] for r in ROW_GROUPS[item]]
        elif item in ROWS:
            rows.append(ROWS[item])
        else:
            raise SetupError(f"unknown row {item!r}; rows: {', '.join(ROWS)}, groups: "
                             f"{', '.join(ROW_GROUPS)}, or LABEL=PATH")
    seen, uniq = set(), []
    for r in rows:
        if r.name not in seen:
            seen.add(r.name)
            uniq.append(r)
    return uniq


def gguf_meta(reader, key: str, default=None):
    """A GGUF metadata value from a gguf.GGUFReader, or `default`."""
    f = reader.fields.get(key)
    if f is None:
        return default
    try:
        return f.contents()
    except Exception:  # noqa: BLE001  (older gguf without contents())
        return default


def _interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> int:
    # Ctrl-C and `kill` both stop the current engine run and keep what was measured (a
    # background job may have inherited SIGINT ignored, hence set explicitly).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build-dir", type=Path, default=REPO / "build", help="Pagoda build (default: %(default)s)")
    ap.add_argument("--rows", default="all", help="comma-separated rows / groups / LABEL=PATH (default: all)")
    ap.add_argument("--model", action="append", default=[], metavar="LABEL=PATH", help="add a row for a GGUF file")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per row, one run of each engine per round")
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-d", "--depth", type=int, default=0,
                    help="tokens of context in the cache before each test (llama-bench -d; default 0)")
    ap.add_argument("--llamacpp-bin", type=Path, help="llama.cpp bin dir (default: scripts/build_llamacpp's)")
    ap.add_argument("--json-out", type=Path, help="default: $PAGODA_CACHE/bench-results/compare-<time>.json")
    ap.add_argument("--md-out", type=Path, help="also write the markdown table here")
    ap.add_argument("--bandwidth", type=float, metavar="GBPS", help="use this read bandwidth, do not measure")
    ap.add_argument("--bw-mib", type=int, default=1024, help="bandwidth buffer size (default 1024 MiB)")
    ap.add_argument("--bw-reps", type=int, default=5, help="bandwidth passes, median taken (default 5)")
    ap.add_argument("--bw-once", action="store_true",
                    help="measure the bandwidth once at the start, not before every round")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds per engine run (default 0: one hour per GiB of model file, at least "
                         "one hour; a slow engine on the 7B row needs hours)")
    ap.add_argument("--regen", action="store_true", help="regenerate the generated models")
    ap.add_argument("--llamacpp-args", default="", metavar="ARGS",
                    help="extra llama-bench arguments, e.g. '--poll 0' or '-fa 1' (recorded in the JSON)")
    ap.add_argument("--pagoda-args", default="", metavar="ARGS", help="extra `pagoda bench` arguments")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                    help="before each run, wait up to S seconds for other processes to use under "
                         "--quiet-threshold cores (default 0: do not wait)")
    ap.add_argument("--quiet-threshold", type=float, default=0.15, metavar="CORES")
    ap.add_argument("--list-rows", action="store_true", help="print the rows and exit")
    a = ap.parse_args()

    if a.list_rows:
        for name in ROWS:
            r = ROWS[name]
            where = (gen_model_path(r) if r.kind == "gen" else "scripts/fetch_model")
            print(f"{name:12} {'(all) ' if name in ALL_ROWS else '      '}{r.qtype or 'Q4_K_M':5} "
                  f"{r.shape or r.note}  -> {where}")
        return 0
    if a.rounds < 1 or a.threads < 1 or a.n_prompt < 0 or a.n_gen < 0 or a.n_prompt + a.n_gen == 0 or a.depth < 0:
        ap.error("need --rounds >= 1, --threads >= 1, -p/-n/-d >= 0 and -p/-n not both 0")
    at = f" @ d{a.depth}" if a.depth else ""
    tests = ([f"pp{a.n_prompt}{at}"] if a.n_prompt else []) + ([f"tg{a.n_gen}{at}"] if a.n_gen else [])

    try:
        rows = parse_rows(a.rows, a.model)
        build = a.build_dir.resolve()
        for b in ("pagoda",):
            if not (build / "bin" / b).exists():
                raise SetupError(f"{build / 'bin' / b} missing: ninja -C {build} pagoda pagoda-gen-model")
        if a.llamacpp_bin:
            llama_bin = a.llamacpp_bin.resolve()
        else:  # build (or find) llama-bench only: quicker and quieter than every target
            env = dict(os.environ, LLAMACPP_TARGETS=os.environ.get("LLAMACPP_TARGETS", "llama llama-bench"))
            llama_bin = Path(last_line([str(REPO / "scripts" / "build_llamacpp")], "build_llamacpp", env=env))
        if not (llama_bin / "llama-bench").exists():
            raise SetupError(f"{llama_bin / 'llama-bench'} missing (LLAMACPP_TARGETS=llama-bench scripts/build_llamacpp)")
        machine = machine_info(build, llama_bin)
        pagoda_exe, machine["pagoda_binary_sha256"] = snapshot_pagoda(build)
        machine["pagoda_binary_used"] = str(pagoda_exe)
        if machine["pagoda_build_type"] not in ("Release", "RelWithDebInfo", ""):
            log(f"warning: {build} is a {machine['pagoda_build_type']} build; its numbers mean little")
        if machine["pagoda_dirty_files"]:
            log(f"note: the working tree has uncommitted changes ({len(machine['pagoda_dirty_files'])} files); "
                f"the binary may not match {machine['pagoda_commit'][:10]}")

        # Make every model first, so generation (minutes for 7B) does not sit between runs.
        models: dict[str, Path] = {}
        for r in rows:
            models[r.name] = make_model(r, build, a.regen, os.cpu_count() or 1)
    except SetupError as e:
        log(f"error: {e}")
        return 2

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    json_out = a.json_out or RESULTS / f"compare-{stamp}.json"
    doc: dict[str, Any] = {
        "started": dt.datetime.now().isoformat(timespec="seconds"),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "threads": a.threads, "rounds": a.rounds, "tests": tests, "machine": machine,
        "bandwidth": None, "rows": [],
    }
    errors = 0
    try:
        if a.bandwidth:
            doc["bandwidth"] = {"median_gbps": a.bandwidth, "given": True}
        else:
            try:
                if a.wait_quiet > 0:
                    wait_quiet(a.wait_quiet, a.quiet_threshold)
                doc["bandwidth"] = measure_bandwidth(a.threads, a.bw_mib, a.bw_reps)
            except (SetupError, ValueError) as e:
                log(f"error: bandwidth: {e}")
                return 2
            log(f"read bandwidth ({a.threads} threads): {doc['bandwidth']['median_gbps']:.1f} GB/s "
                f"(samples {doc['bandwidth']['samples_gbps']})")
        bw = doc["bandwidth"]["median_gbps"]
        write_json(doc, json_out)

        for r in rows:
            model = models[r.name]
            row: dict[str, Any] = {"name": r.name, "model": str(model), "runs": [], "errors": []}
            doc["rows"].append(row)
            try:
                row["weights"] = weight_bytes(model, a.n_gen, a.depth)
            except Exception as e:  # noqa: BLE001  (no roofline for this row, still time it)
                row["errors"].append(f"weight sizes: {e}")
                log(f"{r.name}: cannot read tensor sizes: {e}")
            timeout = a.timeout or 3600 * max(1.0, model.stat().st_size / 2**30)
            row_t0 = time.monotonic()
            for rnd in range(a.rounds):
                if rnd == 1:
                    per_round = time.monotonic() - row_t0
                    log(f"{r.name}: a round takes {per_round / 60:.1f} min; about "
                        f"{per_round * (a.rounds - 1) / 60:.0f} min left for this row")
                if not a.bandwidth and not a.bw_once:
                    try:
                        b = measure_bandwidth(a.threads, a.bw_mib, 3)
                        row.setdefault("bandwidth_gbps", []).append(b["median_gbps"])
                    except (SetupError, ValueError) as e:
                        log(f"{r.name}: bandwidth before round {rnd + 1}: {e}")
                order = ("llamacpp", "pagoda") if rnd % 2 == 0 else ("pagoda", "llamacpp")
                for eng in order:
                    quiet = wait_quiet(a.wait_quiet, a.quiet_threshold) if a.wait_quiet > 0 else {}
                    t0 = time.monotonic()
                    base = {"engine": eng, "round": rnd, "started": dt.datetime.now().isoformat(timespec="seconds"),
                            "loadavg_before": os.getloadavg(), **quiet}
                    try:
                        if eng == "llamacpp":
                            tps, rec = run_llamacpp(llama_bin, model, a, timeout)
                            if rec.get("parsed"):
                                doc["llamacpp_build_commit"] = rec["parsed"][0].get("build_commit")
                        else:
                            tps, rec = run_pagoda(pagoda_exe, model, a, timeout)
                        missing = [t for t in tests if t not in tps]
                        if missing:
                            raise RunFailed(f"no result for {', '.join(missing)} in the output", rec)
                        rec = {**base, **rec, "tps": tps}
                        log(f"{r.name} round {rnd + 1}/{a.rounds} {eng:8}: "
                            + ", ".join(f"{t} {tps[t]:.2f}" for t in tests)
                            + f" t/s ({time.monotonic() - t0:.0f}s, other cpu {rec.get('other_cpu_cores', '?')})")
                    except RunFailed as e:
                        errors += 1
                        rec = {**base, **e.record, "error": str(e)}
                        rec["stderr_tail"] = tail(rec.get("_stderr", ""), 30)
                        rec["stdout_tail"] = tail(rec.get("_stdout", ""), 30)
                        row["errors"].append(f"round {rnd} {eng}: {e}")
                        log(f"{r.name} round {rnd + 1}/{a.rounds} {eng}: ERROR {e}")
                    rec.pop("_stdout", None)
                    rec.pop("_stderr", None)
                    row["runs"].append(rec)
                    write_json(doc, json_out)
            summarize_row(row, tests, bw)
            write_json(doc, json_out)
    except KeyboardInterrupt:
        doc["interrupted"] = True
        doc["finished"] = dt.datetime.now().isoformat(timespec="seconds")
        if doc["rows"] and "summary" not in doc["rows"][-1] and doc["bandwidth"]:
            summarize_row(doc["rows"][-1], tests, doc["bandwidth"]["median_gbps"])
        if doc["rows"]:
            doc["markdown"] = markdown(doc, tests)
            print(doc["markdown"])
        write_json(doc, json_out)
        log(f"interrupted; partial results in {json_out}")
        return 130

    doc["finished"] = dt.datetime.now().isoformat(timespec="seconds")
    table = markdown(doc, tests)
    doc["markdown"] = table
    write_json(doc, json_out)
    print(table)
    if a.md_out:
        a.md_out.write_text(table + "\n")
    for row in doc["rows"]:
        for e in row["errors"]:
            log(f"{row['name']}: {e}")
    log(f"every run: {json_out}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
