"""POST /v1/rerank (and /rerank, /v2/rerank) on a tiny BERT cross-encoder converted by
`pagoda convert` (tests/cross_encoder_reference.py): scores equal to the numpy forward of
the Hugging Face model, best first, top_n and return_documents, both document shapes, 300
documents in one request, the 400s by field (a pair past the context among them), a
reranker's answer to /v1/embeddings and /v1/completions, and a model that is not a
reranker."""
import re
import subprocess

import httpx
import numpy as np
import pytest

import cross_encoder_reference as ce
from oracles import import_oracle
from server_util import Server, gen_tiny_model

QUERY = "what is the capital of france?"
DOCS = ["paris is the capital city of france.", "the cat sat on the mat", "Zebra xylophone 42 QUIZ!",
        "how does the paged kv cache store blocks?", "rain in paris"]
BAR = 5e-3  # as tests/model/test_bert_rerank.py measures and explains


@pytest.fixture(scope="module")
def reranker(tmp_path_factory, pagoda_bin):
    import_oracle("tokenizers")
    d = tmp_path_factory.mktemp("rerank-server")
    m = ce.CrossEncoder(ce.write_folder(d / "ce", seed=1))
    m.gguf = d / "ce-f32.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda")), "convert", str(m.folder), str(m.gguf), "--type", "F32", "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return m


@pytest.fixture(scope="module")
def server(pagoda_bin, reranker):
    s = Server(pagoda_bin, reranker.gguf)
    yield s
    assert s.terminate() == 0, s.output()


def rerank(server, body, path="/v1/rerank"):
    return httpx.post(server.base + path, json=body, timeout=120)


def test_scores_equal_the_reference_best_first(server, reranker):
    docs = [DOCS[0], {"text": DOCS[1]}, DOCS[2], {"text": DOCS[3]}, DOCS[4]]
    r = rerank(server, {"model": "anything", "query": QUERY, "documents": docs})
    assert r.status_code == 200, r.text
    body = r.json()
    ref = np.array(reranker.scores(QUERY, DOCS))
    results = body["results"]
    assert [x["index"] for x in results] == list(np.argsort(-ref))
    for x in results:
        assert abs(x["relevance_score"] - ref[x["index"]]) <= BAR, (x, ref)
        assert x["document"] == {"text": DOCS[x["index"]]}
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] == \
        sum(len(reranker.encode(QUERY, d)[0]) for d in DOCS)
    assert body["model"] and body["id"].startswith("rerank-")


def test_top_n_and_return_documents(server):
    full = rerank(server, {"query": QUERY, "documents": DOCS}).json()["results"]
    top = rerank(server, {"query": QUERY, "documents": DOCS, "top_n": 2, "return_documents": False}).json()["results"]
    assert [x["index"] for x in top] == [x["index"] for x in full[:2]]
    assert all("document" not in x for x in top)
    assert np.allclose([x["relevance_score"] for x in top], [x["relevance_score"] for x in full[:2]], atol=1e-6)
    assert len(rerank(server, {"query": QUERY, "documents": DOCS, "top_n": 50}).json()["results"]) == len(DOCS)


def metric(server, name):
    m = re.search(rf"^pagoda:{name}_total(?:\{{[^}}]*\}})? ([0-9.e+]+)$", httpx.get(server.base + "/metrics").text, re.M)
    return float(m.group(1)) if m else None


def test_metrics_count_requests_documents_and_tokens(server):
    before = {k: metric(server, k) for k in ("rerank_requests", "rerank_documents", "rerank_prompt_tokens")}
    body = rerank(server, {"query": QUERY, "documents": DOCS[:3]}).json()
    assert metric(server, "rerank_requests") == before["rerank_requests"] + 1
    assert metric(server, "rerank_documents") == before["rerank_documents"] + 3
    assert metric(server, "rerank_prompt_tokens") == before["rerank_prompt_tokens"] + body["usage"]["prompt_tokens"]


@pytest.mark.parametrize("path", ["/rerank", "/v2/rerank"])
def test_every_path_answers_the_same(server, path):
    a = rerank(server, {"query": QUERY, "documents": DOCS}).json()["results"]
    b = rerank(server, {"query": QUERY, "documents": DOCS}, path).json()["results"]
    assert [x["index"] for x in a] == [x["index"] for x in b]
    assert np.allclose([x["relevance_score"] for x in a], [x["relevance_score"] for x in b], atol=1e-6)


def test_three_hundred_documents_in_one_request(server, reranker):
    words = ["paris", "france", "capital", "cat", "mat", "river", "engine", "cache", "rain", "token"]
    docs = [f"{words[i % 10]} {words[(i * 7) % 10]} {i} the {words[(i * 3) % 10]}" for i in range(300)]
    r = rerank(server, {"query": QUERY, "documents": docs, "return_documents": False})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert sorted(x["index"] for x in results) == list(range(300))
    scores = [x["relevance_score"] for x in results]
    assert scores == sorted(scores, reverse=True)
    got = {x["index"]: x["relevance_score"] for x in results}
    # Each pair scored as alone (batching does not mix documents) and as the reference says.
    for i in (0, 1, 150, 299):
        alone = rerank(server, {"query": QUERY, "documents": [docs[i]]}).json()["results"][0]["relevance_score"]
        assert abs(got[i] - alone) <= 1e-5, i
        assert abs(got[i] - reranker.scores(QUERY, [docs[i]])[0]) <= BAR, i


@pytest.mark.parametrize("body,param", [
    ({"documents": DOCS}, "query"),
    ({"query": 5, "documents": DOCS}, "query"),
    ({"query": QUERY}, "documents"),
    ({"query": QUERY, "documents": []}, "documents"),
    ({"query": QUERY, "documents": "one text"}, "documents"),
    ({"query": QUERY, "documents": ["ok", 7]}, "documents"),
    ({"query": QUERY, "documents": [{"txt": "x"}]}, "documents"),
    ({"query": QUERY, "documents": DOCS, "top_n": 0}, "top_n"),
    ({"query": QUERY, "documents": DOCS, "top_n": "2"}, "top_n"),
    ({"query": QUERY, "documents": DOCS, "return_documents": "yes"}, "return_documents"),
])
def test_bad_requests_are_400_naming_the_field(server, body, param):
    r = rerank(server, body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_a_body_that_is_not_json_is_a_400(server):
    r = httpx.post(server.base + "/v1/rerank", content=b"{not json", timeout=60)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]


def test_a_pair_past_the_context_is_a_400_saying_so(server):
    long_doc = " ".join(["paged attention stores keys"] * 40)  # about 160 tokens; the context is 128
    r = rerank(server, {"query": QUERY, "documents": ["short", long_doc]})
    assert r.status_code == 400, r.text
    e = r.json()["error"]
    assert e["param"] == "documents"
    assert "document 1" in e["message"] and "context of 128" in e["message"], e["message"]
    assert rerank(server, {"query": QUERY, "documents": ["still serving"]}).status_code == 200


def test_a_reranker_refuses_embeddings_and_completions(server):
    e = httpx.post(server.base + "/v1/embeddings", json={"input": "x"}, timeout=60)
    assert e.status_code == 400 and e.json()["error"]["param"] == "model"
    assert "/v1/rerank" in e.json()["error"]["message"]
    c = httpx.post(server.base + "/v1/completions", json={"prompt": "x", "max_tokens": 2}, timeout=60)
    assert c.status_code == 400 and "reranker" in c.json()["error"]["message"], c.text


def test_a_model_that_is_not_a_reranker_gets_a_400(pagoda_bin, tmp_path_factory, reranker):
    model = gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("dec") / "tiny.gguf")
    s = Server(pagoda_bin, model)
    try:
        r = rerank(s, {"query": QUERY, "documents": DOCS})
        assert r.status_code == 400 and r.json()["error"]["param"] == "model"
        assert "not a reranker" in r.json()["error"]["message"]
    finally:
        assert s.terminate() == 0, s.output()
    # The reranker pooled by mean is an embedding model: no /v1/rerank, /v1/embeddings works.
    s = Server(pagoda_bin, reranker.gguf, "--pooling", "mean")
    try:
        assert rerank(s, {"query": QUERY, "documents": DOCS}).status_code == 400
        e = httpx.post(s.base + "/v1/embeddings", json={"input": "paris"}, timeout=60)
        assert e.status_code == 200 and len(e.json()["data"][0]["embedding"]) == 32
    finally:
        assert s.terminate() == 0, s.output()


def test_pooling_rank_on_a_model_without_a_head_fails_at_startup(pagoda_bin, tmp_path_factory):
    model = gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("dec2") / "tiny.gguf")
    r = subprocess.run([str(pagoda_bin("pagoda")), "serve", "-m", str(model), "--port", "0", "--pooling", "rank"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "classification head" in r.stderr, r.stderr
