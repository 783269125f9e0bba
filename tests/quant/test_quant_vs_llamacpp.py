"""Pagoda's format arithmetic against llama.cpp's own C functions, called through ctypes.

gguf-py (test_quant_vs_gguf.py) cannot quantize K-quants, so the authority for those
bytes is llama.cpp's reference quantizers (quantize_row_*_ref in libggml-base). Here we
require byte equality for every format both sides quantize, bit equality of dequantize,
and agreement of our vec_dot with the dot products llama.cpp runs on this CPU (its SIMD
kernels) up to float summation order. (Not its `_generic` scalar ones: in the 0.3.36
build, ggml_vec_dot_q5_0_q8_0_generic returns a wrong sum while its AVX kernel and we
agree with the exact dot.)

llama.cpp is an optional oracle: it is built by scripts/build_llamacpp into a cache
folder. Without it these tests skip (our own binary missing still fails, via conftest).
"""
import ctypes

import numpy as np
import pytest

from oracles import require_llamacpp

LEGACY = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
KQUANTS = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
SIZES = {"Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34),
         "Q8_1": (32, 36), "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144),
         "Q5_K": (256, 176), "Q6_K": (256, 210), "Q8_K": (256, 292)}


@pytest.fixture(scope="module")
def ggml(llamacpp_bin):
    d = require_llamacpp(llamacpp_bin, "libggml-base.so", "libggml-cpu.so", purpose="ggml's reference quantizers")
    base = ctypes.CDLL(str(d / "libggml-base.so"))
    cpu = ctypes.CDLL(str(d / "libggml-cpu.so"))
    cpu.ggml_cpu_init()  # fills the FP16 tables the generic kernels may read
    return base, cpu


def c_name(name):
    return name.lower().replace("_k", "_K")


def ptr(a):
    return ctypes.c_void_p(a.ctypes.data)


def ref_quantize(ggml, name, x):
    bs, ts = SIZES[name]
    out = np.zeros(x.size // bs * ts, np.uint8)
    getattr(ggml[0], f"quantize_row_{c_name(name)}_ref")(ptr(x), ptr(out), ctypes.c_int64(x.size))
    return out


def ours_quantize(quant_tool, name, x):
    return np.frombuffer(quant_tool("quant", name, x.size, data=x.tobytes()), np.uint8)


def rows(rng, n):
    g = rng.standard_normal(n).astype(np.float32)
    out = {
        "gaussian": g,
        "positive": (np.abs(g) + 1).astype(np.float32),
        "negative": (-np.abs(g) - 1).astype(np.float32),
        "outliers": np.where(np.arange(n) % 97 == 0, 20 * g, g).astype(np.float32),
        "tiny": (g * 1e-5).astype(np.float32),
        "mixed": (g * np.repeat(10.0 ** rng.uniform(-4, 2, n // 32), 32)).astype(np.float32),
        "zeros": np.zeros(n, np.float32),
        "sparse": np.where(rng.uniform(size=n) < 0.9, 0, g).astype(np.float32),
    }
    huge = g.copy()
    huge[::300] = -1000.0
    out["one_huge"] = huge
    return out


@pytest.mark.parametrize("name", LEGACY + KQUANTS + ["Q8_K"])
def test_quantize_matches_llamacpp_ref(ggml, quant_tool, name):
    rng = np.random.default_rng(17)
    bs, ts = SIZES[name]
    n = 256 * 64
    for case, x in rows(rng, n).items():
        ours = ours_quantize(quant_tool, name, x)
        ref = ref_quantize(ggml, name, x)
        bad = np.flatnonzero((ours.reshape(-1, ts) != ref.reshape(-1, ts)).any(axis=1))
        assert bad.size == 0, f"{name}/{case}: {bad.size} of {n // bs} blocks differ, first {bad[:5]}"


@pytest.mark.parametrize("name", LEGACY + KQUANTS + ["Q8_K"])
def test_dequantize_matches_llamacpp(ggml, quant_tool, name):
    rng = np.random.default_rng(19)
    bs, ts = SIZES[name]
    n = 256 * 32
    x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
    q = ref_quantize(ggml, name, x)
    ref = np.zeros(n, np.float32)
    getattr(ggml[0], f"dequantize_row_{c_name(name)}")(ptr(q), ptr(ref), ctypes.c_int64(n))
    ours = np.frombuffer(quant_tool("dequant", name, n, data=q.tobytes()), np.float32)
    assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32))


# llama.cpp pairs Q4_1/Q5_1 with Q8_1 (whose FP16 field s = d * sum(q) rounds the sum);
# we pair them with Q8_0 and take the sum exactly. Same quants, so only that rounding
# (2^-11 relative, of the min term) separates the two.
ACT = {**{t: "Q8_0" for t in LEGACY}, "Q4_1": "Q8_1", "Q5_1": "Q8_1", **{t: "Q8_K" for t in KQUANTS}}


@pytest.mark.parametrize("name", LEGACY + KQUANTS)
def test_vec_dot_matches_llamacpp(ggml, quant_tool, name):
    rng = np.random.default_rng(23)
    n = 4096
    act = ACT[name]
    fn = getattr(ggml[1], f"ggml_vec_dot_{c_name(name)}_{c_name(act)}")
    for trial in range(5):
        w = (rng.standard_normal(n) + (2.0 if trial % 2 else 0.0)).astype(np.float32)
        x = rng.standard_normal(n).astype(np.float32)
        wq = ref_quantize(ggml, name, w)
        xq = ref_quantize(ggml, act, x)
        s = ctypes.c_float()
        fn(ctypes.c_int(n), ctypes.byref(s), ctypes.c_size_t(0), ptr(wq), ctypes.c_size_t(0), ptr(xq),
           ctypes.c_size_t(0), ctypes.c_int(1))
        got, exact = map(float, quant_tool("dot", name, n, data=wq.tobytes() + x.tobytes()).split())
        wd = np.frombuffer(quant_tool("dequant", name, n, data=wq.tobytes()), np.float32).astype(np.float64)
        magnitude = float(np.sum((np.abs(wd) + np.abs(wd).max()) * np.abs(x)))
        # As in vec_dot_test.cpp: float roundings are bounded by 2^-24 of `magnitude` each;
        # llama.cpp sums in SIMD lanes, so allow a few per block (4e-6 ~ 67 * 2^-24).
        tol = (2e-3 if act == "Q8_1" else 4e-6) * magnitude
        assert abs(got - s.value) <= tol, f"{name} trial {trial}: ours {got} llama.cpp {s.value} exact {exact}"
