"""Pagoda's chat template renderer (src/chat/chat_template.h) against Python jinja2,
set up the way Hugging Face transformers renders chat templates in apply_chat_template
(transformers/utils/chat_template_utils.py, _compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension and the {% generation %} tag, transformers' tojson (json.dumps with
ensure_ascii=False), raise_exception and strftime_now, and the variables messages, tools,
documents, add_generation_prompt and the special tokens.

Each case renders one template with one context through jinja2 and through
pagoda-chat-template-tool. Both must produce byte-identical text, or both must fail; when
the template itself raised (raise_exception, e.g. Gemma's and Mistral's role-alternation
check), Pagoda's error must carry the template's message.

The templates are real ones (tests/chat/chat_templates/, sources in its README).
A second set of short snippets exercises language features under both transformers'
settings and jinja2's defaults (trim_blocks and lstrip_blocks off).
"""
import json
import pathlib
import subprocess

import pytest

from oracles import import_oracle
from jinja2_oracle import HF_ENV, environment
from jinja2.exceptions import TemplateError  # noqa: E402 (jinja2_oracle checked it is installed)

TEMPLATE_DIR = pathlib.Path(__file__).resolve().parent / "chat_templates"
PLAIN_ENV = environment(trim_blocks=False, lstrip_blocks=False)


@pytest.fixture(scope="module")
def tool(pagoda_bin):
    return pagoda_bin("pagoda-chat-template-tool")


def check_same(tool, tmp_path, source, context, env=HF_ENV, flags=()):
    """Renders with jinja2 and with Pagoda; asserts identical text or a failure in both."""
    try:
        want, want_error = env.from_string(source).render(**context), None
    except Exception as e:  # any jinja2 failure must be a failure in Pagoda too
        want, want_error = None, e
    template_file = tmp_path / "template.jinja"
    template_file.write_text(source, encoding="utf-8")
    context_file = tmp_path / "context.json"
    context_file.write_text(json.dumps(context, ensure_ascii=False), encoding="utf-8")
    proc = subprocess.run([str(tool), str(template_file), str(context_file), *flags],
                          capture_output=True, timeout=60)
    stderr = proc.stderr.decode("utf-8", "replace")
    if want_error is None:
        assert proc.returncode == 0, f"jinja2 rendered {want!r}, Pagoda failed: {stderr}"
        got = proc.stdout.decode("utf-8", "surrogateescape")
        assert got == want, f"\n  jinja2: {want!r}\n  pagoda: {got!r}"
    else:
        assert proc.returncode == 1, (
            f"jinja2 failed ({type(want_error).__name__}: {want_error}), Pagoda rendered "
            f"{proc.stdout!r} (exit {proc.returncode}, stderr {stderr!r})")
        if type(want_error) is TemplateError:  # the template's own raise_exception()
            assert str(want_error) in stderr, f"jinja2: {want_error}; Pagoda: {stderr}"


# --- real chat templates --------------------------------------------------------------

# (bos_token, eos_token) as each model's tokenizer_config.json has them; None = unset
# (transformers then does not pass the variable at all).
TOKENS = {
    "chatml": ("<s>", "</s>"),
    "deepseek-r1-distill-qwen": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "functionary-v3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "gemma2": ("<bos>", "<eos>"),
    "gemma3": ("<bos>", "<eos>"),
    "hermes3-tool-use": ("<|begin_of_text|>", "<|im_end|>"),
    "llama2": ("<s>", "</s>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral-nemo": ("<s>", "</s>"),
    "mistral-v0.1": ("<s>", "</s>"),
    "mistral-v0.2": ("<s>", "</s>"),
    "mistral-v1-system": ("<s>", "</s>"),
    "mistral-v3": ("<s>", "</s>"),
    "phi3-mini": ("<s>", "<|endoftext|>"),
    "phi3.5-mini": ("<s>", "<|endoftext|>"),
    "qwen2.5": (None, "<|im_end|>"),
    "qwen3": (None, "<|im_end|>"),
    "smollm2": ("<|im_start|>", "<|im_end|>"),
}
TOOL_TEMPLATES = {"functionary-v3.2", "hermes3-tool-use", "llama3.1", "llama3.2", "mistral-nemo",
                  "mistral-v3", "qwen2.5", "qwen3"}


def test_every_fixture_has_tokens():
    assert sorted(p.stem for p in TEMPLATE_DIR.glob("*.jinja")) == sorted(TOKENS)


def U(text):
    return {"role": "user", "content": text}


def A(text):
    return {"role": "assistant", "content": text}


SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
SPECIAL = ("Quotes ' \" and backslashes \\ \\n, template syntax {{ x }} {% if %} {# c #}, "
           "JSON {\"a\": [1, 2]}, tags <|im_end|> </s> [INST], unicode: é ß Ω 中文 العربية 🎉 "
           "𝔘, tab\there,\nnew lines\r\nand CR\r, control \x01 \x7f.")

CONVERSATIONS = {
    "single_user": [U("Hello")],
    "system_user": [SYSTEM, U("Hello")],
    "multi_turn": [U("Hello"), A("Hi there"), U("Who are you")],
    "system_multi_turn": [SYSTEM, U("Hello"), A("Hi there"), U("Who are you"),
                          A("   I am an assistant   "), U("Another question")],
    "ends_with_assistant": [SYSTEM, U("Hello"), A("Hi there")],
    "special_characters": [{"role": "system", "content": "Système: réponds en français. " + SPECIAL},
                           U(SPECIAL), A("Ответ: " + SPECIAL), U("  " + SPECIAL + "  ")],
    "whitespace_edges": [U("\n\n  padded  \n"), A("\t tab \t"), U(" ")],
    "unicode_whitespace": [U("\u00a0nbsp, ideographic\u3000space\u2028 "), A("\u3000x\u00a0")],
    "empty_content": [U("")],
    "thinking": [U("What is 2+2?"), A("<think>\nadd them\n</think>\n\n4"), U("And 3+3?")],
    "two_users_in_a_row": [U("one"), U("two")],
    "assistant_first": [A("I speak first"), U("ok")],
    "system_only": [SYSTEM],
    "no_messages": [],
    "unknown_role": [U("hi"), {"role": "narrator", "content": "meanwhile"}],
}

WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "days": {"type": "integer", "description": "Forecast days", "minimum": 1, "maximum": 14},
    }, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search",
    "description": "Search the web",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "What to look for"},
        "filters": {"type": "array", "description": "Weighted filters",
                    "items": {"type": "object", "properties": {
                        "key": {"type": "string"}, "weight": {"type": "number"}}}},
        "safe": {"type": "boolean", "nullable": True, "description": "Safe search"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["news", "blogs"]}},
        "threshold": {"type": ["number", "null"], "description": "Minimum score"},
    }, "required": ["query"]}}}
ARGS = {"city": "Paris", "days": 3, "ratio": 0.5, "tiny": 1e-05, "big": 1e16, "ok": True,
        "none": None, "list": [1, "two", 3.25], "nested": {"é": "ü"}}


def tool_conversation(arguments):
    return [
        SYSTEM,
        U("What's the weather in Paris?"),
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call12345", "type": "function",
             "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
         "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
        A("It is 21.5 °C and clear in Paris."),
        U("Thanks!"),
    ]


TOOL_CASES = {
    "tools_listed": ([SYSTEM, U("Find news about Jinja")], [WEATHER, SEARCH]),
    "tools_without_system": ([U("Weather in Paris?")], [WEATHER]),
    "tool_call_dict_arguments": (tool_conversation(ARGS), [WEATHER, SEARCH]),
    "tool_call_string_arguments": (tool_conversation(json.dumps(ARGS)), [WEATHER]),
}


def context_for(name, messages, add_generation_prompt, tools=None, **extra):
    bos, eos = TOKENS[name]
    context = {"messages": messages, "tools": tools, "documents": None,
               "add_generation_prompt": add_generation_prompt}
    if bos is not None:
        context["bos_token"] = bos
    if eos is not None:
        context["eos_token"] = eos
    context.update(extra)
    return context


@pytest.mark.parametrize("add_generation_prompt", [True, False], ids=["gen", "nogen"])
@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
@pytest.mark.parametrize("name", sorted(TOKENS))
def test_template_matches_jinja2(tool, tmp_path, name, conversation, add_generation_prompt):
    source = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")
    context = context_for(name, CONVERSATIONS[conversation], add_generation_prompt)
    check_same(tool, tmp_path, source, context)


@pytest.mark.parametrize("add_generation_prompt", [True, False], ids=["gen", "nogen"])
@pytest.mark.parametrize("case", sorted(TOOL_CASES))
@pytest.mark.parametrize("name", sorted(TOOL_TEMPLATES))
def test_tool_template_matches_jinja2(tool, tmp_path, name, case, add_generation_prompt):
    source = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")
    messages, tools = TOOL_CASES[case]
    context = context_for(name, messages, add_generation_prompt, tools=tools)
    check_same(tool, tmp_path, source, context)


@pytest.mark.parametrize("name", ["llama3.1", "llama3.2"])
def test_llama3_date_string_and_tools_in_system(tool, tmp_path, name):
    source = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")
    context = context_for(name, [SYSTEM, U("hi")], True, tools=[WEATHER],
                          date_string="01 Jan 2025", tools_in_user_message=False)
    check_same(tool, tmp_path, source, context)


def test_llama3_1_builtin_tools(tool, tmp_path):
    source = (TEMPLATE_DIR / "llama3.1.jinja").read_text(encoding="utf-8")
    messages = [SYSTEM, U("Search for jinja"),
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "brave_search",
                                                      "arguments": {"query": "jinja", "n": 3}}}]},
                {"role": "ipython", "content": {"results": ["a", "b"]}}]
    context = context_for("llama3.1", messages, True,
                          builtin_tools=["brave_search", "code_interpreter", "wolfram_alpha"])
    check_same(tool, tmp_path, source, context)


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_long_conversation_matches_jinja2(tool, tmp_path, name):
    source = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")
    messages = [SYSTEM]
    for i in range(200):
        messages.append(U(f"Question {i}: {SPECIAL}"))
        messages.append(A(f"<think>\nstep {i}\n</think>\n\nAnswer {i} é"))
    messages.append(U("Last one"))
    check_same(tool, tmp_path, source, context_for(name, messages, True))


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_structured_content_matches_jinja2(tool, tmp_path, name):
    """Multimodal-style content (a list of parts) where templates expect a string or a list."""
    source = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")
    messages = [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe it "}]}]
    check_same(tool, tmp_path, source, context_for(name, messages, True))


# --- templates inside the real models' GGUF files -------------------------------------

REAL_MODELS = {  # cached file -> (bos_token, eos_token) as the model's tokenizer_config.json has them
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": (None, "<|im_end|>"),
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf": (None, "<|im_end|>"),
}


_REAL_TEMPLATES: dict = {}


def real_template(file):
    """The file's tokenizer.chat_template, read once (GGUFReader parses the whole vocabulary)."""
    from oracles import CACHE, oracle_missing
    path = CACHE / "models" / file
    if not path.exists():
        oracle_missing(f"{path} is missing; `pagoda pull` (scripts/fetch_test_data) fetches it")
    if file not in _REAL_TEMPLATES:
        gguf = import_oracle("gguf")
        _REAL_TEMPLATES[file] = gguf.GGUFReader(str(path)).fields["tokenizer.chat_template"].contents()
    return _REAL_TEMPLATES[file]


@pytest.mark.parametrize("add_generation_prompt", [True, False], ids=["gen", "nogen"])
@pytest.mark.parametrize("case", sorted(CONVERSATIONS) + [f"tools-{c}" for c in sorted(TOOL_CASES)])
@pytest.mark.parametrize("file", sorted(REAL_MODELS))
def test_real_model_template_matches_jinja2(tool, tmp_path, file, case, add_generation_prompt):
    source = real_template(file)
    bos, eos = REAL_MODELS[file]
    if case.startswith("tools-"):
        messages, tools = TOOL_CASES[case[len("tools-"):]]
    else:
        messages, tools = CONVERSATIONS[case], None
    context = {"messages": messages, "add_generation_prompt": add_generation_prompt}
    if tools is not None:
        context["tools"] = tools
    if bos is not None:
        context["bos_token"] = bos
    context["eos_token"] = eos
    check_same(tool, tmp_path, source, context)


# --- language features -----------------------------------------------------------------

SNIPPET_CONTEXT = {
    "name": "Wörld", "n": 7, "f": 2.5, "neg": -3, "big": 9007199254740993, "t": True, "nothing": None,
    "items": [3, 1, 2], "words": ["b", "A", "c", "a"], "empty": [], "text": "  Hello, World!  \n",
    "d": {"b": 1, "a": [1, {"x": "y"}], "z": None, "items": "shadowed"},
    "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
             {"role": "user", "content": "bye", "extra": 1}],
    "unicode": "héllo wörld ß Ωμέγα Привет",
    "wide": {f"k{i}": i for i in range(25)},
}

SNIPPETS = [
    # output, whitespace control, comments, raw
    "a {{ name }} b\n  {% if t %}\n    yes\n  {% endif %}\n  c {# comment #}\n  {#- trimmed -#}  d\n",
    "{% for x in items -%}\n  [{{ x }}]\n{%- endfor %}\n{{- 'end' -}}\n\n",
    "  {%+ if t %}keep{% endif +%}\n  x\n",
    "{% raw %}{{ not rendered }}{% endraw %}\n  {%- raw -%}  a  {%- endraw %}\n",
    "line1\r\nline2\rline3\n\n",
    "  {# c #}\n  x\n  {%- if t %}\n\ty\n\t{% endif -%}\n  z\n",
    "{% for m in msgs %}\n  {{ m.role }}:\n    {% if m.extra %}\n      extra\n    {% endif %}\n{% endfor %}\n",
    "a\n  {% raw %}\n  r\n  {% endraw %}\nb\n  {%- raw %} s {% endraw -%}  \nc",
    "\t{% if t %}tab{% endif %}\n \u3000{% if t %}ideographic{% endif %}\n\u00a0{% if t %}nbsp{% endif %}\n",
    "{{- ' x ' -}}\n\n{%- set a = 1 -%}\n\n{{ a }}{#- c -#}  \n  {{ a }}",
    "{%- if t -%}  {{- 'a' -}}  {%- endif -%}|{% if t %}{% endif %}\n\n{% if t %}{% endif %}\n",
    "{% if t %}\r\nx\r\n{% endif %}\r\ny {#\r\n#}\r\nz",
    "{{ 'a' }}\n{{ 'b' }}\n  {{ 'c' }}  \n{% set x = 1 %}  \n  {{ x }}",
    "{% macro m() %}\n  in macro\n{% endmacro %}\n[{{ m() }}]\n{% call m() %}\n{% endcall %}",
    "{{ '{{' }} {{ \"}}\" }} {{ '{%' ~ '%}' }}",
    # literals and operators
    "{{ 1 + 2 * 3 - 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
    "{{ 1.5e3 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.5e-05 }} {{ 100.0 }} {{ -0.0 }} {{ 1 / 3 }} {{ 3.0 * 2 }}",
    "{{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ true + 1 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 3 * 'x' }}",
    "{{ 'a' ~ 1 ~ none ~ 1.5 ~ true ~ nothing ~ undefined_name }}|{{ 'x' 'y' }}",
    "{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 'b' > 'a' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 1 == true }} {{ none == none }}",
    "{{ 1 and 2 }} {{ 0 or 'x' }} {{ none or [] }}|{{ '' and 1 }}|{{ not 1 }} {{ not not 'a' }}",
    "{{ 'a' in 'abc' }} {{ 1 in items }} {{ 'a' in d }} {{ 'q' not in d }} {{ 'x' in missing }}",
    "{{ 'yes' if t else 'no' }} {{ 'a' if false else 'b' if t else 'c' }}|{{ 'x' if false }}|",
    "{{ -n }} {{ +f }} {{ -(1) }} {{ neg|abs }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ [1, 'a', none, true, 2.0] }}",
    "{{ {'k': 'v', 'n': [1, {'a': none}]} }} {{ d }} {{ msgs[0] }}",
    "{{ \"it's\" }} {{ ['it\\'s', \"q\\\"\", 'a\\nb', 'é\\t', '\\x01\\u00e9\\U0001F600'] }}",
    # subscripts, slices, attributes
    "{{ items[0] }} {{ items[-1] }} {{ items[1:] }} {{ items[::-1] }} {{ items[5:] }} {{ 'hello'[1:-1] }} {{ 'hello'[::2] }}",
    "{{ items[9] }}|{{ d.missing }}|{{ d['missing'] }}|{{ d.a[1].x }} {{ d['a'][1]['x'] }} {{ msgs[2].extra }}",
    "{{ d['items'] }}|{{ unicode[1] }} {{ unicode[-3:] }} {{ unicode|length }}",
    "{{ nothing.x }}|{{ items.x }}|{{ 'abc'.x }}|",
    "{{ missing.x }}",
    "{{ d.missing.x }}",
    "{{ missing['x'] }}",
    "{{ missing + 1 }}",
    "{{ missing() }}",
    "{{ nothing() }}",
    "{{ 1 + 'a' }}",
    "{{ 'a' + 1 }}",
    "{{ [1] + 'a' }}",
    "{{ 1 / 0 }}",
    "{{ 1 < 'a' }}",
    "{{ 'a' < missing }}",
    "{{ 1 in 'abc' }}",
    "{{ 'a' in 5 }}",
    # statements
    "{% set x = 1 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }};{% endfor %}{{ x }}",
    "{% for i in range(3) %}{% if i == 0 %}{% set y = 5 %}{% endif %}{{ y }};{% endfor %}{% if t %}{% set w = 3 %}{% endif %}{{ w }}",
    "{% set ns = namespace(a=1, b='x') %}{% for i in range(4) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}{{ ns.c }}|",
    "{% set d2 = {} %}{% set d2.a = 1 %}",
    "{% set a, b = 1, 2 %}{% set (c, e) = ['x', 'y'] %}{{ a }}{{ b }}{{ c }}{{ e }}",
    "{% set a, b = [1] %}",
    "{% set block %}inner {{ n }}{% endset %}[{{ block }}]{% set up | upper | trim %}  shout {% endset %}[{{ up }}]",
    "{% filter upper %}abc {{ name }}{% endfilter %}",
    "{% with a = 1, b = n %}{{ a + b }}{% endwith %}{{ a }}|",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {% for k in d %}{{ k }}{% endfor %} {% for c in 'héllo' %}{{ c }}.{% endfor %}",
    "{% for x in empty %}{{ x }}{% else %}none{% endfor %} {% for x in missing %}{{ x }}{% else %}undef{% endfor %}",
    "{% for x in items if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }}{{ ',' if not loop.last }}{% endfor %}",
    "{% for x in items %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.cycle('a', 'b') }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.depth }} {% endfor %}",
    "{% for row in [[1, 2], [3]] %}{% for c in row %}{{ loop.index }}{{ loop.length }}{% endfor %}{{ loop.index }};{% endfor %}",
    "{% for i in range(10) %}{% if i == 5 %}{% break %}{% endif %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %}",
    "{% for a, b in [[1, 2], [3]] %}{{ a }}{% endfor %}",
    "{% for x in 3 %}{% endfor %}",
    "{% for x in nothing %}{% endfor %}",
    "{% for m in msgs %}{% set m = m.content %}{{ m }}{% endfor %}",
    "{{ loop }}|",
    "{% macro greet(who, punct='!') %}Hello {{ who }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', who='c') }} {{ greet() }}",
    "{% macro m(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }}",
    "{% macro rec(n) %}{{ n }}{% if n > 0 %}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
    "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ name }}{% endcall %}{% call(x) wrap('i') %}{% endcall %}",
    "{% macro list(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(x) list(items) %}<{{ x }}>{% endcall %}",
    "{% set outer = 'o' %}{% macro m() %}{{ outer }}{% endmacro %}{% set outer = 'p' %}{{ m() }}",
    "{% generation %}gen {{ name }}{% endgeneration %}",
    # filters
    "{{ text|trim }}|{{ text|trim('\\n !') }}|{{ '\u00a0x\u3000'|trim }}|{{ name|upper }}{{ name|lower }}|{{ 'hELLO wORLD'|capitalize }}|{{ \"they're o'neil-x (a)[b]{c}<d>\"|title }}",
    "{{ items|length }} {{ d|count }} {{ unicode|length }} {{ missing|length }} {{ items|first }} {{ items|last }} {{ empty|first }}|{{ 'abc'|last }}",
    "{{ items|join(', ') }} {{ msgs|map(attribute='role')|join('/') }} {{ msgs|join(',', attribute='content') }} {{ items|map('string')|join }}",
    "{{ items|sort }} {{ items|sort(reverse=true) }} {{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ msgs|sort(attribute='content')|map(attribute='content')|list }}",
    "{{ items|reverse|list }} {{ 'abc'|reverse }} {{ [1, 2, 2, 1, 'a', 'A']|unique|list }} {{ items|max }} {{ items|min }} {{ words|max }} {{ items|sum }} {{ [1.5, 2]|sum(start=10) }}",
    "{{ msgs|sum(attribute='extra') }}",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('extra')|map(attribute='content')|list }} {{ msgs|selectattr('extra', 'defined')|list }}",
    "{{ items|select('odd')|list }} {{ items|reject('odd')|list }} {{ [0, 1, '', 'x', none]|select|list }} {{ items|select('gt', 1)|list }} {{ words|select('in', ['a', 'b'])|list }}",
    "{{ missing|default('dflt') }} {{ ''|default('dflt') }} {{ ''|default('dflt', true) }} {{ nothing|default('x') }} {{ missing|d('y') }}",
    "{{ 'x'|int }} {{ '42'|int }} {{ ' 7 '|int }} {{ '3.9'|int }} {{ 3.9|int }} {{ '1_000'|int }} {{ 'x'|int(-1) }} {{ '0x1f'|int(0, 16) }} {{ true|int }} {{ nothing|int }}",
    "{{ '1.5'|float }} {{ 'x'|float }} {{ 3|float }} {{ ' 2e3 '|float }} {{ 'inf'|float }} {{ 'x'|float(9.5) }}",
    "{{ 'a,b'|replace(',', ';') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'x'|string }} {{ items|string }} {{ nothing|string }} {{ n|string|length }}",
    "{{ d|tojson }} {{ d|tojson(indent=2) }} {{ msgs|tojson(sort_keys=true) }} {{ items|tojson(separators=(',', ':')) }} {{ unicode|tojson }} {{ unicode|tojson(ensure_ascii=true) }}",
    "{{ [1.0, 0.5, 1e-7, 1e22, -0.0, big, 'a\"b\\\\c\\n\\u0001', nothing, t]|tojson }} {{ {'k': {}}|tojson(indent='\\t') }} {{ {1: 'a', none: 'b'}|tojson }}",
    "{{ missing|tojson }}",
    "{{ d|items|list }} {{ missing|items|list }} {{ d|dictsort }} {{ {'b': 2, 'A': 1}|dictsort(by='value', reverse=true) }} {{ d|list }} {{ 'ab'|list }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}",
    "{{ 'hello'|center(11) }}|{{ 'one two three four'|wordcount }}|{{ 'foo bar baz qux'|truncate(9) }}|{{ 'foo bar baz qux'|truncate(9, true) }}|{{ 'foo bar baz qux'|truncate(11) }}",
    "{{ '<a href=\"x\">&</a>'|e }} {{ '<b>x</b>'|safe }} {{ '<p>a  <b>b</b></p>&amp;'|striptags }} {{ 2.567|round(2) }} {{ 2.5|round }} {{ 3.5|round }} {{ 3|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }}",
    "{{ items|batch(2)|list }} {{ items|batch(2, 0)|list }} {{ '%s is %d years' % ('Al', 30) }} {{ '%5.1f|%-4d|%x' % (3.14159, 7, 255) }} {{ '%s'|format(name) }} {{ '%(a)s'|format(a=1) }}",
    "{{ items|nofilter }}",
    "{% if false %}{{ items|nofilter }}{% endif %}ok",
    "{{ items is nosuchtest }}",
    # tests
    "{{ missing is defined }} {{ missing is undefined }} {{ nothing is none }} {{ t is boolean }} {{ n is integer }} {{ f is float }} {{ t is number }} {{ name is string }}",
    "{{ d is mapping }} {{ items is mapping }} {{ items is iterable }} {{ missing is iterable }} {{ n is iterable }} {{ name is sequence }} {{ missing is sequence }} {{ greet is callable }}",
    "{{ 4 is divisibleby 2 }} {{ 3 is odd }} {{ 3 is even }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 2 is gt 1 }} {{ 'a' is in 'abc' }} {{ nothing is sameas none }}",
    "{{ n is not defined }} {{ not missing is defined }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ true is true }} {{ 1 is true }} {{ false is false }}",
    # globals and methods
    "{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(-2)|list }} {{ dict(a=1, b=[2]) }} {{ namespace(x=1).x }}",
    "{{ range(1000000)|length }}",
    "{% set j = joiner(' | ') %}{% for i in items %}{{ j() }}{{ i }}{% endfor %}",
    "{{ raise_exception('custom failure: ' ~ name) }}",
    "{{ text.strip() }}|{{ text.lstrip() }}|{{ text.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a b  c '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }} {{ 'a-b-c'.rsplit('-', 1) }} {{ ' a b '.rsplit(None, 1) }}",
    "{{ 'ab'.startswith('a') }} {{ 'ab'.endswith(('x', 'b')) }} {{ 'hello world'.title() }} {{ \"they're bill's\".title() }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ unicode.upper() }} {{ unicode.lower() }} {{ 'a\\nb\\r\\nc'.splitlines() }}",
    "{{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'héllo'.find('l') }} {{ 'abcabc'.count('bc') }} {{ 'a-b'.replace('-', '+') }} {{ ', '.join(words) }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }}",
    "{{ '{} and {}'.format(1, 'b') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name=name) }} {{ '{:>5}|{:<5}|{:^5}'.format('a', 'b', 'c') }} {{ '{:05d} {:.2f} {!r}'.format(42, 1.5, 'q') }}",
    "{{ 'x'.zfill(3) }} {{ 'x'.center(5, '*') }} {{ 'x'.ljust(3) }}|{{ 'pre_x'.removeprefix('pre_') }} {{ 'a=b=c'.partition('=') }}",
    "{{ wide.k20 }} {{ wide['k3'] }} {{ wide.k99 }}|{{ wide|length }} {{ wide|tojson }} {% set w = dict(wide, k5='x', new=1) %}{{ w.k5 }} {{ w|list|last }} {{ w|length }} {{ 'k7' in wide }}",
    "{{ d.get('b') }} {{ d.get('nope') }} {{ d.get('nope', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list|length }} {{ items.index(2) }} {{ items.count(3) }}",
    "{{ items.append(4) }}",
    "{{ d.update({}) }}",
    "{{ ''.join([1, 2]) }}",
    # syntax errors
    "{% if t %}unclosed",
    "{% endif %}",
    "{% for %}{% endfor %}",
    "{{ }}",
    "{{ 1 + }}",
    "{% set 1 = 2 %}",
    "{% unknowntag %}",
    "{% break %}",
    "{{ 'unterminated }}",
    "{{ (1 }}",
    "{# unterminated comment",
    "{% raw %}never closed",
    "{{ a.b.c = 1 }}",
]


@pytest.mark.parametrize("env_name", ["hf", "plain"])
@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_snippet_matches_jinja2(tool, tmp_path, index, env_name):
    env, flags = (HF_ENV, ()) if env_name == "hf" else (
        PLAIN_ENV, ("--no-trim-blocks", "--no-lstrip-blocks"))
    check_same(tool, tmp_path, SNIPPETS[index], SNIPPET_CONTEXT, env=env, flags=flags)
