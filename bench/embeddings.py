#!/usr/bin/env python3
"""Embedding throughput: `pagoda serve` vs `llama-server --embeddings` on the same GGUF,
measured by the same openai client, in alternating rounds.

  bench/embeddings.py                         # all-MiniLM-L6-v2 F16, 64 inputs of 128 tokens, 5 rounds
  bench/embeddings.py --inputs 64 --tokens 128 --rounds 3 --json-out raw.json
  bench/embeddings.py --type Q8_0             # the same file quantized (twice the throughput here)

The model is all-MiniLM-L6-v2 from PyPI, converted by `pagoda convert --type F16` (what
llama.cpp's converter writes by default) into $PAGODA_CACHE/bench-models/. The inputs are
texts of common words that each WordPiece into one token, N (--inputs) of them with
exactly T (--tokens) tokens each, [CLS] and [SEP] included, checked by the server's
reported usage. Two loads per round, each server started fresh per round:
  batch       one request carrying all N inputs (how RAG indexing calls the endpoint)
  concurrent  N requests of one input each, 16 in flight (many clients)
Servers (2 threads each, one machine):
  llama.cpp  llama-server -m M --embeddings --pooling mean -t 2 -np S -c S*512 -b S*512 -ub S*512
             (S = --slots, default 16: an encoder's whole sequence must fit one ubatch, and
             each slot holds one input of up to 512 tokens)
  Pagoda     pagoda serve -m M -t 2 (its defaults: 64 sequences, 512 tokens a step)
Reported: median inputs/s and tokens/s per engine and load, the ratio Pagoda / llama.cpp,
and the cores other processes kept busy during the runs (/proc/stat minus the server's and
the client's own CPU time; trust runs near 0)."""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
CACHE = Path(os.environ.get("PAGODA_CACHE", Path.home() / ".cache" / "pagoda"))

WORDS = ("the cat sat on mat dog ran to park and then went home with a red ball it was very good day for all of "
         "us we like to play in sun when sky is blue but rain can come at any time so take an old hat").split()


def free_port() -> int:
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


TICK = os.sysconf("SC_CLK_TCK")


def busy_seconds() -> float:
    """CPU seconds all processes have used (every core), from /proc/stat."""
    with open("/proc/stat") as f:
        parts = [float(x) for x in f.readline().split()[1:]]
    return (sum(parts) - parts[3] - parts[4]) / TICK


def process_seconds(pid: int) -> float:
    """CPU seconds a process (all its threads) has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (float(fields[11]) + float(fields[12])) / TICK


def own_seconds() -> float:
    t = os.times()
    return t.user + t.system


class Server:
    def __init__(self, cmd: list[str], port: int, log: Path):
        self.cmd = cmd
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited early; see {log}")
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                time.sleep(0.2)
        raise RuntimeError(f"{cmd[0]} did not come up; see {log}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def make_inputs(tokenizer, n: int, tokens: int, seed: int) -> list[str]:
    single = [w for w in WORDS if len(tokenizer.encode(w, add_special_tokens=False).ids) == 1]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(single) for _ in range(tokens - 2))
        assert len(tokenizer.encode(text).ids) == tokens
        out.append(text)
    return out


def run_load(client, inputs: list[str], load: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    if load == "batch":
        r = client.embeddings.create(model="m", input=inputs)
        assert len(r.data) == len(inputs)
        used = r.usage.prompt_tokens
    else:
        with ThreadPoolExecutor(16) as ex:
            rs = list(ex.map(lambda t: client.embeddings.create(model="m", input=t), inputs))
        used = sum(r.usage.prompt_tokens for r in rs)
    return time.perf_counter() - t0, used


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--type", default="F16", help="the GGUF's matrix type, as pagoda convert --type takes it")
    ap.add_argument("--json-out", type=Path)
    a = ap.parse_args()
    import openai
    import minilm_reference as mr

    pagoda = ROOT / "build" / "bin" / "pagoda"
    bindir = Path(subprocess.run([str(ROOT / "scripts" / "build_llamacpp")], capture_output=True, text=True,
                                 check=True).stdout.strip().splitlines()[-1])
    models = CACHE / "bench-models"
    models.mkdir(parents=True, exist_ok=True)
    folder = mr.extract(models)
    gguf = models / f"all-minilm-l6-v2-{a.type.lower()}.gguf"
    if not gguf.exists():
        subprocess.run([str(pagoda), "convert", str(folder), str(gguf), "--type", a.type], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    inputs = make_inputs(mr.MiniLM(folder).tokenizer(), a.inputs, a.tokens, a.seed)
    logs = Path(tempfile.mkdtemp(prefix="pagoda-embed-bench-"))
    engines = {
        "llamacpp": lambda port: [str(bindir / "llama-server"), "-m", str(gguf), "--embeddings", "--pooling", "mean",
                                  "-t", "2", "-np", str(a.slots), "-c", str(a.slots * 512), "-b", str(a.slots * 512),
                                  "-ub", str(a.slots * 512), "--host", "127.0.0.1", "--port", str(port),
                                  "--no-webui"],
        "pagoda": lambda port: [str(pagoda), "serve", "-m", str(gguf), "-t", "2", "--host", "127.0.0.1", "--port",
                                str(port)],
    }
    runs = []
    for rnd in range(a.rounds):
        order = ["pagoda", "llamacpp"] if rnd % 2 == 0 else ["llamacpp", "pagoda"]
        for eng in order:
            port = free_port()
            s = Server(engines[eng](port), port, logs / f"{eng}-{rnd}.log")
            try:
                client = openai.OpenAI(base_url=s.base + "/v1", api_key="none", max_retries=0, timeout=600)
                run_load(client, inputs[:4], "batch")  # warm-up
                for load in ("batch", "concurrent"):
                    b0, s0, c0 = busy_seconds(), process_seconds(s.proc.pid), own_seconds()
                    secs, used = run_load(client, inputs, load)
                    b1, s1, c1 = busy_seconds(), process_seconds(s.proc.pid), own_seconds()
                    assert used == a.inputs * a.tokens, f"{eng} reported {used} tokens"
                    # Cores other processes kept busy: everything minus the server and this client.
                    other = max(0.0, (b1 - b0) - (s1 - s0) - (c1 - c0)) / secs
                    runs.append({"round": rnd, "engine": eng, "load": load, "seconds": secs, "tokens": used,
                                 "other_cores": other, "server_cores": (s1 - s0) / secs})
                    print(f"round {rnd} {eng:8s} {load:10s} {a.inputs / secs:7.1f} inputs/s "
                          f"{used / secs:8.0f} tok/s  server {(s1 - s0) / secs:.2f} cores, other {other:.2f}",
                          file=sys.stderr)
            finally:
                s.stop()
    print(f"\nall-MiniLM-L6-v2 {a.type}, {a.inputs} inputs of {a.tokens} tokens, {a.rounds} rounds (medians)\n")
    print("| load | llama.cpp inputs/s | Pagoda inputs/s | Pagoda / llama.cpp | other load (cores, max) |")
    print("| --- | --- | --- | --- | --- |")
    summary = {}
    for load in ("batch", "concurrent"):
        med = {e: statistics.median(a.inputs / r["seconds"] for r in runs if r["engine"] == e and r["load"] == load)
               for e in ("llamacpp", "pagoda")}
        summary[load] = {**med, "ratio": med["pagoda"] / med["llamacpp"]}
        other = max(r["other_cores"] for r in runs if r["load"] == load)
        print(f"| {load} | {med['llamacpp']:.1f} | {med['pagoda']:.1f} | {med['pagoda'] / med['llamacpp']:.2f}x "
              f"| {other:.2f} |")
    if a.json_out:
        a.json_out.write_text(json.dumps({"runs": runs, "summary": summary, "logs": str(logs),
                                          "llamacpp": engines["llamacpp"](0), "pagoda": engines["pagoda"](0)},
                                         indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
