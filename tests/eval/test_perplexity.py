"""`pagoda perplexity` against llama.cpp's llama-perplexity and a numpy oracle.

Models: small random F32 models from pagoda-gen-model, and the trained stories260K with its
placeholder vocabulary ("[3]", "[4]", ...: every text becomes <unk>, and llama.cpp's
tokenizer throws on it) replaced by a generated model's 512-token vocabulary of byte
tokens and merges, so real text tokenizes in both engines while the trained weights (sharp
attention) are kept. Text: the repository's README (long enough for 4 chunks of 128).

Tolerances (why they are what they are):
- PPL vs llama-perplexity, F32 weights: rel 1e-3. Neither engine rounds activations for
  F32 weights; both keep K/V in FP16. What differs is float summation order, which moves
  each logit by ~1e-6 relative and the mean NLL by ~1e-5 nats (measured 2e-5..8e-5
  relative on these models and on Gemma 3 270M F32), so 1e-3 is 10x margin and still
  catches any convention difference (BOS, scored range, chunking, one token off), which
  moves PPL by percents.
- KL divergence, Q8_0 copy vs its F32 base: both engines round the Q8_0 matmuls' inputs
  to Q8_0, and float-order differences before the rounding flip some roundings, so the
  two engines' Q8_0 logits differ by noise of the size of that rounding (5.7e-3 of the
  activations, ~0.03 on these random models' logits). Each token's NLL moves by about
  that, the mean over 252 tokens by ~2e-3: PPL(Q) rel 1e-2 (measured 2.4e-3; Gemma 3 270M
  Q4_K_M 1.7e-3). The KLD means agreed to 1% (Gemma: 1.3%): rel 10%, median rel 20%. Top-1 agreement: within 2 points
  (5 of 252 tokens; near-ties flip either way). llama.cpp's base PPL in KL mode comes from
  its rounded log-probabilities (a target 16 nats below the top is clipped), so Pagoda's
  base PPL (exact) is compared with llama-perplexity's plain PPL of the base instead.
- numpy oracle (float64 forward, FP16 rounding of q/k/v like both engines): PPL rel 1e-3
  and KLD rel 1e-3 (the packing's grid moves a log-probability by at most 1.3e-4 nats).
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from oracles import cached_model, require_llamacpp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
from reference_forward import ReferenceModel  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
TEXT = REPO / "README.md"
CTX = 128
CHUNKS = 4
CRASH_MARKERS = ("terminate called", "Segmentation fault", "Aborted", "AddressSanitizer", "runtime error:", "what():")


@pytest.fixture(scope="module")
def llamacpp(llamacpp_bin):
    return require_llamacpp(llamacpp_bin, "llama-perplexity", "llama-quantize", purpose="the llama-perplexity oracle")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private KL base cache for each test."""
    c = tmp_path / "cache"
    monkeypatch.setenv("PAGODA_CACHE", str(c))
    return c


@pytest.fixture
def gen_model(write_gen_model, tmp_path):
    def make(name, arch="llama", fmt="F32", seed=3, vocab=512, **extra):
        return write_gen_model(tmp_path / name, arch, fmt, seed=seed, vocab=vocab, sliding_window=32, **extra)
    return make


@pytest.fixture
def pagoda(pagoda_bin):
    def run(*args, timeout=300):
        r = subprocess.run([str(pagoda_bin("pagoda")), "perplexity", *map(str, args)], capture_output=True,
                           timeout=timeout)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    return run


def pagoda_json(pagoda, model, *extra, text=TEXT, ctx=CTX, chunks=CHUNKS):
    rc, out, err = pagoda("-m", model, "-f", text, "-c", ctx, "--chunks", chunks, "-t", 2, "--json", *extra)
    assert rc == 0, err
    return json.loads(out), err


def llama_perplexity(run, bindir, model, *extra, text=TEXT, ctx=CTX, chunks=CHUNKS, expect="Final estimate"):
    """llama-perplexity's log, retried while its last lines are lost (`run` is the
    llamacpp_log fixture)."""
    return run([bindir / "llama-perplexity", "-m", model, "-f", text, "-c", ctx, "--chunks", chunks,
                         "-t", 2, *extra], expect)


def llama_ppl(log):
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", log)
    assert m, log[-3000:]
    return float(m.group(1)), float(m.group(2))


def llama_kld(log):
    def num(label):
        m = re.search(re.escape(label) + r"\s*:\s*([-0-9.]+)", log)
        assert m, f"no '{label}' in llama-perplexity output:\n{log[-3000:]}"
        return float(m.group(1))
    return {"ppl": num("Mean PPL(Q)"), "kld": num("Mean    KLD"), "median": num("Median  KLD"),
            "top1": num("Same top p")}


def transplant_vocab(src, vocab_src, out):
    """A copy of `src` (metadata and tensors) with the tokenizer.* metadata of `vocab_src`."""
    r, v = GGUFReader(str(src)), GGUFReader(str(vocab_src))
    w = GGUFWriter(str(out), r.fields["general.architecture"].contents())

    def copy(f):
        vtype = f.types[0]
        w.add_key_value(f.name, f.contents(), vtype, sub_type=f.types[-1] if vtype == GGUFValueType.ARRAY else None)
    for name, f in r.fields.items():
        if not name.startswith(("GGUF.", "tokenizer.")) and name != "general.architecture":
            copy(f)
    for name, f in v.fields.items():
        if name.startswith("tokenizer."):
            copy(f)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_shape=[int(d) for d in reversed(t.shape)], raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


@pytest.fixture
def stories(shared_model, gen_model, tmp_path):
    src = shared_model("stories260K.gguf")
    n_vocab = len(GGUFReader(str(src)).fields["tokenizer.ggml.tokens"].data)
    vocab = gen_model("vocab.gguf", vocab=n_vocab)
    return transplant_vocab(src, vocab, tmp_path / "stories260K-bytevocab.gguf")


def quantize_q8(bindir, src, out):
    r = subprocess.run([str(bindir / "llama-quantize"), str(src), str(out), "Q8_0", "2"], capture_output=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return out


# ---- against llama-perplexity -----------------------------------------------------------

@pytest.mark.parametrize("which", ["llama", "gemma3", "stories260K"])
def test_ppl_matches_llama_perplexity(pagoda, llamacpp, llamacpp_log, gen_model, request, cache, which):
    model = request.getfixturevalue("stories") if which == "stories260K" else gen_model(f"{which}.gguf", arch=which)
    ours, err = pagoda_json(pagoda, model)
    ppl, ppl_err = llama_ppl(llama_perplexity(llamacpp_log, llamacpp, model))
    assert ours["scored_tokens"] == CHUNKS * (CTX - 1 - CTX // 2)
    assert ours["ppl"] == pytest.approx(ppl, rel=1e-3), (ours["ppl"], ppl)
    assert ours["ppl_error"] == pytest.approx(ppl_err, rel=1e-2)
    assert "PPL" in err and f"[{CHUNKS}/{CHUNKS}]" in err


def test_kld_matches_llama_perplexity(pagoda, llamacpp, llamacpp_log, gen_model, cache, tmp_path):
    base = gen_model("base.gguf")
    q8 = quantize_q8(llamacpp, base, tmp_path / "q8.gguf")
    logits_file = tmp_path / "base.kld"
    base_ppl, _ = llama_ppl(llama_perplexity(llamacpp_log, llamacpp, base, "--kl-divergence-base", logits_file))
    ref = llama_kld(llama_perplexity(llamacpp_log, llamacpp, q8, "--kl-divergence-base", logits_file, "--kl-divergence",
                                     expect=r"Same top p\s*:"))
    ours, _ = pagoda_json(pagoda, q8, "--kl-base", base)
    kl = ours["kl"]
    assert ours["ppl"] == pytest.approx(ref["ppl"], rel=1e-2)
    assert kl["base_ppl"] == pytest.approx(base_ppl, rel=1e-3)
    assert kl["kld_mean"] == pytest.approx(ref["kld"], rel=0.1), (kl["kld_mean"], ref["kld"])
    assert kl["kld_median"] == pytest.approx(ref["median"], rel=0.2)
    assert abs(kl["top1_percent"] - ref["top1"]) <= 2.0, (kl["top1_percent"], ref["top1"])
    assert kl["kld_mean"] > 0


# ---- against the numpy oracle -----------------------------------------------------------

def chunk_rows(tokens, bos, ctx, n_chunks):
    """(chunk tokens with BOS in front, scored positions, their targets), llama.cpp's way."""
    first = ctx // 2
    for i in range(n_chunks):
        chunk = list(tokens[i * ctx:(i + 1) * ctx])
        targets = chunk[first + 1:]
        if bos is not None:
            chunk[0] = bos
        yield chunk, range(first, ctx - 1), targets


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def test_ppl_and_kld_match_numpy(pagoda, pagoda_bin, gen_model, cache):
    """Two unrelated random models (large KLD, many top-1 disagreements): Pagoda's PPL,
    base PPL, mean KLD and top-1 against float64 numpy on the same tokens."""
    model, base = gen_model("m.gguf", seed=3), gen_model("b.gguf", seed=4)
    ctx, n_chunks = 32, 3
    ours, _ = pagoda_json(pagoda, model, "--kl-base", base, ctx=ctx, chunks=n_chunks)
    tok = subprocess.run([str(pagoda_bin("pagoda-tokenize-tool")), str(model), "--no-parse-special"],
                         input=TEXT.read_bytes().removesuffix(b"\n"), capture_output=True, timeout=60)
    assert tok.returncode == 0, tok.stderr.decode()
    tokens = [int(t) for t in tok.stdout.split()]
    fields = GGUFReader(str(model)).fields
    add_bos = "tokenizer.ggml.add_bos_token" in fields and fields["tokenizer.ggml.add_bos_token"].contents()
    bos = int(fields["tokenizer.ggml.bos_token_id"].contents()) if add_bos else None
    ref_m, ref_b = ReferenceModel(model, f16_attention=True), ReferenceModel(base, f16_attention=True)
    nll, nll_b, kld, same = [], [], [], []
    for chunk, rows, targets in chunk_rows(tokens, bos, ctx, n_chunks):
        lq = log_softmax(ref_m.forward(chunk)[list(rows)])
        lp = log_softmax(ref_b.forward(chunk)[list(rows)])
        for r, t in enumerate(targets):
            nll.append(-lq[r, t])
            nll_b.append(-lp[r, t])
            keep = lp[r] > -16
            kld.append(float(np.sum(np.exp(lp[r][keep]) * (lp[r][keep] - lq[r][keep]))))
            same.append(int(np.argmax(lq[r])) == int(np.argmax(lp[r])))
    assert ours["scored_tokens"] == len(nll)
    assert ours["ppl"] == pytest.approx(np.exp(np.mean(nll)), rel=1e-3)
    assert ours["kl"]["base_ppl"] == pytest.approx(np.exp(np.mean(nll_b)), rel=1e-3)
    assert ours["kl"]["kld_mean"] == pytest.approx(np.mean(kld), rel=1e-3)
    assert ours["kl"]["kld_median"] == pytest.approx(np.median(kld), rel=1e-3)
    assert abs(ours["kl"]["top1_percent"] - 100 * np.mean(same)) <= 100 / len(same) + 1e-9
    # se of the mean, llama.cpp's formula
    x = np.array(nll)
    se = np.sqrt((np.mean(x * x) - np.mean(x) ** 2) / (len(x) - 1))
    assert ours["ppl_error"] == pytest.approx(np.exp(np.mean(x)) * se, rel=1e-2)


# ---- the cache and self-comparison ------------------------------------------------------

def test_model_against_itself_and_cache_reuse(pagoda, gen_model, cache):
    model = gen_model("m.gguf")
    first, err1 = pagoda_json(pagoda, model, "--kl-base", model)
    assert first["kl"]["cache"] == "computed" and "KL base: computed" in err1
    assert abs(first["kl"]["kld_mean"]) < 1e-4
    assert first["kl"]["top1_percent"] == 100.0
    assert first["kl"]["base_ppl"] == pytest.approx(first["ppl"], rel=1e-6)
    cache_file = pathlib.Path(first["kl"]["cache_file"])
    assert cache_file.exists() and cache_file.parent == cache / "kl-base"
    again, err2 = pagoda_json(pagoda, model, "--kl-base", model)
    assert again["kl"]["cache"] == "reused" and "KL base: reused" in err2 and "base [" not in err2
    assert again["kl"]["kld_mean"] == first["kl"]["kld_mean"] and again["ppl"] == first["ppl"]
    # Another chunk count, context or text is another cache entry.
    other, _ = pagoda_json(pagoda, model, "--kl-base", model, chunks=CHUNKS - 1)
    assert other["kl"]["cache"] == "computed" and other["kl"]["cache_file"] != str(cache_file)
    # A rewritten base file (new modification time) is not trusted.
    os.utime(model, ns=(1, 1))
    touched, _ = pagoda_json(pagoda, model, "--kl-base", model)
    assert touched["kl"]["cache"] == "computed"
    assert len(list((cache / "kl-base").iterdir())) == 3  # no temporary files left behind


def test_text_output(pagoda, gen_model, cache):
    model = gen_model("m.gguf")
    rc, out, err = pagoda("-m", model, "-f", TEXT, "-c", CTX, "--chunks", 2, "--kl-base", model)
    assert rc == 0, err
    assert re.search(r"^PPL = [0-9.]+ \+/- [0-9.]+$", out, re.M), out
    assert re.search(r"^KLD = ", out, re.M) and re.search(r"^top-1 agreement = 100\.000%", out, re.M), out
    assert "[1/2] PPL" in err and "[2/2] PPL" in err


# ---- errors -----------------------------------------------------------------------------

def expect_error(rc, out, err, *words):
    assert rc != 0, out
    assert err.strip().splitlines()[-1].startswith("error:"), err
    for w in words:
        assert w in err, err
    assert not any(m in err for m in CRASH_MARKERS), err


def test_errors(pagoda, gen_model, tmp_path, cache):
    model = gen_model("m.gguf", ctx=256)
    other_vocab = gen_model("v600.gguf", vocab=600)
    short = tmp_path / "short.txt"
    short.write_text("Just a few words of text.\n")
    expect_error(*pagoda("-m", model, "-f", TEXT, "-c", 512), "larger than the model's context")
    expect_error(*pagoda("-m", model, "-f", short, "-c", 64), "tokens", "at least 128")
    expect_error(*pagoda("-m", model, "-f", tmp_path / "missing.txt"), "cannot read the text file")
    expect_error(*pagoda("-m", model, "-f", tmp_path), "cannot read the text file")
    expect_error(*pagoda("-m", model, "-f", TEXT, "-c", CTX, "--chunks", 1, "--kl-base", other_vocab),
                 "vocabulary mismatch")
    expect_error(*pagoda("-m", model, "-f", TEXT, "-c", CTX, "--kl-base", tmp_path / "nope.gguf"), "nope.gguf")
    expect_error(*pagoda("-m", tmp_path / "nope.gguf", "-f", TEXT))
    # A damaged cache file under the key's name is recomputed, not trusted.
    good, _ = pagoda_json(pagoda, model, "--kl-base", model, chunks=1)
    path = pathlib.Path(good["kl"]["cache_file"])
    path.write_bytes(path.read_bytes()[:100])
    redo, err = pagoda_json(pagoda, model, "--kl-base", model, chunks=1)
    assert redo["kl"]["cache"] == "computed" and "stale or damaged" in err
    assert redo["kl"]["kld_mean"] == good["kl"]["kld_mean"]


# ---- a real model, when present ---------------------------------------------------------

def test_gemma_ppl_matches_llama_perplexity(pagoda, llamacpp, llamacpp_log, cache):
    """Gemma 3 270M F32 (real SentencePiece vocabulary of 262k tokens, BOS, sliding window):
    tokenization of a real text, the BOS convention and the chunked scoring in pieces."""
    model = cached_model("gemma-3-270m-q4_k_m-dequant-f32.gguf", "scripts/fetch_test_data writes it")
    ours, _ = pagoda_json(pagoda, model, chunks=2)
    ppl, _ = llama_ppl(llama_perplexity(llamacpp_log, llamacpp, model, chunks=2))
    assert ours["ppl"] == pytest.approx(ppl, rel=1e-3), (ours["ppl"], ppl)
