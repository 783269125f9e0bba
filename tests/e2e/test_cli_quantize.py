"""`pagoda quantize` end to end on generated models: what it writes (types per tensor, the
metadata, bytes independent of the thread count, F16/BF16 sources), what it prints (a
plain progress line per tensor when stderr is not a terminal, a summary), and clean
failures (one `error:` line, non-zero exit, no output file and no temporary left)."""
from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, quants

CRASH_MARKERS = ("terminate called", "Segmentation fault", "Aborted", "core dumped", "AddressSanitizer",
                 "runtime error:", "what():")


@pytest.fixture
def gen_model(write_gen_model, tmp_path):
    def make(fmt="F32", name=None, dim=64, ff=128):
        return write_gen_model(tmp_path / (name or f"llama-{fmt}.gguf"), "llama", fmt, dim=dim, ff=ff,
                               sliding_window=None)
    return make


@pytest.fixture
def pagoda(pagoda_bin):
    def run(*args, timeout=120):
        r = subprocess.run([str(pagoda_bin("pagoda")), *map(str, args)], capture_output=True, timeout=timeout)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    return run


def types_of(path):
    return {t.name: t.tensor_type.name for t in GGUFReader(str(path)).tensors}


def field(path_or_reader, key):
    r = path_or_reader if isinstance(path_or_reader, GGUFReader) else GGUFReader(str(path_or_reader))
    f = r.get_field(key)
    return None if f is None else f.contents()


def test_quantize_prints_progress_and_summary_and_runs(pagoda, gen_model, tmp_path):
    src, out = gen_model(dim=256, ff=512), tmp_path / "q4k.gguf"
    rc, stdout, err = pagoda("quantize", src, out, "--type", "q4_k", "-t", 2)
    assert rc == 0, err
    n = len(GGUFReader(str(src)).tensors)
    progress = [line for line in err.splitlines() if re.match(r"\[\s*\d+/\d+\]", line)]
    assert len(progress) == n, err  # not a terminal: one plain line per tensor
    assert progress[-1].startswith(f"[{n}/{n}] 100.0%")
    assert "\r" not in err and "\033[" not in err
    assert re.search(r"blk\.0\.attn_q\.weight\s+F32 -> Q4_K", err)
    assert re.search(r"bits/weight", stdout) and "Q4_K (rtn)" in stdout, stdout
    assert "32.00 ->" in stdout  # an F32 source
    rc, info, err = pagoda("inspect", out)
    assert rc == 0, err
    assert re.search(r"Q4_K\s+\d+ tensors", info) and "general.file_type" in info
    ids_out = tmp_path / "ids.json"
    rc, _, err = pagoda("run", "-m", out, "--prompt-ids", "1,5,9", "-n", 4, "--temp", 0, "--ignore-eos", "-t", 2,
                        "--ids-out", ids_out)
    assert rc == 0, err
    assert len(json.loads(ids_out.read_text())["generated_ids"]) == 4


def test_types_keep_rules_and_metadata(pagoda, gen_model, tmp_path):
    src, out = gen_model(), tmp_path / "q4_0.gguf"
    # Anchored: rules search the name, so a bare output\.weight would match attn_output.weight too.
    rc, _, err = pagoda("quantize", src, out, "--type", "Q4_0", "--keep", r"q8_0=^output\.weight|token_embd",
                        "--keep", "F16=attn_v", "--keep", "q6_k=nothing-matches", "-t", 2)
    assert rc == 0, err
    assert "matched no weight matrix" in err
    dims = {t.name: len(t.shape) for t in GGUFReader(str(src)).tensors}
    got = types_of(out)
    assert got.keys() == dims.keys()
    for name, t in got.items():
        if dims[name] == 1:
            assert t == "F32", name  # norms stay as they are
        elif name in ("output.weight", "token_embd.weight"):
            assert t == "Q8_0", name
        elif "attn_v" in name:
            assert t == "F16", name
        else:
            assert t == "Q4_0", name
    a, b = GGUFReader(str(src)), GGUFReader(str(out))
    assert field(b, "general.file_type") == 2 and field(b, "general.quantization_version") == 2
    for key in a.fields:
        if not key.startswith("GGUF.") and key not in ("general.file_type", "general.quantization_version"):
            assert field(a, key) == field(b, key), key


def test_fallback_notes(pagoda, gen_model, tmp_path):
    # Rows of 64 do not split into 256-value blocks; Q6_K falls back to Q8_0 like llama-quantize.
    rc, _, err = pagoda("quantize", gen_model(), tmp_path / "q6k.gguf", "--type", "Q6_K", "-t", 2)
    assert rc == 0, err
    assert re.search(r"note: \d+ tensors with rows of 64 values .* Q6_K blocks of 256; written as Q8_0", err), err
    assert set(types_of(tmp_path / "q6k.gguf").values()) == {"Q8_0", "F32"}


def test_threads_do_not_change_the_bytes(pagoda, gen_model, tmp_path):
    src = gen_model(dim=256, ff=512)
    for qtype in ("Q4_K", "Q2_K", "Q8_0"):
        files = []
        for t in (1, 3):
            out = tmp_path / f"{qtype}-t{t}.gguf"
            rc, _, err = pagoda("quantize", src, out, "--type", qtype, "-t", t)
            assert rc == 0, err
            files.append(out.read_bytes())
        assert files[0] == files[1], qtype


@pytest.mark.parametrize("fmt", ["F16", "BF16"])
def test_f16_and_bf16_sources(pagoda, gen_model, tmp_path, fmt):
    """Sources are decoded to float rows, then quantized: Q8_0 bytes equal gguf-py's."""
    src, out = gen_model(fmt), tmp_path / "q8.gguf"
    rc, _, err = pagoda("quantize", src, out, "--type", "Q8_0", "--method", "rtn", "--calib", "unused.txt", "-t", 2)
    assert rc == 0, err
    a = {t.name: t for t in GGUFReader(str(src)).tensors}
    for t in GGUFReader(str(out)).tensors:
        s = a[t.name]
        if t.tensor_type == s.tensor_type:
            assert np.array_equal(np.asarray(t.data), np.asarray(s.data)), t.name
            continue
        assert t.tensor_type == T.Q8_0
        want = quants.quantize(quants.dequantize(s.data, s.tensor_type).astype(np.float32), T.Q8_0)
        assert np.array_equal(np.asarray(t.data).reshape(-1), want.reshape(-1)), t.name


def test_quantized_sources_need_allow_requantize(pagoda, gen_model, tmp_path):
    src = gen_model("Q8_0")
    out = tmp_path / "q4k.gguf"
    rc, _, err = pagoda("quantize", src, out, "--type", "Q4_0", "-t", 2)
    assert_failure(rc, err, out, "already quantized", "--allow-requantize")
    rc, _, err = pagoda("quantize", src, out, "--type", "Q4_0", "--allow-requantize", "-t", 2)
    assert rc == 0, err
    assert "Q4_0" in types_of(out).values()
    # The same type is a copy, as in llama-quantize: no requantizing involved.
    rc, _, err = pagoda("quantize", src, tmp_path / "same.gguf", "--type", "Q8_0", "-t", 2)
    assert rc == 0, err


def assert_failure(rc, err, out, *must_mention):
    assert rc != 0 and 0 < rc < 128, f"exit {rc}; stderr:\n{err}"
    for marker in CRASH_MARKERS:
        assert marker not in err, f"crash marker {marker!r} in stderr:\n{err}"
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    for word in must_mention:
        assert word.lower() in errors[0].lower(), f"error should mention {word!r}: {errors[0]}"
    if out is not None:
        assert not out.exists(), "a failed run left its output"
        assert not list(out.parent.glob(out.name + ".tmp*")), "a failed run left a temporary file"


@pytest.mark.parametrize("args,words", [
    (["--type", "Q9_9"], ["unknown type", "Q4_K"]),
    (["--type", "Q4_K_M"], ["Q4_K_M", "--pure"]),
    (["--type", "Q8_K"], ["unknown type"]),
    (["--type", "Q4_0", "--keep", "q8_0=output("], ["regular expression"]),
    (["--type", "Q4_0", "--keep", "q8_0"], ["TYPE=REGEX"]),
    (["--type", "Q4_0", "--keep", "iq4_nl=output"], ["iq4_nl"]),
    (["--type", "Q4_0", "--method", "awq"], ["awq", "--calib"]),
    (["--type", "Q4_0", "--method", "gptq", "--calib", "c.txt"], ["c.txt", "calibration text"]),
    (["--type", "Q4_0", "--method", "magic"], ["magic"]),
], ids=["type", "mix", "q8_k", "regex", "keep-syntax", "keep-type", "awq", "gptq", "method"])
def test_bad_options(pagoda, gen_model, tmp_path, args, words):
    out = tmp_path / "out.gguf"
    rc, _, err = pagoda("quantize", gen_model(), out, *args)
    assert_failure(rc, err, out, *words)


def test_bad_files(pagoda, gen_model, tmp_path):
    src = gen_model()
    out = tmp_path / "out.gguf"
    rc, _, err = pagoda("quantize", tmp_path / "missing.gguf", out, "--type", "Q4_0")
    assert_failure(rc, err, out, "missing.gguf")
    bad = tmp_path / "notes.gguf"
    bad.write_text("not a model\n" * 40)
    rc, _, err = pagoda("quantize", bad, out, "--type", "Q4_0")
    assert_failure(rc, err, out, "notes.gguf")
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    rc, _, err = pagoda("quantize", truncated, out, "--type", "Q4_0")
    assert_failure(rc, err, out, "truncated.gguf")
    nodir = tmp_path / "no-such-dir" / "out.gguf"
    rc, _, err = pagoda("quantize", src, nodir, "--type", "Q4_0")
    assert_failure(rc, err, nodir, "no-such-dir")
    rc, _, err = pagoda("quantize", src, src, "--type", "Q4_0")
    assert_failure(rc, err, None, "input")
    rc, _, err = pagoda("quantize", src, tmp_path, "--type", "Q4_0")
    assert_failure(rc, err, None, "directory")
    assert types_of(src)["blk.0.attn_q.weight"] == "F32"  # untouched


def test_non_finite_weights_fail_without_output(pagoda, gen_model, tmp_path):
    src = gen_model()
    reader = GGUFReader(str(src))
    t = next(x for x in reader.tensors if x.name == "blk.1.ffn_up.weight")
    offset = int(t.data_offset) + 4 * (3 * int(t.shape[0]) + 5)  # row 3
    data = bytearray(src.read_bytes())
    data[offset:offset + 4] = np.array([np.nan], np.float32).tobytes()
    bad = tmp_path / "nan.gguf"
    bad.write_bytes(bytes(data))
    out = tmp_path / "out.gguf"
    rc, _, err = pagoda("quantize", bad, out, "--type", "Q8_0", "-t", 2)
    assert_failure(rc, err, out, "blk.1.ffn_up.weight", "row 3", "NaN")
