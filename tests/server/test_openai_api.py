"""`pagoda serve` against the official `openai` Python client (the oracle for the API's
shapes): completions and chat, streamed and not, n > 1, stop strings, logprobs, seeds,
token-id prompts, usage, and each error case with its status and OpenAI's error shape.
The model is a generated tiny one: the text is gibberish, but every property checked
here is about the API, and greedy decoding makes streamed and plain replies comparable."""
from __future__ import annotations

import json

import httpx
import openai
import pytest


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=120)


def model_id(client) -> str:
    return client.models.list().data[0].id


def test_models_lists_the_served_model(client):
    models = client.models.list().data
    assert len(models) == 1 and models[0].id == "tiny-q8"


def test_completion_respects_max_tokens_and_counts_usage(client):
    r = client.completions.create(model=model_id(client), prompt="hello world", max_tokens=7, temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 7
    assert r.usage.total_tokens == r.usage.prompt_tokens + 7
    assert r.usage.prompt_tokens >= 2


def test_streamed_completion_equals_the_plain_one(client):
    kw = dict(model=model_id(client), prompt="the cat sat", max_tokens=12, temperature=0)
    plain = client.completions.create(**kw).choices[0].text
    chunks = list(client.completions.create(stream=True, **kw))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == plain
    assert chunks[-1].choices[0].finish_reason == "length"


def test_chat_plain_and_streamed_agree(client):
    kw = dict(model=model_id(client), messages=[{"role": "system", "content": "be brief"},
                                                {"role": "user", "content": "hi there"}],
              max_tokens=10, temperature=0)
    plain = client.chat.completions.create(**kw)
    assert plain.object == "chat.completion"
    assert plain.choices[0].message.role == "assistant"
    text = ""
    roles = []
    for ch in client.chat.completions.create(stream=True, **kw):
        assert ch.object == "chat.completion.chunk"
        for c in ch.choices:
            if c.delta.role:
                roles.append(c.delta.role)
            text += c.delta.content or ""
    assert roles == ["assistant"]
    assert text == plain.choices[0].message.content


def test_n_samples_are_indexed_and_greedy_ones_agree(client):
    r = client.completions.create(model=model_id(client), prompt="one two", max_tokens=6, temperature=0, n=3)
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert len({c.text for c in r.choices}) == 1
    assert r.usage.completion_tokens == 18


def test_several_prompts_in_one_request(client):
    r = client.completions.create(model=model_id(client), prompt=["a b", "c d e"], max_tokens=3, temperature=0, n=2)
    assert [c.index for c in sorted(r.choices, key=lambda c: c.index)] == [0, 1, 2, 3]


def test_stop_string_cuts_the_text_and_reports_stop(client):
    kw = dict(model=model_id(client), prompt="once upon", max_tokens=24, temperature=0)
    full = client.completions.create(**kw).choices[0].text
    stop = full[len(full) // 2: len(full) // 2 + 3]
    assert stop.strip(), f"no usable stop string in {full!r}"
    r = client.completions.create(stop=[stop], **kw)
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == full[:full.index(stop)]
    streamed = "".join(c.choices[0].text for c in client.completions.create(stream=True, stop=stop, **kw) if c.choices)
    assert streamed == r.choices[0].text


def test_completion_logprobs_have_one_entry_per_token(client):
    r = client.completions.create(model=model_id(client), prompt="x y z", max_tokens=5, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 5
    for tok, val, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert val <= 0 and len(top) == 2
        assert max(top.values()) == pytest.approx(val, abs=1e-5)  # greedy: the chosen token is the top one
    assert "".join(lp.tokens) == r.choices[0].text


def test_chat_logprobs_with_alternatives(client):
    r = client.chat.completions.create(model=model_id(client), messages=[{"role": "user", "content": "hey"}],
                                       max_tokens=4, temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == 4
    for entry in content:
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob, abs=1e-5)
        assert bytes(entry.bytes).decode(errors="replace") == entry.token


def test_seed_reproduces_a_sampled_reply(client):
    kw = dict(model=model_id(client), prompt="random words", max_tokens=16, temperature=1.0)
    a = client.completions.create(seed=42, **kw).choices[0].text
    b = client.completions.create(seed=42, **kw).choices[0].text
    c = client.completions.create(seed=43, **kw).choices[0].text
    assert a == b
    assert a != c


def test_token_id_prompts(client):
    r = client.completions.create(model=model_id(client), prompt=[1, 40, 41, 42], max_tokens=3, temperature=0)
    assert r.usage.prompt_tokens == 4
    r2 = client.completions.create(model=model_id(client), prompt=[[1, 40], [1, 41, 42]], max_tokens=2,
                                   temperature=0)
    assert r2.usage.prompt_tokens == 5 and len(r2.choices) == 2


def test_stream_usage_comes_last_when_asked(client):
    chunks = list(client.chat.completions.create(model=model_id(client), messages=[{"role": "user", "content": "a"}],
                                                 max_tokens=5, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    assert all(c.usage is None for c in chunks[:-1])


# ---- errors: status and OpenAI's shape -----------------------------------------------------

def error_of(resp: httpx.Response):
    body = resp.json()
    assert set(body) == {"error"} and {"message", "type", "param", "code"} <= set(body["error"]), body
    assert body["error"]["message"]
    return body["error"]


def test_malformed_json_is_a_400(server):
    r = server.post("/v1/completions", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    error_of(r)


@pytest.mark.parametrize("field,value", [("temperature", "hot"), ("max_tokens", -5), ("max_tokens", 1.5),
                                         ("temperature", 3.0), ("top_p", 1.5), ("n", 0), ("stream", "yes"),
                                         ("stop", 5), ("presence_penalty", 9), ("logprobs", 99)])
def test_bad_field_is_a_400_naming_it(client, field, value):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model_id(client), prompt="hi", **{field: value})
    assert e.value.status_code == 400
    assert field in str(e.value)


def test_missing_prompt_and_bad_messages_are_400s(server):
    assert server.post("/v1/completions", json={"model": "x"}).status_code == 400
    r = server.post("/v1/chat/completions", json={"messages": [{"content": "no role"}]})
    assert r.status_code == 400
    error_of(r)


def test_prompt_longer_than_the_context_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model_id(client), prompt=[5] * 600, max_tokens=4)
    assert "context length" in str(e.value)


def test_token_outside_the_vocabulary_is_a_400(client):
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=model_id(client), prompt=[1, 99999], max_tokens=2)


def test_unknown_endpoint_is_a_404_in_openai_shape(server):
    r = server.get("/v1/nothing")
    assert r.status_code == 404
    error_of(r)


def test_api_key_is_enforced(pagoda_bin, tiny_model):
    from server_util import Server
    s = Server(pagoda_bin, tiny_model, "--api-key", "sekret")
    try:
        bad = openai.OpenAI(base_url=s.base + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as e:
            bad.completions.create(model="tiny-q8", prompt="hi", max_tokens=2)
        assert e.value.status_code == 401
        assert s.post("/v1/completions", json={"prompt": "hi"}).status_code == 401
        good = openai.OpenAI(base_url=s.base + "/v1", api_key="sekret", max_retries=0)
        assert good.completions.create(model="tiny-q8", prompt="hi", max_tokens=2).usage.completion_tokens == 2
        assert s.get("/health").status_code == 200  # health and metrics stay open for probes
    finally:
        assert s.terminate() == 0


def test_body_too_large_is_a_413(pagoda_bin, tiny_model):
    from server_util import Server
    s = Server(pagoda_bin, tiny_model, "--max-body-mib", "1")
    try:
        r = s.post("/v1/completions", content=json.dumps({"prompt": "x" * (2 << 20)}).encode(),
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 413
    finally:
        assert s.terminate() == 0
