"""`pagoda quantize` against llama.cpp's own `llama-quantize --pure` on the same F32 source.

For every target type: the two files must hold the same tensors with the same types (the
type policy and its fallbacks for rows that do not split into the format's blocks, as
on stories260K's rows of 64 and 172 values), the same general.file_type, and values that
agree within one quantization step (quant_steps.py; both sides run the reference
quantizers, so the bytes are expected to be identical and the count is printed). Then
llama.cpp loads and runs our file, and so does `pagoda run`.

llama.cpp is an optional oracle (scripts/build_llamacpp); without it these tests skip.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader

from oracles import require_llamacpp

import quant_steps

REPO = Path(__file__).resolve().parents[2]
# Pagoda's type -> llama-quantize's name for the file type whose every weight matrix has it
# (with --pure; plain "Q4_K" would name the Q4_K_M mix there).
TYPES = {"Q8_0": "Q8_0", "Q6_K": "Q6_K", "Q5_K": "Q5_K_S", "Q4_K": "Q4_K_S", "Q4_0": "Q4_0",
         "Q3_K": "Q3_K_S", "Q2_K": "Q2_K"}
PROMPT = [1, 5, 9, 42]
N_GEN = 4


@pytest.fixture(scope="module")
def llama_quantize(llamacpp_bin):
    if os.environ.get("PAGODA_SKIP_LLAMACPP") == "1":
        pytest.skip("PAGODA_SKIP_LLAMACPP=1")
    return require_llamacpp(llamacpp_bin, "llama-quantize", purpose="the llama-quantize comparison") / "llama-quantize"


@pytest.fixture(scope="module")
def generated_f32(pagoda_bin, tmp_path_factory):
    """A small random llama whose every matrix row splits into 256-value blocks."""
    out = tmp_path_factory.mktemp("src") / "llama-f32.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "llama", "--type", "F32", "--dim", "256",
                        "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ff", "512", "--vocab", "512",
                        "--seed", "11", "-t", "2", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out


def quantize_both(pagoda_bin, llama_quantize, src, qtype, tmp_path):
    ours, theirs = tmp_path / f"pagoda-{qtype}.gguf", tmp_path / f"llamacpp-{qtype}.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda")), "quantize", str(src), str(ours), "--type", qtype, "-t", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(llama_quantize), "--pure", str(src), str(theirs), TYPES[qtype], "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return ours, theirs


def field(reader, key):
    f = reader.get_field(key)
    return None if f is None else f.contents()


def compare(ours_path, theirs_path):
    """Per-tensor agreement; returns (identical, total, worst |diff| in quantization steps)."""
    ours, theirs = GGUFReader(str(ours_path)), GGUFReader(str(theirs_path))
    assert field(ours, "general.file_type") == field(theirs, "general.file_type")
    assert field(ours, "general.quantization_version") == field(theirs, "general.quantization_version") == 2
    assert set(ours.fields) == set(theirs.fields)
    a = {t.name: t for t in ours.tensors}
    b = {t.name: t for t in theirs.tensors}
    assert a.keys() == b.keys()
    chosen = {n: (a[n].tensor_type.name, b[n].tensor_type.name) for n in a}
    assert all(x == y for x, y in chosen.values()), {n: v for n, v in chosen.items() if v[0] != v[1]}
    identical, worst = 0, 0.0
    for name, ta in a.items():
        tb = b[name]
        assert list(ta.shape) == list(tb.shape), name
        if np.array_equal(np.asarray(ta.data).view(np.uint8), np.asarray(tb.data).view(np.uint8)):
            identical += 1
            continue
        va, vb = quant_steps.dequantize(ta), quant_steps.dequantize(tb)
        step = np.maximum(quant_steps.steps(ta.tensor_type, ta.data, va), quant_steps.steps(tb.tensor_type, tb.data, vb))
        diff = np.abs(va - vb)
        ratio = float(np.max(diff / np.maximum(step, np.finfo(np.float32).tiny)))
        worst = max(worst, ratio)
        # One step, plus float rounding of the dequantized values.
        assert np.all(diff <= step * (1 + 1e-5) + 1e-30), f"{name}: differs by {ratio:.3f} steps"
    return identical, len(a), worst, chosen


def llamacpp_runs(model, tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "llamacpp_oracle.py"), "greedy", str(model),
                        "--prompt-ids", ",".join(map(str, PROMPT)), "-n", str(N_GEN), "-t", "2",
                        "--logits-out", str(tmp_path / "lc.npy")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"llama.cpp could not run {model.name}:\n{r.stderr[-3000:]}"
    ids = json.loads(r.stdout)["generated_ids"]
    assert len(ids) == N_GEN and np.isfinite(np.load(tmp_path / "lc.npy")).all()
    return ids


def pagoda_runs(pagoda_bin, model, tmp_path):
    ids_out = tmp_path / "ids.json"
    r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(model), "--prompt-ids", ",".join(map(str, PROMPT)),
                        "-n", str(N_GEN), "--temp", "0", "--ignore-eos", "-t", "2", "--no-stats", "--ids-out",
                        str(ids_out)], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")  # generated text may be raw bytes
    ids = json.loads(ids_out.read_text())["generated_ids"]
    assert len(ids) == N_GEN
    return ids


def check(pagoda_bin, llama_quantize, src, qtype, tmp_path, label):
    ours, theirs = quantize_both(pagoda_bin, llama_quantize, src, qtype, tmp_path)
    identical, total, worst, chosen = compare(ours, theirs)
    formats = sorted({t for t, _ in chosen.values()})
    lc_ids = llamacpp_runs(ours, tmp_path)
    pg_ids = pagoda_runs(pagoda_bin, ours, tmp_path)
    print(f"\n{label} {qtype}: {identical}/{total} tensors byte-identical to llama-quantize --pure"
          f" (worst other: {worst:.3f} steps); formats {', '.join(formats)};"
          f" greedy ids llama.cpp {lc_ids} pagoda {pg_ids}")
    return chosen


@pytest.mark.parametrize("qtype", list(TYPES))
def test_generated_model_matches_llama_quantize(pagoda_bin, llama_quantize, generated_f32, qtype, tmp_path):
    chosen = check(pagoda_bin, llama_quantize, generated_f32, qtype, tmp_path, "llama 256/512")
    # Rows of 256 and 512 fit every format: no fallback, norms stay F32.
    assert {t for t, _ in chosen.values()} == {qtype, "F32"}


@pytest.mark.parametrize("qtype", list(TYPES))
def test_stories260k_fallbacks_match_llama_quantize(pagoda_bin, llama_quantize, shared_model, qtype, tmp_path):
    src = shared_model("stories260K.gguf")
    chosen = check(pagoda_bin, llama_quantize, src, qtype, tmp_path, "stories260K")
    # Rows of 172 values (ffn_down) fit no block format: F16, as llama.cpp writes them.
    assert all(chosen[n][0] == "F16" for n in chosen if n.endswith("ffn_down.weight"))
