#!/usr/bin/env python3
"""Online serving, Pagoda's `pagoda serve` vs llama.cpp's `llama-server`, measured by one client.

  bench/compare_serving.py                                  # gemma and 1b-q4_0, 2 load points, 3 rounds
  bench/compare_serving.py --rows gemma --num-prompts 8 --input-len 32 --output-len 16 --rounds 1   # a quick look
  bench/compare_serving.py --rows 1b-q4_0 --rates 1b-q4_0=1 --load-points rate --json > raw.json

Rows are compare_llamacpp.py's (--rows, comma-separated; see --list-rows): `gemma` (Gemma
3 270M Q4_K_M from scripts/fetch_model), `1b-q4_0` etc. (random-weight `llama` files
generated once into $PAGODA_CACHE/bench-models/), or LABEL=PATH for any GGUF file.

The workload, per row and load point: `pagoda bench serve` (the same client binary for both
servers) sends N (--num-prompts) streaming /v1/completions requests whose prompts are
random token ids, P (--input-len) long on average, asking for T (--output-len) tokens on
average, both uniform in [len*(1-r), len*(1+r)] (--range-ratio r); greedy, ignore_eos, so
every request produces exactly its drawn length. The draw depends only on --seed (plus
the load point's index), so both engines get the very same requests in every round.
Load points (--load-points):
  burst   all N requests queued at once, at most C (--max-concurrency, default = --slots)
          in flight: a saturated server; throughput is the number
  rate    Poisson arrivals at R req/s (--rates ROW=R,...; default gemma=2, 1b-q4_0=0.5,
          --default-rate for other rows), at most C in flight: a server under a given
          load; req/s is close to R when the server keeps up, latency is the number

The servers, per row (S = --slots, TH = --threads, CTX = per-slot context):
  CTX = ceil(P*(1+r)) + ceil(T*(1+r)), rounded up to a multiple of --ctx-align (256:
        llama.cpp pads each sequence's KV stream to 256 cells, so the two caches are the
        same size only at a multiple of 256; it is also a multiple of Pagoda's 16-token
        KV block, so S sequences of CTX tokens fit without preemption)
  llama.cpp  llama-server -m M -t TH -np S -c S*CTX --host 127.0.0.1 --port PORT --no-webui -lv 4
             S slots of CTX tokens each (-c is the total, split across the slots; one KV
             stream per slot since -np is given), continuous batching (its default),
             flash attention left at its default (`auto`; the JSON records what it chose),
             -b 2048 / -ub 512, prompt cache in RAM (--cache-ram 8192) by default. -lv 4
             only makes it log its context, KV sizes and flash-attention choice (a few
             dozen lines per request, none per token), which the script records.
  Pagoda     pagoda serve -m M -t TH --max-num-seqs S -c CTX --kv-cache-memory KV
                 --host 127.0.0.1 --port PORT
             KV = 2 (K,V) x n_layer x S*CTX x kv_dim x 2 bytes (F16; from the GGUF
             metadata), the KV memory llama-server's -c asks for. Step budget 512 tokens
             by default (--max-num-batched-tokens).
Each server is started fresh for every round (so neither carries a prompt cache over),
the script waits for GET /health to answer 200, sends one warm-up request (a streamed
completion of P token ids and 8 tokens, which also checks that the server reports
`usage` with the expected prompt and completion token counts), then runs each load point:
  pagoda bench serve --base-url http://127.0.0.1:PORT -m M --num-prompts N --input-len P
      --output-len T --range-ratio r --max-concurrency C [--request-rate R] --seed SEED --json
and finally stops the server with SIGTERM. Rounds alternate which engine goes first.

Reported per engine (medians over --rounds of each run's value): req/s, output tok/s,
TTFT / TPOT / ITL / E2E p50 (ms; the client's numbers, see `pagoda bench serve`), and
  throughput p/l   Pagoda's output tok/s / llama.cpp's   (> 1: Pagoda serves more)
  TPOT l/p         llama.cpp's TPOT p50 / Pagoda's       (> 1: Pagoda decodes faster)
  other cpu        most CPU (cores) other processes took during that engine's runs: /proc/stat
                   minus the server's and the client's own CPU time; llama.cpp's spinning
                   threads collapse when a core is taken, so trust only values near 0
The JSON (--json-out; default $PAGODA_CACHE/bench-results/serving-<time>.json, rewritten
after every run) has every run (client command and JSON, server and client CPU), every
server start (command line, log file, /props, the warm-up's checks, the warnings it logged,
its context/KV/flash-attention as logged) and the machine; server logs are kept beside it
in serving-<time>-logs/.

Exit status: 0 when every run worked (whichever engine is faster); 1 when some run failed
(the table says `error` there); 2 on a setup error; 130 on Ctrl-C.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import random
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_llamacpp as cl  # noqa: E402  (rows, models, processes, machine info)
import compare_batching as cb  # noqa: E402  (KV shape from the GGUF, llama.cpp log parsing)

REPO = cl.REPO
RESULTS = cl.RESULTS
DEFAULT_ROWS = "gemma,1b-q4_0"
DEFAULT_RATES = "gemma=2,1b-q4_0=0.5"
WARMUP_TOKENS = 8
ENGINES = ("llamacpp", "pagoda")
ENGINE_NAMES = {"llamacpp": "llama.cpp", "pagoda": "pagoda"}


def log(msg: str) -> None:
    print(f"[serving] {msg}", file=sys.stderr, flush=True)


cl.log = log  # compare_llamacpp's helpers (models, quiet wait, binary snapshot) log through this


# ------------------------------------------------------------------------------- models
def vocab_size(path: Path) -> int:
    """Number of tokens in the GGUF vocabulary (cached like compare_batching's KV shape)."""
    st = path.stat()
    key = hashlib.sha256(f"vocab|{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    cache = cl.MODEL_CACHE / ".sizes" / f"vocab-{key}.json"
    try:
        return int(json.loads(cache.read_text())["vocab"])
    except (OSError, ValueError, KeyError):
        pass
    import gguf  # PyPI `gguf`

    r = gguf.GGUFReader(str(path))
    f = r.fields.get("tokenizer.ggml.tokens")
    n = len(f.data) if f is not None else 0
    if n <= 0:
        raise ValueError("no tokenizer.ggml.tokens in the metadata")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"vocab": n}))
    except OSError:
        pass
    return n


def ctx_per_slot(p: int, t: int, r: float, align: int) -> int:
    need = math.ceil(p * (1 + r)) + math.ceil(t * (1 + r))
    return -(-need // align) * align if align > 1 else need


# ------------------------------------------------------------------------------ servers
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (OSError, ValueError) as e:
        return -1, str(e)


def proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (all its threads), from /proc/PID/stat."""
    try:
        s = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, engine: str, cmd: list[str], port: int, log_path: Path):
        self.engine, self.cmd, self.port, self.log_path = engine, cmd, port, log_path
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None
        self.started = 0.0

    def start(self, timeout: float) -> float:
        """Starts the server and waits for /health to answer 200; returns the seconds it took."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "w") as f:  # a file, not a pipe: nothing has to drain it
            self.proc = subprocess.Popen(self.cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        self.started = time.monotonic()
        last = (0, "")
        while time.monotonic() - self.started < timeout:
            if self.proc.poll() is not None:
                raise ServerFailed(f"{self.engine} server exited with {self.proc.returncode} before it was ready: "
                                   f"{cl.tail(self.log(), 8)}")
            last = http_get(self.base + "/health", timeout=2)
            if last[0] == 200:
                return time.monotonic() - self.started
            time.sleep(0.25)
        raise ServerFailed(f"{self.engine} server not ready after {timeout:.0f}s (last /health: {last[0]} "
                           f"{last[1][:200]}): {cl.tail(self.log(), 8)}")

    def cpu(self) -> float | None:
        return proc_cpu_seconds(self.proc.pid) if self.proc else None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 60) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            log(f"{self.engine} server did not stop within {timeout:.0f}s of SIGTERM; killing it")
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            return None


class ServerFailed(Exception):
    pass


def wait_quiet_besides(server: Server | None, max_wait: float, threshold: float) -> dict:
    """cl.wait_quiet, but not counting the (idle) server we started."""
    if max_wait <= 0:
        return {}

    def load() -> tuple[float | None, float | None]:
        a, sa = cl._proc_stat(), server.cpu() if server else 0.0
        time.sleep(1.0)
        b, sb = cl._proc_stat(), server.cpu() if server else 0.0
        if not a or not b:
            return None, None
        own = (sb - sa) if sa is not None and sb is not None else 0.0
        return max(0.0, (b[0] - a[0]) + (b[1] - a[1]) - own), own

    t0 = time.monotonic()
    other, own = load()
    warned = False
    while other is not None and other >= threshold and time.monotonic() - t0 < max_wait:
        if not warned:
            log(f"waiting for a quiet machine: other processes use {other:.2f} cores "
                f"(threshold {threshold}, up to {max_wait:.0f}s)")
            warned = True
        time.sleep(3)
        other, own = load()
    waited = time.monotonic() - t0
    if other is not None and other >= threshold:
        log(f"still busy after {waited:.0f}s ({other:.2f} cores); running anyway")
    rec = {"waited_s": round(waited, 1), "other_cpu_cores_before": None if other is None else round(other, 3)}
    if server is not None and own is not None:
        rec["server_idle_cores"] = round(own, 3)
    return rec


def warmup(server: Server, vocab: int, n_prompt: int, timeout: float) -> dict:
    """One streamed completion with a token-id prompt, as the client sends them; checks what
    the server reports back (usage, number of text chunks, finish reason)."""
    code, body = http_get(server.base + "/v1/models")
    model = ""
    try:
        model = json.loads(body)["data"][0]["id"]
    except (ValueError, KeyError, IndexError, TypeError):
        pass
    rng = random.Random(12345)
    prompt = [rng.randrange(vocab // 2, vocab) for _ in range(n_prompt)]
    req = {"prompt": prompt, "max_tokens": WARMUP_TOKENS, "temperature": 0, "stream": True, "ignore_eos": True,
           "stream_options": {"include_usage": True}}
    if model:
        req["model"] = model
    out: dict[str, Any] = {"models_status": code, "model": model, "prompt_tokens_sent": n_prompt,
                           "max_tokens": WARMUP_TOKENS}
    t0 = time.monotonic()
    try:
        r = urllib.request.Request(server.base + "/v1/completions", data=json.dumps(req).encode(),
                                   headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            status, raw = resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read().decode(errors="replace")
    except OSError as e:
        raise ServerFailed(f"warm-up request to {server.engine} failed: {e}") from None
    out["seconds"] = round(time.monotonic() - t0, 3)
    out["status"] = status
    if status != 200:
        out["body"] = raw[:2000]
        raise ServerFailed(f"warm-up request to {server.engine} answered HTTP {status}: {raw[:500]}")
    chunks, text_chunks, usage, finish = 0, 0, None, None
    for ev in raw.split("\n\n"):
        ev = ev.strip()
        if not ev.startswith("data: ") or ev == "data: [DONE]":
            continue
        try:
            j = json.loads(ev[6:])
        except ValueError:
            continue
        chunks += 1
        if isinstance(j.get("usage"), dict):
            usage = j["usage"]
        for c in j.get("choices") or []:
            if c.get("text"):
                text_chunks += 1
            if c.get("finish_reason"):
                finish = c["finish_reason"]
    out.update({"events": chunks, "text_events": text_chunks, "usage": usage, "finish_reason": finish,
                "first_events": raw[:600], "last_events": raw[-600:]})
    problems = []
    if usage is None:
        problems.append("no `usage` in the stream (the client then counts text events as tokens)")
    else:
        if usage.get("prompt_tokens") != n_prompt:
            problems.append(f"usage.prompt_tokens = {usage.get('prompt_tokens')} for a prompt of {n_prompt} ids")
        if usage.get("completion_tokens") != WARMUP_TOKENS:
            problems.append(f"usage.completion_tokens = {usage.get('completion_tokens')} for max_tokens "
                            f"{WARMUP_TOKENS} with ignore_eos")
    if text_chunks != WARMUP_TOKENS:
        problems.append(f"{text_chunks} events with text for {WARMUP_TOKENS} tokens (the client's ITL and TTFT "
                        f"only see events with text)")
    if finish != "length":
        problems.append(f"finish_reason {finish!r}, expected 'length'")
    out["problems"] = problems
    return out


# ------------------------------------------------------------------------------ engines
def llama_cmd(bindir: Path, model: Path, port: int, ctx: int, a) -> list[str]:
    return [str(bindir / "llama-server"), "-m", str(model), "-t", str(a.threads), "-np", str(a.slots),
            "-c", str(a.slots * ctx), "--host", "127.0.0.1", "--port", str(port), "--no-webui", "-lv", "4",
            *shlex.split(a.llamacpp_args)]


def pagoda_cmd(pagoda: Path, model: Path, port: int, ctx: int, kv_bytes: int, a) -> list[str]:
    return [str(pagoda), "serve", "-m", str(model), "-t", str(a.threads), "--max-num-seqs", str(a.slots),
            "-c", str(ctx), "--kv-cache-memory", str(kv_bytes), "--host", "127.0.0.1", "--port", str(port),
            *shlex.split(a.pagoda_args)]


_LLAMA_WARN = re.compile(r"^\s*[0-9.]+ [WE] ")  # llama.cpp's log lines carry a level letter
_PAGODA_WARN = re.compile(r"warn|error|fail", re.I)


def server_info(engine: str, text: str) -> dict:
    """What the server's log says about itself: the warnings, and for llama.cpp its context,
    slots, KV size and flash attention; for Pagoda its context and KV."""
    lines = text.splitlines()
    warnings = []
    pat = _LLAMA_WARN if engine == "llamacpp" else _PAGODA_WARN
    for l in lines:
        if pat.search(l) and l.strip() not in warnings:
            warnings.append(l.strip())
    info: dict[str, Any] = {"warnings": warnings[:60]}
    if engine == "llamacpp":
        info.update(cb.parse_llama_log(text))
        m = re.search(r"n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '?(\w+)", text)
        if m:
            info.update({"n_slots": int(m.group(1)), "n_ctx_slot": int(m.group(2)),
                         "slots_kv_unified": m.group(3) == "true"})
        m = re.search(r"system_info: (.*)", text)
        if m:
            info["system_info"] = m.group(1).strip()
        m = re.search(r"common_params_print_info: (build .*)", text)
        if m:
            info["build"] = m.group(1).strip()
    else:
        m = re.search(r"context (\d+) \| KV (\d+) blocks of (\d+)(?: x (\d+) layers in \d+ layer groups)? "
                      r"\((\w+), ([0-9.]+) MiB\).*threads (\d+)", text)
        if m:
            info.update({"context": int(m.group(1)), "kv_blocks": int(m.group(2)), "block_size": int(m.group(3)),
                         "kv_dtype": m.group(5), "kv_mib": float(m.group(6)), "threads": int(m.group(7))})
            if m.group(4):  # a block holds one sliding-window layer group's layers
                info["layers_per_block"] = int(m.group(4))
    return info


def run_client(pagoda: Path, server: Server, model: Path, lp: dict, a, timeout: float) -> tuple[dict, dict]:
    cmd = [str(pagoda), "bench", "serve", "--base-url", server.base, "-m", str(model),
           "--num-prompts", str(a.num_prompts), "--input-len", str(a.input_len), "--output-len", str(a.output_len),
           "--range-ratio", str(a.range_ratio), "--max-concurrency", str(lp["concurrency"])]
    if lp["rate"]:
        cmd += ["--request-rate", str(lp["rate"])]
    cmd += ["--seed", str(lp["seed"]), "--json"]
    st0, ch0, sv0 = cl._proc_stat(), cl._children_cpu(), server.cpu()
    rec = cl.run_cmd(cmd, timeout)
    st1, ch1, sv1 = cl._proc_stat(), cl._children_cpu(), server.cpu()
    wall = rec["wall_s"]
    if st0 and st1 and sv0 is not None and sv1 is not None and wall > 0:
        busy = (st1[0] - st0[0]) - (ch1 - ch0) - (sv1 - sv0)
        rec["other_cpu_cores"] = round(min(float(os.cpu_count() or 1), max(0.0, busy) / wall), 3)
        rec["server_cores"] = round((sv1 - sv0) / wall, 3)
        rec["client_cores"] = round((ch1 - ch0) / wall, 3)
    j = None
    out = rec["_stdout"]
    try:
        j = json.loads(out[out.index("{"):])
    except ValueError:
        pass
    if server.proc is not None and server.proc.poll() is not None:
        raise cl.RunFailed(f"the {server.engine} server died during the run (exit {server.proc.returncode}): "
                           f"{cl.tail(server.log(), 6)}", rec)
    if j is None:
        raise cl.RunFailed(f"pagoda bench serve exit {rec['rc']}{' (timeout)' if rec['timed_out'] else ''}, no JSON: "
                           f"{cl.tail(rec['_stderr'], 5)} {cl.tail(out, 3)}", rec)
    rec["parsed"] = j
    if rec["rc"] != 0 or j.get("failed"):
        raise cl.RunFailed(f"pagoda bench serve exit {rec['rc']}: {j.get('failed')} of {j.get('num_prompts')} "
                           f"requests failed, first error: {j.get('first_error')!r}", rec)
    try:
        res = {
            "seconds": float(j["seconds"]),
            "req_s": float(j["requests_per_second"]),
            "output_tps": float(j["output_tokens_per_second"]),
            "total_tps": float(j["total_tokens_per_second"]),
            "input_tokens": int(j["input_tokens"]),
            "output_tokens": int(j["output_tokens"]),
        }
        for m in ("ttft", "tpot", "itl", "e2e"):
            for q in ("mean", "p50", "p90", "p99"):
                res[f"{m}_{q}"] = float(j[f"{m}_ms"][q])
    except (KeyError, TypeError, ValueError) as ex:
        raise cl.RunFailed(f"pagoda bench serve output not understood: {ex}", rec) from None
    return res, rec


# ------------------------------------------------------------------------------- output
METRICS = ["req_s", "output_tps", "total_tps", "seconds"] + [f"{m}_{q}" for m in ("ttft", "tpot", "itl", "e2e")
                                                             for q in ("mean", "p50", "p90", "p99")]


def med(vals: list) -> float | None:
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarize(lp: dict) -> None:
    s: dict[str, Any] = {}
    for eng in ENGINES:
        runs = [r for r in lp["runs"] if r["engine"] == eng and "result" in r]
        e: dict[str, Any] = {"n": len(runs), "errors": sum(1 for r in lp["runs"] if r["engine"] == eng and "error" in r)}
        for k in METRICS:
            e[k] = med([r["result"][k] for r in runs])
        vals = [r["result"]["output_tps"] for r in runs]
        e["output_tps_values"] = vals
        e["spread_pct"] = cl.spread(vals)
        e["server_cores"] = med([r.get("server_cores") for r in runs])
        e["client_cores"] = med([r.get("client_cores") for r in runs])
        e["tokens"] = sorted({(r["result"]["input_tokens"], r["result"]["output_tokens"]) for r in runs})
        oc = [r.get("other_cpu_cores") for r in runs if r.get("other_cpu_cores") is not None]
        e["max_other_cpu_cores"] = max(oc) if oc else None
        s[eng] = e
    l, p = s["llamacpp"], s["pagoda"]

    def ratio(x, y):
        return x / y if x and y else None

    s["throughput_ratio"] = ratio(p["output_tps"], l["output_tps"])   # pagoda / llama.cpp
    s["req_s_ratio"] = ratio(p["req_s"], l["req_s"])
    s["tpot_ratio"] = ratio(l["tpot_p50"], p["tpot_p50"])              # llama.cpp / pagoda
    s["ttft_ratio"] = ratio(l["ttft_p50"], p["ttft_p50"])
    s["itl_ratio"] = ratio(l["itl_p50"], p["itl_p50"])
    s["e2e_ratio"] = ratio(l["e2e_p50"], p["e2e_p50"])
    loads = [r.get("other_cpu_cores") for r in lp["runs"] if r.get("other_cpu_cores") is not None]
    s["max_other_cpu_cores"] = max(loads) if loads else None
    s["same_work"] = len(set(l["tokens"]) | set(p["tokens"])) <= 1
    lp["summary"] = s


def f1(v: float | None, nd: int = 1) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def fms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fx(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def markdown(doc: dict) -> str:
    m = doc["machine"]
    a = doc["args"]
    out = [f"Pagoda {m['pagoda_describe']} ({m['pagoda_build_type'] or '?'} build) `pagoda serve` vs llama.cpp "
           f"`llama-server` (llama-cpp-python {m['llamacpp_python_version'] or '?'}, "
           f"{doc.get('llamacpp_version') or '?'}) | {m['cpu_model']} | {doc['threads']} threads | "
           f"{a['slots']} slots | client `pagoda bench serve`: {a['num_prompts']} requests, input {a['input_len']}, "
           f"output {a['output_len']}, range ratio {a['range_ratio']} | {doc['rounds']} rounds, medians",
           "",
           "Latencies in ms (p50 over the requests of a run, median over the rounds). throughput p/l = Pagoda's "
           "output tok/s / llama.cpp's; TPOT l/p = llama.cpp's TPOT p50 / Pagoda's: above 1.00x Pagoda is better. "
           "spread = (max - min) / median of output tok/s over the rounds.",
           "",
           "| row | load | engine | req/s | output tok/s | TTFT p50 | TPOT p50 | ITL p50 | E2E p50 "
           "| throughput p/l | TPOT l/p | spread | other cpu |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in doc["rows"]:
        if not row.get("loads"):
            out.append(f"| {row['name']} | - | - | error | error | - | - | - | - | - | - | - | - |")
        for lp in row.get("loads", []):
            s = lp.get("summary")
            if not s:
                out.append(f"| {row['name']} | {lp['label']} | - | - | - | - | - | - | - | - | - | - | - |")
                continue
            for eng in ENGINES:
                e = s[eng]
                oc = "-" if e["max_other_cpu_cores"] is None else f"{e['max_other_cpu_cores']:.2f}"
                sp = "-" if e["spread_pct"] is None else f"{e['spread_pct']:.0f}%"
                if not e["n"]:
                    cells = ["error"] * 2 + ["-"] * 4
                else:
                    cells = [f1(e["req_s"], 2), cl.fmt_tps(e["output_tps"]), fms(e["ttft_p50"]), fms(e["tpot_p50"]),
                             fms(e["itl_p50"]), fms(e["e2e_p50"])]
                ratios = (["", ""] if eng == "llamacpp" else [fx(s["throughput_ratio"]), fx(s["tpot_ratio"])])
                out.append(f"| {row['name']} | {lp['label']} | {ENGINE_NAMES[eng]} | " + " | ".join(cells) + " | "
                           + " | ".join(ratios) + f" | {sp} | {oc} |")
    out.append("")
    out.append("| row | load | ctx/slot | llama-server -c / -np | KV MiB llama.cpp / pagoda | flash attn "
               "| TTFT p99 l / p | TPOT p99 l / p | E2E p99 l / p | server cores l / p | output tokens l / p |")
    out.append("| --- | --- | ---: | --- | --- | :---: | --- | --- | --- | --- | --- |")
    for row in doc["rows"]:
        srv = {eng: [x for x in row.get("servers", []) if x["engine"] == eng and x.get("info")] for eng in ENGINES}
        lkv = med([x["info"].get("kv_mib") for x in srv["llamacpp"]])
        pkv = med([x["info"].get("kv_mib") for x in srv["pagoda"]])
        fa = next((x["info"].get("flash_attn") for x in srv["llamacpp"] if x["info"].get("flash_attn") is not None),
                  None)
        fa_s = "-" if fa is None else ("on" if fa else "off")
        for lp in row.get("loads", []):
            s = lp.get("summary")
            if not s:
                continue
            l, p = s["llamacpp"], s["pagoda"]

            def pair(k, fmt=fms):
                return f"{fmt(l.get(k))} / {fmt(p.get(k))}"

            toks = f"{'/'.join(str(t[1]) for t in l['tokens']) or '-'} / {'/'.join(str(t[1]) for t in p['tokens']) or '-'}"
            out.append(f"| {row['name']} | {lp['label']} | {row['ctx_per_slot']} | {row['llama_ctx']} / "
                       f"{doc['args']['slots']} | {f1(lkv, 2)} / {f1(pkv, 2)} | {fa_s} | {pair('ttft_p99')} | "
                       f"{pair('tpot_p99')} | {pair('e2e_p99')} | {pair('server_cores', lambda v: f1(v, 2))} | "
                       f"{toks} |")
    out.append("")
    for row in doc["rows"]:
        for eng in ENGINES:
            x = next((x for x in row.get("servers", []) if x["engine"] == eng), None)
            if x:
                out.append(f"- {row['name']} {ENGINE_NAMES[eng]}: `{x['cmd']}`")
    notes = doc.get("notes") or []
    if notes:
        out.append("")
        out += [f"- {n}" for n in notes]
    return "\n".join(out)


def add_notes(doc: dict, quiet_threshold: float) -> None:
    notes = []
    for row in doc["rows"]:
        seen_warn: set[str] = set()
        seen_probe: set[str] = set()
        for x in row.get("servers", []):
            who = ENGINE_NAMES[x["engine"]]
            if x.get("error"):
                notes.append(f"{row['name']} round {x['round'] + 1} {who}: {x['error']}")
            for w in (x.get("info") or {}).get("warnings", []):
                key = f"{who}|{w}"
                if key not in seen_warn:
                    seen_warn.add(key)
                    notes.append(f"{row['name']}: {who} logged: `{w[:240]}`")
            for pr in (x.get("warmup") or {}).get("problems", []):
                key = f"{who}|{pr}"
                if key not in seen_probe:
                    seen_probe.add(key)
                    notes.append(f"{row['name']}: {who} warm-up request: {pr}")
        srv = {eng: [x for x in row.get("servers", []) if x["engine"] == eng and x.get("info")] for eng in ENGINES}
        lkv = med([x["info"].get("kv_mib") for x in srv["llamacpp"]])
        pkv = med([x["info"].get("kv_mib") for x in srv["pagoda"]])
        if lkv and pkv and abs(lkv - pkv) > 0.01 * pkv + 0.01:
            notes.append(f"{row['name']}: llama.cpp allocated {lkv:.2f} MiB of KV, Pagoda {pkv:.2f} MiB (asked: "
                         f"{row['kv_bytes'] / 2**20:.2f} MiB); llama.cpp pads each slot's stream to 256 cells and "
                         f"may size sliding-window layers differently.")
        for lp in row.get("loads", []):
            s = lp.get("summary")
            if not s:
                continue
            where = f"{row['name']} {lp['label']}"
            if not s["same_work"]:
                notes.append(f"{where}: the runs did not all produce the same (input, output) token counts: "
                             f"llama.cpp {s['llamacpp']['tokens']}, Pagoda {s['pagoda']['tokens']}; the work "
                             f"differs (ignore_eos or usage not honoured?).")
            oc = s.get("max_other_cpu_cores")
            if oc is not None and oc > quiet_threshold:
                notes.append(f"{where}: other processes used up to {oc:.2f} cores during a run; llama.cpp "
                             f"collapses under contention, do not trust this ratio.")
            if lp["rate"]:
                for eng in ENGINES:
                    rq = s[eng].get("req_s")
                    if rq and rq < 0.8 * lp["rate"]:
                        notes.append(f"{where}: {ENGINE_NAMES[eng]} served {rq:.2f} req/s of the {lp['rate']} "
                                     f"offered: it did not keep up, requests queued.")
    doc["notes"] = notes


def llamacpp_version(bindir: Path) -> str:
    try:
        p = subprocess.run([str(bindir / "llama-server"), "--version"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = re.search(r"version: (.*)", p.stdout)
    return m.group(1).strip() if m else ""


def parse_rates(spec: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in [x.strip() for x in spec.split(",") if x.strip()]:
        if "=" not in item:
            raise ValueError(f"{item!r} is not ROW=RATE")
        k, v = item.split("=", 1)
        out[k.strip()] = float(v)
    return out


def main() -> int:
    signal.signal(signal.SIGINT, cl._interrupt)
    signal.signal(signal.SIGTERM, cl._interrupt)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build-dir", type=Path, default=REPO / "build", help="Pagoda build (default: %(default)s)")
    ap.add_argument("--rows", default=DEFAULT_ROWS,
                    help="comma-separated rows / groups / LABEL=PATH, as in compare_llamacpp.py (default: %(default)s)")
    ap.add_argument("--model", action="append", default=[], metavar="LABEL=PATH", help="add a row for a GGUF file")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per row, each engine's server once per round")
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("--slots", type=int, default=16,
                    help="parallel sequences: llama-server -np and Pagoda --max-num-seqs (default 16)")
    ap.add_argument("--num-prompts", type=int, default=64, help="requests per load point (default 64)")
    ap.add_argument("--input-len", type=int, default=256, help="mean prompt tokens (default 256)")
    ap.add_argument("--output-len", type=int, default=128, help="mean output tokens (default 128)")
    ap.add_argument("--range-ratio", type=float, default=0.5,
                    help="lengths uniform in [len*(1-r), len*(1+r)] (default 0.5)")
    ap.add_argument("--load-points", default="burst,rate",
                    help="comma-separated: burst (all at once, --max-concurrency in flight) and/or rate "
                         "(Poisson arrivals at the row's rate) (default: %(default)s)")
    ap.add_argument("--max-concurrency", type=int, default=0,
                    help="most requests in flight, both load points (default 0: = --slots)")
    ap.add_argument("--rates", default=DEFAULT_RATES, metavar="ROW=RPS,...",
                    help="Poisson request rate per row for the `rate` load point (default: %(default)s)")
    ap.add_argument("--default-rate", type=float, default=1.0,
                    help="request rate for rows not in --rates (default 1.0 req/s)")
    ap.add_argument("--seed", type=int, default=0, help="workload seed; load point i uses SEED+i (default 0)")
    ap.add_argument("--ctx-align", type=int, default=256,
                    help="round the per-slot context up to a multiple of this (default 256, llama.cpp's padding)")
    ap.add_argument("--llamacpp-bin", type=Path, help="llama.cpp bin dir (default: scripts/build_llamacpp's)")
    ap.add_argument("--json", action="store_true",
                    help="print the raw results (the JSON document) on stdout; the table then goes to stderr")
    ap.add_argument("--json-out", type=Path, help="default: $PAGODA_CACHE/bench-results/serving-<time>.json")
    ap.add_argument("--md-out", type=Path, help="also write the markdown tables here")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds per client run (default 0: one hour per GiB of model file, at least one hour)")
    ap.add_argument("--start-timeout", type=float, default=600, help="seconds for a server to become ready")
    ap.add_argument("--regen", action="store_true", help="regenerate the generated models")
    ap.add_argument("--llamacpp-args", default="", metavar="ARGS",
                    help="extra llama-server arguments, e.g. '-fa off' or '--cache-ram 0' (recorded in the JSON)")
    ap.add_argument("--pagoda-args", default="", metavar="ARGS",
                    help="extra `pagoda serve` arguments; one starting with a dash needs '=', "
                         "e.g. --pagoda-args=--no-prefix-caching")
    ap.add_argument("--wait-quiet", type=float, default=300, metavar="S",
                    help="before each server start and each client run, wait up to S seconds for other "
                         "processes to use under --quiet-threshold cores, then run anyway (default 300; 0: do not wait)")
    ap.add_argument("--quiet-threshold", type=float, default=0.15, metavar="CORES")
    ap.add_argument("--list-rows", action="store_true", help="print the rows and exit")
    a = ap.parse_args()

    if a.list_rows:
        for name, r in cl.ROWS.items():
            where = cl.gen_model_path(r) if r.kind == "gen" else "scripts/fetch_model"
            print(f"{name:12} {'(default) ' if name in DEFAULT_ROWS.split(',') else '          '}"
                  f"{r.qtype or 'Q4_K_M':6} {r.shape or r.note}  -> {where}")
        return 0
    if a.max_concurrency <= 0:
        a.max_concurrency = a.slots
    points = [x.strip() for x in a.load_points.split(",") if x.strip()]
    if not points or any(x not in ("burst", "rate") for x in points):
        ap.error(f"--load-points: burst and/or rate, not {a.load_points!r}")
    try:
        rates = parse_rates(a.rates)
    except ValueError as e:
        ap.error(f"--rates: {e}")
    if (a.rounds < 1 or a.threads < 1 or a.slots < 1 or a.num_prompts < 1 or a.input_len < 1 or a.output_len < 1
            or not 0 <= a.range_ratio <= 1 or a.ctx_align < 1):
        ap.error("need --rounds, --threads, --slots, --num-prompts, --input-len, --output-len >= 1, "
                 "0 <= --range-ratio <= 1, --ctx-align >= 1")

    try:
        rows = cl.parse_rows(a.rows, a.model)
        build = a.build_dir.resolve()
        if not (build / "bin" / "pagoda").exists():
            raise cl.SetupError(f"{build / 'bin' / 'pagoda'} missing: cmake --build {build} --target pagoda")
        if a.llamacpp_bin:
            llama_bin = a.llamacpp_bin.resolve()
        else:  # build (or find) llama-server only
            env = dict(os.environ, LLAMACPP_TARGETS=os.environ.get("LLAMACPP_TARGETS", "llama llama-server"))
            llama_bin = Path(cl.last_line([str(REPO / "scripts" / "build_llamacpp")], "build_llamacpp", env=env))
        if not (llama_bin / "llama-server").exists():
            raise cl.SetupError(f"{llama_bin / 'llama-server'} missing "
                                f"(LLAMACPP_TARGETS=llama-server scripts/build_llamacpp)")
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
        vocabs: dict[str, int] = {}
        for r in rows:
            models[r.name] = cl.make_model(r, build, a.regen, os.cpu_count() or 1)
            try:
                shapes[r.name] = cb.kv_shape(models[r.name])
                vocabs[r.name] = vocab_size(models[r.name])
            except Exception as e:  # noqa: BLE001
                raise cl.SetupError(f"{r.name}: cannot read the KV shape / vocabulary of {models[r.name]}: {e}") \
                    from None
            if not shapes[r.name]["kv_bytes_per_token"]:
                raise cl.SetupError(f"{r.name}: no KV shape in the metadata of {models[r.name]}")
    except cl.SetupError as e:
        log(f"error: {e}")
        return 2

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    json_out = a.json_out or RESULTS / f"serving-{stamp}.json"
    log_dir = json_out.with_suffix("").with_name(json_out.stem + "-logs")
    doc: dict[str, Any] = {
        "started": dt.datetime.now().isoformat(timespec="seconds"),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "threads": a.threads, "rounds": a.rounds, "machine": machine, "server_logs": str(log_dir),
        "llamacpp_version": llamacpp_version(llama_bin), "rows": [],
    }
    log(f"{a.num_prompts} requests, input {a.input_len} output {a.output_len} range {a.range_ratio}, "
        f"{a.slots} slots, concurrency {a.max_concurrency}, load points {points}, {a.rounds} rounds, "
        f"{a.threads} threads; server logs in {log_dir}")
    errors = 0
    servers_alive: list[Server] = []
    try:
        cl.write_json(doc, json_out)
        t_start = time.monotonic()
        for ri, r in enumerate(rows):
            model, shape = models[r.name], shapes[r.name]
            ctx = ctx_per_slot(a.input_len, a.output_len, a.range_ratio, a.ctx_align)
            kv_bytes = a.slots * ctx * shape["kv_bytes_per_token"]
            rate = rates.get(r.name, a.default_rate)
            loads = []
            for i, name in enumerate(points):
                if name == "burst":
                    loads.append({"name": "burst", "label": f"burst c{a.max_concurrency}", "rate": 0,
                                  "concurrency": a.max_concurrency, "seed": a.seed + i, "runs": []})
                else:
                    loads.append({"name": "rate", "label": f"{rate:g}/s c{a.max_concurrency}", "rate": rate,
                                  "concurrency": a.max_concurrency, "seed": a.seed + i, "runs": []})
            row: dict[str, Any] = {"name": r.name, "model": str(model), "kv_shape": shape, "vocab": vocabs[r.name],
                                   "ctx_per_slot": ctx, "llama_ctx": a.slots * ctx, "kv_bytes": kv_bytes,
                                   "servers": [], "loads": loads}
            doc["rows"].append(row)
            timeout = a.timeout or 3600 * max(1.0, model.stat().st_size / 2**30)
            log(f"{r.name}: ctx/slot {ctx} (max request {math.ceil(a.input_len * (1 + a.range_ratio))} + "
                f"{math.ceil(a.output_len * (1 + a.range_ratio))}), llama-server -c {a.slots * ctx} -np {a.slots}, "
                f"Pagoda KV {kv_bytes / 2**20:.2f} MiB ({kv_bytes} bytes)")
            row_t0 = time.monotonic()
            for rnd in range(a.rounds):
                order = ENGINES if rnd % 2 == 0 else ENGINES[::-1]
                for eng in order:
                    quiet = wait_quiet_besides(None, a.wait_quiet, a.quiet_threshold)
                    port = free_port()
                    tag = f"{r.name}-{eng}-r{rnd + 1}"
                    cmd = (llama_cmd(llama_bin, model, port, ctx, a) if eng == "llamacpp"
                           else pagoda_cmd(pagoda_exe, model, port, ctx, kv_bytes, a))
                    srv = Server(eng, cmd, port, log_dir / f"{tag}.log")
                    srec: dict[str, Any] = {"engine": eng, "round": rnd, "cmd": " ".join(shlex.quote(c) for c in cmd),
                                            "log": str(srv.log_path), **quiet}
                    row["servers"].append(srec)
                    server_error = None
                    try:
                        servers_alive.append(srv)
                        srec["ready_s"] = round(srv.start(a.start_timeout), 2)
                        if eng == "llamacpp":
                            code, body = http_get(srv.base + "/props")
                            try:
                                props = json.loads(body) if code == 200 else None
                            except ValueError:
                                props = None
                            if isinstance(props, dict):
                                gs = props.get("default_generation_settings") or {}
                                srec["props"] = {k: props.get(k) for k in ("total_slots", "build_info", "model_path")
                                                 if k in props}
                                srec["props"]["slot_n_ctx"] = gs.get("n_ctx")
                        srec["warmup"] = warmup(srv, vocabs[r.name], min(a.input_len, ctx - WARMUP_TOKENS), timeout)
                        log(f"{tag}: ready in {srec['ready_s']}s, warm-up {srec['warmup']['seconds']}s"
                            + (f"; warm-up problems: {'; '.join(srec['warmup']['problems'])}"
                               if srec["warmup"]["problems"] else ""))
                    except ServerFailed as e:
                        server_error = str(e)
                        srec["error"] = server_error
                        log(f"{tag}: ERROR {e}")
                    for lp in loads:
                        base = {"engine": eng, "round": rnd, "started": dt.datetime.now().isoformat(timespec="seconds")}
                        if server_error:
                            errors += 1
                            lp["runs"].append({**base, "error": f"server: {server_error}"})
                            continue
                        base.update(wait_quiet_besides(srv, a.wait_quiet, a.quiet_threshold))
                        base["loadavg_before"] = os.getloadavg()
                        t0 = time.monotonic()
                        try:
                            res, rec = run_client(pagoda_exe, srv, model, lp, a, timeout)
                            rec = {**base, **rec, "result": res}
                            log(f"{r.name} {lp['label']} round {rnd + 1}/{a.rounds} {eng:8}: {res['req_s']:.2f} req/s, "
                                f"output {res['output_tps']:.1f} tok/s, TTFT p50 {res['ttft_p50']:.0f} ms, TPOT p50 "
                                f"{res['tpot_p50']:.1f} ms ({res['output_tokens']} tokens, {time.monotonic() - t0:.0f}s; "
                                f"server {rec.get('server_cores', '?')} cores, other cpu {rec.get('other_cpu_cores', '?')})")
                        except cl.RunFailed as e:
                            errors += 1
                            rec = {**base, **e.record, "error": str(e)}
                            rec["stderr_tail"] = cl.tail(rec.get("_stderr", ""), 30)
                            rec["stdout_tail"] = cl.tail(rec.get("_stdout", ""), 30)
                            log(f"{r.name} {lp['label']} round {rnd + 1}/{a.rounds} {eng}: ERROR {e}")
                        rec.pop("_stdout", None)
                        rec.pop("_stderr", None)
                        lp["runs"].append(rec)
                        cl.write_json(doc, json_out)
                    srec["exit"] = srv.stop()
                    servers_alive.remove(srv)
                    srec["info"] = server_info(eng, srv.log())
                    if srec["info"].get("kv_blocks"):  # Pagoda prints whole MiB; the exact size
                        layers = srec["info"].get("layers_per_block", shape["n_layer"])
                        srec["info"]["kv_mib"] = (srec["info"]["kv_blocks"] * srec["info"]["block_size"]
                                                  * shape["kv_bytes_per_token"] * layers / shape["n_layer"] / 2**20)
                    cl.write_json(doc, json_out)
                if rnd == 0 and a.rounds > 1:
                    per_round = time.monotonic() - row_t0
                    log(f"{r.name}: a round takes {per_round / 60:.1f} min; about "
                        f"{per_round * (a.rounds - 1) / 60:.0f} min left for this row")
            for lp in loads:
                summarize(lp)
            log(f"{r.name}: done ({ri + 1}/{len(rows)} rows, {(time.monotonic() - t_start) / 60:.1f} min so far)")
            cl.write_json(doc, json_out)
    except KeyboardInterrupt:
        for srv in servers_alive:
            srv.stop(timeout=10)
        doc["interrupted"] = True
        for row in doc["rows"]:
            for lp in row.get("loads", []):
                if "summary" not in lp and lp["runs"]:
                    summarize(lp)
        finish(doc, a, json_out)
        log(f"interrupted; partial results in {json_out}")
        return 130
    finally:
        for srv in servers_alive:
            srv.stop(timeout=10)

    finish(doc, a, json_out)
    for row in doc["rows"]:
        for lp in row["loads"]:
            for rec in lp["runs"]:
                if "error" in rec:
                    log(f"{row['name']} {lp['label']} round {rec['round'] + 1} {rec['engine']}: {rec['error']}")
    log(f"every run: {json_out}; server logs: {log_dir}")
    return 1 if errors else 0


def finish(doc: dict, a, json_out: Path) -> None:
    doc["finished"] = dt.datetime.now().isoformat(timespec="seconds")
    add_notes(doc, a.quiet_threshold)
    table = markdown(doc)
    doc["markdown"] = table
    cl.write_json(doc, json_out)
    if a.json:
        print(table, file=sys.stderr)
        print(json.dumps(doc, indent=1, default=str))
    else:
        print(table)
    if a.md_out:
        a.md_out.write_text(table + "\n")


if __name__ == "__main__":
    sys.exit(main())
