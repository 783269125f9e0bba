"""Prompt compression in `pagoda serve`: POST /v1/compress (prompt and messages), the
compress_prompt option of /v1/completions and /v1/chat/completions through the openai
client (it must give exactly what /v1/compress gives), the scorer as the served model
loaded again or a named model (Gemma 3 270M), and the 400s naming the field."""
import re

import httpx
import pytest

from oracles import cached_model, import_oracle
from server_util import Server, gen_tiny_model

CONTEXT = ("The old house stood at the end of a quiet lane near Matsuyama. Its garden held a chestnut tree that "
           "the boy loved more than anything. Every autumn he climbed it to shake down the nuts, and his brother "
           "laughed at him from the porch. One day a neighbour named Kantaro came over the fence to steal the "
           "chestnuts. The boy caught him and they wrestled in the dirt until the sun went down.")
QUESTION = "Who came over the fence?"


@pytest.fixture(scope="module")
def tiny(pagoda_bin, tmp_path_factory):
    return gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("compress-server") / "tiny.gguf", ctx=4096)


@pytest.fixture(scope="module")
def server(pagoda_bin, tiny):
    s = Server(pagoda_bin, tiny)
    yield s
    assert s.terminate() == 0, s.output()


@pytest.fixture(scope="module")
def client(server):
    openai = import_oracle("openai")
    return openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)


def compress(server, **body):
    r = server.post("/v1/compress", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_compress_endpoint_prompt(server):
    j = compress(server, prompt=CONTEXT, question=QUESTION, instruction="Answer briefly.", ratio=0.5)
    assert abs(j["compressed_tokens"] / j["origin_tokens"] - 0.5) < 0.06, j
    assert j["ratio"] == pytest.approx(j["compressed_tokens"] / j["origin_tokens"])
    assert j["compressed_prompt"].startswith("Answer briefly.\n\n")
    assert j["compressed_prompt"].endswith("\n\n" + QUESTION)
    assert j["seconds"] >= 0
    # Deterministic: the same request gives the same text.
    assert compress(server, prompt=CONTEXT, question=QUESTION, instruction="Answer briefly.",
                    ratio=0.5)["compressed_prompt"] == j["compressed_prompt"]
    assert compress(server, prompt=CONTEXT, ratio=1)["compressed_prompt"] == CONTEXT


def test_compress_endpoint_question_share_and_scorer_vocab(server):
    asked = "One day a neighbour named Kantaro came over the fence to steal the chestnuts."
    body = dict(prompt=CONTEXT, question="Who came over the fence to steal the chestnuts?", ratio=0.5,
                question_words=False)
    # The tiny vocabulary spells words by letters (and a space before a capital in bytes).
    spaced = lambda j: j["compressed_prompt"].replace("\u2581", " ")  # noqa: E731
    assert asked in spaced(compress(server, **body, question_share=0.6))
    assert asked not in spaced(compress(server, **body, question_share=0))
    # The tiny vocabulary is smaller than the default subset: exact, nothing to report;
    # a subset of 100 holds too little of a random model's rows and falls back to exact.
    assert "scorer_vocab" not in compress(server, **body)
    j = compress(server, **body, scorer_vocab=100)
    assert j["scorer_vocab"]["tokens"] == 0 and j["scorer_vocab"]["mass"] < 0.9, j


def compress_metrics(server):
    text = server.get("/metrics").text
    out = {}
    for name in ("compress_requests", "compress_origin_tokens", "compress_kept_tokens", "compress_seconds"):
        m = re.search(rf"^pagoda:{name}_total(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1))
    return out


def test_metrics_count_compressions_and_their_tokens(server):
    before = compress_metrics(server)
    a = compress(server, prompt=CONTEXT, question=QUESTION, ratio=0.5)
    b = compress(server, messages=[{"role": "user", "content": CONTEXT}, {"role": "user", "content": CONTEXT}],
                 ratio=0.5)
    after = compress_metrics(server)
    assert after["compress_requests"] == before["compress_requests"] + 3  # one per text
    assert after["compress_origin_tokens"] == before["compress_origin_tokens"] + a["origin_tokens"] + b["origin_tokens"]
    assert after["compress_kept_tokens"] == before["compress_kept_tokens"] + a["compressed_tokens"] + \
        b["compressed_tokens"]
    assert after["compress_seconds"] > before["compress_seconds"]


def test_compress_endpoint_messages_keeps_the_last_question_whole(server):
    msgs = [{"role": "system", "content": "You answer questions about stories."},
            {"role": "user", "content": CONTEXT + "\n\n" + QUESTION}]
    j = compress(server, messages=msgs, ratio=0.5)
    out = j["messages"]
    assert out[0] == msgs[0]
    assert out[1]["content"].endswith("\n\n" + QUESTION)
    assert len(out[1]["content"]) < 0.75 * len(msgs[1]["content"])
    assert j["compressed_prompt"] == out[1]["content"]


def test_completions_option_applies_what_the_endpoint_gives(client, server):
    prompt = CONTEXT + "\n\n" + QUESTION
    want = compress(server, prompt=CONTEXT, question=QUESTION, ratio=0.5)["compressed_prompt"]
    a = client.completions.create(model="m", prompt=prompt, max_tokens=2, temperature=0, echo=True,
                                  extra_body={"compress_prompt": {"ratio": 0.5}})
    b = client.completions.create(model="m", prompt=want, max_tokens=2, temperature=0, echo=True)
    full = client.completions.create(model="m", prompt=prompt, max_tokens=2, temperature=0)
    assert a.usage.prompt_tokens == b.usage.prompt_tokens
    assert a.usage.prompt_tokens < 0.7 * full.usage.prompt_tokens
    assert a.choices[0].text == b.choices[0].text


def test_chat_option_applies_what_the_endpoint_gives(client, server):
    msgs = [{"role": "user", "content": "Some background first. " + CONTEXT},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": CONTEXT + "\n\n" + QUESTION}]
    want = compress(server, messages=msgs, ratio=0.5)["messages"]
    a = client.chat.completions.create(model="m", messages=msgs, max_tokens=2, temperature=0,
                                       extra_body={"compress_prompt": {"ratio": 0.5}})
    b = client.chat.completions.create(model="m", messages=want, max_tokens=2, temperature=0)
    full = client.chat.completions.create(model="m", messages=msgs, max_tokens=2, temperature=0)
    assert a.usage.prompt_tokens == b.usage.prompt_tokens
    assert a.usage.prompt_tokens < 0.75 * full.usage.prompt_tokens
    assert a.choices[0].message.content == b.choices[0].message.content


@pytest.mark.parametrize("body,param", [
    ({"prompt": CONTEXT, "ratio": 0}, "ratio"),
    ({"prompt": CONTEXT, "ratio": 1.5}, "ratio"),
    ({"prompt": CONTEXT, "ratio": "half"}, "ratio"),
    ({"prompt": "  \n", "ratio": 0.5}, "prompt"),
    ({"ratio": 0.5}, "prompt"),
    ({"prompt": 5, "ratio": 0.5}, "prompt"),
    ({"prompt": CONTEXT, "question": 3}, "question"),
    ({"messages": [], "ratio": 0.5}, "messages"),
    ({"messages": [{"role": "system", "content": "x"}], "ratio": 0.5}, "messages"),
    ({"prompt": CONTEXT, "iterative": "yes"}, "iterative"),
    ({"prompt": CONTEXT, "question_words": 1}, "question_words"),
    ({"prompt": CONTEXT, "question_share": 1.5}, "question_share"),
    ({"prompt": CONTEXT, "question_share": "all"}, "question_share"),
    ({"prompt": CONTEXT, "scorer_vocab": -1}, "scorer_vocab"),
    ({"prompt": CONTEXT, "scorer_vocab": 0.5}, "scorer_vocab"),
])
def test_compress_endpoint_bad_input_is_a_400_naming_the_field(server, body, param):
    r = server.post("/v1/compress", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.text


@pytest.mark.parametrize("body,param", [
    ({"prompt": CONTEXT * 40, "ratio": 0.5}, "prompt"),
    ({"messages": [{"role": "user", "content": CONTEXT * 40}], "ratio": 0.5}, "messages"),
])
def test_a_prompt_longer_than_the_scorers_context_is_the_callers_400(server, body, param):
    # Checked before scoring (compress_input_error), not told apart from a server failure
    # by the words of an error message.
    r = server.post("/v1/compress", json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and "more than the scorer's context" in err["message"], r.text
    # The same prompt kept whole needs no scoring, so nothing is too long.
    r = server.post("/v1/compress", json={**body, "ratio": 1})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("option,param", [
    ({"ratio": 0}, "compress_prompt.ratio"),
    ({"ratio": 2}, "compress_prompt.ratio"),
    ("half", "compress_prompt"),
    ({"ratio": 0.5, "scorer": "some-other-model"}, "compress_prompt.scorer"),
])
def test_completions_option_bad_input_is_a_400(client, option, param):
    openai = import_oracle("openai")
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt=CONTEXT, max_tokens=1, extra_body={"compress_prompt": option})
    assert e.value.body["param"] == param


def test_token_id_prompts_cannot_be_compressed(client):
    openai = import_oracle("openai")
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt=[1, 300, 301], max_tokens=1,
                                  extra_body={"compress_prompt": {"ratio": 0.5}})
    assert e.value.body["param"] == "compress_prompt"


def test_without_a_scorer_compression_is_a_400(pagoda_bin, tiny):
    s = Server(pagoda_bin, tiny, "--compress-scorer", "none")
    try:
        r = s.post("/v1/compress", json={"prompt": CONTEXT, "ratio": 0.5})
        assert r.status_code == 400
        assert "--compress-scorer" in r.json()["error"]["message"]
        r = s.post("/v1/completions", json={"prompt": CONTEXT, "max_tokens": 1, "compress_prompt": {"ratio": 0.5}})
        assert r.status_code == 400
        assert r.json()["error"]["param"] == "compress_prompt"
        # Requests without the option are untouched.
        assert s.post("/v1/completions", json={"prompt": CONTEXT, "max_tokens": 1}).status_code == 200
    finally:
        assert s.terminate() == 0, s.output()


def test_a_named_scorer_gemma(pagoda_bin, tiny):
    gemma = cached_model("gemma-3-270m-q4_k_m.gguf", "`pagoda pull` (scripts/fetch_test_data)")
    s = Server(pagoda_bin, tiny, "--compress-scorer", str(gemma))
    try:
        r = s.post("/v1/compress", json={"prompt": CONTEXT, "question": QUESTION, "ratio": 0.5})
        assert r.status_code == 200, r.text
        j = r.json()
        assert abs(j["compressed_tokens"] / j["origin_tokens"] - 0.5) < 0.08, j
        assert "Kantaro" in j["compressed_prompt"] and "Matsuyama" in j["compressed_prompt"]
        r = s.post("/v1/completions", json={"prompt": CONTEXT + "\n\n" + QUESTION, "max_tokens": 1,
                                            "compress_prompt": {"ratio": 0.5, "scorer": gemma.stem}})
        assert r.status_code == 200, r.text
    finally:
        assert s.terminate() == 0, s.output()


def test_a_scorer_that_does_not_exist_fails_at_startup(pagoda_bin, tiny, tmp_path):
    with pytest.raises(RuntimeError, match="--compress-scorer"):
        Server(pagoda_bin, tiny, "--compress-scorer", str(tmp_path / "missing.gguf"))
