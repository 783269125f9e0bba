"""POST /v1/embeddings through the openai client: all-MiniLM-L6-v2 (a BERT encoder, mean
pooling) against the numpy reference forward, OpenAI's input shapes and encodings, one
request of 1,000 inputs, the 400s (by field), the embedding-only model's answer to a
completion, the metrics; and a decoder model embedding too (last-token and mean pooling)."""
import base64

import httpx
import numpy as np
import pytest

import minilm_reference as mr
from oracles import import_oracle
from server_util import Server, gen_tiny_model


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    import_oracle("tokenizers")
    d = tmp_path_factory.mktemp("minilm-server")
    m = mr.MiniLM(mr.extract(d))
    m.gguf = m.write_gguf(d / "minilm-f16.gguf", "F16")
    return m


@pytest.fixture(scope="module")
def bert_server(pagoda_bin, minilm):
    s = Server(pagoda_bin, minilm.gguf)
    yield s
    assert s.terminate() == 0, s.output()


@pytest.fixture(scope="module")
def client(bert_server):
    openai = import_oracle("openai")
    return openai.OpenAI(base_url=bert_server.base + "/v1", api_key="none", max_retries=0)


TEXTS = ["Embeddings map text to vectors.", "Prefix caching shares the KV blocks of a common prompt.",
         "The cat sat on the mat."]


def test_embeddings_equal_the_reference_forward(client, minilm):
    r = client.embeddings.create(model="minilm", input=TEXTS)
    tok = minilm.tokenizer()
    assert [d.index for d in r.data] == [0, 1, 2]
    assert r.usage.prompt_tokens == sum(len(tok.encode(t).ids) for t in TEXTS)
    for text, d in zip(TEXTS, r.data):
        assert len(d.embedding) == 384
        assert mr.cosine(minilm.embed(tok.encode(text).ids), d.embedding) >= 0.99999


def test_input_shapes_and_encodings_give_the_same_vectors(client, minilm):
    ids = minilm.tokenizer().encode(TEXTS[2]).ids
    text = client.embeddings.create(model="m", input=TEXTS[2]).data[0].embedding
    one_ids = client.embeddings.create(model="m", input=ids).data[0].embedding
    many_ids = client.embeddings.create(model="m", input=[ids, ids]).data
    b64 = client.embeddings.create(model="m", input=TEXTS[2], encoding_format="base64").data[0].embedding
    assert isinstance(b64, str)
    decoded = np.frombuffer(base64.b64decode(b64), dtype="<f4")
    np.testing.assert_array_equal(decoded, np.array(text, dtype=np.float32))
    np.testing.assert_allclose(one_ids, text, atol=1e-6)
    for d in many_ids:
        np.testing.assert_allclose(d.embedding, text, atol=1e-6)
    same = client.embeddings.create(model="m", input=TEXTS[2], dimensions=384).data[0].embedding
    np.testing.assert_allclose(same, text, atol=1e-6)


def test_a_thousand_inputs_in_one_request(client):
    inputs = [f"sentence {i}: continuous batching with paged attention" for i in range(1000)]
    r = client.embeddings.create(model="m", input=inputs)
    assert len(r.data) == 1000
    assert [d.index for d in r.data] == list(range(1000))
    v = np.array([d.embedding for d in r.data])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # Distinct inputs, distinct vectors (no input's result handed to another).
    assert np.linalg.norm(v[0] - v[999]) > 1e-3


@pytest.mark.parametrize("body,param", [
    ({"input": []}, "input"),
    ({"input": 5}, "input"),
    ({"input": [["a"]]}, "input"),
    ({"input": [[1, 2], [3, 10 ** 9]]}, "input"),
    ({"input": "x " * 600}, "input"),
    ({"input": "x", "dimensions": 128}, "dimensions"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "x", "embd_normalize": "two"}, "embd_normalize"),
    ({"model": "m"}, "input"),
])
def test_bad_requests_are_400_naming_the_field(bert_server, body, param):
    r = httpx.post(bert_server.base + "/v1/embeddings", json=body, timeout=60)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_an_embedding_model_refuses_to_generate(client, bert_server):
    openai = import_oracle("openai")
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt="hello", max_tokens=4)
    assert "embedding model" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    # The server still serves after refusing.
    assert client.embeddings.create(model="m", input="still here").data


def test_metrics_count_embedded_inputs_and_tokens(bert_server):
    def counters():
        text = bert_server.get("/metrics").text
        out = {}
        for line in text.splitlines():
            for name in ("pagoda:embedding_requests_total", "pagoda:embedding_prompt_tokens_total"):
                if line.startswith(name + "{"):
                    out[name] = float(line.rsplit(" ", 1)[1])
        return out
    before = counters()
    r = httpx.post(bert_server.base + "/v1/embeddings", json={"input": ["one", "two", "three"]}, timeout=60)
    assert r.status_code == 200
    after = counters()
    assert after["pagoda:embedding_requests_total"] - before["pagoda:embedding_requests_total"] == 3
    assert after["pagoda:embedding_prompt_tokens_total"] - before["pagoda:embedding_prompt_tokens_total"] == \
        r.json()["usage"]["prompt_tokens"]


@pytest.mark.parametrize("pooling", [None, "mean"])
def test_a_decoder_model_embeds_and_still_generates(pagoda_bin, tmp_path_factory, pooling):
    model = gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("dec") / "tiny.gguf")
    s = Server(pagoda_bin, model, *(["--pooling", pooling] if pooling else []))
    try:
        a = httpx.post(s.base + "/v1/embeddings", json={"input": ["abc def", "abc xyz"]}, timeout=60).json()
        v = np.array([d["embedding"] for d in a["data"]])
        assert v.shape == (2, 64)
        np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
        assert np.linalg.norm(v[0] - v[1]) > 1e-4
        g = httpx.post(s.base + "/v1/completions", json={"prompt": "abc", "max_tokens": 3, "temperature": 0},
                       timeout=60)
        assert g.status_code == 200 and g.json()["usage"]["completion_tokens"] == 3
    finally:
        assert s.terminate() == 0, s.output()


def test_an_embedding_model_beside_the_generating_one(pagoda_bin, tmp_path_factory, minilm):
    """One base URL for RAG: the served decoder generates, --embedding-model embeds."""
    model = gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("dec2") / "tiny.gguf")
    s = Server(pagoda_bin, model, "--embedding-model", str(minilm.gguf))
    try:
        r = httpx.post(s.base + "/v1/embeddings", json={"input": TEXTS}, timeout=60).json()
        tok = minilm.tokenizer()
        assert r["usage"]["prompt_tokens"] == sum(len(tok.encode(t).ids) for t in TEXTS)
        for text, d in zip(TEXTS, r["data"]):
            assert len(d["embedding"]) == 384
            assert mr.cosine(minilm.embed(tok.encode(text).ids), d["embedding"]) >= 0.99999
        g = httpx.post(s.base + "/v1/completions", json={"prompt": "abc", "max_tokens": 3, "temperature": 0},
                       timeout=60)
        assert g.status_code == 200 and g.json()["usage"]["completion_tokens"] == 3
        bad = httpx.post(s.base + "/v1/embeddings", json={"input": "x", "dimensions": 64}, timeout=60)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "dimensions"
    finally:
        assert s.terminate() == 0, s.output()


def test_a_missing_embedding_model_is_one_clear_error(pagoda_bin, tmp_path_factory):
    import subprocess
    model = gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("dec3") / "tiny.gguf")
    r = subprocess.run([str(pagoda_bin("pagoda")), "serve", "-m", str(model), "--port", "0", "--embedding-model",
                        "/no/such/model.gguf"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--embedding-model" in r.stderr, r.stderr
