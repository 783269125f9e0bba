"""The GGUF mutant campaign (scripts/gguf_mutate.py) itself: it must report a binary that
crashes, hangs or prints a sanitizer report, and pass one that fails cleanly."""
from __future__ import annotations

import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "gguf_mutate.py"


def campaign(pagoda, seeds, count=6, timeout=5):
    return subprocess.run([sys.executable, str(SCRIPT), "--pagoda", str(pagoda), "--seeds", *map(str, seeds),
                           "--count", str(count), "--jobs", "2", "--timeout", str(timeout)],
                          capture_output=True, text=True, timeout=120)


def fake(tmp_path, name, body):
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return p


def test_campaign_reports_signals_sanitizer_reports_and_hangs(write_gen_model, tmp_path):
    seed = write_gen_model(tmp_path / "seed.gguf", "llama", "Q8_0")
    for name, body in [("segv", "kill -SEGV $$"), ("abort", "echo 'terminate called' >&2; exit 1"),
                       ("asan", "echo '==1==ERROR: AddressSanitizer: heap-buffer-overflow' >&2; exit 1"),
                       ("ubsan", "echo 'x.cpp:1:2: runtime error: signed integer overflow' >&2; exit 1"),
                       ("hang", "sleep 30"), ("rc2", "exit 2")]:
        r = campaign(fake(tmp_path, name, body), [seed], count=4, timeout=1)
        assert r.returncode == 1 and "4 failing" in r.stdout, (name, r.stdout, r.stderr[-500:])


def test_campaign_passes_a_binary_that_fails_cleanly(write_gen_model, tmp_path):
    seed = write_gen_model(tmp_path / "seed.gguf", "llama", "Q8_0")
    r = campaign(fake(tmp_path, "clean", "echo 'error: bad file' >&2; exit 1"), [seed], count=20)
    assert r.returncode == 0 and "0 failing" in r.stdout, r.stdout + r.stderr


def test_real_binary_survives_a_short_campaign(pagoda_bin, write_gen_model, tmp_path):
    seeds = [write_gen_model(tmp_path / "llama.gguf", "llama", "Q8_0"),
             write_gen_model(tmp_path / "gemma3.gguf", "gemma3", "Q8_0")]
    r = campaign(pagoda_bin("pagoda"), seeds, count=200, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
