"""Issue 18: tool calling and reasoning through the OpenAI API.

On a random-weight model (where only the constraint can make a call valid) with real
templates from tests/chat/chat_templates: tool_choice `required` and a named function
always give calls whose arguments validate against the tool's parameters (jsonschema),
for n = 3, in the Hermes (Qwen), Llama 3 JSON and Mistral syntaxes (Mistral's 9-character
call ids rendered back by its own templates as jinja2 renders them); <think> text is split into
reasoning_content, also when the generation prompt opened it; chat_template_kwargs
reach the template. On Qwen2.5-Coder-0.5B-Instruct (its GGUF template renders tools):
required, named, auto, none and parallel_tool_calls=false behave as OpenAI documents,
streamed calls equal plain ones, and a two-turn agent loop renders exactly as jinja2
renders the template (the oracle)."""
from __future__ import annotations

import json
import pathlib

import jsonschema
import openai
import pytest

from jinja2_oracle import render_like_transformers
from oracles import cached_model, import_oracle
from server_util import Server, gen_tiny_model

TEMPLATES = pathlib.Path(__file__).resolve().parent.parent / "chat" / "chat_templates"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 12},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the current time in a timezone",
    "parameters": {"type": "object", "properties": {"offset": {"type": "integer", "minimum": -12, "maximum": 14}},
                   "required": ["offset"], "additionalProperties": False}}}
NOARGS = {"type": "function", "function": {"name": "ping", "description": "Checks the connection"}}
TOOLS = [WEATHER, TIME, NOARGS]
# A function without parameters takes none (OpenAI): its arguments are {}.
SCHEMAS = {t["function"]["name"]: t["function"].get("parameters", {"type": "object", "maxProperties": 0})
           for t in TOOLS}


def client(s: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=s.base + "/v1", api_key="x", max_retries=0, timeout=300)


def check_calls(message, allowed=None, mistral=False):
    assert message.tool_calls, f"no tool calls in {message}"
    for call in message.tool_calls:
        if mistral:  # the only ids Mistral's templates take back
            assert call.type == "function" and len(call.id) == 9 and call.id.isalnum(), call.id
        else:
            assert call.type == "function" and call.id.startswith("call_")
        assert call.function.name in (allowed or SCHEMAS), call.function.name
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    return [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls]


def streamed(c: openai.OpenAI, pieces: dict | None = None, **kw):
    """Joins a streamed reply: (content, reasoning, calls, finish_reason); `pieces` gets
    the number of chunks that carried each call's arguments."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in c.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        reasoning += getattr(d, "reasoning_content", None) or ""
        for t in d.tool_calls or []:
            entry = calls.setdefault(t.index, {"name": "", "arguments": ""})
            if t.function.name:
                entry["name"] += t.function.name
            entry["arguments"] += t.function.arguments or ""
            if pieces is not None and t.function.arguments:
                pieces[t.index] = pieces.get(t.index, 0) + 1
        finish = chunk.choices[0].finish_reason or finish
    return content, reasoning, [(v["name"], json.loads(v["arguments"])) for _, v in sorted(calls.items())], finish


# --- a random-weight model: only the constraint makes the calls valid --------------------

@pytest.fixture(scope="module")
def model(pagoda_bin, tmp_path_factory):
    return gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("tools") / "q2.gguf", arch="qwen2", vocab=300,
                          ctx=8192, seed=11)


@pytest.fixture(scope="module")
def qwen3_template_server(pagoda_bin, model):
    s = Server(pagoda_bin, model, "-c", "8192", "--chat-template", str(TEMPLATES / "qwen3.jinja"))
    yield s
    assert s.terminate() == 0, s.output()


ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.mark.parametrize("parallel", [True, False])
def test_required_calls_always_parse_and_validate(qwen3_template_server, parallel):
    r = client(qwen3_template_server).chat.completions.create(
        model="m", messages=ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=parallel, n=3, seed=3,
        max_tokens=2000)
    for choice in r.choices:
        assert choice.finish_reason == "tool_calls", choice
        calls = check_calls(choice.message)
        assert choice.message.content is None
        if not parallel:
            assert len(calls) == 1


def test_named_function_is_the_only_call(qwen3_template_server):
    c = client(qwen3_template_server)
    kw = dict(model="m", messages=ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}},
              seed=5, max_tokens=2000)
    r = c.chat.completions.create(n=3, **kw)
    for choice in r.choices:
        assert [name for name, _ in check_calls(choice.message, {"get_time"})] == ["get_time"] * len(choice.message.tool_calls)
    # Streamed: the deltas join to the same calls as the plain reply with the same seed, and
    # a constrained call's arguments arrive as they are written, in many chunks.
    plain = c.chat.completions.create(**kw).choices[0]
    pieces = {}
    content, _, calls, finish = streamed(c, pieces, **kw)
    assert calls == check_calls(plain.message) and finish == "tool_calls" and content == ""
    assert pieces and min(pieces.values()) > 3, pieces


def test_none_never_calls(qwen3_template_server):
    r = client(qwen3_template_server).chat.completions.create(
        model="m", messages=ASK, tools=TOOLS, tool_choice="none", n=3, seed=1, max_tokens=60)
    for choice in r.choices:
        assert not choice.message.tool_calls and "<tool_call>" not in choice.message.content


def test_llama3_json_syntax(pagoda_bin, model):
    s = Server(pagoda_bin, model, "-c", "8192", "--chat-template", str(TEMPLATES / "llama3.1.jinja"))
    try:
        c = client(s)
        r = c.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required", n=3, seed=2,
                                      max_tokens=2000)
        for choice in r.choices:
            assert choice.finish_reason == "tool_calls"
            check_calls(choice.message)
    finally:
        assert s.terminate() == 0, s.output()


@pytest.mark.parametrize("template,parallel", [("mistral-nemo.jinja", True), ("mistral-v3.jinja", False)])
def test_mistral_syntax_and_its_ids_round_trip(pagoda_bin, model, template, parallel):
    source = (TEMPLATES / template).read_text()
    s = Server(pagoda_bin, model, "-c", "8192", "--chat-template", str(TEMPLATES / template))
    try:
        c = client(s)
        r = c.chat.completions.create(model="m", messages=ASK, tools=TOOLS, tool_choice="required", n=3, seed=4,
                                      parallel_tool_calls=parallel, max_tokens=2000)
        for choice in r.choices:
            assert choice.finish_reason == "tool_calls", choice
            calls = check_calls(choice.message, mistral=True)
            if not parallel:
                assert len(calls) == 1
        # The second turn: the calls and their result rendered back, as jinja2 renders the
        # template (which refuses any id that is not 9 letters and digits).
        call = r.choices[0].message.tool_calls[0]
        history = ASK + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21})}]
        got = s.post("/apply-template", json={"messages": history, "tools": TOOLS})
        assert got.status_code == 200, got.text
        oracle_history = json.loads(json.dumps(history))
        oracle_history[1]["content"] = ""
        oracle_history[1]["tool_calls"][0]["function"]["arguments"] = json.loads(call.function.arguments)
        want = render_like_transformers(source, messages=oracle_history, tools=TOOLS, add_generation_prompt=True,
                                        documents=None, bos_token="<s>", eos_token="</s>")
        assert got.json()["prompt"] == want
        assert f'"id": "{call.id}"' in want and "[TOOL_CALLS]" in want
    finally:
        assert s.terminate() == 0, s.output()


def test_tool_errors_are_400s(qwen3_template_server, pagoda_bin, model):
    c = client(qwen3_template_server)
    cases = [
        (dict(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
        (dict(tool_choice="required"), "tool_choice"),
        (dict(tools=TOOLS, tool_choice="sometimes"), "tool_choice"),
        (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}],
              tool_choice="required"), "tools"),
        (dict(tools=[{"type": "function"}]), "tools"),
        (dict(tools=TOOLS, tool_choice="required", response_format={"type": "json_object"}), "tool_choice"),
        (dict(tools=TOOLS, parallel_tool_calls="yes"), "parallel_tool_calls"),
    ]
    for kw, param in cases:
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="m", messages=ASK, max_tokens=4, **kw)
        assert e.value.body["param"] == param, (kw, e.value.body)
    # A template that renders no tools: a 400 that says so, not a reply that ignores them.
    plain = Server(pagoda_bin, model, "-c", "2048", "--chat-template", str(TEMPLATES / "gemma3.jinja"))
    try:
        with pytest.raises(openai.BadRequestError) as e:
            client(plain).chat.completions.create(model="m", messages=ASK, tools=TOOLS, max_tokens=4)
        assert e.value.body["param"] == "tools" and "does not render tools" in e.value.body["message"]
    finally:
        assert plain.terminate() == 0


# --- reasoning ---------------------------------------------------------------------------

THINK = r"<think>[a-z]{3,8}</think>\n\n[a-z]{3,8}"


def test_reasoning_is_split_streamed_and_plain(qwen3_template_server):
    c = client(qwen3_template_server)
    kw = dict(model="m", messages=ASK, seed=9, max_tokens=60, extra_body={"guided_regex": THINK})
    r = c.chat.completions.create(**kw)
    m = r.choices[0].message
    raw = c.chat.completions.create(**{**kw, "extra_body": {"guided_regex": THINK, "reasoning_format": "none"}})
    text = raw.choices[0].message.content
    thought, answer = text[len("<think>"):].split("</think>\n\n")
    assert m.reasoning_content == thought and m.content == answer, (m, text)
    content, reasoning, _, _ = streamed(c, **kw)
    assert (reasoning, content) == (thought, answer)


def test_a_prompt_that_opens_the_thought(pagoda_bin, model):
    s = Server(pagoda_bin, model, "-c", "8192", "--chat-template", str(TEMPLATES / "deepseek-r1-distill-qwen.jinja"))
    try:
        c = client(s)
        r = c.chat.completions.create(model="m", messages=ASK, seed=4, max_tokens=60,
                                      extra_body={"guided_regex": r"[a-z]{3,8}</think>[a-z]{3,8}"})
        m = r.choices[0].message
        assert m.reasoning_content and m.content and m.reasoning_content.isalpha() and m.content.isalpha(), m
    finally:
        assert s.terminate() == 0, s.output()


def test_chat_template_kwargs_reach_the_template(pagoda_bin, model, qwen3_template_server):
    source = (TEMPLATES / "qwen3.jinja").read_text()
    def prompt(s, **extra):
        r = s.post("/apply-template", json={"messages": ASK, **extra})
        assert r.status_code == 200, r.text
        return r.json()["prompt"]
    off = prompt(qwen3_template_server, chat_template_kwargs={"enable_thinking": False})
    assert off == render_like_transformers(source, messages=ASK, add_generation_prompt=True, tools=None,
                                           documents=None, bos_token="", eos_token="", enable_thinking=False)
    assert off.endswith("<think>\n\n</think>\n\n") and not prompt(qwen3_template_server).endswith("</think>\n\n")
    # The server-wide default, which a request's own kwargs override.
    s = Server(pagoda_bin, model, "-c", "2048", "--chat-template", str(TEMPLATES / "qwen3.jinja"),
               "--chat-template-kwargs", '{"enable_thinking": false}')
    try:
        assert prompt(s) == off
        assert prompt(s, chat_template_kwargs={"enable_thinking": True}) == prompt(qwen3_template_server)
    finally:
        assert s.terminate() == 0


# --- Qwen2.5-Coder-0.5B-Instruct, whose own template renders tools -----------------------

@pytest.fixture(scope="module")
def qwen(pagoda_bin):
    path = cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "`pagoda pull` (scripts/fetch_test_data)")
    s = Server(pagoda_bin, path, "-c", "4096")
    yield s, path
    assert s.terminate() == 0, s.output()


QUESTION = [{"role": "user", "content": "What's the weather like in Paris, in celsius?"}]


def test_qwen_tool_choice_modes(qwen):
    s, _ = qwen
    c = client(s)
    base = dict(model="m", messages=QUESTION, tools=TOOLS, temperature=0, max_tokens=150)
    required = c.chat.completions.create(tool_choice="required", **base).choices[0]
    assert required.finish_reason == "tool_calls"
    assert ("get_weather", {"city": "Paris", "unit": "celsius"}) in check_calls(required.message)
    single = c.chat.completions.create(tool_choice="required", parallel_tool_calls=False, **base).choices[0]
    assert len(check_calls(single.message)) == 1
    named = c.chat.completions.create(tool_choice={"type": "function", "function": {"name": "get_time"}},
                                      **base).choices[0]
    assert {n for n, _ in check_calls(named.message, {"get_time"})} == {"get_time"}
    none = c.chat.completions.create(tool_choice="none", **base).choices[0]
    assert none.finish_reason == "stop" and not none.message.tool_calls and "<tool_call>" not in none.message.content
    # auto: the model decides; a call it makes parses and validates, and says so.
    auto = c.chat.completions.create(tool_choice="auto", **base).choices[0]
    if auto.message.tool_calls:
        assert auto.finish_reason == "tool_calls"
        check_calls(auto.message)
    else:
        assert auto.finish_reason == "stop" and auto.message.content
    # Streamed replies equal the plain ones, content and calls alike.
    for choice, plain in [("required", required), ("auto", auto), ("none", none)]:
        content, _, calls, finish = streamed(c, tool_choice=choice, **base)
        assert finish == plain.finish_reason
        assert content == (plain.message.content or "")
        assert calls == [(t.function.name, json.loads(t.function.arguments)) for t in plain.message.tool_calls or []]


def test_qwen_agent_loop_renders_as_jinja2(qwen):
    s, path = qwen
    gguf = import_oracle("gguf")
    source = gguf.GGUFReader(str(path)).fields["tokenizer.chat_template"].contents()
    c = client(s)
    first = c.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS, tool_choice="required",
                                      temperature=0, max_tokens=150).choices[0].message
    call = first.tool_calls[0]
    history = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})}]
    got = s.post("/apply-template", json={"messages": history, "tools": TOOLS}).json()["prompt"]
    # What vLLM and transformers users pass the template: arguments as an object, content "".
    oracle_history = json.loads(json.dumps(history))
    oracle_history[1]["content"] = ""
    oracle_history[1]["tool_calls"][0]["function"]["arguments"] = json.loads(call.function.arguments)
    want = render_like_transformers(source, messages=oracle_history, tools=TOOLS, add_generation_prompt=True,
                                    documents=None, bos_token="", eos_token="<|im_end|>")
    assert got == want
    assert "<tool_response>\n{\"temperature\": 21" in got and "<tool_call>\n{\"name\": \"get_weather\"" in got
    # The second turn answers from the tool's result.
    answer = c.chat.completions.create(model="m", messages=history, tools=TOOLS, temperature=0,
                                       max_tokens=60).choices[0]
    assert answer.finish_reason == "stop" and not answer.message.tool_calls
    assert "21" in answer.message.content, answer.message.content
