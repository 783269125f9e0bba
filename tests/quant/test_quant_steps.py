"""quant_steps.py reads the right step out of each format's blocks: within every group the
dequantized values sit on a grid of exactly that step, spanning no more levels than the
format has (so it is not a fraction of the true step), and round-to-nearest puts almost
every value within one step of its original. The llama-quantize comparison relies on
these steps as its tolerance."""

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import quants

import quant_steps

# Largest level index minus smallest, per format.
LEVELS = {"Q4_0": 15, "Q4_1": 15, "Q5_0": 31, "Q5_1": 31, "Q8_0": 254, "Q2_K": 3, "Q3_K": 7, "Q4_K": 15,
          "Q5_K": 31, "Q6_K": 63}
GROUP = {"Q2_K": 16, "Q3_K": 16, "Q6_K": 16}


@pytest.mark.parametrize("name", list(LEVELS))
def test_steps_are_the_grid_of_each_group(quant_tool, name):
    rng = np.random.default_rng(5)
    n = 256 * 64
    x = (rng.standard_normal(n) * np.repeat(10.0 ** rng.uniform(-3, 1, n // 256), 256)).astype(np.float32)
    raw = np.frombuffer(quant_tool("quant", name, n, data=x.tobytes()), np.uint8).reshape(1, -1)
    qt = T[name]
    vals = quants.dequantize(raw, qt).astype(np.float32).reshape(1, n)
    st = quant_steps.steps(qt, raw, vals)
    group = GROUP.get(name, 32)
    gv, gs = vals.reshape(-1, group), st.reshape(-1, group)
    assert (gs == gs[:, :1]).all(), "one step per group"
    live = gs[:, 0] > 0
    k = (gv[live] - gv[live].min(axis=1, keepdims=True)) / gs[live, :1]
    assert np.abs(k - np.round(k)).max() < 1e-3, "values off the step's grid"
    span = np.round(k).max(axis=1)
    assert span.max() <= LEVELS[name] and span.max() >= LEVELS[name] // 2, f"span {span.max()}"
    assert np.mean(np.abs(vals[0] - x) <= st[0]) > 0.99
