"""Hostile files and options through the CLI: hyper-parameters that would size huge
allocations or overflow, metadata strings that would drive the terminal, and option values
out of range. Each gets one clear `error:` line and exit code 1 (never a signal, an
uncaught exception or a silently different value)."""
from __future__ import annotations

import struct

import pytest

from e2e.test_cli_run import assert_clean_failure, gen_model, pagoda  # noqa: F401 (fixtures)


def patched_u32(src, dst, key: bytes, value: int):
    """A copy of src whose UINT32 value of `key` becomes `value`."""
    b = bytearray(src.read_bytes())
    at = b.index(key) + len(key)
    assert struct.unpack_from("<I", b, at)[0] == 4, "the key is not a UINT32"
    struct.pack_into("<I", b, at + 4, value)
    dst.write_bytes(bytes(b))
    return dst


def with_string(src, dst, key: str, value: bytes):
    """A copy of src with one more string key (the gguf package writes it)."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    r = GGUFReader(str(src))
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = GGUFWriter(str(dst), arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.alignment"):
            continue
        w.add_key_value(name, field.contents(), field.types[0], field.types[-1] if len(field.types) > 1 else None)
    w.add_key_value(key, value, GGUFValueType.STRING)
    for t in r.tensors:
        w.add_tensor(t.name, t.data)  # F32 models only: the array's shape is the tensor's
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


@pytest.mark.parametrize("layers", [100_000_000, 1 << 30, 1 << 24])
def test_huge_block_count_is_one_clear_error(pagoda, gen_model, tmp_path, layers):
    bad = patched_u32(gen_model(fmt="Q8_0"), tmp_path / "layers.gguf", b"llama.block_count", layers)
    for cmd in (("run", "-m", bad, "--prompt-ids", "1,2", "-n", 2), ("inspect", bad)):
        rc, out, err = pagoda(*cmd)
        if cmd[0] == "inspect":  # inspect prints the metadata, then says why the model cannot run
            assert rc == 1 and "block_count" in out and "Aborted" not in err, (rc, out[-400:], err)
        else:
            assert_clean_failure(rc, out, err, "block_count")


def test_huge_sliding_window_is_refused(pagoda, gen_model, tmp_path):
    bad = patched_u32(gen_model("gemma3", "Q8_0"), tmp_path / "window.gguf", b"gemma3.attention.sliding_window",
                      (1 << 31) - 1)
    assert_clean_failure(*pagoda("run", "-m", bad, "--prompt-ids", "1,2", "-n", 2), "sliding_window", "range")


def test_inspect_escapes_control_characters_from_the_file(pagoda, gen_model, tmp_path):
    hostile = b"\x1b]0;pwned\x07\x1b[2J\x1b[H" + b"\xff\xfe" + b"A" * 5000
    model = with_string(gen_model(), tmp_path / "hostile.gguf", "general.description", hostile)
    rc, out, err = pagoda("inspect", model)
    assert rc == 0, err
    line = next(l for l in out.splitlines() if "general.description" in l)
    assert "\x1b" not in out and "\x07" not in out, "a control character reached the terminal"
    assert "\\x1b]0;pwned\\x07" in line and "\\xff\\xfe" in line, line
    assert len(line) < 400 and f"({len(hostile)} bytes)" in line, line


@pytest.mark.parametrize("flag,value", [("--temp", "nan"), ("--temp", "inf"), ("--top-p", "2"), ("--min-p", "-1"),
                                        ("--repeat-penalty", "0"), ("--threads", "-3"), ("--ctx-size", "-1")])
def test_sampling_and_size_options_are_range_checked(pagoda, gen_model, flag, value):
    assert_clean_failure(*pagoda("run", "-m", gen_model(), "-p", "hi", "-n", 2, flag, value), flag)


def test_prompt_file_that_is_a_directory(pagoda, gen_model, tmp_path):
    assert_clean_failure(*pagoda("run", "-m", gen_model(), "-f", tmp_path, "-n", 2), "--file")


@pytest.mark.parametrize("budget,words", [("99999T", ("available",)), ("1e30", ("larger than",)),
                                          ("1K", ("kv-cache-memory", "block")), ("-1G", ("positive",))])
def test_kv_cache_budgets_are_checked(pagoda, gen_model, budget, words):
    assert_clean_failure(*pagoda("run", "-m", gen_model(), "-p", "hi", "-n", 2, "--kv-cache-memory", budget), *words)


@pytest.mark.parametrize("url,words", [("ftp://127.0.0.1:8080", ("scheme", "ftp")), ("127.0.0.1:8080", ("http://",)),
                                       ("http:///v1", ("host",))])
def test_bench_serve_refuses_base_urls_it_cannot_use(pagoda, url, words):
    assert_clean_failure(*pagoda("bench", "serve", "--base-url", url, "--num-prompts", 1), *words)


@pytest.mark.parametrize("flag,value", [("--port", "65536"), ("--port", "-1"), ("--max-body-mib", str(1 << 44)),
                                        ("--max-queued-requests", "0"), ("--max-tokens-limit", "-5")])
def test_serve_options_are_range_checked(pagoda, gen_model, flag, value):
    # Refused while parsing, before the model loads or a socket is bound.
    assert_clean_failure(*pagoda("serve", "-m", gen_model(), flag, value, timeout=30), flag)
