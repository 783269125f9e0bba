"""`pagoda doctor` end to end: each check sees its fault injected into a real setup (a
budget too small, with a fix that then fits; temperature 3; more threads than cores; a busy
core; a template whose markers the vocabulary lacks, BOS twice, a prompt with its own BOS;
a server whose KV budget forces preemption) and a clean setup reports nothing. Plus the
JSON keys (docs/doctor.md) and the errors of a bad --server."""
from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys
import time

import pytest

from oracles import CACHE, oracle_missing

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "server"))
from server_util import Server, gen_tiny_model  # noqa: E402

FINDING_KEYS = {"id", "severity", "what", "why", "fix", "data"}
CORES = len(os.sched_getaffinity(0))
COMPUTE_BOUND_SHARE = 0.6  # kComputeBoundShare in src/doctor/checks.h
MiB = 1 << 20


@pytest.fixture
def doctor(pagoda_bin, tmp_path):
    env = dict(os.environ, PAGODA_CACHE=str(tmp_path / "cache"))

    def run(*args, timeout=300):
        r = subprocess.run([str(pagoda_bin("pagoda")), "doctor", "--json", *map(str, args)], capture_output=True,
                           timeout=timeout, env=env)
        err = r.stderr.decode(errors="replace")
        assert r.returncode in (0, 2), err
        j = json.loads(r.stdout)
        assert (r.returncode == 2) == j["needs_change"], j
        return j
    return run


def ids(j) -> list[str]:
    return [f["id"] for f in j["findings"]]


def finding(j, fid) -> dict:
    for f in j["findings"]:
        if f["id"] == fid:
            return f
    raise AssertionError(f"no {fid} in {ids(j)}")


def bandwidth_swing_confirmed(f, j) -> bool:
    """A host whose memory read rate moves (this project's VM does, 1.5x) is a fact of the
    hardware, not a fault of the setup: accepted where the report's own samples show it."""
    b = j["summary"]["cpu"].get("bandwidth")
    return f["id"] == "cpu.bandwidth_swings" and b is not None and b["p90_bytes_per_s"] >= 1.25 * b["p10_bytes_per_s"]


def quiet(doctor, *args, tries=4, confirmed=lambda finding, report: False):
    """The doctor's report of a clean setup: the machine is shared, so a run that saw other
    load (and only that) is repeated; the other checks must be silent every time, except a
    finding `confirmed` measures to be true of this hardware (not a fault of the setup)."""
    for _ in range(tries):
        j = doctor(*args)
        rest = [f for f in j["findings"] if f["id"] != "cpu.other_load" and not confirmed(f, j)
                and not bandwidth_swing_confirmed(f, j)]
        assert rest == [], rest
        if "cpu.other_load" not in ids(j):
            return j
        time.sleep(2)
    raise AssertionError(f"other load on every try: {j['findings']}")


def decode_bound_confirmed(pagoda_bin, model_path):
    """Whether a decode.compute_bound finding on a real model is true of this machine.

    Whether a format's decode is bound by memory or by the kernels' arithmetic depends on
    the CPU: Qwen2.5-Coder-0.5B's Q5_0 decode streams at the read rate on Zen 5 and on a
    Xeon with AVX-512, but its kernel streamed 17.5 of 36 GB/s on an AVX2 machine, where
    the finding is right. The independent measurement is `pagoda bench`'s decode: a whole
    step takes at least its matrix time, so weights per step x tokens/s bounds from below
    the rate the doctor's matrix timings claim. A finding on a model that decodes faster
    than the threshold share of the read bandwidth (plus 10% for noise) is false."""
    def check(finding, report):
        if finding["id"] != "decode.compute_bound":
            return False
        d = finding["data"]
        r = subprocess.run([str(pagoda_bin("pagoda")), "bench", "-m", str(model_path), "-p", "0", "-n", "32",
                            "-r", "3", "-t", str(d["threads"]), "--json"], capture_output=True, timeout=300)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        tok_s = json.loads(r.stdout)[0]["tokens_per_second_median"]
        whole_step_rate = tok_s * report["summary"]["decode"]["weight_bytes_per_step"]
        assert whole_step_rate <= 1.1 * d["achieved_bytes_per_s"], (whole_step_rate, finding)
        return whole_step_rate <= 1.1 * COMPUTE_BOUND_SHARE * d["stream_bytes_per_s"]
    return check


@pytest.fixture(scope="module")
def model(pagoda_bin, tmp_path_factory):
    return gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("doctor") / "llama.gguf", ctx=8192)


def real(name: str) -> pathlib.Path:
    path = CACHE / "models" / name
    if not path.exists():
        oracle_missing(f"{path} is missing; scripts/fetch_test_data fetches it")
    return path


GEMMA = "gemma-3-270m-q4_k_m.gguf"
QWEN = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def test_json_keys_are_stable(doctor, model):
    j = doctor("-m", model, "-c", 1024, "--hardware", "none", "--load-seconds", 0.1, "--temp", 3)
    assert set(j) == {"model", "checks", "summary", "findings", "needs_change"}
    assert j["checks"] == ["memory", "decode", "cpu", "sampling", "template", "server"]
    assert {"cpu", "memory"} <= set(j["summary"])
    assert {"cores", "machine_cores", "threads", "other_cores", "busy_cores", "steal_share", "loadavg_1m",
            "window_s", "bandwidth"} == set(j["summary"]["cpu"])
    assert {"samples", "window_s", "min_bytes_per_s", "p10_bytes_per_s", "median_bytes_per_s", "p90_bytes_per_s",
            "max_bytes_per_s"} == set(j["summary"]["cpu"]["bandwidth"])
    assert j["findings"], "temperature 3 should have been found"
    for f in j["findings"]:
        assert set(f) == FINDING_KEYS and f["severity"] in ("info", "warning", "error") and f["fix"], f


def test_clean_setups_report_nothing(doctor, model):
    quiet(doctor, "--load-seconds", 0.5)
    quiet(doctor, "-m", model, "-c", 2048, "--max-num-seqs", 4, "--hardware", "none", "--load-seconds", 0.5)


def test_memory_read_rate_is_sampled_and_judged_by_its_percentiles(doctor):
    j = doctor("--load-seconds", 0.1, "--bandwidth-seconds", 1)
    b = j["summary"]["cpu"]["bandwidth"]
    assert b["samples"] >= 5 and b["window_s"] == pytest.approx(0.1)
    assert 0 < b["min_bytes_per_s"] <= b["p10_bytes_per_s"] <= b["median_bytes_per_s"] <= b["p90_bytes_per_s"] \
        <= b["max_bytes_per_s"] < 1e13
    swings = b["p90_bytes_per_s"] >= 1.25 * b["p10_bytes_per_s"]
    assert ("cpu.bandwidth_swings" in ids(j)) == swings, (b, j["findings"])
    j = doctor("--load-seconds", 0.1, "--bandwidth-seconds", 0)
    assert "bandwidth" not in j["summary"]["cpu"] and "cpu.bandwidth_swings" not in ids(j)


def test_temperature_three_is_found(doctor):
    j = doctor("--temp", 3, "--load-seconds", 0.1)
    f = finding(j, "sampling.temperature_high")
    assert f["data"]["temperature"] == 3 and "--temp 0.7" in f["fix"]


def test_more_threads_than_cores_is_found(doctor):
    j = doctor("-t", 2 * CORES, "--load-seconds", 0.1)
    f = finding(j, "cpu.threads_over_cores")
    assert f["fix"] == f"-t {CORES}" and f["data"]["threads"] == 2 * CORES


def test_busy_core_is_found_with_its_process(doctor):
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        j = doctor("--load-seconds", 1.0)
        f = finding(j, "cpu.other_load")
        assert f["data"]["other_cores"] >= 0.5, f
        assert any(p["pid"] == busy.pid for p in f["data"]["top"]), f
    finally:
        busy.kill()
        busy.wait()


def apply(args: list, flags: str) -> list:
    """The fix's flags after the others: a flag given twice takes its last value."""
    return [*args, *[w for w in shlex.split(flags)]]


def test_too_small_budget_is_found_and_its_fix_fits(doctor, model):
    base = ["-m", model, "-c", 8192, "--max-num-seqs", 64, "--hardware", "none", "--load-seconds", 0.1]
    j = doctor(*base)
    total = j["summary"]["memory"]["total_bytes"]
    budget = int(total * 0.6)
    j = doctor(*base, "--memory-budget", budget)
    f = finding(j, "memory.does_not_fit")
    # The metadata and tokenizer parts are measured heap growth: a few hundred bytes apart run to run.
    assert f["severity"] == "error" and abs(f["data"]["total_bytes"] - total) < MiB
    assert f["data"]["fixes"], f
    for fix in f["data"]["fixes"]:
        if fix["flags"].startswith("pagoda quantize"):
            continue
        after = doctor(*apply(base, fix["flags"]), "--memory-budget", budget)
        assert "memory.does_not_fit" not in ids(after), (fix, after["findings"])
        assert abs(after["summary"]["memory"]["total_bytes"] - fix["total_bytes"]) < MiB, fix


def test_real_model_with_its_own_template_is_clean(doctor, pagoda_bin):
    for name in (GEMMA, QWEN):
        path = real(name)
        quiet(doctor, "-m", path, "-c", 2048, "--max-num-seqs", 4, "--load-seconds", 0.5,
              confirmed=decode_bound_confirmed(pagoda_bin, path))


CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_template_faults_are_found(doctor, tmp_path):
    gemma = real(GEMMA)
    chatml = tmp_path / "chatml.jinja"
    chatml.write_text(CHATML)
    j = doctor("-m", gemma, "-c", 1024, "--hardware", "none", "--load-seconds", 0.1, "--chat-template", chatml)
    f = finding(j, "template.split_special")
    assert "<|im_start|>" in f["what"] and f["severity"] == "error"
    twice = tmp_path / "twice.jinja"
    twice.write_text("{{ bos_token }}{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n"
                     "{{ m.content }}<end_of_turn>\n{% endfor %}")
    j = doctor("-m", gemma, "-c", 1024, "--hardware", "none", "--load-seconds", 0.1, "--chat-template", twice)
    assert "template.double_bos" in ids(j), j["findings"]
    j = doctor("-m", gemma, "-c", 1024, "--hardware", "none", "--load-seconds", 0.1, "-p", "<bos>Once upon a time")
    assert "prompt.double_bos" in ids(j), j["findings"]
    j = doctor("-m", gemma, "-c", 1024, "--hardware", "none", "--load-seconds", 0.1, "-p", "<bos>Once", "--no-bos")
    assert "prompt.double_bos" not in ids(j), j["findings"]


def test_server_preemption_is_found_and_a_quiet_server_is_clean(doctor, pagoda_bin, tmp_path):
    tiny = gen_tiny_model(pagoda_bin, tmp_path / "q.gguf", arch="qwen2", vocab=300, ctx=4096, seed=7)
    s = Server(pagoda_bin, tiny, "--kv-cache-memory", "256K", "--max-num-seqs", "16", "-c", "2048")
    try:
        r = s.post("/v1/completions", json={"prompt": [3 + i % 280 for i in range(100)], "max_tokens": 400, "n": 8,
                                            "ignore_eos": True, "temperature": 1, "seed": 3}, timeout=600)
        assert r.status_code == 200, r.text
        j = doctor("--server", s.base, "--load-seconds", 0.1)
        f = finding(j, "server.preemption")
        assert f["data"]["preemptions"] >= 3 and f["data"]["kv_cache_blocks"] > 0, f
        assert j["summary"]["server"]["preemptions"] == f["data"]["preemptions"]
    finally:
        assert s.terminate() == 0, s.output()
    s = Server(pagoda_bin, tiny, "-c", "2048")
    try:
        for _ in range(3):
            assert s.post("/v1/completions", json={"prompt": "hello", "max_tokens": 8}).status_code == 200
        j = doctor("--server", s.base, "--load-seconds", 0.1)
        assert not [i for i in ids(j) if i.startswith("server.")], j["findings"]
        assert j["summary"]["server"]["requests"] == 3
    finally:
        assert s.terminate() == 0, s.output()


def test_bad_server_is_a_clear_error(pagoda_bin):
    for url, msg in (("localhost:1", "expected http://"), ("http://127.0.0.1:1", "cannot reach")):
        r = subprocess.run([str(pagoda_bin("pagoda")), "doctor", "--server", url, "--load-seconds", "0.1"],
                           capture_output=True, timeout=60)
        assert r.returncode == 1 and msg in r.stderr.decode(), r.stderr.decode()
