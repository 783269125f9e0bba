"""`pagoda bench` (llama-bench style pp/tg) on a generated model: the JSON it prints, the
depth option (-d: the tests start with that much context in the cache) and bad options."""
from __future__ import annotations

import json
import subprocess

import pytest


@pytest.fixture
def bench(pagoda_bin, write_gen_model, tmp_path):
    model = write_gen_model(tmp_path / "llama.gguf", "llama", "Q8_0", vocab=512)

    def run(*args, timeout=300):
        r = subprocess.run([str(pagoda_bin("pagoda")), "bench", "-m", str(model), "-t", "2", *map(str, args)],
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
