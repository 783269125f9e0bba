"""`pagoda quantize --sparsity 2:4` against an independent numpy model of the 2:4 formats.

The file is read with a small GGUF reader of its own (gguf-py refuses Pagoda's type ids),
each Q8_0_S24 / Q4_0_S24 block decoded from the format's description (docs/quantize.md:
eight 6-bit codes naming two of four positions in two groups each, then the dense
format's block over the 32 kept values), and compared with numpy's magnitude pruning of
the F32 source plus gguf-py's own Q8_0 / Q4_0 quantizer on the kept values: same kept
positions in every group of every row, same bytes. Wanda and SparseGPT must keep exactly
two of four everywhere too, choose differently from magnitude, and run. Bad requests get
clear errors.
"""
from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import quantize as gguf_quantize

PAIRS = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
SPARSE = {1024: ("Q8_0_S24", 40, GGMLQuantizationType.Q8_0), 1025: ("Q4_0_S24", 24, GGMLQuantizationType.Q4_0)}


def read_gguf(path: Path) -> dict:
    """name -> (type id, shape (ne0 first), raw bytes) for every tensor of a GGUF v3 file."""
    data = path.read_bytes()
    off = 0

    def take(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, data, off)
        off += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal off
        n = take("Q")
        s = data[off:off + n].decode()
        off += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert data[:4] == b"GGUF"
    off = 4
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        shape = [take("Q") for _ in range(take("I"))]
        infos.append((name, shape, take("I"), take("Q")))
    align = meta.get("general.alignment", 32)
    base = (off + align - 1) // align * align
    sizes = {0: (1, 4), 1: (1, 2), 8: (32, 34), 2: (32, 18), 1024: (64, 40), 1025: (64, 24)}
    out = {}
    for name, shape, t, o in infos:
        block, size = sizes[t]
        n = int(np.prod(shape))
        out[name] = (t, shape, data[base + o: base + o + n // block * size])
    return out


def decode_sparse(raw: bytes, rows: int, cols: int, block_bytes: int):
    """-> (kept positions per row, as a bool array [rows, cols]; the dense-block bytes of
    the kept values per block, [rows * cols / 64, block_bytes - 6])."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(rows * cols // 64, block_bytes)
    keep = np.zeros((blocks.shape[0], 64), dtype=bool)
    for b, blk in enumerate(blocks):
        bits = int.from_bytes(bytes(blk[2:8]), "little")
        for j in range(8):
            code = (bits >> (6 * j)) & 63
            assert code < 36, f"block {b}: code {code} names no pair"
            for g, c in ((2 * j, code % 6), (2 * j + 1, code // 6)):
                for p in PAIRS[c]:
                    keep[b, 4 * g + p] = True
    dense_block = np.concatenate([blocks[:, :2], blocks[:, 8:]], axis=1)  # d, then the quants
    return keep.reshape(rows, cols), dense_block


def magnitude_keep(w: np.ndarray) -> np.ndarray:
    """Two largest |w| of each group of four, ties to the lower position."""
    g = np.abs(w).reshape(-1, 4)
    order = np.argsort(-g, axis=1, kind="stable")
    keep = np.zeros_like(g, dtype=bool)
    np.put_along_axis(keep, order[:, :2], True, axis=1)
    return keep.reshape(w.shape)


@pytest.fixture(scope="module")
def source(pagoda_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("sparse") / "llama-f32.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "llama", "--type", "F32", "--dim", "256",
                        "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ff", "512", "--vocab", "512",
                        "--seed", "5", "-t", "2", "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def calib(tmp_path_factory):
    words = "the quick brown fox jumps over a lazy dog while seven wizards quietly pack boxes of jam".split()
    rng = np.random.default_rng(3)
    p = tmp_path_factory.mktemp("calib") / "calib.txt"
    p.write_text(" ".join(words[i] for i in rng.integers(0, len(words), 6000)))
    return p


def quantize(pagoda_bin, src, out, *args):
    return subprocess.run([str(pagoda_bin("pagoda")), "quantize", str(src), str(out), "-t", "2", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("dense", ["Q8_0", "Q4_0"])
def test_magnitude_pruning_is_numpys_choice_in_gguf_pys_bytes(pagoda_bin, source, tmp_path, dense):
    out = tmp_path / "sparse.gguf"
    r = quantize(pagoda_bin, source, out, "--type", dense, "--sparsity", "2:4")
    assert r.returncode == 0, r.stderr
    src = {t.name: np.array(t.data, dtype=np.float32).reshape(-1, int(t.shape[0])) for t in GGUFReader(source).tensors}
    got = read_gguf(out)
    layer_mats = 0
    for name, (t, shape, raw) in got.items():
        if not name.startswith("blk.") or len(shape) < 2 or name.endswith("norm.weight"):
            if name in ("token_embd.weight", "output.weight"):
                assert t == int(GGMLQuantizationType[dense]), f"{name} stays dense"
            continue
        label, block_bytes, dense_type = SPARSE[t]
        assert label == dense + "_S24", name
        w = src[name]
        rows, cols = w.shape
        keep, dense_block = decode_sparse(raw, rows, cols, block_bytes)
        want = magnitude_keep(w)
        assert (keep.reshape(-1, 4).sum(axis=1) == 2).all(), f"{name}: a group does not keep exactly two"
        assert (keep == want).all(), f"{name}: {np.count_nonzero(keep != want)} positions differ from magnitude"
        kept = w[keep].reshape(-1, 32)
        ref = np.frombuffer(gguf_quantize(kept, dense_type).tobytes(), dtype=np.uint8).reshape(dense_block.shape)
        assert (ref == dense_block).all(), f"{name}: kept values differ from gguf-py's {dense} in " \
                                           f"{np.count_nonzero((ref != dense_block).any(axis=1))} blocks"
        layer_mats += 1
    assert layer_mats == 2 * 7


@pytest.mark.parametrize("prune", ["wanda", "sparsegpt"])
def test_calibrated_pruning_keeps_two_of_four_chooses_its_own_and_runs(pagoda_bin, source, calib, tmp_path, prune):
    out = tmp_path / f"{prune}.gguf"
    r = quantize(pagoda_bin, source, out, "--type", "Q8_0", "--sparsity", "2:4", "--prune", prune, "--calib",
                 str(calib), "--calib-tokens", "1024", "--calib-ctx", "128")
    assert r.returncode == 0, r.stderr
    assert f"Q8_0_S24 ({prune})" in r.stdout
    src = {t.name: np.array(t.data, dtype=np.float32).reshape(-1, int(t.shape[0])) for t in GGUFReader(source).tensors}
    differ = 0
    for name, (t, shape, raw) in read_gguf(out).items():
        if t not in SPARSE:
            continue
        w = src[name]
        keep, _ = decode_sparse(raw, *w.shape, SPARSE[t][1])
        assert (keep.reshape(-1, 4).sum(axis=1) == 2).all(), name
        differ += int(np.count_nonzero(keep != magnitude_keep(w)))
    assert differ > 0, f"{prune} kept exactly magnitude's weights everywhere"
    run = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(out), "-p", "the quick", "-n", "8", "--temp", "0"],
                         capture_output=True, timeout=120)  # random weights: bytes, not UTF-8
    assert run.returncode == 0, run.stderr
    insp = subprocess.run([str(pagoda_bin("pagoda")), "inspect", str(out)], capture_output=True, text=True, timeout=60)
    assert "llama.cpp cannot load this file" in insp.stdout


@pytest.mark.parametrize("args, message", [
    (["--type", "Q4_K", "--sparsity", "2:4"], "has no sparse counterpart"),
    (["--type", "Q8_0", "--sparsity", "1:4"], "only 2:4"),
    (["--type", "Q8_0", "--prune", "wanda", "--calib", "x"], "applies to 2:4 sparse formats"),
    (["--type", "Q8_0", "--sparsity", "2:4", "--prune", "wanda"], "needs calibration text"),
    (["--type", "Q8_0", "--sparsity", "2:4", "--prune", "random"], "unknown --prune"),
    (["--type", "Q8_0", "--sparsity", "2:4", "--method", "gptq", "--calib", "x"], "does not apply to 2:4"),
])
def test_bad_sparsity_requests_fail_clearly_and_write_nothing(pagoda_bin, source, tmp_path, args, message):
    out = tmp_path / "never.gguf"
    r = quantize(pagoda_bin, source, out, *args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert not out.exists()
