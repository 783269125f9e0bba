"""Expert statistics (`pagoda run --moe-stats-out`) against a count taken from the routing
itself: the numpy oracle (reference_forward.py) routes every position of the run, following
Pagoda's choices only at near ties, and the per-layer, per-expert token counts and active
steps it implies must equal what Pagoda reports. The model's router is skewed toward low
expert ids (pagoda-gen-model --router-skew), so the load is uneven and an off-by-one expert,
layer or step would show."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from reference_forward import ReferenceModel  # noqa: E402

PROMPT = [1] + [(37 * i + 11) % 500 + 3 for i in range(29)]  # 30 ids
N_GEN = 12


def test_expert_counts_match_the_routing(pagoda_bin, tmp_path):
    model = tmp_path / "skewed.gguf"
    subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "llama", "--experts", "8", "--experts-used", "2",
                    "--router-skew", "4", "--dim", "64", "--ff", "128", "--layers", "3", "--vocab", "512",
                    "--seed", "3", "-o", str(model)], check=True, capture_output=True, timeout=120)
    stats_out, routing_out, ids_out = tmp_path / "stats.json", tmp_path / "routing.json", tmp_path / "ids.json"
    r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(model), "--prompt-ids", ",".join(map(str, PROMPT)),
                        "-n", str(N_GEN), "--temp", "0", "--ignore-eos", "-t", "2", "--moe-stats",
                        "--moe-stats-out", str(stats_out), "--moe-routing-out", str(routing_out),
                        "--ids-out", str(ids_out)], capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    assert "imbalance" in err and "routing" in err  # the table for people
    stats = json.loads(stats_out.read_text())
    gen = json.loads(ids_out.read_text())["generated_ids"]
    routing = json.loads(routing_out.read_text())

    ref = ReferenceModel(model, f16_attention=True)
    fed = PROMPT + gen[:-1]  # the last token is never run
    ref.forward(fed, routing, 1e-3)
    assert len(ref.route_flips) <= 2, ref.route_flips
    # One step for the prompt, one per later token.
    steps = [list(range(len(PROMPT)))] + [[len(PROMPT) + i] for i in range(N_GEN - 1)]
    assert stats["steps"] == len(steps) and stats["experts"] == 8 and stats["experts_used"] == 2
    assert len(stats["layers"]) == 3
    for il, layer in enumerate(stats["layers"]):
        sel = np.asarray(ref.routing[il])
        assert sel.shape == (len(fed), 2)
        want_tokens = np.bincount(sel.ravel(), minlength=8)
        want_active = [sum(bool(np.isin(e, sel[s]).any()) for s in steps) for e in range(8)]
        assert layer["tokens"] == want_tokens.tolist(), f"layer {il}"
        assert layer["active_steps"] == want_active, f"layer {il}"
        mean = want_tokens.mean()
        assert abs(layer["imbalance"] - want_tokens.max() / mean) < 1e-3
        # The skew is visible: expert 0 takes well over its share.
        assert want_tokens[0] > 1.5 * mean, f"layer {il}: {want_tokens.tolist()}"
    assert 0.0 < stats["routing_share"] < 1.0 and stats["forward_seconds"] > 0


def test_a_dense_model_has_no_expert_statistics(pagoda_bin, tmp_path):
    model = tmp_path / "dense.gguf"
    subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "llama", "-o", str(model)], check=True,
                   capture_output=True, timeout=120)
    r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(model), "-p", "hi", "-n", "2",
                        "--moe-stats-out", str(tmp_path / "s.json")], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "has no experts" in r.stderr
