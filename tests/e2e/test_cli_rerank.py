"""`pagoda rerank` from the command line: every bad invocation is one clear error line and
a non-zero exit (never a crash), and `pagoda embed` on a reranker says to rerank instead.
Its scores against the oracles: tests/model/test_bert_rerank.py."""
import subprocess

import pytest

import cross_encoder_reference as ce


@pytest.fixture(scope="module")
def models(pagoda_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("rerank-cli")
    reranker = d / "ce.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda")), "convert", str(ce.write_folder(d / "ce")), str(reranker), "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    encoder = d / "bert.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "bert", "--dim", "64", "--layers", "2",
                        "--heads", "4", "--kv-heads", "4", "--ff", "128", "--ctx", "64", "-o", str(encoder)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    docs = d / "docs.txt"
    docs.write_text("paris is the capital\n\nthe cat sat\n")
    empty = d / "empty.txt"
    empty.write_text("\n\n")
    long = d / "long.txt"
    long.write_text("short\n" + " ".join(["paged attention"] * 80) + "\n")
    return {"reranker": reranker, "encoder": encoder, "docs": docs, "empty": empty, "long": long}


def run(pagoda_bin, *args):
    return subprocess.run([str(pagoda_bin("pagoda")), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_blank_lines_are_not_documents(pagoda_bin, models):
    r = run(pagoda_bin, "rerank", "-m", models["reranker"], "-q", "capital", "-f", models["docs"])
    assert r.returncode == 0, r.stderr
    assert sorted(int(line.split()[0]) for line in r.stdout.splitlines()) == [0, 1]
    assert "rerank: 2 documents" in r.stderr


@pytest.mark.parametrize("model,args,message", [
    ("reranker", ["-f", "docs"], "--query is required"),
    ("reranker", ["-q", "x"], "--file is required"),
    ("reranker", ["-q", "x", "-f", "empty"], "no documents"),
    ("reranker", ["-q", "x", "-f", "/no/such/file"], "cannot read"),
    ("reranker", ["-q", "x", "-f", "docs", "--top-n", "0"], "--top-n"),
    ("reranker", ["-q", "x", "-f", "long"], "document 1 (line 2): the query and document together are"),
    ("encoder", ["-q", "x", "-f", "docs"], "is not a reranker"),
])
def test_bad_invocations_fail_with_one_clear_line(pagoda_bin, models, model, args, message):
    args = [models.get(a, a) if isinstance(a, str) else a for a in args]
    r = run(pagoda_bin, "rerank", "-m", models[model], *args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "Segmentation" not in r.stderr


def test_embed_on_a_reranker_says_to_rerank(pagoda_bin, models):
    r = run(pagoda_bin, "embed", "-m", models["reranker"], "-p", "paris")
    assert r.returncode != 0 and "pagoda rerank" in r.stderr, r.stderr
    # Pooled by mean, the same model embeds.
    ok = run(pagoda_bin, "embed", "-m", models["reranker"], "-p", "paris", "--pooling", "mean")
    assert ok.returncode == 0, ok.stderr
