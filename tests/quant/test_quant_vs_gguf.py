"""Pagoda's format arithmetic against gguf-py's numpy code (the `gguf` package).

Dequantize must match gguf.quants.dequantize bit for bit for every type gguf-py knows
(random blocks with finite FP16 scales, plus fully random bytes), and quantize must
match gguf.quants.quantize byte for byte wherever gguf-py implements it (F16, BF16 and
the 32-value formats). The K-quant quantizers have no gguf-py counterpart; for them we
check that gguf-py decodes our bytes to the same floats we do, close to the input.

Drives the `pagoda-quant-tool` binary (tests/quant/quant_tool.cc); run from the repo
root with PAGODA_BUILD_DIR pointing at a build that has it.
"""
import subprocess
import zlib

import numpy as np
import pytest

from oracles import import_oracle

gguf = import_oracle("gguf")
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf.constants import GGML_QUANT_SIZES  # noqa: E402

DEQUANT_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
                 "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
GGUF_QUANT_TYPES = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
K_QUANT_TYPES = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]

# Byte offsets of the FP16 scale fields in each block (see src/quant/blocks.h).
FP16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
}


@pytest.fixture
def tool(pagoda_bin):
    path = pagoda_bin("pagoda-quant-tool")

    def run(*args, data=b"", check=True):
        r = subprocess.run([str(path), *map(str, args)], input=data, capture_output=True, timeout=60)
        if check:
            assert r.returncode == 0, r.stderr.decode()
        return r
    return run


def sizes(name):
    return GGML_QUANT_SIZES[QT[name]]


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def random_blocks(name, n_blocks, rng):
    """Random bytes with every FP16 scale field replaced by a finite value (normal or
    subnormal, either sign, magnitudes 1e-7..10)."""
    block_size, type_size = sizes(name)
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in FP16_FIELDS.get(name, []):
        mag = 10.0 ** rng.uniform(-7, 1, size=n_blocks)
        val = (rng.choice([-1.0, 1.0], size=n_blocks) * mag).astype(np.float16)
        raw[:, off:off + 2] = val.view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(-1)


def ours_dequant(tool, name, raw, n):
    out = tool("dequant", name, n, data=raw.tobytes()).stdout
    return np.frombuffer(out, dtype=np.float32)


def ours_quant(tool, name, x):
    return np.frombuffer(tool("quant", name, x.size, data=x.astype(np.float32).tobytes()).stdout, dtype=np.uint8)


@pytest.mark.parametrize("name", DEQUANT_TYPES)
def test_dequantize_matches_gguf_bit_for_bit(tool, name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    block_size, type_size = sizes(name)
    n_blocks = 257 if block_size == 1 else 96
    for trial in range(3):
        if block_size == 1:
            raw = rng.integers(0, 256, size=n_blocks * 256 * type_size, dtype=np.uint8)  # Inf/NaN included
            n = n_blocks * 256
        else:
            raw = random_blocks(name, n_blocks, rng)
            n = n_blocks * block_size
        with np.errstate(all="ignore"):
            ref = gguf.quants.dequantize(raw.reshape(1, -1), QT[name]).reshape(-1)
        ours = ours_dequant(tool, name, raw, n)
        assert ours.shape == ref.shape
        diff = np.flatnonzero(bits(ours) != bits(ref))
        assert diff.size == 0, f"{name} trial {trial}: {diff.size} values differ, first at {diff[:5]}"


@pytest.mark.parametrize("name", [t for t in DEQUANT_TYPES if t not in ("F32", "F16", "BF16")])
def test_dequantize_of_arbitrary_bytes_matches_gguf(tool, name):
    """Even garbage scales (Inf, NaN, subnormal) decode to the same bits."""
    rng = np.random.default_rng(7)
    block_size, type_size = sizes(name)
    raw = rng.integers(0, 256, size=64 * type_size, dtype=np.uint8)
    with np.errstate(all="ignore"):
        ref = gguf.quants.dequantize(raw.reshape(1, -1), QT[name]).reshape(-1)
    assert np.array_equal(bits(ours_dequant(tool, name, raw, 64 * block_size)), bits(ref))


def test_q8_k_dequantize(tool):
    """gguf-py has no Q8_K; its definition is x = d * q with an FP32 d."""
    rng = np.random.default_rng(3)
    n_blocks = 32
    d = (rng.standard_normal(n_blocks) * 10.0 ** rng.uniform(-6, 2, n_blocks)).astype(np.float32)
    qs = rng.integers(-128, 128, size=(n_blocks, 256), dtype=np.int8)
    bsums = qs.reshape(n_blocks, 16, 16).astype(np.int16).sum(axis=-1, dtype=np.int16)
    raw = np.concatenate([d.view(np.uint8).reshape(n_blocks, 4), qs.view(np.uint8),
                          bsums.view(np.uint8).reshape(n_blocks, 32)], axis=1).reshape(-1)
    assert raw.size == n_blocks * sizes("Q8_K")[1]
    ref = (d[:, None] * qs.astype(np.float32)).reshape(-1)
    assert np.array_equal(bits(ours_dequant(tool, "Q8_K", raw, n_blocks * 256)), bits(ref))


def quant_cases(rng, n):
    """Rows that exercise the quantizers' corners."""
    g = rng.standard_normal(n).astype(np.float32)
    cases = {
        "gaussian": g,
        "uniform": rng.uniform(-1, 1, n).astype(np.float32),
        "zeros": np.zeros(n, np.float32),
        "constant": np.full(n, 0.3, np.float32),
        "positive": (3 + rng.uniform(-1, 1, n)).astype(np.float32),
        "negative": (-3 + rng.uniform(-1, 1, n)).astype(np.float32),
        "tiny": (g * 1e-6).astype(np.float32),       # FP16 scales go subnormal
        "large": (g * 1e4).astype(np.float32),
        "overflow": (g * 1e9).astype(np.float32),    # FP16 scales overflow to Inf
        # exact multiples of half a step: ties in every rounding step
        "ties": (rng.integers(-16, 17, n) * 0.5).astype(np.float32),
    }
    # Q8_0 ties: amax 63.5 gives d = 0.5 exactly, so odd multiples of 0.25 land on k + 0.5
    # and test round-half-away-from-zero.
    t8 = (rng.integers(-127, 127, n) * 0.5 + 0.25).astype(np.float32)
    t8[::32] = 63.5
    cases["ties_q8"] = t8
    huge = g.copy()
    huge[::37] = 1000.0
    cases["one_huge"] = huge
    neg = g.copy()
    neg[5::64] = -50.0
    cases["negative_max"] = neg
    pos = g.copy()
    pos[9::64] = 50.0
    cases["positive_max"] = pos
    same = np.abs(g)
    same[3::32] = 4.0
    same[4::32] = -4.0   # |max| tie: the first one (positive) wins, as numpy's argmax
    cases["abs_tie"] = same
    return cases


@pytest.mark.parametrize("name", GGUF_QUANT_TYPES)
def test_quantize_matches_gguf_byte_for_byte(tool, name):
    rng = np.random.default_rng(11)
    n = 32 * 256
    for case, x in quant_cases(rng, n).items():
        with np.errstate(all="ignore"):
            ref = gguf.quants.quantize(x.reshape(1, -1), QT[name]).reshape(-1).view(np.uint8)
        ours = ours_quant(tool, name, x)
        diff = np.flatnonzero(ours != ref)
        assert diff.size == 0, f"{name}/{case}: {diff.size} bytes differ, first at {diff[:5]}"


@pytest.mark.parametrize("name", ["F16", "BF16"])
def test_float_conversion_specials_match_numpy(tool, name):
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 1e-8, 3e-8,
                         6.1e-5, 5.96e-8, 2.98e-8, 1 + 2**-11, 1 + 3 * 2**-11, 3.4e38], np.float32)
    payload_nans = np.array([0x7f800001, 0xffa00001, 0x7fffffff, 0x7fc00000], np.uint32).view(np.float32)
    x = np.concatenate([specials, -specials, payload_nans])
    with np.errstate(all="ignore"):
        ref = gguf.quants.quantize(x.reshape(1, -1), QT[name]).reshape(-1).view(np.uint8)
    assert np.array_equal(ours_quant(tool, name, x), ref)


@pytest.mark.parametrize("name", K_QUANT_TYPES)
def test_k_quant_bytes_decode_the_same_in_gguf(tool, name):
    """Our K-quant bytes are valid GGUF: gguf-py decodes them to our floats, near x."""
    rng = np.random.default_rng(5)
    n = 64 * 256
    x = rng.standard_normal(n).astype(np.float32)
    q = ours_quant(tool, name, x)
    assert q.size == n // 256 * sizes(name)[1]
    ref = gguf.quants.dequantize(q.reshape(1, -1), QT[name]).reshape(-1)
    ours = ours_dequant(tool, name, q, n)
    assert np.array_equal(bits(ours), bits(ref))
    # Relative RMS error of round-to-nearest K-quants on Gaussian data (measured: Q2_K 0.29,
    # Q3_K 0.15, Q4_K 0.071, Q5_K 0.036, Q6_K 0.018).
    bound = {"Q2_K": 0.33, "Q3_K": 0.17, "Q4_K": 0.08, "Q5_K": 0.04, "Q6_K": 0.02}[name]
    assert np.sqrt(np.mean((ours - x) ** 2) / np.mean(x ** 2)) < bound


@pytest.mark.parametrize("name", DEQUANT_TYPES + ["Q8_K"])
def test_dot_matches_dequantized_dot(tool, name):
    rng = np.random.default_rng(13)
    n = 4096
    w = ours_quant(tool, name, rng.standard_normal(n).astype(np.float32))
    x = rng.standard_normal(n).astype(np.float32)
    got, ref = map(float, tool("dot", name, n, data=w.tobytes() + x.tobytes()).stdout.split())
    assert abs(got - ref) <= 1e-5 * (1 + abs(ref)) * np.sqrt(n)


def test_tool_rejects_bad_input(tool):
    r = tool("dequant", "Q4_0", 33, check=False)
    assert r.returncode == 2 and b"multiple" in r.stderr
    r = tool("dequant", "NOPE", 32, check=False)
    assert r.returncode == 2 and b"unknown type" in r.stderr
    r = tool("dequant", "Q4_0", 64, data=b"\0" * 18, check=False)
    assert r.returncode == 2 and b"short input" in r.stderr
    assert tool("info", "Q4_K").stdout.split() == [b"256", b"144", b"Q8_K"]
