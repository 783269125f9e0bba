"""Schema patterns that admit a quote, a backslash or a control character: every string
generated under them is valid JSON whose decoded value matches the pattern (json.loads and
Python's re in ASCII mode, ECMA-262's \\w \\d \\s, as the oracles), on a random-weight model
where only the constraint shapes the text. xgrammar alone wrote such characters raw ("a\\b"
for ^a\\\\b$, a bare quote, a raw tab)."""
from __future__ import annotations

import json
import re
import subprocess

import pytest

PATTERNS = [r'^a\\b$', r'^\\{2}$', r'^[\\]{2}$', r'^"a"$', r'^["]{2}$', r'^\u00e9\t$', r'^[\x00-\x1f]{2}$',
            r'^.{1,8}$', r'^\S{3,6}$', r'^\D{4}$', r'^\W{3}$', r'^[^a-z0-9]{5}$', r'^\s{2}x$', r'^[\s"]{3}$',
            r'^(\\|"|[a-c])+$', r'^[ -~]{6}$']


@pytest.fixture(scope="module")
def model(pagoda_bin, tmp_path_factory):
    path = tmp_path_factory.mktemp("patterns") / "q2.gguf"
    cmd = [str(pagoda_bin("pagoda-gen-model")), "--arch", "qwen2", "--type", "Q8_0", "--dim", "64", "--layers", "2",
           "--heads", "4", "--kv-heads", "2", "--ff", "128", "--vocab", "300", "--ctx", "2048", "--seed", "7",
           "-o", str(path)]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return path


@pytest.mark.parametrize("pattern", PATTERNS)
def test_generated_strings_are_json_and_match(pagoda_bin, model, tmp_path, pattern):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "string", "pattern": pattern}))
    for seed in range(1, 7):
        r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(model), "--prompt-ids", "3,4", "-n", "60",
                            "--temp", "1.5", "-s", str(seed), "-j", str(schema), "--no-stats"],
                           capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        text = r.stdout.decode()
        value = json.loads(text)  # raises on a raw quote, backslash or control character
        assert isinstance(value, str) and re.search(pattern, value, re.ASCII), (pattern, seed, text)


def test_a_class_that_cannot_be_rewritten_is_refused(pagoda_bin, model, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "string", "pattern": r"^[\D]$"}))
    r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(model), "--prompt-ids", "3", "-n", "4",
                        "-j", str(schema)], capture_output=True, timeout=60)
    assert r.returncode == 1 and "'pattern'" in r.stderr.decode(), r.stderr.decode()
