"""The soak test (scripts/soak.py) against a server on a tiny generated model: mixed
streams, non-streams, n > 1, cancels, clients hanging up, malformed requests, slow
clients and KV pressure. Two and a half minutes under CI (PAGODA_PARITY=1), 30 s otherwise
(PAGODA_SOAK_MINUTES overrides); the 30-minute run is done by hand. A short run measures
RSS growth over its last third: the HTTP workers' stacks and the allocator's arenas are
touched one by one as connections come (30 minutes: a plateau by minute 18), so the first
minutes of a short run are still filling."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from server_util import gen_tiny_model

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def test_soak_mixed_hostile_load(pagoda_bin, tmp_path):
    minutes = float(os.environ.get("PAGODA_SOAK_MINUTES", "2.5" if os.environ.get("PAGODA_PARITY") == "1" else "0.5"))
    model = gen_tiny_model(pagoda_bin, tmp_path / "soak.gguf")
    r = subprocess.run([sys.executable, str(SCRIPT), "--pagoda", str(pagoda_bin("pagoda")), "--model", str(model),
                        "--minutes", str(minutes), "--warmup", "0.67", "--json"], capture_output=True, text=True, timeout=minutes * 60 + 600)
    assert r.stdout, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert not result["lost"], result["lost"][:20]
    assert result["health_ms_max"] < 1000, result
    assert all(v == 0 for v in result["idle"].values()), result["idle"]
    assert result["rss_growth_after_warmup"] < 0.05, result["rss_mib"]
    assert r.returncode == 0, result
