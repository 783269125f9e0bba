"""`pagoda bench` (llama-bench style pp/tg) and `pagoda bench throughput` (an offline workload
through the engine) on a generated model: the JSON they print, the depth option (-d: the
tests start with that much context in the cache), static against continuous batching on
the same workload, a KV budget too small for the workload, and bad options."""
from __future__ import annotations

import json
import subprocess

import pytest


@pytest.fixture
def bench(pagoda_bin, write_gen_model, tmp_path):
    model = write_gen_model(tmp_path / "llama.gguf", "llama", "Q8_0", vocab=512)

    def run(*args, timeout=300):
        sub = ["throughput"] if args and args[0] == "throughput" else []  # takes its own -m
        rest = list(map(str, args[len(sub):]))
        r = subprocess.run([str(pagoda_bin("pagoda")), "bench", *sub, "-m", str(model), "-t", "2", *rest],
                           capture_output=True, timeout=timeout)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    return run


def test_json_names_the_tests_as_llama_bench_does(bench):
    rc, out, err = bench("-p", 32, "-n", 8, "-r", 2, "--json")
    assert rc == 0, err
    tests = {e["test"]: e for e in json.loads(out)}
    assert set(tests) == {"pp32", "tg8"}
    for e in tests.values():
        assert e["n_depth"] == 0 and len(e["runs"]) == 2 and all(r > 0 for r in e["runs"])


def test_depth_runs_each_test_after_that_much_context(bench):
    rc, out, err = bench("-p", 32, "-n", 8, "-d", 200, "-r", 1, "--json")
    assert rc == 0, err
    tests = {e["test"]: e for e in json.loads(out)}
    assert set(tests) == {"pp32 @ d200", "tg8 @ d200"}
    assert all(e["n_depth"] == 200 and e["tokens_per_second_median"] > 0 for e in tests.values())
    rc, out, err = bench("-p", 0, "-n", 4, "-d", 64, "-r", 1)
    assert rc == 0, err
    assert "tg4 @ d64" in out


def test_negative_depth_is_rejected(bench):
    rc, out, err = bench("-p", 8, "-n", 0, "-d", -5)
    assert rc != 0 and "depth" in err.lower(), err


@pytest.fixture
def throughput(bench):
    def run(*args):
        rc, out, err = bench("throughput", *args)
        assert rc == 0, err
        return json.loads(out)
    return run


def test_throughput_counts_every_token_of_the_workload(throughput):
    r = throughput("--num-prompts", 12, "--input-len", 16, "--output-len", 8, "--range-ratio", 0, "-c", 64, "--json")
    assert r["num_prompts"] == 12 and r["input_tokens"] == 12 * 16 and r["output_tokens"] == 12 * 8
    assert r["requests_per_second"] > 0 and r["seconds"] > 0
    assert 0 < r["ttft_ms"]["p50"] <= r["ttft_ms"]["p99"]
    assert 0 <= r["kv_waste_steady"] < 1 and r["preemptions"] == 0


def test_static_batches_pad_where_continuous_batching_refills(throughput):
    # Long-tailed outputs: a static batch runs until its longest request ends.
    common = ("--num-prompts", 24, "--input-len", 8, "--range-ratio", 0, "--output-dist", "exp", "--output-len", 12,
              "--output-min", 2, "--output-max", 60, "-c", 128, "--max-num-seqs", 8, "--seed", 3, "--json")
    static = throughput(*common, "--scheduler", "static")
    cont = throughput(*common, "--scheduler", "continuous")
    assert static["output_tokens"] == cont["output_tokens"]
    assert static["steps"] > 1.5 * cont["steps"], (static["steps"], cont["steps"])
    assert static["kv_waste_steady"] > cont["kv_waste_steady"]


def test_a_kv_budget_smaller_than_the_workload_queues_and_completes(throughput, bench):
    # Room for ~2 of the 16 sequences at a time: the rest wait (or are preempted), none is lost.
    r = throughput("--num-prompts", 16, "--input-len", 40, "--output-len", 40, "--range-ratio", 0, "-c", 96,
                   "--kv-cache-memory", "48K", "--json")
    assert r["output_tokens"] == 16 * 40 and r["kv_usage_peak"] > 0.8
    rc, out, err = bench("throughput", "--num-prompts", 4, "--kv-cache-memory", "1K")
    assert rc != 0 and "error:" in err and "KV" in err, err
