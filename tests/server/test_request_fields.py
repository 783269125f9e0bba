"""Issue 18: no request field is silently ignored. Walks the table of fields Pagoda knows
but does not implement in docs/server.md and in src/server/request_fields.cpp (the two
must list the same fields, endpoints and accepted values), and sends each one to the
server: any value but the accepted ones is a 400 whose `param` names the field; the
accepted ones, and the fields OpenAI documents as not affecting the output, are served."""
from __future__ import annotations

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKEN = re.compile(r'R"\((.*?)\)"|"((?:[^"\\]|\\.)*)"|\b(kChat|kCompletions|kNo)\b', re.S)
FLAGS = ("kChat", "kCompletions", "kNo")


def code_fields() -> dict:
    """kFields of request_fields.cpp: name -> (endpoints, accepted values)."""
    src = (ROOT / "src/server/request_fields.cpp").read_text()
    body = src[src.index("kFields[] = {") + len("kFields[] = {"):]
    body = body[:body.index("\n};")] + "\n"
    fields = {}
    for entry in re.findall(r"\{(.*?)\},?\n", body, re.S):
        parts: list = []
        for raw, plain, flag in TOKEN.findall(entry):
            if flag:
                parts.append(flag)
            else:
                text = raw if raw else json.loads('"' + plain + '"')
                if len(parts) >= 3 and parts[-1] not in FLAGS:  # adjacent literals concatenate
                    parts[-1] += text
                else:
                    parts.append(text)
        name, values, _hint, chat, completions = parts
        endpoints = {e for e, on in (("chat", chat == "kChat"), ("completions", completions == "kCompletions")) if on}
        fields[name] = (endpoints, json.loads(values))
    return fields


def doc_fields() -> dict:
    text = (ROOT / "docs/server.md").read_text()
    section = text[text.index("## Fields Pagoda knows but does not implement"):]
    fields = {}
    for name, endpoints, accepted in re.findall(r"^\| `(\w+)` \| ([a-z, ]+) \| (.*) \|$", section, re.M):
        values = [] if accepted == "none" else [json.loads(v) for v in re.findall(r"`([^`]*)`", accepted)]
        fields[name] = ({e.strip() for e in endpoints.split(",")}, values)
    return fields


def test_the_docs_and_the_code_list_the_same_fields():
    code, docs = code_fields(), doc_fields()
    assert len(code) >= 40
    assert code == docs


def body(endpoint: str, field: str, value) -> dict:
    b = {"messages": [{"role": "user", "content": "hi"}]} if endpoint == "chat" else {"prompt": "hi"}
    return {**b, "max_tokens": 1, field: value}


PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def test_each_field_is_refused_unless_it_asks_for_nothing(server):
    for name, (endpoints, accepted) in code_fields().items():
        for endpoint in endpoints:
            r = server.post(PATHS[endpoint], json=body(endpoint, name, {"something": "else"}))
            assert r.status_code == 400, (name, endpoint, r.text)
            err = r.json()["error"]
            assert err["param"] == name and "not supported" in err["message"], err
            for value in accepted:
                r = server.post(PATHS[endpoint], json=body(endpoint, name, value))
                assert r.status_code == 200, (name, value, r.text)


@pytest.mark.parametrize("field,value", [("user", "u-1"), ("metadata", {"k": "v"}), ("store", False),
                                         ("service_tier", "auto"), ("safety_identifier", "s"),
                                         ("prompt_cache_key", "p"), ("an_unknown_field", 1)])
def test_fields_without_effect_are_accepted(server, field, value):
    assert server.post(PATHS["chat"], json=body("chat", field, value)).status_code == 200
