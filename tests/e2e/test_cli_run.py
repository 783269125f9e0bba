"""End-to-end behaviour of the `pagoda` CLI: `run` and `inspect` on generated models, and
clean failures on bad input (a one-line `error:` message and a non-zero exit, never a
crash, a signal or a C++ exception escaping)."""
from __future__ import annotations

import json
import re
import subprocess

import pytest
from gguf import GGUFReader

VOCAB = 512
CRASH_MARKERS = ("terminate called", "Segmentation fault", "Aborted", "core dumped", "AddressSanitizer",
                 "runtime error:", "std::", "what():")


@pytest.fixture
def gen_model(write_gen_model, tmp_path):
    def make(arch="llama", fmt="F32", name=None, **extra):
        return write_gen_model(tmp_path / (name or f"{arch}-{fmt}.gguf"), arch, fmt, vocab=VOCAB, **extra)
    return make


@pytest.fixture
def pagoda(pagoda_bin):
    def run(*args, timeout=120):
        r = subprocess.run([str(pagoda_bin("pagoda")), *map(str, args)], capture_output=True, timeout=timeout)
        # Generated text may hold raw bytes from byte tokens; decode leniently.
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    return run


def ids_arg(ids) -> str:
    return ",".join(str(i) for i in ids)


# ---- normal operation -------------------------------------------------------------------

def test_run_text_prompt_prints_stats(pagoda, gen_model):
    model = gen_model()
    rc, out, err = pagoda("run", "-m", model, "-p", "hello world", "-n", 8, "--temp", 0, "-t", 2)
    assert rc == 0, err
    assert out.strip(), "no generated text on stdout"
    stats = [line for line in err.splitlines() if "prefill" in line and "decode" in line]
    assert len(stats) == 1, f"expected one stats line on stderr, got:\n{err}"
    for phase in ("prefill", "decode"):
        m = re.search(phase + r"\s+([0-9.]+)\s*tok/s", stats[0])
        assert m and float(m.group(1)) > 0, f"no positive '{phase} N tok/s' in: {stats[0]}"


def test_run_no_stats_and_ids_out(pagoda, gen_model, tmp_path):
    model = gen_model()
    ids_out = tmp_path / "ids.json"
    rc, out, err = pagoda("run", "-m", model, "--prompt-ids", "1,5,9", "-n", 5, "--temp", 0, "--ignore-eos",
                          "-t", 2, "--no-stats", "--ids-out", ids_out)
    assert rc == 0, err
    assert "tok/s" not in err
    ids = json.loads(ids_out.read_text())
    assert ids["prompt_ids"] == [1, 5, 9] and len(ids["generated_ids"]) == 5
    assert all(0 <= t < VOCAB for t in ids["generated_ids"])


def test_sliding_window_blocks_released_or_kept_give_the_same_tokens(pagoda, gen_model, tmp_path):
    """Gemma 3's windowed layers release the KV blocks that left the window (the default);
    over a prompt and output many windows long (window 8) the tokens equal those of a run
    that keeps every position, and inspect counts the smaller KV."""
    model = gen_model("gemma3", "F32", layers=12)
    runs = []
    for flag in ([], ["--disable-hybrid-kv-cache-manager"]):
        ids_out = tmp_path / f"ids{len(flag)}.json"
        rc, out, err = pagoda("run", "-m", model, "--prompt-ids", ids_arg(range(3, 203)), "-n", 100, "--temp", 0,
                              "--ignore-eos", "-t", 2, "--no-stats", "--ids-out", ids_out, *flag)
        assert rc == 0, err
        runs.append(json.loads(ids_out.read_text())["generated_ids"])
    assert len(runs[0]) == 100 and runs[0] == runs[1]
    rc, out, err = pagoda("inspect", model, "-c", 2048)
    assert rc == 0, err
    size = r"([0-9.]+) ([KMG]iB)"
    m = re.search(rf"KV cache {size} \(FP16; sliding-window layers keep their 8-position window and a 512-token prefill chunk, {size} for all", out)
    assert m, out
    unit = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    held, full = float(m.group(1)) * unit[m.group(2)], float(m.group(3)) * unit[m.group(4)]
    # In blocks of 16: 2 global layers hold all 2048 positions, 10 local ones (5 groups of
    # 2) a 512-token prefill chunk plus their window, 34 blocks: (128 * 2 + 5 * 34 * 2) /
    # (128 * 12) of the full size.
    assert held == pytest.approx(full * (128 * 2 + 5 * 34 * 2) / (128 * 12), rel=0.01), out


def test_inspect_reports_active_parameters_of_an_moe_model(pagoda, pagoda_bin, tmp_path):
    model = tmp_path / "moe.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "olmoe", "--kv-heads", "4", "--experts", "8",
                        "--experts-used", "2", "-o", str(model)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    rc, out, err = pagoda("inspect", model)
    assert rc == 0, err
    reader = GGUFReader(str(model))
    total = sum(int(t.n_elements) for t in reader.tensors)
    experts = sum(int(t.n_elements) for t in reader.tensors if t.name.endswith("_exps.weight"))
    m = re.search(r"experts: 8 per layer, 2 per token, each ffn 128 \| parameters ([0-9.]+)M total, ([0-9.]+)M active", out)
    assert m, out
    assert float(m.group(1)) == pytest.approx(total / 1e6, abs=0.06)
    assert float(m.group(2)) == pytest.approx((total - experts + experts * 2 / 8) / 1e6, abs=0.06)


@pytest.mark.parametrize("arch,fmt", [("gemma3", "Q8_0"), ("qwen2", "Q4_0"), ("llama", "F16")])
def test_inspect_reports_arch_formats_params(pagoda, gen_model, arch, fmt):
    model = gen_model(arch, fmt)
    rc, out, err = pagoda("inspect", model)
    assert rc == 0, err
    reader = GGUFReader(str(model))
    n_params = sum(int(t.n_elements) for t in reader.tensors)
    formats = {t.tensor_type.name for t in reader.tensors}
    assert arch in out
    for f in formats:  # the 2-D weights' format and F32 for the norms
        assert re.search(rf"\b{f}\b", out), f"format {f} missing from inspect output:\n{out}"
    assert re.search(r"param", out, re.I) and str(n_params) in out, \
        f"parameter count {n_params} missing from inspect output:\n{out}"


def test_inspect_stories260k(pagoda, shared_model):
    rc, out, err = pagoda("inspect", shared_model("stories260K.gguf"))
    assert rc == 0, err
    assert "llama" in out and "F32" in out
    n_params = sum(int(t.n_elements) for t in GGUFReader(str(shared_model("stories260K.gguf"))).tensors)
    assert str(n_params) in out


def patched_copy(src, dst, key: bytes, old: bytes, new: bytes):
    """A copy of src whose string value `old` after `key` becomes `new` (same length)."""
    b = bytearray(src.read_bytes())
    i = b.index(old, b.index(key))
    b[i:i + len(old)] = new
    dst.write_bytes(bytes(b))
    return dst


def test_inspect_names_what_is_unsupported(pagoda, gen_model, tmp_path):
    model = gen_model("llama", "Q8_0")
    rc, out, _ = pagoda("inspect", model)
    assert rc == 0 and re.search(r"^tokenizer: llama \| 512 tokens", out, re.M), out
    arch = patched_copy(model, tmp_path / "arch.gguf", b"general.architecture", b"llama", b"mamba")
    rc, out, _ = pagoda("inspect", arch)
    lines = [l for l in out.splitlines() if "not supported" in l]
    assert rc == 1 and len(lines) == 1 and "architecture 'mamba'" in lines[0] and str(arch) in lines[0], out
    tok = patched_copy(model, tmp_path / "tok.gguf", b"tokenizer.ggml.model", b"llama", b"xxxxx")
    rc, out, _ = pagoda("inspect", tok)
    lines = [l for l in out.splitlines() if l.startswith("tokenizer:")]
    assert rc == 0 and lines == [l for l in lines if "cannot tokenize" in l and "'xxxxx'" in l and str(tok) in l], out
    assert re.search(r"^model: llama", out, re.M), out  # the model itself still loads


# ---- bad input: one clear line, non-zero exit, no crash ---------------------------------

def assert_clean_failure(rc: int, out: str, err: str, *must_mention: str):
    assert rc != 0, f"expected failure, got exit 0; stderr:\n{err}"
    assert 0 < rc < 128, f"exit code {rc}: killed by a signal or crashed; stderr:\n{err}"
    for marker in CRASH_MARKERS:
        assert marker not in err, f"crash marker {marker!r} in stderr:\n{err}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, "no error message on stderr"
    # the message is one line (CLI11 may add a 'Run with --help' hint below a flag error)
    msg = lines[0]
    assert len(lines) == 1 or (len(lines) == 2 and "--help" in lines[1]), f"expected a one-line error:\n{err}"
    for word in must_mention:
        assert word.lower() in msg.lower(), f"error message should mention {word!r}: {msg}"


def test_nonexistent_model(pagoda, tmp_path):
    missing = tmp_path / "no-such-model.gguf"
    for cmd in (("run", "-m", missing, "-p", "hi", "-n", 2), ("inspect", missing)):
        assert_clean_failure(*pagoda(*cmd), "no-such-model.gguf")


def test_model_is_a_directory(pagoda, tmp_path):
    assert_clean_failure(*pagoda("run", "-m", tmp_path, "-p", "hi", "-n", 2), str(tmp_path.name))


def test_not_a_gguf_file(pagoda, tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("this is a text file, not a model\n" * 20)
    for cmd in (("run", "-m", bad, "-p", "hi", "-n", 2), ("inspect", bad)):
        assert_clean_failure(*pagoda(*cmd), "notes.gguf", "gguf")


# Cut points: empty, inside the magic, version, counts, the metadata, the tensor infos, the
# data (half the file), and one byte short.
CUTS = ["0", "3", "10", "30", "200", "2000", "half", "minus1"]


@pytest.mark.parametrize("cut", CUTS)
def test_truncated_gguf(pagoda, gen_model, tmp_path, cut):
    data = gen_model(fmt="Q8_0").read_bytes()
    n = {"half": len(data) // 2, "minus1": len(data) - 1}.get(cut) or int(cut)
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(data[:n])
    for cmd in (("run", "-m", bad, "--prompt-ids", "1,2", "-n", 2), ("inspect", bad)):
        assert_clean_failure(*pagoda(*cmd), "truncated.gguf")


@pytest.mark.parametrize("ids", [[1, 2, VOCAB], [1, 10 * VOCAB], [1, -1]], ids=["vocab", "far", "negative"])
def test_prompt_id_out_of_vocabulary(pagoda, gen_model, ids):
    rc, out, err = pagoda("run", "-m", gen_model(), "--prompt-ids", ids_arg(ids), "-n", 2, "-t", 2)
    assert_clean_failure(rc, out, err, str(ids[-1]))
    assert "vocab" in err.lower()


def test_prompt_ids_not_numbers(pagoda, gen_model):
    assert_clean_failure(*pagoda("run", "-m", gen_model(), "--prompt-ids", "1,x,3", "-n", 2), "x")


def test_prompt_longer_than_context(pagoda, gen_model):
    ids = [(7 * i) % (VOCAB - 3) + 3 for i in range(40)]
    rc, out, err = pagoda("run", "-m", gen_model(), "--prompt-ids", ids_arg(ids), "-c", 16, "-n", 4, "-t", 2)
    assert_clean_failure(rc, out, err, "40", "16")


def test_generation_stops_at_context_end(pagoda, gen_model, tmp_path):
    """Not an error: a prompt that fits, with more tokens asked than the context holds."""
    ids_out = tmp_path / "ids.json"
    rc, out, err = pagoda("run", "-m", gen_model(), "--prompt-ids", ids_arg(range(3, 13)), "-c", 16, "-n", 40,
                          "--ignore-eos", "-t", 2, "--ids-out", ids_out)
    assert rc == 0, err
    gen = json.loads(ids_out.read_text())["generated_ids"]
    assert 0 < len(gen) <= 16 - 10 + 1


def test_unknown_flag(pagoda, gen_model):
    assert_clean_failure(*pagoda("run", "-m", gen_model(), "--bogus-flag", "-n", 2), "--bogus-flag")


def test_missing_model_flag(pagoda):
    assert_clean_failure(*pagoda("run", "-p", "hi"), "model")


def test_run_stop_string_ends_generation_where_it_first_appears(pagoda_bin, gen_model, tmp_path):
    """The oracle is the unstopped run's own text: with --stop S, stdout is that text cut
    before S's first occurrence, and generation ends at the token that completed S."""
    model = gen_model()
    def run(*extra, ids_out):
        r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(model), "-p", "hello", "-n", "40", "--temp",
                            "0", "--ignore-eos", "-t", "2", "--ids-out", str(ids_out), *extra],
                           capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return r.stdout, r.stderr.decode(errors="replace"), json.loads(ids_out.read_text())["generated_ids"]
    full, _, full_ids = run(ids_out=tmp_path / "full.json")
    assert full.startswith(b"hello") and full.endswith(b"\n")
    text = full[len(b"hello"):-1]
    stop = text[len(text) // 2:len(text) // 2 + 3]
    assert len(stop) == 3 and stop.isascii(), text
    cut, err, ids = run("--stop", stop.decode(), "--stop", "\x01never", ids_out=tmp_path / "cut.json")
    assert cut == b"hello" + text[:text.find(stop)] + b"\n"
    assert "stop: stop" in err
    assert ids == full_ids[:len(ids)] and len(ids) < len(full_ids)
    # The token that completed the stop string is the last one generated.
    shorter = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(model), "-p", "hello", "-n", str(len(ids) - 1),
                              "--temp", "0", "--ignore-eos", "-t", "2", "--no-stats"], capture_output=True, timeout=120)
    assert stop not in shorter.stdout[len(b"hello"):]
