"""The quantization step of every value of a GGUF tensor, read from its blocks' scales.

Two round-to-nearest quantizations of the same weights each sit within about half a
step of the original, so they agree within one step (the larger of the two); tests use
this as the tolerance when two quantizers' bytes differ. Steps per format:
  Q4_0 Q4_1 Q5_0 Q5_1 Q8_0   d (FP16, first field of the 32-value block)
  Q2_K                       d * (scales[g] & 15), 16 groups of 16
  Q3_K                       |d * (s_g - 32)|, 16 groups of 16, 6-bit s_g split in scales
  Q4_K Q5_K                  d * sc_g, 8 groups of 32, 6-bit sc_g packed in scales
  Q6_K                       |d * scales[g]|, 16 groups of 16 (int8 scales)
  F16 BF16 F32               the spacing of the format at the value
"""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

BLOCK = {T.Q4_0: (32, 18), T.Q4_1: (32, 20), T.Q5_0: (32, 22), T.Q5_1: (32, 24), T.Q8_0: (32, 34),
         T.Q2_K: (256, 84), T.Q3_K: (256, 110), T.Q4_K: (256, 144), T.Q5_K: (256, 176), T.Q6_K: (256, 210)}


def _f16(b: np.ndarray, off: int) -> np.ndarray:
    return b[:, off:off + 2].copy().view(np.float16)[:, 0].astype(np.float32)


def _k4_scales(s: np.ndarray) -> np.ndarray:
    """The 8 six-bit group scales of Q4_K/Q5_K from their 12 packed bytes."""
    s = s.astype(np.int32)
    lo = s[:, 0:4] & 63
    hi = (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)
    return np.concatenate([lo, hi], axis=1)


def _q3_scales(s: np.ndarray) -> np.ndarray:
    """The 16 signed group scales of Q3_K: low nibble from byte g%8 (high half for g>=8),
    two high bits from byte 8+g%4 at bit 2*(g//4)."""
    s = s.astype(np.int32)
    g = np.arange(16)
    low = (s[:, g % 8] >> (4 * (g // 8))) & 15
    high = (s[:, 8 + g % 4] >> (2 * (g // 4))) & 3
    return (low | (high << 4)) - 32


def steps(qtype: T, raw: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Step per value, shaped like `values` (the dequantized tensor, rows x cols)."""
    if qtype in (T.F16, T.BF16, T.F32):
        kind = {T.F16: np.float16, T.BF16: np.float32, T.F32: np.float32}[qtype]
        sp = np.spacing(np.abs(values).astype(kind)).astype(np.float32)
        return sp * (65536.0 if qtype == T.BF16 else 1.0)
    bs, ts = BLOCK[qtype]
    b = np.ascontiguousarray(raw).reshape(-1, ts)
    if bs == 32:
        per_group, group = np.abs(_f16(b, 0))[:, None], 32
    elif qtype == T.Q2_K:
        per_group, group = np.abs(_f16(b, 80))[:, None] * (b[:, 0:16] & 15), 16
    elif qtype == T.Q3_K:
        per_group, group = np.abs(_f16(b, 108)[:, None] * _q3_scales(b[:, 96:108])), 16
    elif qtype in (T.Q4_K, T.Q5_K):
        per_group, group = np.abs(_f16(b, 0))[:, None] * _k4_scales(b[:, 4:16]), 32
    elif qtype == T.Q6_K:
        per_group, group = np.abs(_f16(b, 208)[:, None] * b[:, 192:208].view(np.int8)), 16
    else:
        raise ValueError(f"no step rule for {qtype.name}")
    return np.repeat(per_group.astype(np.float32), group, axis=1).reshape(values.shape)


def dequantize(tensor) -> np.ndarray:
    """A GGUFReader tensor's values as float32, rows x cols."""
    cols = int(tensor.shape[0])
    return quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32).reshape(-1, cols)
