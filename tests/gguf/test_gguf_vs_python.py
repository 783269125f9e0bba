"""Our GGUF reader and writer against the `gguf` Python package (gguf-py, the reference
implementation maintained with llama.cpp).

1. gguf.GGUFWriter writes a file with every value type, nested arrays and tensors of
   several types (quantized ones as raw bytes); `pagoda-gguf-tool dump` must report
   exactly what was written, and agree with gguf.GGUFReader on the layout.
2. `pagoda-gguf-tool copy` (our reader + our writer) must produce a file that
   gguf.GGUFReader reads back equal to the original, metadata and tensor bytes.
3. Truncated and corrupted files must make the tool exit 1 with an error naming the
   file, never crash or die on a signal.

Run from the repo root: PAGODA_BUILD_DIR=build-gguf python3 -m pytest tests/gguf
"""
import filecmp
import json
import math
import random
import subprocess

import gguf
import numpy as np
import pytest

from oracles import CACHE, import_oracle, oracle_missing

TOOL = "pagoda-gguf-tool"
VT = gguf.GGUFValueType
QT = gguf.GGMLQuantizationType


def arr(elem, values):
    """An array as the tool dumps it (and as the spec below describes it)."""
    return {"elem_type": elem, "values": values}


# (key, type, value) in file order. Nested arrays only hold element types gguf-py infers
# from Python values (INT32, FLOAT32, BOOL, STRING, ARRAY), as it takes no inner type.
SPEC = [
    ("t.u8", "UINT8", 200),
    ("t.i8", "INT8", -100),
    ("t.u16", "UINT16", 65535),
    ("t.i16", "INT16", -32768),
    ("t.u32", "UINT32", 4294967295),
    ("t.i32", "INT32", -2147483648),
    ("t.f32", "FLOAT32", 0.1),
    ("t.f32.inf", "FLOAT32", -math.inf),
    ("t.bool", "BOOL", True),
    ("t.bool.false", "BOOL", False),
    ("t.string", "STRING", 'h\u00e9llo "q"\n\t\\ \u2581the \U0001f600'),
    ("t.u64", "UINT64", 2**64 - 1),
    ("t.i64", "INT64", -(2**63)),
    ("t.f64", "FLOAT64", math.pi),
    ("t.arr.u8", "ARRAY", arr("UINT8", [0, 1, 255])),
    ("t.arr.i8", "ARRAY", arr("INT8", [-128, 127])),
    ("t.arr.u16", "ARRAY", arr("UINT16", [7])),
    ("t.arr.i16", "ARRAY", arr("INT16", [-1, 2, -3])),
    ("t.arr.u32", "ARRAY", arr("UINT32", [1, 4000000000])),
    ("t.arr.i32", "ARRAY", arr("INT32", [-5, 6])),
    ("t.arr.f32", "ARRAY", arr("FLOAT32", [1.5, -0.25, 3.0e38])),
    ("t.arr.bool", "ARRAY", arr("BOOL", [True, False, True])),
    ("t.arr.string", "ARRAY", arr("STRING", ["<s>", "", "\u2581the", "a\"b\\c"])),
    ("t.arr.u64", "ARRAY", arr("UINT64", [2**63])),
    ("t.arr.i64", "ARRAY", arr("INT64", [-(2**62), 5])),
    ("t.arr.f64", "ARRAY", arr("FLOAT64", [1e-300, -2.5])),
    ("t.arr.nested", "ARRAY", arr("ARRAY", [arr("INT32", [1, 2]), arr("INT32", [3])])),
    ("t.arr.nested.str", "ARRAY", arr("ARRAY", [arr("STRING", ["x"]), arr("STRING", ["y", "zz"])])),
    ("t.arr.nested3", "ARRAY",
     arr("ARRAY", [arr("ARRAY", [arr("FLOAT32", [0.5]), arr("FLOAT32", [1.0, 2.0])])])),
]


def plain(value):
    """The Python value gguf-py takes for a spec value."""
    if isinstance(value, dict):
        return [plain(v) for v in value["values"]]
    return value


# (name, numpy shape, how it is stored). Raw quantized tensors are given as bytes per row.
def make_tensors():
    rng = np.random.default_rng(1234)
    raw = lambda rows, row_bytes: rng.integers(0, 256, size=(rows, row_bytes), dtype=np.uint8)  # noqa: E731
    return [
        ("token_embd.weight", rng.standard_normal((5, 8)).astype(np.float32), None),
        ("blk.0.attn_norm.weight", rng.standard_normal(7).astype(np.float16), None),
        ("blk.0.f64", rng.standard_normal((2, 3)).astype(np.float64), None),
        ("blk.0.i8", rng.integers(-128, 128, (3, 5), dtype=np.int8), None),
        ("blk.0.i16", rng.integers(-1000, 1000, (4,), dtype=np.int16), None),
        ("blk.0.i32", rng.integers(-10**6, 10**6, (2, 2, 2, 2), dtype=np.int32), None),
        ("blk.0.i64", rng.integers(-10**12, 10**12, (3,), dtype=np.int64), None),
        ("blk.0.attn_q.weight", raw(3, 2 * 34), QT.Q8_0),      # 3 rows of 64 values
        ("blk.0.q4_0", raw(1, 18), QT.Q4_0),                   # 1 row of 32 values
        ("blk.0.ffn_up.weight", raw(2, 144), QT.Q4_K),         # 2 rows of 256 values
        ("blk.0.ffn_down.weight", raw(4, 2 * 210), QT.Q6_K),   # 4 rows of 512 values
        ("blk.0.q2_k", raw(1, 84), QT.Q2_K),
        ("blk.0.bf16", raw(3, 2 * 6), QT.BF16),                # 3 rows of 6 values
    ]


def write_with_gguf_py(path):
    w = gguf.GGUFWriter(str(path), arch="testarch")
    for key, vtype, value in SPEC:
        if vtype == "ARRAY":
            w.add_key_value(key, plain(value), VT.ARRAY, sub_type=VT[value["elem_type"]])
        else:
            w.add_key_value(key, value, VT[vtype])
    for name, data, raw_dtype in make_tensors():
        w.add_tensor(name, data, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def same(vtype, got, want):
    """Compares one dumped value with the spec, FLOAT32 at float32 precision."""
    if vtype == "ARRAY":
        return (got["elem_type"] == want["elem_type"]
                and len(got["values"]) == len(want["values"])
                and all(same(want["elem_type"], g, w) for g, w in zip(got["values"], want["values"])))
    if vtype == "FLOAT32":
        return np.float32(got) == np.float32(want)
    if vtype == "FLOAT64":
        return float(got) == float(want)
    return type(got) is type(want) and got == want


def run_tool(pagoda_bin, *args):
    return subprocess.run([str(pagoda_bin(TOOL)), *map(str, args)], capture_output=True,
                          timeout=60)


def dump(pagoda_bin, path):
    r = run_tool(pagoda_bin, "dump", path)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.gguf"
    write_with_gguf_py(path)
    return path


def test_dump_matches_what_gguf_py_wrote(pagoda_bin, sample):
    d = dump(pagoda_bin, sample)
    reader = gguf.GGUFReader(str(sample))
    assert d["version"] == 3
    assert d["alignment"] == 32
    assert d["file_size"] == sample.stat().st_size

    # Metadata: gguf-py puts general.architecture first, then ours in order.
    meta = d["metadata"]
    assert [m["key"] for m in meta] == ["general.architecture"] + [k for k, _, _ in SPEC]
    assert meta[0] == {"key": "general.architecture", "type": "STRING", "value": "testarch"}
    for m, (key, vtype, value) in zip(meta[1:], SPEC):
        assert m["type"] == vtype, key
        assert same(vtype, m["value"], value), (key, m["value"], value)
    # And the reader agrees on the order and top-level types.
    fields = [f for name, f in reader.fields.items() if not name.startswith("GGUF.")]
    assert [f.name for f in fields] == [m["key"] for m in meta]
    assert [f.types[0].name for f in fields] == [m["type"] for m in meta]

    # Tensors: names, types, shapes (ne[0] first, as gguf-py's reader reports them),
    # absolute offsets, sizes, and the bytes themselves.
    raw = sample.read_bytes()
    assert len(d["tensors"]) == len(reader.tensors) == len(make_tensors())
    for t, rt, (name, data, raw_dtype) in zip(d["tensors"], reader.tensors, make_tensors()):
        assert t["name"] == rt.name == name
        assert t["type"] == rt.tensor_type.name
        assert t["type_id"] == int(rt.tensor_type)
        assert t["shape"] == [int(x) for x in rt.shape]
        assert d["data_offset"] + t["offset"] == rt.data_offset
        assert t["nbytes"] == rt.n_bytes == data.nbytes
        assert t["offset"] % 32 == 0
        assert t["fnv1a64"] == fnv1a64(raw[rt.data_offset:rt.data_offset + rt.n_bytes])
        assert t["fnv1a64"] == fnv1a64(data.tobytes())


def field_bytes(field):
    """The exact encoded bytes of a field (key and value), for byte-level comparison."""
    return b"".join(p.tobytes() for p in field.parts)


def assert_same_gguf(a_path, b_path):
    """Every field and tensor of two files equal as gguf-py reads them."""
    a, b = gguf.GGUFReader(str(a_path)), gguf.GGUFReader(str(b_path))
    assert list(a.fields) == list(b.fields)
    for name in a.fields:
        fa, fb = a.fields[name], b.fields[name]
        assert fa.types == fb.types, name
        assert field_bytes(fa) == field_bytes(fb), name
    assert len(a.tensors) == len(b.tensors)
    for ta, tb in zip(a.tensors, b.tensors):
        assert ta.name == tb.name
        assert ta.tensor_type == tb.tensor_type
        assert list(ta.shape) == list(tb.shape)
        assert ta.n_bytes == tb.n_bytes
        assert np.array_equal(np.asarray(ta.data).view(np.uint8), np.asarray(tb.data).view(np.uint8)), ta.name


def test_copy_reads_back_equal_in_gguf_py(pagoda_bin, sample, tmp_path):
    out = tmp_path / "copy.gguf"
    r = run_tool(pagoda_bin, "copy", sample, out)
    assert r.returncode == 0, r.stderr.decode()
    assert_same_gguf(sample, out)
    # Both writers lay files out the same way (v3, 32-byte alignment, padding after
    # every tensor), so the copy is byte for byte the original.
    assert out.read_bytes() == sample.read_bytes()
    # And the copy dumps the same as the original, apart from its path.
    da, db = dump(pagoda_bin, sample), dump(pagoda_bin, out)
    da.pop("path"), db.pop("path")
    assert da == db


def test_copy_with_custom_alignment(pagoda_bin, tmp_path):
    src = tmp_path / "aligned.gguf"
    w = gguf.GGUFWriter(str(src), arch="testarch")
    w.add_custom_alignment(64)
    w.add_array("tokens", ["a", "b"])
    w.add_tensor("x", np.arange(10, dtype=np.float32))
    w.add_tensor("y", np.arange(3, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    d = dump(pagoda_bin, src)
    assert d["alignment"] == 64
    assert [t["offset"] for t in d["tensors"]] == [0, 64]
    out = tmp_path / "aligned-copy.gguf"
    r = run_tool(pagoda_bin, "copy", src, out)
    assert r.returncode == 0, r.stderr.decode()
    assert_same_gguf(src, out)


def expect_clean_failure(pagoda_bin, path, tmp_path):
    r = run_tool(pagoda_bin, "dump", path)
    assert r.returncode == 1, f"exit {r.returncode}: {r.stderr.decode()}"
    err = r.stderr.decode()
    assert err.startswith(f"error: {path}: "), err
    out = tmp_path / "never.gguf"
    r = run_tool(pagoda_bin, "copy", path, out)
    assert r.returncode == 1, f"copy exit {r.returncode}: {r.stderr.decode()}"
    assert not out.exists()


def test_truncated_files_fail_cleanly(pagoda_bin, sample, tmp_path):
    raw = sample.read_bytes()
    reader = gguf.GGUFReader(str(sample))
    data_end = max(t.data_offset + t.n_bytes for t in reader.tensors)
    header_end = min(t.data_offset for t in reader.tensors)
    # Every cut in the first 256 bytes (header and first keys), every 7th through the
    # rest of the metadata and tensor descriptions, and a spread through the data.
    cuts = sorted(set(list(range(0, 256)) + list(range(256, header_end, 7)) +
                      list(np.linspace(header_end, data_end - 1, 40).astype(int))))
    bad = tmp_path / "cut.gguf"
    for n in cuts:
        bad.write_bytes(raw[:n])
        r = run_tool(pagoda_bin, "dump", bad)
        assert r.returncode == 1, f"cut at {n}: exit {r.returncode}: {r.stderr.decode()}"
        assert r.stderr.decode().startswith(f"error: {bad}: "), f"cut at {n}: {r.stderr.decode()}"
    expect_clean_failure(pagoda_bin, bad, tmp_path)
    # Cutting only the trailing padding after the last tensor leaves a valid file.
    bad.write_bytes(raw[:data_end])
    assert run_tool(pagoda_bin, "dump", bad).returncode == 0


def test_corrupted_headers_never_crash(pagoda_bin, sample, tmp_path):
    """Random corruption of the metadata and tensor descriptions: the tool may accept the
    file (a changed character in a string is still valid) but must never crash."""
    raw = sample.read_bytes()
    reader = gguf.GGUFReader(str(sample))
    header_end = min(t.data_offset for t in reader.tensors)
    rng = random.Random(42)
    bad = tmp_path / "corrupt.gguf"
    failures = 0
    for _ in range(300):
        b = bytearray(raw)
        at = rng.randrange(header_end)
        kind = rng.randrange(3)
        if kind == 0:
            b[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            b[at] = rng.randrange(256)
        else:  # a huge little-endian count or length
            b[at:at + 8] = rng.choice([2**63, 2**64 - 1, 2**40, 2**32 + 1]).to_bytes(8, "little")
            b = b[:len(raw)]
        bad.write_bytes(bytes(b))
        r = run_tool(pagoda_bin, "dump", bad)
        assert r.returncode in (0, 1), f"offset {at}: exit {r.returncode}: {r.stderr.decode()}"
        if r.returncode == 1:
            failures += 1
            assert r.stderr.decode().startswith(f"error: {bad}: "), r.stderr.decode()
        else:
            json.loads(r.stdout)
    assert failures > 100  # most corruptions of a header are detected


@pytest.mark.parametrize("patch, field", [
    (lambda b: b.__setitem__(slice(0, 4), b"GGUG"), "header magic"),
    (lambda b: b.__setitem__(slice(4, 8), (1).to_bytes(4, "little")), "version 1"),
    (lambda b: b.__setitem__(slice(4, 8), (3).to_bytes(4, "big")), "big-endian"),
    (lambda b: b.__setitem__(slice(8, 16), (2**60).to_bytes(8, "little")), "tensor_count"),
    (lambda b: b.__setitem__(slice(16, 24), (2**60).to_bytes(8, "little")), "metadata_kv_count"),
])
def test_header_errors_name_the_field(pagoda_bin, sample, tmp_path, patch, field):
    b = bytearray(sample.read_bytes())
    patch(b)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(bytes(b))
    expect_clean_failure(pagoda_bin, bad, tmp_path)
    assert field in run_tool(pagoda_bin, "dump", bad).stderr.decode()


def test_usage(pagoda_bin):
    assert run_tool(pagoda_bin).returncode == 2
    assert run_tool(pagoda_bin, "dump").returncode == 2
    r = run_tool(pagoda_bin, "dump", "/nonexistent/x.gguf")
    assert r.returncode == 1 and "/nonexistent/x.gguf" in r.stderr.decode()


@pytest.fixture(scope="module")
def gemma_model():
    """Gemma 3 270M Q4_K_M as `pagoda pull` leaves it in the cache."""
    path = CACHE / "models" / "gemma-3-270m-q4_k_m.gguf"
    if not path.exists():
        oracle_missing(f"{path} is missing; scripts/fetch_model (pagoda pull gemma-3-270m) fetches it")
    return path


def test_real_model_dump_and_copy(pagoda_bin, gemma_model, tmp_path):
    d = dump(pagoda_bin, gemma_model)
    reader = gguf.GGUFReader(str(gemma_model))
    fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert [m["key"] for m in d["metadata"]] == list(fields)
    for m in d["metadata"]:
        f = fields[m["key"]]
        assert m["type"] == f.types[0].name
        if m["type"] == "ARRAY":
            assert m["value"]["elem_type"] == f.types[1].name
            got, want = m["value"]["values"], f.contents()
            assert len(got) == len(want)
            if f.types[1] in (VT.STRING, VT.INT32, VT.UINT32):
                assert got == want, m["key"]
            else:
                assert np.array_equal(np.float32(got), np.float32(want)), m["key"]
        else:
            assert same(m["type"], m["value"], f.contents()), m["key"]
    assert len(d["tensors"]) == len(reader.tensors)
    for t, rt in zip(d["tensors"], reader.tensors):
        assert (t["name"], t["type"], t["shape"], d["data_offset"] + t["offset"], t["nbytes"]) == \
            (rt.name, rt.tensor_type.name, [int(x) for x in rt.shape], rt.data_offset, rt.n_bytes)

    # llama.cpp wrote this file with the same layout rules as ours, so the copy must be
    # byte for byte the original: stronger than re-reading it with gguf-py, and much
    # faster on a 262k-token vocabulary.
    out = tmp_path / "gemma-copy.gguf"
    r = run_tool(pagoda_bin, "copy", gemma_model, out)
    assert r.returncode == 0, r.stderr.decode()
    assert filecmp.cmp(gemma_model, out, shallow=False)
