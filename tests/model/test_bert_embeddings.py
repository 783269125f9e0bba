"""BERT embeddings (all-MiniLM-L6-v2) against two independent oracles: a float64 numpy
forward of Hugging Face's BertModel from the safetensors (tests/minilm_reference.py, with
sentence-transformers' pooling and normalization), and llama.cpp's llama-embedding on the
same GGUF. Two GGUFs of each type: one written by gguf-py under llama.cpp's tensor names
(neither Pagoda's converter nor its writer involved), one by `pagoda convert` from the
Hugging Face folder.

Bars: cosine >= 0.99999 against numpy (what separates them is Pagoda's FP16 KV cache and
ggml's tanh-form GELU table against the erf GELU), and >= 0.99999 against llama.cpp too
(the issue asks 0.9999; measured 1 - cosine <= 2.5e-7, the same GELU and FP16 KV); the
pooling modes are each the numpy forward's first, last and mean rows."""
import json
import subprocess

import numpy as np
import pytest

import minilm_reference as mr
from oracles import import_oracle, require_llamacpp

TEXTS = [
    "Hello world, this is a test of sentence embeddings.",
    "The quick brown fox jumps over the lazy dog.",
    "Paged attention stores keys and values in fixed-size blocks.",
    "Café naïve façade: accents are stripped by the uncased tokenizer.",
    "Numbers like 3.14159 and 2,718 and dates like 2026-12-06 split oddly.",
    "東京は日本の首都です。",
    "a",
    " ".join(["Continuous batching admits new requests between decoding steps."] * 30),  # ~300 tokens
]


def llama_embedding(cmd: list[str]) -> np.ndarray:
    """llama-embedding's vectors. Its stdout once came back as malformed JSON in a loaded
    full-suite run (a missing comma 32 KB in; the same test passed when run again): a run
    whose output does not parse is run once more, and a second failure shows the text
    around the error."""
    for attempt in (1, 2):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        try:
            return np.array(json.loads(r.stdout))
        except json.JSONDecodeError as e:
            if attempt == 2:
                raise AssertionError(f"llama-embedding printed malformed JSON twice: {e}; around it: "
                                     f"{r.stdout[max(0, e.pos - 200):e.pos + 200]!r}") from e
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def minilm(tmp_path_factory, pagoda_bin):
    import_oracle("tokenizers")
    d = tmp_path_factory.mktemp("minilm")
    m = mr.MiniLM(mr.extract(d))
    m.f32 = m.write_gguf(d / "minilm-f32.gguf", "F32")
    m.f16 = m.write_gguf(d / "minilm-f16.gguf", "F16")
    m.files = {"gguf-py-f32": m.f32, "gguf-py-f16": m.f16}
    for kind in ("F32", "F16"):
        out = d / f"minilm-convert-{kind.lower()}.gguf"
        r = subprocess.run([str(pagoda_bin("pagoda")), "convert", str(m.folder), str(out), "--type", kind],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        m.files[f"convert-{kind.lower()}"] = out
    m.texts = d / "texts.txt"
    m.texts.write_text("\n".join(TEXTS) + "\n")
    return m


def pagoda_embed(pagoda_bin, model, texts_file, *extra):
    r = subprocess.run([str(pagoda_bin("pagoda")), "embed", "-m", str(model), "-f", str(texts_file), "-t", "2",
                        "--embd-output-format", "array", *extra], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return np.array(json.loads(r.stdout))


@pytest.mark.parametrize("kind", ["gguf-py-f32", "gguf-py-f16", "convert-f32", "convert-f16"])
def test_mean_pooled_embeddings_equal_the_numpy_bert_forward(pagoda_bin, minilm, kind):
    got = pagoda_embed(pagoda_bin, minilm.files[kind], minilm.texts)
    tok = minilm.tokenizer()
    assert got.shape == (len(TEXTS), 384)
    for text, v in zip(TEXTS, got):
        ref = minilm.embed(tok.encode(text).ids)
        assert mr.cosine(ref, v) >= 0.99999, (text[:40], mr.cosine(ref, v))
        assert abs(np.linalg.norm(v) - 1.0) < 1e-5


@pytest.mark.parametrize("pooling,pick", [("cls", lambda h: h[0]), ("last", lambda h: h[-1]),
                                          ("mean", lambda h: h.mean(0))])
def test_each_pooling_is_the_forward_rows_it_names(pagoda_bin, minilm, pooling, pick):
    got = pagoda_embed(pagoda_bin, minilm.f32, minilm.texts, "--pooling", pooling, "--embd-normalize", "-1")
    tok = minilm.tokenizer()
    for text, v in list(zip(TEXTS, got))[:4]:
        ref = pick(minilm.forward(tok.encode(text).ids))
        assert mr.cosine(ref, v) >= 0.99999, (pooling, text[:40])
        assert abs(np.linalg.norm(v) / np.linalg.norm(ref) - 1.0) < 1e-3  # not normalized: the raw scale


@pytest.mark.parametrize("kind", ["gguf-py-f16", "convert-f16"])
def test_embeddings_agree_with_llama_embedding_on_the_same_file(pagoda_bin, llamacpp_bin, minilm, kind):
    bin_dir = require_llamacpp(llamacpp_bin, "llama-embedding", purpose="BERT embeddings")
    path = minilm.files[kind]
    got = pagoda_embed(pagoda_bin, path, minilm.texts)
    ref = llama_embedding([str(bin_dir / "llama-embedding"), "-m", str(path), "-f", str(minilm.texts), "-t", "2",
                           "--embd-output-format", "array", "-c", "512", "-b", "512", "-ub", "512"])
    assert ref.shape == got.shape
    for text, a, b in zip(TEXTS, got, ref):
        assert mr.cosine(a, b) >= 0.99999, (text[:40], mr.cosine(a, b))


@pytest.mark.parametrize("pooling", ["last", "mean"])
@pytest.mark.parametrize("model,bar", [("gemma-3-270m-q4_k_m-dequant-f32.gguf", 0.99999),
                                       ("gemma-3-270m-q4_k_m.gguf", 0.995)])
def test_decoder_embeddings_agree_with_llama_embedding(pagoda_bin, llamacpp_bin, tmp_path, pooling, model, bar):
    """A decoder embeds too: Gemma 3 270M's final normed hidden states pooled, against
    llama.cpp on the same file. The dequantized F32 file agrees to 1e-7 (measured 1 -
    cosine = 1.6e-7); on Q4_K_M the two engines quantize activations differently (llama.cpp
    to Q8_K, Pagoda to its own Q8 rows), which moves the last token's state by about 2e-3."""
    from oracles import cached_model
    path = cached_model(model, "scripts/fetch_test_data")
    bin_dir = require_llamacpp(llamacpp_bin, "llama-embedding", purpose="decoder embeddings")
    texts = tmp_path / "texts.txt"
    texts.write_text("The capital of France is Paris.\nPaged attention splits the KV cache into blocks.\n"
                     "def add(a, b):    return a + b\n")
    got = pagoda_embed(pagoda_bin, path, texts, "--pooling", pooling)
    ref = llama_embedding([str(bin_dir / "llama-embedding"), "-m", str(path), "-f", str(texts), "-t", "2", "--pooling",
                           pooling, "--embd-output-format", "array", "-c", "512", "-b", "512", "-ub", "512"])
    assert ref.shape == got.shape == (3, 640)
    for a, b in zip(got, ref):
        assert mr.cosine(a, b) >= bar, mr.cosine(a, b)
