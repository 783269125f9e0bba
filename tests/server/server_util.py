"""Starting and stopping `pagoda serve` for the server tests: a generated tiny model (or
Gemma 3 270M when fetched), any free port, and a clean shutdown that checks the process
exited by itself."""
from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import tempfile
import time

import httpx

GEMMA = pathlib.Path(os.environ.get("PAGODA_CACHE", pathlib.Path.home() / ".cache" / "pagoda")) / "models" / \
    "gemma-3-270m-q4_k_m.gguf"


def gen_tiny_model(pagoda_bin, path: pathlib.Path, arch: str = "llama", vocab: int = 512, ctx: int = 512,
                   seed: int = 5) -> pathlib.Path:
    if not path.exists():
        cmd = [str(pagoda_bin("pagoda-gen-model")), "--arch", arch, "--type", "Q8_0", "--dim", "64", "--layers", "2",
               "--heads", "4", "--kv-heads", "2", "--ff", "128", "--vocab", str(vocab), "--ctx", str(ctx),
               "--seed", str(seed), "-o", str(path)]
        r = subprocess.run(cmd, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
    return path


class Server:
    def __init__(self, pagoda_bin, model: pathlib.Path, *extra: str):
        # An unnamed file: the server's output is read back here and gone when the test ends
        # (a named one next to the model piled up in the user's model cache).
        self.log = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen([str(pagoda_bin("pagoda")), "serve", "-m", str(model), "--port", "0", "-t", "2",
                                      *extra], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pagoda serve exited early:\n{self.output()}")
            m = re.search(r"listening on http://[^:]+:(\d+)", self.output())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            self.kill()
            raise RuntimeError(f"pagoda serve did not start:\n{self.output()}")
        self.base = f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.base + path, timeout=60, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        kw.setdefault("timeout", 120)
        return httpx.post(self.base + path, **kw)

    def terminate(self, timeout: float = 60) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
