"""Pagoda's tokenizer against llama.cpp's on the same GGUF vocabularies (llama.cpp is the
reference for how GGUF files tokenize). llama.cpp comes from scripts/build_llamacpp (see
scripts/llamacpp_oracle.py); without a build these tests skip. Vocabularies are loaded
vocab-only, so tokenizer-only GGUF files work.

Two documented differences are left out of the comparison:
  - invalid UTF-8: Pagoda keeps each invalid byte as a byte token (lossless); llama.cpp
    turns it into U+FFFD (byte-level BPE) or swallows the bytes after a bad lead byte
    into byte tokens (SentencePiece, e.g. b"\\xe4\\xb8A" loses its "A").
  - "</s>": llama.cpp forces any token spelled "</s>" to control because the text is on
    its end-of-generation name list; in Gemma it is a user-defined HTML tag and in Qwen a
    normal piece, which is how Pagoda (and Hugging Face) treat it.
"""
import ctypes
import pathlib
import sys

import pytest
import sentencepiece as spm

from oracles import oracle_missing

from tokenizer_oracle_util import (BPE_VOCABS, bpe_vocab_dir, encode_many, gemma_gguf,
                                   hf_bpe_to_gguf, spm_to_gguf)
from tokenizer_texts import TEXTS, random_texts

REPO = pathlib.Path(__file__).resolve().parents[2]

CHAT_TEXTS = [
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<s>Hello</s> <s> x",
]


@pytest.fixture(scope="module")
def llamacpp():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import llamacpp_oracle
        lib = llamacpp_oracle.load_bindings()
    except (ImportError, SystemExit, OSError) as e:
        oracle_missing(f"llama.cpp is not built (scripts/build_llamacpp): {e}")
    # Silence llama.cpp's loader log; the callback must outlive every call.
    quiet = lib.llama_log_callback(lambda level, text, user: None)
    lib.llama_log_set(quiet, ctypes.c_void_p(0))
    lib.llama_backend_init()
    models = []

    def load(path):
        params = lib.llama_model_default_params()
        params.vocab_only = True
        model = lib.llama_model_load_from_file(str(path).encode(), params)
        assert model, f"llama.cpp could not load {path}"
        models.append(model)
        vocab = lib.llama_model_get_vocab(model)

        def tokenize(data: bytes, add_special: bool, parse_special: bool):
            cap = len(data) * 2 + 16
            buf = (lib.llama_token * cap)()
            n = lib.llama_tokenize(vocab, data, len(data), buf, cap, add_special, parse_special)
            assert n >= 0
            return list(buf[:n])
        return tokenize

    yield load
    for m in models:
        lib.llama_model_free(m)
    del quiet


def _vocab_path(name, tmp_path, shared_model):
    if name == "llama2":
        sp = spm.SentencePieceProcessor(model_file=str(shared_model("llama2-tokenizer.model")))
        return spm_to_gguf(sp, tmp_path / "llama2.gguf")
    if name == "gemma3":
        return gemma_gguf()
    return hf_bpe_to_gguf(bpe_vocab_dir(name), name, tmp_path / f"{name}.gguf")


@pytest.mark.parametrize("name", ["llama2", "gemma3", *sorted(BPE_VOCABS)])
@pytest.mark.parametrize("flags", [("--no-special",), ()], ids=["plain", "special"])
def test_ids_match_llamacpp(name, flags, llamacpp, pagoda_bin, tmp_path, shared_model):
    path = _vocab_path(name, tmp_path, shared_model)
    reference = llamacpp(path)
    texts = [t for _, t in TEXTS] + CHAT_TEXTS + random_texts()
    if name in ("gemma3", "qwen2"):
        texts = [t for t in texts if "</s>" not in t]
    special = not flags
    ours = encode_many(pagoda_bin("pagoda-tokenize-tool"), path, texts, *flags)
    bad = [(t, got, want) for t, got in zip(texts, ours)
           if got != (want := reference(t.encode(), special, special))]
    assert not bad, f"{name}: {len(bad)} of {len(texts)} differ, first: {bad[0]!r}"
