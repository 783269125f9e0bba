"""`pagoda embed` from the command line: its output formats carry the same vectors, and
every bad invocation is one clear error line and a non-zero exit (never a crash)."""
import json
import subprocess

import numpy as np
import pytest


@pytest.fixture(scope="module")
def bert(pagoda_bin, tmp_path_factory):
    path = tmp_path_factory.mktemp("embed") / "bert.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "bert", "--dim", "64", "--layers", "2",
                        "--heads", "4", "--kv-heads", "4", "--ff", "128", "--ctx", "64", "-o", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return path


def embed(pagoda_bin, model, *args):
    return subprocess.run([str(pagoda_bin("pagoda")), "embed", "-m", str(model), "-t", "2", *args],
                          capture_output=True, text=True, timeout=120)


def test_output_formats_carry_the_same_vectors(pagoda_bin, bert):
    arr = embed(pagoda_bin, bert, "-p", "abc def\nxyz", "--embd-output-format", "array")
    js = embed(pagoda_bin, bert, "-p", "abc def\nxyz", "--embd-output-format", "json+")
    txt = embed(pagoda_bin, bert, "-p", "abc def\nxyz")
    for r in (arr, js, txt):
        assert r.returncode == 0, r.stderr
        assert "embed: 2 inputs" in r.stderr and "mean pooling" in r.stderr
    a = np.array(json.loads(arr.stdout))
    j = json.loads(js.stdout)
    assert a.shape == (2, 64)
    np.testing.assert_allclose([d["embedding"] for d in j["data"]], a, atol=1e-6)
    np.testing.assert_allclose(np.diag(j["cosineSimilarity"]), 1.0, atol=1e-5)
    t = np.array([[float(x) for x in line.split(":", 1)[1].split()] for line in txt.stdout.splitlines()])
    np.testing.assert_allclose(t, a, atol=1e-6)
    sep = embed(pagoda_bin, bert, "-p", "abc def<#>xyz", "--embd-separator", "<#>", "--embd-output-format", "array")
    np.testing.assert_allclose(np.array(json.loads(sep.stdout)), a, atol=1e-6)


@pytest.mark.parametrize("args,message", [
    ([], "-p TEXT or -f FILE"),
    (["-p", "x", "--pooling", "none"], "--pooling none"),
    (["-p", "x", "--pooling", "max"], "not one of none, mean, cls, last"),
    (["-p", "x", "--embd-normalize", "-3"], "--embd-normalize"),
    (["-p", "x", "--embd-output-format", "xml"], "--embd-output-format"),
    (["-p", "\n\n"], "no inputs"),
    (["-f", "/"], "is a directory"),
    (["-f", "/no/such/file"], "cannot read"),
    (["-p", "word " * 80], "maximum context length is 64"),
])
def test_bad_invocations_fail_with_one_clear_line(pagoda_bin, bert, args, message):
    r = embed(pagoda_bin, bert, *args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "Segmentation" not in r.stderr


def test_generating_with_an_embedding_model_says_what_it_is(pagoda_bin, bert):
    r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(bert), "-p", "hello", "-n", "4"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "embedding model" in r.stderr, r.stderr
