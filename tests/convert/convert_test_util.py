"""Helpers of the `pagoda convert` tests: safetensors files read and written with numpy
alone (the format is an 8-byte little-endian header length, a JSON header, raw data), and
the converter run as a subprocess."""
import json
import pathlib
import struct
import subprocess

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path):
    """{name: numpy array} of one file (BF16 widened to float32)."""
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = body[b:end]
        if e["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=DTYPES[e["dtype"]])
        out[name] = arr.reshape(e["shape"])
    return out


def write_safetensors(path, tensors):
    """Writes {name: float32/float16 array} as one safetensors file, data in name order."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}[arr.dtype]
        raw = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-aligned, as the reference writer pads it
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run_convert(pagoda, hf_dir, out, *args, check=True):
    r = subprocess.run([str(pagoda), "convert", str(hf_dir), str(out), *map(str, args)], capture_output=True,
                       timeout=600)
    if check:
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-3000:]
    return r


def gguf_fields(reader):
    """{key: value} of a GGUFReader's metadata (arrays as lists), without the GGUF.* header fields."""
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def gguf_tensor(t):
    """A GGUFReader tensor as float32 in numpy's (outermost-first) order."""
    import gguf
    shape = [int(d) for d in reversed(t.shape)]
    if t.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        return np.asarray(t.data).astype(np.float32).reshape(shape)
    return gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(shape)
