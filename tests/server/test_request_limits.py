"""Issue 22: what one request may cost the server, and what the server survives. The
per-request limits (prompts, n, prompts x n, tokens) answer 400 naming the field and the
flag that raises them; the server-wide sequence limit answers 429 with Retry-After; a
step that throws on the engine thread fails its requests with 500 and the server keeps
serving; /metrics stays parseable whatever the model is called; and /v1/completions'
top_logprobs keeps one key per candidate when several are pieces of a UTF-8 character."""
from __future__ import annotations

import shutil

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from server_util import Server


def amplification_body() -> dict:
    # The issue's ~700-byte request: 64 prompts x n=128 = 8,192 sequences.
    return {"prompt": [f"p{i}" for i in range(64)], "n": 128, "max_tokens": 2}


def error_of(r: httpx.Response) -> dict:
    body = r.json()
    assert set(body) == {"error"}, body
    return body["error"]


def test_amplification_request_is_a_400_naming_the_limit(server):
    r = server.post("/v1/completions", json=amplification_body())
    assert r.status_code == 400, r.text
    e = error_of(r)
    assert e["param"] == "n" and e["type"] == "invalid_request_error"
    assert "8192" in e["message"] and "--max-seqs-per-request" in e["message"]
    # The server is unharmed and still answers.
    assert server.post("/v1/completions", json={"prompt": "a", "max_tokens": 2}).status_code == 200


def test_each_per_request_limit_names_its_flag(pagoda_bin, tiny_model):
    s = Server(pagoda_bin, tiny_model, "--max-prompts-per-request", "2", "--max-n", "4", "--max-seqs-per-request", "6",
               "--max-request-tokens", "100")
    try:
        cases = [
            ({"prompt": ["a", "b", "c"]}, "prompt", "--max-prompts-per-request"),
            ({"prompt": "a", "n": 5}, "n", "--max-n"),
            ({"prompt": ["a", "b"], "n": 4}, "n", "--max-seqs-per-request"),
            ({"prompt": "a", "n": 4, "max_tokens": 30}, "max_tokens", "--max-request-tokens"),
        ]
        for body, param, flag in cases:
            r = s.post("/v1/completions", json=body)
            assert r.status_code == 400, (body, r.text)
            e = error_of(r)
            assert e["param"] == param and flag in e["message"], (body, e)
        chat = {"messages": [{"role": "user", "content": "hi"}], "n": 5, "max_tokens": 2}
        assert error_of(s.post("/v1/chat/completions", json=chat))["param"] == "n"
        # Within every limit a request runs.
        r = s.post("/v1/completions", json={"prompt": ["a", "b"], "n": 3, "max_tokens": 4})
        assert r.status_code == 200 and len(r.json()["choices"]) == 6
    finally:
        assert s.terminate() == 0, s.output()


def test_server_wide_sequences_answer_429_with_retry_after(pagoda_bin, tiny_model):
    s = Server(pagoda_bin, tiny_model, "--max-seqs-in-flight", "6")
    try:
        long = {"prompt": "a", "n": 4, "max_tokens": 480, "ignore_eos": True, "temperature": 0, "stream": True}
        refused = None
        # The stream's headers come after its 4 sequences were queued; they are held until
        # its 480 tokens are out, so a second request of 4 finds 2 places left. A tiny
        # model can finish first, hence a few tries.
        for _ in range(20):
            with httpx.stream("POST", s.base + "/v1/completions", json=long, timeout=120) as held:
                assert held.status_code == 200
                r = s.post("/v1/completions", json={"prompt": "b", "n": 4, "max_tokens": 1})
                held.read()
            if r.status_code == 429:
                refused = r
                break
            assert r.status_code == 200, r.text
        assert refused is not None, "no request was refused while 4 of 6 sequences were held"
        assert refused.headers.get("Retry-After") == "1"
        e = error_of(refused)
        assert e["type"] == "rate_limit_exceeded" and "--max-seqs-in-flight" in e["message"], e
        # A request that could never fit is the client's error, not a reason to retry.
        r = s.post("/v1/completions", json={"prompt": "b", "n": 7, "max_tokens": 1})
        assert r.status_code == 400 and "--max-seqs-in-flight" in error_of(r)["message"], r.text
        # The held sequences were given back: the same request now runs.
        r = s.post("/v1/completions", json={"prompt": "b", "n": 4, "max_tokens": 1})
        assert r.status_code == 200, r.text
    finally:
        assert s.terminate() == 0, s.output()


def test_a_throwing_step_is_a_500_and_the_server_keeps_serving(pagoda_bin, tiny_model, monkeypatch):
    monkeypatch.setenv("PAGODA_TEST_STEP_THROW", "1")
    s = Server(pagoda_bin, tiny_model)
    try:
        r = s.post("/v1/completions", json={"prompt": "a", "max_tokens": 4})
        assert r.status_code == 500, r.text
        e = error_of(r)
        assert e["type"] == "server_error" and "PAGODA_TEST_STEP_THROW" in e["message"], e
        assert s.get("/health").status_code == 200
        r = s.post("/v1/completions", json={"prompt": "a", "max_tokens": 4})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] == 4
        # The failed request's sequence was given back along with the good one's.
        r = s.post("/v1/completions", json={"prompt": "a", "n": 8, "max_tokens": 2})
        assert r.status_code == 200, r.text
    finally:
        assert s.terminate() == 0, s.output()


def metric_model_names(text: str) -> set[str]:
    return {sample.labels["model_name"] for family in text_string_to_metric_families(text)
            for sample in family.samples if "model_name" in sample.labels}


@pytest.mark.parametrize("how", ["file", "flag"])
def test_metrics_escape_the_model_name(pagoda_bin, tiny_model, tmp_path, how):
    if how == "file":
        name = 'we"ird\\name'
        model = tmp_path / f"{name}.gguf"
        shutil.copyfile(tiny_model, model)
        s = Server(pagoda_bin, model)
    else:
        name = 'line one\nline "two" \\ three'
        s = Server(pagoda_bin, tiny_model, "--served-model-name", name)
    try:
        assert s.post("/v1/completions", json={"prompt": "a", "max_tokens": 2}).status_code == 200
        text = s.get("/metrics").text
        assert metric_model_names(text) == {name}
    finally:
        assert s.terminate() == 0, s.output()


def test_top_logprobs_keep_one_key_per_candidate(server):
    # Half of the tiny model's vocabulary is byte tokens, so among 20 candidates several are
    # pieces of a UTF-8 character (and some letters have a byte token twin).
    r = server.post("/v1/completions",
                    json={"prompt": "x y z", "max_tokens": 8, "temperature": 0, "logprobs": 20, "ignore_eos": True})
    assert r.status_code == 200, r.text
    tops = r.json()["choices"][0]["logprobs"]["top_logprobs"]
    assert len(tops) == 8
    saw_bytes = False
    for top in tops:
        assert len(top) == 20, top
        saw_bytes = saw_bytes or any(k.startswith("bytes:\\x") for k in top)
        assert "\ufffd" not in top
    assert saw_bytes, tops
    # Chat carries every entry's bytes (OpenAI's field) instead.
    r = server.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hey"}], "max_tokens": 4,
                                                  "temperature": 0, "logprobs": True, "top_logprobs": 20})
    assert r.status_code == 200, r.text
    for entry in r.json()["choices"][0]["logprobs"]["content"]:
        assert isinstance(entry["bytes"], list) and len(entry["top_logprobs"]) == 20
        for alt in entry["top_logprobs"]:
            assert isinstance(alt["bytes"], list) and all(0 <= b < 256 for b in alt["bytes"])
