"""Reranking with a BERT cross-encoder against two independent oracles. The model is a tiny
random BertForSequenceClassification written as a Hugging Face folder by
tests/cross_encoder_reference.py and converted by `pagoda convert`:

- a float64 numpy forward of Hugging Face's model from the safetensors, on the pair as
  Hugging Face's `tokenizers` encodes it (ids and token_type_ids: type 1 over the
  document and its [SEP]), pooler tanh, classifier;
- llama.cpp's `llama-server --reranking` on the same GGUF. llama.cpp adds token type 0's
  embedding to every token (src/models/bert.cpp: "type_row0"), so against it the model's
  two token-type rows are equal, which makes type 0 and HF's type 1 the same.

Bars: |score - reference| <= 5e-3 on scores of size 0.1 to 3 (F32 files; 1e-2 for F16
weights). Both engines evaluate GELU through ggml's FP16 table (x rounded to FP16, the
tanh form) where Hugging Face uses the erf form in full precision, and Pagoda keeps keys
and values in FP16: each moves an activation by up to 5e-4 relative, and on a 32-wide
model the score moves by about 2e-3 (measured: see docs/rerank.md). The fixture checks
that every part of the head and of the token types moves the scores by far more than the
bar (no tanh: > 1; every token type 0: > 0.1; the boundary one token later: > 1e-2), so a
test that passes has checked them."""
import json
import socket
import subprocess
import time

import httpx
import numpy as np
import pytest

import cross_encoder_reference as ce
from oracles import import_oracle, require_llamacpp

QUERY = "what is the capital of france?"
DOCS = [
    "paris is the capital city of france.",
    "the cat sat on the mat",
    "Zebra xylophone 42 QUIZ!",
    "how does the paged kv cache store blocks of attention keys?",
    "a",
    "Café naïve façade: accents are stripped by the uncased tokenizer.",
    " ".join(["the engine batches tokens of every query and document"] * 6),  # ~60 tokens
    "rain in paris",
]
BARS = {"F32": 5e-3, "F16": 1e-2}


def convert(pagoda_bin, folder, out, kind):
    r = subprocess.run([str(pagoda_bin("pagoda")), "convert", str(folder), str(out), "--type", kind, "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory, pagoda_bin):
    import_oracle("tokenizers")
    d = tmp_path_factory.mktemp("rerank")
    out = {}
    for name, equal in (("types", False), ("equal-types", True)):
        folder = ce.write_folder(d / name, seed=1 if not equal else 2, equal_type_rows=equal)
        m = ce.CrossEncoder(folder)
        m.files = {kind: convert(pagoda_bin, folder, d / f"{name}-{kind.lower()}.gguf", kind) for kind in BARS}
        out[name] = m
    (d / "docs.txt").write_text("\n".join(DOCS) + "\n")
    out["docs"] = d / "docs.txt"
    return out


def pagoda_rerank(pagoda_bin, model, docs_file, *extra):
    r = subprocess.run([str(pagoda_bin("pagoda")), "rerank", "-m", str(model), "-q", QUERY, "-f", str(docs_file),
                        "-t", "2", "--json", *extra], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def by_index(results):
    return np.array([s for _, s in sorted((x["index"], x["relevance_score"]) for x in results)])


def test_the_fixture_makes_every_part_of_the_score_matter(models):
    m = models["types"]
    for doc in DOCS[:4]:
        ids, types = m.encode(QUERY, doc)
        assert types[0] == 0 and types[-1] == 1  # [CLS] ... [SEP] doc [SEP]:1
        score = m.score(ids, types)
        assert abs(m.score(ids, types, tanh=False) - score) > 1.0
        assert abs(m.score(ids, [0] * len(ids)) - score) > 0.1
    shifted = []
    for doc in DOCS:
        ids, types = m.encode(QUERY, doc)
        later = list(types)
        later[types.index(1)] = 0
        shifted.append(abs(m.score(ids, later) - m.score(ids, types)))
    assert max(shifted) > 1e-2


@pytest.mark.parametrize("kind", ["F32", "F16"])
def test_scores_equal_the_numpy_forward_of_the_hf_model(pagoda_bin, models, kind):
    m = models["types"]
    got = pagoda_rerank(pagoda_bin, m.files[kind], models["docs"])
    ref = np.array(m.scores(QUERY, DOCS))
    scores = by_index(got["results"])
    assert scores.shape == ref.shape
    diff = np.abs(scores - ref)
    assert diff.max() <= BARS[kind], (kind, diff.max(), scores, ref)
    # Best first, and as many tokens as Hugging Face's pair encoding has.
    assert [x["relevance_score"] for x in got["results"]] == sorted(scores, reverse=True)
    assert got["usage"]["prompt_tokens"] == sum(len(m.encode(QUERY, d)[0]) for d in DOCS)
    assert [x["document"]["text"] for x in got["results"]] == [DOCS[x["index"]] for x in got["results"]]


def test_top_n_and_the_text_output(pagoda_bin, models):
    m = models["types"]
    ref = np.array(m.scores(QUERY, DOCS))
    got = pagoda_rerank(pagoda_bin, m.files["F32"], models["docs"], "--top-n", "3")
    assert [x["index"] for x in got["results"]] == list(np.argsort(-ref)[:3])
    r = subprocess.run([str(pagoda_bin("pagoda")), "rerank", "-m", str(m.files["F32"]), "-q", QUERY, "-f",
                        str(models["docs"]), "--top-n", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    index, score, text = lines[0].split(maxsplit=2)
    assert int(index) == int(np.argmax(ref)) and text == DOCS[int(index)]
    assert abs(float(score) - ref.max()) <= BARS["F32"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_server_rerank(bin_dir, model, tmp_path):
    port = free_port()
    log = (tmp_path / "llama-server.log").open("w")
    # Flash attention off: its CPU path rounds the attention's inputs to FP16, which moves
    # these scores by up to 6e-3 more (measured on the "Café" document).
    proc = subprocess.Popen([str(bin_dir / "llama-server"), "-m", str(model), "--reranking", "--port", str(port),
                             "-t", "2", "-c", "1024", "-b", "512", "-ub", "512", "-np", "1", "-fa", "off"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "llama-server.log").read_text()[-3000:]
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.time() < deadline, "llama-server did not start"
            time.sleep(0.2)
        r = httpx.post(base + "/v1/rerank", json={"query": QUERY, "documents": DOCS}, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_scores_agree_with_llama_server_reranking(pagoda_bin, llamacpp_bin, models, tmp_path):
    bin_dir = require_llamacpp(llamacpp_bin, "llama-server", purpose="BERT reranking")
    m = models["equal-types"]
    path = m.files["F32"]
    got = by_index(pagoda_rerank(pagoda_bin, path, models["docs"])["results"])
    theirs = llama_server_rerank(bin_dir, path, tmp_path)
    ref = by_index(theirs["results"])
    assert theirs["usage"]["prompt_tokens"] == sum(len(m.encode(QUERY, d)[0]) for d in DOCS)
    assert np.abs(got - ref).max() <= BARS["F32"], (got, ref)
    # And llama.cpp agrees with the numpy forward on this model (type rows equal).
    assert np.abs(ref - np.array(m.scores(QUERY, DOCS))).max() <= BARS["F32"]
