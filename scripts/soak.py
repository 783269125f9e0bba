#!/usr/bin/env python3
"""Soak test: a running `pagoda serve` under mixed hostile load for a bounded time, on
loopback only.

    scripts/soak.py --base-url http://127.0.0.1:8080 --pid PID --minutes 30 [--json]
    scripts/soak.py --pagoda build/bin/pagoda --model M.gguf --minutes 3   (starts its own server)

Load, all at once from worker threads: streamed and non-streamed completions and chats,
n > 1, clients that cancel mid-stream or hang up on a non-streaming request, malformed
bodies and framing, slow clients (headers a byte at a time), and long prompts that press
on the KV cache. Measured: the server's RSS every 10 s, /health latency every second,
each request's outcome. It passes when, after a warm-up (--warmup, a fifth of the run),
RSS grew less than 5% (of its level at the end of the warm-up), no request was lost (every request that was not
cancelled on purpose got a complete HTTP reply, and no reply was a 5xx), /health never
took 1 s or more, and once idle the engine holds no KV blocks and no requests.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import socket
import subprocess
import sys
import threading
import time

import httpx


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.eE+-]+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


class Soak:
    def __init__(self, base: str, pid: int, minutes: float, vocab: int, seed: int, warmup: float):
        self.base, self.pid, self.seconds, self.vocab, self.warmup = base, pid, minutes * 60, vocab, warmup
        self.host, self.port = re.match(r"http://([^:/]+):(\d+)", base).groups()
        self.port = int(self.port)
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.lost: list[str] = []
        self.health_ms: list[float] = []
        self.rss: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.t0 = time.time()

    def count(self, what: str, lost: str | None = None):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1
            if lost:
                self.lost.append(f"{what}: {lost}")

    def prompt(self, rng: random.Random, n: int) -> list[int]:
        return [rng.randrange(3, self.vocab) for _ in range(n)]

    # ---- the clients ------------------------------------------------------------------

    def completion(self, rng: random.Random, client: httpx.Client):
        body = {"prompt": self.prompt(rng, rng.randint(4, 64)), "max_tokens": rng.randint(1, 48),
                "n": rng.choice([1, 1, 2, 4]), "temperature": rng.choice([0, 0.8]), "ignore_eos": True}
        r = client.post(self.base + "/v1/completions", json=body, timeout=300)
        ok = r.status_code == 200 and len(r.json()["choices"]) == body["n"]
        self.count("completion", None if ok or r.status_code == 429 else f"HTTP {r.status_code} {r.text[:200]}")

    def stream(self, rng: random.Random, client: httpx.Client, cancel: bool):
        body = {"messages": [{"role": "user", "content": "word " * rng.randint(1, 40)}], "max_tokens": rng.randint(4, 64),
                "stream": True, "ignore_eos": True}
        done = False
        with client.stream("POST", self.base + "/v1/chat/completions", json=body, timeout=300) as r:
            if r.status_code == 429:
                return self.count("stream_429")
            if r.status_code != 200:
                return self.count("stream", f"HTTP {r.status_code}")
            events = 0
            for line in r.iter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    events += 1
                    if cancel and events >= 3:
                        return self.count("stream_cancelled")
        self.count("stream", None if done else "stream ended without [DONE]")

    def hang_up(self, rng: random.Random):
        """A non-streaming request whose client leaves before the answer."""
        body = json.dumps({"prompt": self.prompt(rng, 16), "max_tokens": 400, "n": 2, "ignore_eos": True}).encode()
        s = socket.create_connection((self.host, self.port), timeout=10)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(rng.uniform(0.05, 0.5))
        s.close()
        self.count("hang_up")

    def malformed(self, rng: random.Random):
        bad = rng.choice([
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{bad}",
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n[]",
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
            b"GARBAGE\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32),
            b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
            b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n{"prompt": "a", "n": 100000}',
        ])
        s = socket.create_connection((self.host, self.port), timeout=10)
        try:
            s.sendall(bad)
            s.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
            status = reply[9:12]
            if status.startswith(b"5"):
                return self.count("malformed", f"5xx for {bad[:40]!r}: {reply[:200]!r}")
        except (socket.timeout, ConnectionError):
            pass  # refused or closed: fine for garbage
        finally:
            s.close()
        self.count("malformed")

    def slow_client(self, rng: random.Random):
        """Sends the headers of a /health request a few bytes at a time, then reads."""
        req = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        s = socket.create_connection((self.host, self.port), timeout=30)
        try:
            for i in range(0, len(req), 4):
                s.sendall(req[i:i + 4])
                time.sleep(rng.uniform(0.0, 0.1))
            reply = s.recv(65536)
            ok = reply.startswith(b"HTTP/1.1 200") or reply.startswith(b"HTTP/1.1 408") or not reply
            self.count("slow_client", None if ok else f"{reply[:100]!r}")
        except (socket.timeout, ConnectionError):
            self.count("slow_client")  # closed by the header timeout
        finally:
            s.close()

    def kv_pressure(self, rng: random.Random, client: httpx.Client):
        body = {"prompt": self.prompt(rng, rng.randint(200, 400)), "max_tokens": 32, "n": 4, "ignore_eos": True}
        r = client.post(self.base + "/v1/completions", json=body, timeout=600)
        ok = r.status_code in (200, 400, 429)  # 400: longer than the context the pool allows
        self.count("kv_pressure", None if ok else f"HTTP {r.status_code} {r.text[:200]}")

    def worker(self, idx: int):
        rng = random.Random(self.rng.random() + idx)
        with httpx.Client() as client:
            while not self.stop.is_set():
                kind = rng.choice(["completion", "completion", "stream", "cancel", "hang_up", "malformed",
                                   "slow", "kv"])
                try:
                    if kind == "completion":
                        self.completion(rng, client)
                    elif kind in ("stream", "cancel"):
                        self.stream(rng, client, kind == "cancel")
                    elif kind == "hang_up":
                        self.hang_up(rng)
                    elif kind == "malformed":
                        self.malformed(rng)
                    elif kind == "slow":
                        self.slow_client(rng)
                    else:
                        self.kv_pressure(rng, client)
                except (httpx.HTTPError, OSError) as e:
                    self.count(kind, f"{type(e).__name__}: {e}")

    def monitor(self):
        next_rss = 0.0
        while not self.stop.is_set():
            now = time.time() - self.t0
            if now >= next_rss:
                self.rss.append((now, rss_bytes(self.pid)))
                # Every 10 s, and at least 10 samples in a short run: the growth after the
                # warm-up needs samples past it (a 30 s run sampled at 0, 10, 20 s had none
                # past 20.1 s and reported nan).
                next_rss = now + min(10.0, self.seconds / 10)
            t = time.perf_counter()
            try:
                ok = httpx.get(self.base + "/health", timeout=10).status_code == 200
            except httpx.HTTPError:
                ok = False
            ms = (time.perf_counter() - t) * 1000
            with self.lock:
                self.health_ms.append(ms if ok else 1e9)
            time.sleep(max(0.0, 1.0 - ms / 1000))

    def run(self, workers: int) -> dict:
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True) for i in range(workers)]
        mon = threading.Thread(target=self.monitor, daemon=True)
        mon.start()
        for t in threads:
            t.start()
        time.sleep(self.seconds)
        self.stop.set()
        for t in threads:
            t.join(timeout=600)
        mon.join(timeout=30)
        # Idle: every request finished or aborted, and no KV block held.
        idle = {}
        for _ in range(100):
            m = httpx.get(self.base + "/metrics", timeout=10).text
            idle = {k: metric(m, f"pagoda:{k}") for k in ("num_requests_running", "num_requests_waiting",
                                                          "kv_cache_usage_perc")}
            if all(v == 0 for v in idle.values()):
                break
            time.sleep(0.2)
        warm = [b for t, b in self.rss if t >= self.seconds * self.warmup]
        base_rss = warm[0] if warm else 0
        growth = (max(warm) - base_rss) / base_rss if base_rss else float("nan")
        worst_health = max(self.health_ms) if self.health_ms else float("nan")
        return {"seconds": self.seconds, "workers": workers, "requests": self.counts, "lost": self.lost,
                "rss_mib": [round(b / 2**20, 1) for _, b in self.rss], "rss_growth_after_warmup": growth,
                "health_ms_max": worst_health,
                "health_ms_p50": sorted(self.health_ms)[len(self.health_ms) // 2] if self.health_ms else None,
                "idle": idle,
                "passed": (growth < 0.05 and not self.lost and worst_health < 1000
                           and all(v == 0 for v in idle.values()))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--pagoda", help="start `pagoda serve` on --model (instead of --base-url/--pid)")
    ap.add_argument("--model")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=512, help="token ids are drawn below this")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=0.2,
                    help="share of the run before RSS growth is measured (thread stacks and allocator arenas fill)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    proc = None
    if a.pagoda:
        proc = subprocess.Popen([a.pagoda, "serve", "-m", a.model, "--port", "0", "-t", "2"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            m = re.search(r"listening on (http://[^:]+:\d+)", line)
            if m:
                a.base_url, a.pid = m.group(1), proc.pid
                break
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    if not a.base_url or not a.pid:
        ap.error("give --base-url and --pid, or --pagoda and --model")
    try:
        result = Soak(a.base_url, a.pid, a.minutes, a.vocab, a.seed, a.warmup).run(a.workers)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=120)
    if a.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"soak {a.minutes} min, {a.workers} workers: {sum(result['requests'].values())} requests "
              f"{result['requests']}; lost {len(result['lost'])}; RSS {result['rss_mib'][0] if result['rss_mib'] else '?'}"
              f" -> {result['rss_mib'][-1] if result['rss_mib'] else '?'} MiB (growth after warm-up "
              f"{100 * result['rss_growth_after_warmup']:.1f}%); /health max {result['health_ms_max']:.0f} ms; "
              f"idle {result['idle']}: {'PASS' if result['passed'] else 'FAIL'}")
        for lost in result["lost"][:20]:
            print("  lost:", lost)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
