"""Shared pytest fixtures: where the built binaries and the shared models are.

The C++ build directory comes from PAGODA_BUILD_DIR (default: build/ at the repo root);
tests that need a binary that is not built fail with a clear message rather than skip,
because a missing binary means the build is broken.

Oracles (llama.cpp, the Python reference libraries) and models from outside the repo go
through `oracle_missing`: outside CI a test whose oracle is absent skips and says where
the oracle comes from; under PAGODA_PARITY=1 (what .ci/run sets, after
scripts/fetch_test_data has built and fetched everything) it fails, so CI cannot pass
by skipping the comparisons it exists to make.
"""
import os
import pathlib
import re
import subprocess

import pytest

import oracles

REPO = pathlib.Path(__file__).resolve().parent.parent
BUILD = pathlib.Path(os.environ.get("PAGODA_BUILD_DIR", REPO / "build"))
SHARED_MODELS = pathlib.Path(os.environ.get("PAGODA_SHARED_MODELS", REPO.parent / "shared" / "models"))


def binary(name: str) -> pathlib.Path:
    for cand in (BUILD / "bin" / name, BUILD / "tests" / name, BUILD / name):
        if cand.exists():
            return cand
    pytest.fail(f"binary {name!r} not found under {BUILD}; build the project first (scripts/test does)")


@pytest.fixture(scope="session")
def pagoda_bin():
    return binary


@pytest.fixture
def shared_model():
    def get(name: str) -> pathlib.Path:
        p = SHARED_MODELS / name
        if not p.exists():
            oracles.oracle_missing(f"{p} is not present (the shared models folder beside the repository)")
        return p
    return get


@pytest.fixture(scope="session")
def llamacpp_bin():
    """llama.cpp's bin folder built by scripts/build_llamacpp (or $LLAMACPP_BIN), or None;
    tests that need a binary from it call require_llamacpp."""
    env = os.environ.get("LLAMACPP_BIN")
    if env:
        return pathlib.Path(env)
    dirs = sorted(oracles.CACHE.glob("llama.cpp-build-*/bin"))
    return dirs[-1] if dirs else None


def exit_drain_library() -> str | None:
    """tests/llamacpp_exit_drain.c built once into the cache (None without a C compiler)."""
    src = REPO / "tests" / "llamacpp_exit_drain.c"
    out = oracles.CACHE / "test-helpers" / f"libexitdrain-{int(src.stat().st_mtime_ns)}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
        r = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(tmp), str(src)], capture_output=True)
        if r.returncode != 0:
            return None
        os.replace(tmp, out)
    return str(out)


def run_llamacpp_logged(argv, expect, ok=lambda rc: rc == 0, timeout=600, tries=5):
    """Runs a llama.cpp tool and returns its stdout + stderr once the regular expression
    `expect` is found in it. llama.cpp logs from a thread that the process does not wait
    for at exit (it leaks the logger on purpose, ggml-org/llama.cpp#22142), so on a busy
    machine the last lines, often the very ones a test looks for, were lost; the tool runs
    with tests/llamacpp_exit_drain.c preloaded, which lets that thread finish at exit. A
    log still without `expect` is run again, and after `tries` such runs the test fails
    under PAGODA_PARITY=1 (skips outside it). Every run's exit status must satisfy `ok`."""
    env = dict(os.environ)
    drain = exit_drain_library()
    if drain:
        env["LD_PRELOAD"] = drain
    for _ in range(tries):
        r = subprocess.run([str(a) for a in argv], capture_output=True, timeout=timeout, env=env)
        log = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
        assert ok(r.returncode), f"exit {r.returncode}: {log[-3000:]}"
        if re.search(expect, log):
            return log
    oracles.oracle_missing(f"{pathlib.Path(str(argv[0])).name}'s log lost its last lines ('{expect}') in {tries} runs")


@pytest.fixture(scope="session")
def llamacpp_log():
    """run_llamacpp_logged, for tests that read what a llama.cpp tool printed."""
    return run_llamacpp_logged


@pytest.fixture
def quant_tool(pagoda_bin):
    """Runs bin/pagoda-quant-tool (tests/quant/quant_tool.cc) and returns its stdout."""
    path = pagoda_bin("pagoda-quant-tool")

    def run(*args, data=b""):
        r = subprocess.run([str(path), *map(str, args)], input=data, capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        return r.stdout
    return run


# A small random model's defaults; tests override what they need (dim=256, vocab=...).
GEN_MODEL_DEFAULTS = {"dim": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ff": 128, "vocab": 512,
                      "sliding_window": 8, "seed": 3}


@pytest.fixture(scope="session")
def write_gen_model(pagoda_bin):
    """write(out, arch="llama", fmt="F32", **options): runs pagoda-gen-model (random weights
    written as GGUF) with GEN_MODEL_DEFAULTS updated by options (underscores become dashes;
    None leaves an option out)."""
    def write(out, arch="llama", fmt="F32", **options):
        opts = {**GEN_MODEL_DEFAULTS, **options}
        cmd = [str(pagoda_bin("pagoda-gen-model")), "--arch", arch, "--type", fmt, "-t", "2", "-o", str(out)]
        for k, v in opts.items():
            if v is not None:  # None drops a default
                cmd += [f"--{k.replace('_', '-')}", str(v)]
        r = subprocess.run(cmd, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return out
    return write

