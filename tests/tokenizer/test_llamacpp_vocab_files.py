"""llama.cpp's own vocabulary tests (tests/test-tokenizer-0 upstream): each
models/ggml-vocab-NAME.gguf in the llama-cpp-python sdist that has NAME.gguf.inp (texts
separated by a marker line) and NAME.gguf.out (the ids Hugging Face's tokenizer gives,
one line per text). Every text must tokenize to exactly those ids, as test-tokenizer-0
runs it: no BOS/EOS added, special text parsed as text.

The sdist comes from scripts/build_llamacpp (scripts/fetch_test_data under CI); the files
are read from its cache and never copied into the repository.
"""
import pathlib

import pytest

from oracles import CACHE, oracle_missing
from tokenizer_oracle_util import encode_many

SEPARATOR = "\n__ggml_vocab_test__\n"


def vocab_dir() -> pathlib.Path | None:
    found = sorted((CACHE / "sdist").glob("llama_cpp_python-*/vendor/llama.cpp/models"))
    return found[-1] if found else None


def vocab_names() -> list[str]:
    d = vocab_dir()
    if d is None:
        return ["(missing)"]
    return sorted(p.name[len("ggml-vocab-"):-len(".gguf.out")] for p in d.glob("ggml-vocab-*.gguf.out")
                  if p.with_name(p.name[:-len(".out")] + ".inp").exists())


@pytest.fixture
def tool(pagoda_bin):
    return pagoda_bin("pagoda-tokenize-tool")


@pytest.mark.parametrize("name", vocab_names())
def test_vocab_file_tokenizes_as_huggingface(name, tool):
    d = vocab_dir()
    if d is None:
        oracle_missing("the llama-cpp-python sdist is not unpacked (scripts/build_llamacpp)")
    gguf = d / f"ggml-vocab-{name}.gguf"
    texts = (d / f"{gguf.name}.inp").read_text(encoding="utf-8").split(SEPARATOR)
    want_lines = (d / f"{gguf.name}.out").read_text(encoding="utf-8").split("\n")
    # The .inp ends with a separator after its last text; the .out has one line per text.
    if texts and texts[-1] == "":
        texts.pop()
    want = [[int(x) for x in line.split()] for line in want_lines[:len(texts)]]
    assert len(want) == len(texts)
    got = encode_many(tool, gguf, texts, "--no-special")
    bad = [(t, w, g) for t, w, g in zip(texts, want, got) if w != g]
    assert not bad, f"{len(bad)} of {len(texts)} texts differ; first: {bad[0][0]!r}\n want {bad[0][1]}\n got  {bad[0][2]}"
