"""The chat-template oracle: Python jinja2 set up the way Hugging Face transformers
renders chat templates in apply_chat_template (transformers/utils/chat_template_utils.py,
_compile_jinja_template): ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) with the loopcontrols extension and the {% generation %} tag,
transformers' tojson (json.dumps with ensure_ascii=False), raise_exception and
strftime_now. Shared by tests/chat (the renderer) and tests/server (what the server
renders for a chat request)."""
import json
from datetime import datetime

from oracles import import_oracle

jinja2 = import_oracle("jinja2")
from jinja2 import nodes  # noqa: E402
from jinja2.exceptions import TemplateError  # noqa: E402
from jinja2.ext import Extension, loopcontrols  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

# --- the oracle: transformers' environment ------------------------------------------

class GenerationTag(Extension):
    """transformers' AssistantTracker without the index bookkeeping: renders the body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def environment(trim_blocks=True, lstrip_blocks=True):
    env = ImmutableSandboxedEnvironment(trim_blocks=trim_blocks, lstrip_blocks=lstrip_blocks,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


HF_ENV = environment()


def render_like_transformers(source: str, **context) -> str:
    """What apply_chat_template(..., tokenize=False) renders."""
    return HF_ENV.from_string(source).render(**context)
