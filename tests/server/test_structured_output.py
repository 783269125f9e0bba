"""Issue 18: structured output through the OpenAI API on a random-weight model, where only
the constraint can make the text valid. Every response to a json_schema request must
parse (json.loads) and validate (jsonschema) against its schema, for n = 3, streamed or
not, and under KV pressure that preempts; the choice, regex and grammar fields hold too;
a spec that does not compile is a 400 naming its field."""
from __future__ import annotations

import concurrent.futures as cf
import json
import pathlib
import re

import jsonschema
import openai
import pydantic
import pytest

from oracles import cached_model, oracle_missing
from schema_corpus import SUITE, corpus
from server_util import Server, gen_tiny_model

SCHEMAS = [
    {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 1, "maximum": 9}},
     "required": ["ok", "n"], "additionalProperties": False},
    {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}, "v": {"const": 3}},
     "required": ["color", "v"]},
    {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "minItems": 2, "maxItems": 4},
    {"type": "object", "properties": {"name": {"type": "string", "minLength": 2, "maxLength": 8},
                                      "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}},
     "required": ["name", "code"]},
    {"type": "object", "properties": {"x": {"type": "number", "minimum": 0.5, "maximum": 2.5}}, "required": ["x"]},
    {"anyOf": [{"type": "integer", "minimum": 100, "maximum": 200}, {"enum": ["none"]}]},
    {"$defs": {"pt": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
                      "required": ["a"], "additionalProperties": False}},
     "type": "object", "properties": {"p": {"$ref": "#/$defs/pt"}, "q": {"type": "array", "items": {"$ref": "#/$defs/pt"},
                                                                          "maxItems": 2}},
     "required": ["p", "q"]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1,
                                               "maxItems": 3}, "flag": {"type": ["boolean", "null"]}},
     "required": ["tags", "flag"]},
    {"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"],
                "additionalProperties": False},
               {"type": "object", "properties": {"kind": {"const": "b"}, "w": {"type": "integer", "maximum": 3,
                                                                            "minimum": 0}},
                "required": ["kind", "w"], "additionalProperties": False}]},
]


@pytest.fixture(scope="module")
def model(pagoda_bin, tmp_path_factory):
    # A vocabulary of little more than bytes: random logits then close strings and arrays
    # within a few hundred tokens.
    return gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("structured") / "q2.gguf", arch="qwen2", vocab=300,
                          ctx=8192, seed=7)


@pytest.fixture(scope="module")
def server(pagoda_bin, model):
    s = Server(pagoda_bin, model, "--max-num-seqs", "32", "-c", "8192")
    yield s
    assert s.terminate() == 0, s.output()


def client(s: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=s.base + "/v1", api_key="none", timeout=300, max_retries=0)


def response_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "t", "schema": schema, "strict": True}}


def check(text: str, schema: dict):
    value = json.loads(text)
    jsonschema.validate(value, schema)


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_every_choice_parses_and_validates(server, i):
    schema = SCHEMAS[i]
    r = client(server).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "json please"}], n=3, max_tokens=4000, temperature=1.0,
        seed=i, response_format=response_format(schema))
    assert len(r.choices) == 3
    for c in r.choices:
        assert c.finish_reason == "stop", c
        check(c.message.content, schema)


def test_streamed_equals_a_valid_document(server):
    schema = SCHEMAS[6]
    stream = client(server).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "json"}], n=2, max_tokens=4000, stream=True, seed=3,
        response_format=response_format(schema))
    texts = {0: "", 1: ""}
    finish = {}
    for chunk in stream:
        for c in chunk.choices:
            texts[c.index] += c.delta.content or ""
            if c.finish_reason:
                finish[c.index] = c.finish_reason
    assert finish == {0: "stop", 1: "stop"}
    for t in texts.values():
        check(t, schema)
    # The same seed without streaming gives the same documents.
    plain = client(server).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "json"}], n=2, max_tokens=4000, seed=3,
        response_format=response_format(schema))
    assert sorted(c.message.content for c in plain.choices) == sorted(texts.values())


def test_completions_endpoint_and_other_spellings(server):
    schema = SCHEMAS[0]
    bodies = [
        {"response_format": response_format(schema)},
        {"guided_json": schema},
        {"structured_outputs": {"json": schema}},
        {"json_schema": schema},  # llama.cpp's field
        {"response_format": {"type": "json_object", "schema": schema}},  # llama.cpp's form
    ]
    for extra in bodies:
        r = server.post("/v1/completions", json={"prompt": "x", "max_tokens": 4000, "n": 2, **extra}, timeout=300)
        assert r.status_code == 200, (extra, r.text)
        for c in r.json()["choices"]:
            check(c["text"], schema)
    r = server.post("/v1/completions", json={"prompt": "x", "max_tokens": 4000, "response_format": {"type": "json_object"}},
                    timeout=300)
    assert r.status_code == 200, r.text
    text = r.json()["choices"][0]["text"]
    if r.json()["choices"][0]["finish_reason"] == "stop":
        assert isinstance(json.loads(text), dict), text


def test_choice_regex_and_grammar(server):
    post = lambda body: server.post("/v1/completions", json={"prompt": "x", "max_tokens": 200, **body}, timeout=300)
    for seed in range(4):
        r = post({"guided_choice": ["alpha", "beta", "gamma delta"], "seed": seed, "n": 2})
        assert r.status_code == 200, r.text
        assert all(c["text"] in ("alpha", "beta", "gamma delta") for c in r.json()["choices"]), r.text
        r = post({"guided_regex": r"[a-f]{2,4}@[0-9]{3}\.(com|org)", "seed": seed})
        assert re.fullmatch(r"[a-f]{2,4}@[0-9]{3}\.(com|org)", r.json()["choices"][0]["text"]), r.text
        gbnf = 'root ::= "(" item (" " item)* ")"\nitem ::= [0-9] | "x" | root\n'
        r = post({"grammar": gbnf, "seed": seed, "max_tokens": 2000})
        text = r.json()["choices"][0]["text"]
        assert r.json()["choices"][0]["finish_reason"] == "stop", r.text
        depth = 0
        for ch in text:  # balanced parentheses, items separated by single spaces
            depth += {"(": 1, ")": -1}.get(ch, 0)
            assert depth >= 0 and ch in "()x 0123456789", text
        assert depth == 0 and text.startswith("(") and "  " not in text, text


def test_pydantic_parse_returns_the_object(server):
    class Pet(pydantic.BaseModel):
        kind: str = pydantic.Field(max_length=6)
        legs: int = pydantic.Field(ge=0, le=8)
        tame: bool

    c = client(server)
    parse = c.beta.chat.completions.parse if hasattr(c, "beta") and hasattr(c.beta, "chat") else c.chat.completions.parse
    r = parse(model="m", messages=[{"role": "user", "content": "a pet"}], response_format=Pet, max_tokens=4000, seed=1)
    pet = r.choices[0].message.parsed
    assert isinstance(pet, Pet) and 0 <= pet.legs <= 8, r


def test_specs_that_do_not_compile_are_400s_naming_the_field(server):
    cases = [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": {"type": "bogus"}}}},
         "response_format.json_schema.schema"),
        ({"guided_regex": "(unclosed"}, "guided_regex"),
        ({"grammar": "root ::= missing"}, "grammar"),
        ({"guided_choice": []}, "guided_choice"),
        ({"response_format": {"type": "yaml"}}, "response_format"),
        ({"guided_json": {"type": "object"}, "guided_regex": "a"}, "guided_regex"),
    ]
    for extra, field in cases:
        r = server.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], **extra})
        assert r.status_code == 400, (extra, r.text)
        e = r.json()["error"]
        assert e["param"] == field and e["type"] == "invalid_request_error", (extra, e)
    # The server still serves.
    assert server.post("/v1/completions", json={"prompt": "a", "max_tokens": 2}).status_code == 200


def test_valid_under_kv_pressure_that_preempts(pagoda_bin, model):
    # 512 KiB of KV holds 2,048 tokens of this model. Eight samples of one request, each
    # forced to a 60-number array (several hundred tokens with the whitespace a random
    # model picks), outgrow it together, so some are preempted and recomputed; with
    # recompute the grammar state is kept, as the tokens are.
    s = Server(pagoda_bin, model, "--kv-cache-memory", "512K", "--max-num-seqs", "16", "-c", "2048")
    try:
        schema = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "minItems": 60,
                  "maxItems": 60}
        r = s.post("/v1/completions", json={"prompt": [3 + i % 280 for i in range(200)], "max_tokens": 1800, "n": 8,
                                            "seed": 11, "response_format": response_format(schema)}, timeout=600)
        assert r.status_code == 200, r.text
        choices = r.json()["choices"]
        assert len(choices) == 8
        for c in choices:
            assert c["finish_reason"] == "stop", c
            check(c["text"], schema)
        metrics = s.get("/metrics").text
        m = re.search(r"^pagoda:num_preemptions_total(?:\{[^}]*\})? ([0-9.e+]+)$", metrics, re.M)
        assert m and float(m.group(1)) > 0, "no preemption happened; the test did not press on the KV cache"
    finally:
        assert s.terminate() == 0, s.output()


def validate_document(name: str, schema: dict, text: str):
    """json.loads and the schema's own draft validator (formats checked where jsonschema can)."""
    drafts = {"draft4/": jsonschema.Draft4Validator, "draft6/": jsonschema.Draft6Validator,
              "draft7/": jsonschema.Draft7Validator}
    default = next((v for prefix, v in drafts.items() if name.startswith(prefix)), jsonschema.Draft202012Validator)
    validator = jsonschema.validators.validator_for(schema, default=default)
    try:
        validator(schema, format_checker=validator.FORMAT_CHECKER).validate(json.loads(text))
    except Exception as e:  # noqa: BLE001 - the schema name is what a failure needs
        raise AssertionError(f"{name}: {text[:300]!r}: {e}") from e


def run_corpus(s: Server, schemas, max_tokens: int, messages=None, threads: int = 8) -> dict:
    """Sends every schema (n = 3; every fourth streamed) and checks every finished reply.
    Each schema either compiles and every reply that finished validates, or is a 400
    naming what is not supported; never a reply that breaks its schema. A reply cut by
    max_tokens is counted apart (its text is a prefix of a valid document)."""
    c = client(s)

    def one(item):
        i, (name, schema) = item
        kw = dict(model="m", n=3, seed=i, max_tokens=max_tokens, response_format=response_format(schema),
                  messages=messages(schema) if messages else [{"role": "user", "content": "x"}])
        try:
            if i % 4 == 3:
                texts, finish = ["", "", ""], [None] * 3
                for chunk in c.chat.completions.create(stream=True, **kw):
                    for ch in chunk.choices:
                        texts[ch.index] += ch.delta.content or ""
                        finish[ch.index] = ch.finish_reason or finish[ch.index]
                replies = list(zip(texts, finish))
            else:
                replies = [(ch.message.content, ch.finish_reason) for ch in c.chat.completions.create(**kw).choices]
        except openai.BadRequestError as e:
            err = e.body
            assert err["param"] == "response_format.json_schema.schema" and "cannot be compiled" in err["message"], \
                (name, err)
            return "refused", 0
        assert len(replies) == 3, name
        cut = 0
        for text, finish in replies:
            if finish == "length":
                cut += 1
                continue
            assert finish == "stop", (name, finish)
            validate_document(name, schema, text)
        return "valid", cut

    counts = {"schemas": len(schemas), "refused": 0, "compiled": 0, "replies_valid": 0, "replies_cut": 0}
    with cf.ThreadPoolExecutor(threads) as pool:
        for kind, cut in pool.map(one, enumerate(schemas)):
            if kind == "refused":
                counts["refused"] += 1
            else:
                counts["compiled"] += 1
                counts["replies_valid"] += 3 - cut
                counts["replies_cut"] += cut
    return counts


def corpus_or_skip():
    if not SUITE.is_dir():
        oracle_missing(f"{SUITE} is missing (Debian package json-schema-test-suite; scripts/setup installs it)")
    schemas = corpus()
    assert len(schemas) >= 200
    return schemas


def test_schema_corpus_is_valid_or_refused(server):
    # Random weights: only the constraint can make a reply valid.
    counts = run_corpus(server, corpus_or_skip(), max_tokens=3000)
    print(f"schema corpus, random model: {counts}")
    assert counts["compiled"] >= 150 and counts["replies_valid"] >= 400, counts


def schema_prompt(schema: dict) -> list[dict]:
    return [{"role": "user", "content": "Reply with one JSON value, and nothing else, that matches this JSON schema:\n"
                                        + json.dumps(schema)}]


@pytest.mark.parametrize("file", ["gemma-3-270m-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"])
def test_schema_corpus_on_real_models(pagoda_bin, file):
    # A real model writes what it likes inside the grammar: long strings, many items. The
    # replies that finish must all validate; the rest are cut by max_tokens.
    schemas = corpus_or_skip()
    path = cached_model(file, "`pagoda pull` (scripts/fetch_test_data)")
    s = Server(pagoda_bin, path, "-c", "2048", "--max-num-seqs", "32")
    try:
        counts = run_corpus(s, schemas, max_tokens=200, messages=schema_prompt)
    finally:
        assert s.terminate() == 0, s.output()
    print(f"schema corpus, {file}: {counts}")
    assert counts["compiled"] >= 150 and counts["replies_valid"] >= 300, counts


def mask_count(s: Server) -> float:
    m = re.search(r"^pagoda:structured_output_mask_seconds_count(?:\{[^}]*\})? ([0-9.e+]+)$", s.get("/metrics").text,
                  re.M)
    return float(m.group(1)) if m else 0.0


@pytest.mark.parametrize("fast_forward", [True, False])
def test_forced_text_is_appended_without_sampling(pagoda_bin, model, fast_forward):
    # A grammar whose every item is followed by a long literal: with fast-forward the
    # literal's tokens are appended at once (no mask, no sampling step of their own), so
    # fewer tokens are masked than generated; the text obeys the grammar either way, also
    # when 8 samples outgrow a small KV cache and are preempted and recomputed with
    # forced tokens not yet computed. (No spaces in the literal: this random vocabulary has
    # no "▁" piece, so its encoding of a space would not spell one and nothing is forced.)
    extra = [] if fast_forward else ["--no-grammar-fast-forward"]
    s = Server(pagoda_bin, model, "--kv-cache-memory", "512K", "--max-num-seqs", "16", "-c", "2048", *extra)
    try:
        gbnf = 'root ::= "[" num (";and-the-next-value-is:" num){20} "]"\nnum ::= [0-9] | [1-9] [0-9]\n'
        r = s.post("/v1/completions", json={"prompt": [3 + i % 280 for i in range(200)], "max_tokens": 1500, "n": 8,
                                            "seed": 5, "grammar": gbnf}, timeout=600)
        assert r.status_code == 200, r.text
        item = r"(?:[0-9]|[1-9][0-9])"
        generated = r.json()["usage"]["completion_tokens"]
        for c in r.json()["choices"]:
            assert c["finish_reason"] == "stop", c
            assert re.fullmatch(rf"\[{item}(?:;and-the-next-value-is:{item}){{20}}\]", c["text"]), c["text"]
        masked = mask_count(s)
        if fast_forward:
            assert masked < 0.6 * generated, (masked, generated)
        else:
            assert masked == generated, (masked, generated)
        m = re.search(r"^pagoda:num_preemptions_total(?:\{[^}]*\})? ([0-9.e+]+)$", s.get("/metrics").text, re.M)
        assert m and float(m.group(1)) > 0, "no preemption happened; the test did not press on the KV cache"
    finally:
        assert s.terminate() == 0, s.output()


def spec_metrics(s: Server) -> dict[str, float]:
    out = {}
    for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        m = re.search(rf"^pagoda:spec_decode_{name}_total(?:\{{[^}}]*\}})? ([0-9.e+]+)$", s.get("/metrics").text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def test_speculative_decoding_gives_constrained_requests_their_plain_tokens(pagoda_bin, model, server):
    # Prompt lookup drafts from each sample's own text; every verified row is masked by
    # the grammar in the state the drafts before it left, so greedy documents are the
    # plain server's token for token, batched together, with n = 2, and with the grammar's
    # forced text appended after verified tokens.
    spec = Server(pagoda_bin, model, "--max-num-seqs", "32", "-c", "8192", "--speculative-config",
                  '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3}')
    try:
        gbnf = 'root ::= "[" num (";and-the-next-value-is:" num){12} "]"\nnum ::= [0-9] | [1-9] [0-9]\n'
        bodies = [{"response_format": response_format(schema)} for schema in SCHEMAS]
        bodies += [{"grammar": gbnf}, {"regex": "(ab|cd){3,9}x[0-9]{4}"}]

        def ask(s: Server, body: dict) -> list[str]:
            r = s.post("/v1/completions", json={"prompt": [3 + i % 280 for i in range(40)], "max_tokens": 600,
                                                "temperature": 0, "n": 2, **body}, timeout=600)
            assert r.status_code == 200, r.text
            return [(c["text"], c["finish_reason"]) for c in r.json()["choices"]]

        with cf.ThreadPoolExecutor(len(bodies)) as ex:
            plain = list(ex.map(lambda b: ask(server, b), bodies))
            drafted = list(ex.map(lambda b: ask(spec, b), bodies))
        assert drafted == plain
        for (text, finish), _ in plain[:len(SCHEMAS)]:
            assert finish == "stop"
        m = spec_metrics(spec)
        assert 0 < m["num_drafts"] and 0 < m["num_accepted_tokens"] <= m["num_draft_tokens"], m
    finally:
        assert spec.terminate() == 0, spec.output()
