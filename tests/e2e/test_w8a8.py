"""W8A8, Pagoda's int8-weight x int8-activation format, end to end: the generator's file
layout (read back with the `gguf` package), `pagoda inspect`, and `pagoda run` on a W8A8
model against the F32 model it was quantized from.

The logit bound. pagoda-gen-model draws the same values for every format from one seed, so
the F32, Q8_0 and W8A8 files hold the same model rounded three ways. Q8_0 is the accepted
8-bit format: weights and activations rounded with a step of amax / 127 per block of 32.
W8A8 uses the same step over a whole weight row or token instead. For rows of n roughly
Gaussian values the expected amax grows like sqrt(2 ln n): about 2.1 sigma for 32 values,
2.6 for 96 and 2.8 for 160 (this model's widths), so W8A8's rounding errors are about 1.3x
Q8_0's, on both operands, hence on every logit. The test requires W8A8's relative logit
error (||w8a8 - f32|| / ||f32|| per position) to stay within 2x Q8_0's on the same prompts
(margin for the max of a few draws), and below 5% outright (measured: ~2%).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader

from oracles import require_llamacpp

DIM, FF = 96, 160  # odd multiples of 32
PROMPTS = [[1, 5, 9, 44, 80], [1, 300, 301, 45, 77, 99, 12, 400, 260], [1, 2, 3], [1] + list(range(100, 130))]
CRASH_MARKERS = ("terminate called", "Segmentation fault", "Aborted", "core dumped", "AddressSanitizer",
                 "runtime error:", "what():")


@pytest.fixture
def gen(pagoda_bin, tmp_path):
    def make(fmt, arch="llama"):
        out = tmp_path / f"{arch}-{fmt}.gguf"
        cmd = [str(pagoda_bin("pagoda-gen-model")), "--arch", arch, "--type", fmt, "--dim", str(DIM),
               "--ff", str(FF), "--layers", "2", "--heads", "3", "--kv-heads", "1", "--vocab", "512",
               "--seed", "5", "-t", "2", "-o", str(out)]
        r = subprocess.run(cmd, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return out
    return make


def run_pagoda(pagoda_bin, *args, timeout=120):
    r = subprocess.run([str(pagoda_bin("pagoda")), *map(str, args)], capture_output=True, timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def next_token_logits(pagoda_bin, model, prompt, tmp_path):
    out = tmp_path / "logits.f32"
    rc, _, err = run_pagoda(pagoda_bin, "run", "-m", model, "--prompt-ids", ",".join(map(str, prompt)), "-n", 1,
                            "--temp", 0, "--ignore-eos", "-t", 2, "--no-stats", "--logits-out", out)
    assert rc == 0, err
    return np.fromfile(out, dtype=np.float32).astype(np.float64)


def test_file_layout_and_row_quantizer(gen):
    """Each matrix is an I8 tensor plus an F32 [rows] scale tensor; scale = amax / 127 of the
    F32 source row and every value decodes within half a step."""
    src = {t.name: t for t in GGUFReader(str(gen("F32"))).tensors}
    reader = GGUFReader(str(gen("W8A8")))
    assert reader.fields["pagoda.weight_format"].contents() == "W8A8"
    assert "general.file_type" not in reader.fields
    tensors = {t.name: t for t in reader.tensors}
    matrices = [n for n, t in tensors.items() if t.tensor_type == GGMLQuantizationType.I8]
    assert "blk.0.attn_q.weight" in matrices and "token_embd.weight" in matrices and "output.weight" in matrices
    assert len(matrices) == 2 + 2 * 7
    for name in matrices:
        q = np.asarray(tensors[name].data, dtype=np.int8)
        scale_t = tensors[name + ".scale"]
        assert scale_t.tensor_type == GGMLQuantizationType.F32
        rows, cols = q.shape
        assert [int(d) for d in scale_t.shape] == [rows]
        scale = np.asarray(scale_t.data, dtype=np.float32)
        f = np.asarray(src[name].data, dtype=np.float32).reshape(rows, cols)
        amax = np.abs(f).max(axis=1)
        np.testing.assert_array_equal(scale, amax / np.float32(127))
        assert np.abs(q.astype(np.int32)).max() <= 127
        err = np.abs(q * scale[:, None].astype(np.float64) - f)
        assert (err <= 0.5 * scale[:, None] + 1e-6 * amax[:, None]).all(), name


def test_inspect_names_w8a8_and_says_llamacpp_cannot_load(pagoda_bin, gen):
    rc, out, err = run_pagoda(pagoda_bin, "inspect", gen("W8A8"))
    assert rc == 0, err
    lines = out.splitlines()
    q = next(line for line in lines if line.strip().startswith("blk.0.attn_q.weight "))
    assert q.split()[1] == "W8A8", q
    s = next(line for line in lines if line.strip().startswith("blk.0.attn_q.weight.scale"))
    assert s.split()[1] == "F32", s
    fmt = next(line for line in lines if line.strip().startswith("W8A8") and "tensors" in line)
    assert fmt.split()[1] == "16", fmt  # token_embd, output, 7 per layer
    assert "W8A8 is a Pagoda format" in out and "llama.cpp cannot load this file" in out
    assert "pagoda.weight_format" in out
    assert "model: llama" in out


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_run_logits_close_to_f32_source(pagoda_bin, gen, tmp_path, arch):
    models = {fmt: gen(fmt, arch) for fmt in ("F32", "Q8_0", "W8A8")}
    rel = {"Q8_0": [], "W8A8": []}
    for prompt in PROMPTS:
        ref = next_token_logits(pagoda_bin, models["F32"], prompt, tmp_path)
        for fmt in rel:
            got = next_token_logits(pagoda_bin, models[fmt], prompt, tmp_path)
            assert got.shape == ref.shape
            rel[fmt].append(float(np.linalg.norm(got - ref) / np.linalg.norm(ref)))
    print(f"\n{arch}: relative logit error vs F32, per prompt: Q8_0 {np.round(rel['Q8_0'], 4)}  "
          f"W8A8 {np.round(rel['W8A8'], 4)}")
    assert max(rel["W8A8"]) < 0.05
    assert np.mean(rel["W8A8"]) <= 2.0 * np.mean(rel["Q8_0"])


def test_run_generates_and_bad_scale_tensor_is_a_clean_error(pagoda_bin, gen, tmp_path):
    model = gen("W8A8")
    rc, out, err = run_pagoda(pagoda_bin, "run", "-m", model, "-p", "hello world", "-n", 8, "--temp", 0, "-t", 2)
    assert rc == 0, err
    assert out.strip()
    # The same file with one scale tensor's name changed: a load error naming it.
    data = bytearray(Path(model).read_bytes())
    old = b"blk.1.ffn_up.weight.scale"
    assert data.count(old) == 1
    at = data.index(old)
    data[at:at + len(old)] = b"blk.1.ffn_up.weight.scalx"
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(bytes(data))
    rc, out, err = run_pagoda(pagoda_bin, "run", "-m", broken, "-p", "hello", "-n", 2)
    assert rc != 0
    assert "blk.1.ffn_up.weight.scale are missing" in err, err
    assert not any(m in err for m in CRASH_MARKERS), err


def test_llamacpp_refuses_the_file(gen, llamacpp_bin, llamacpp_log):
    """What inspect says: llama.cpp does not load a W8A8 file (when llama.cpp is built)."""
    exe = require_llamacpp(llamacpp_bin, "llama-completion", purpose="llama.cpp's refusal") / "llama-completion"
    llamacpp_log([exe, "-m", gen("W8A8"), "-n", 2, "-p", "hello", "-no-cnv"], "failed to load model",
                 ok=lambda rc: rc != 0, timeout=120)
