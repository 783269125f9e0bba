#!/usr/bin/env python3
"""GGUF mutants for hardening the reader and the model loader, and the campaign that runs
`pagoda inspect` and `pagoda run` on them.

    scripts/gguf_mutate.py --pagoda build/bin/pagoda --seeds A.gguf B.gguf --count 6000 [--jobs 2]
    scripts/gguf_mutate.py --pagoda build/bin/pagoda --gen-model build/bin/pagoda-gen-model --count 300

(--gen-model writes the default seeds: tiny llama Q8_0, gemma3 Q4_K, qwen2 Q4_0, phi3 F16,
starcoder2 Q6_K and qwen2moe Q8_0 (experts: 3-D tensors, expert counts) models, each
architecture's own keys and formats.)

Each mutant is a seed file with one structural or directed change, chosen from a
seeded generator so a failure is reproducible from its number:
  - bit flips anywhere in the header (metadata and tensor descriptions) or the data;
  - truncation at a random offset;
  - counts and lengths (tensor count, key count, string and array lengths, n_dims)
    replaced by 0, 1, 2^31, 2^32, 2^63, 2^64-1, the file size and neighbours;
  - value and tensor type ids replaced by other ids, unknown ones included;
  - tensor dimensions and offsets made huge, zero or misaligned;
  - hyper-parameters (block_count, embedding_length, head counts, key_length,
    context_length, sliding_window, rope values, epsilons, ...) set to directed values:
    0, 1, -1, 2^24, 2^30, 2^31-1, 2^32+64, NaN, infinities, and the original +-1;
  - strings given control characters, invalid UTF-8 or their full length in 'A's.

The campaign fails (exit 1) on any mutant where a command was killed by a signal, printed
a sanitizer report or a C++ terminate message, exited with a code other than 0 or 1, or
ran past the timeout. It prints the count of each outcome.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

# GGUF value types (gguf-py's GGUFValueType).
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B", U64: "<Q",
          I64: "<q", F64: "<d"}

CRASH_MARKERS = (b"AddressSanitizer", b"LeakSanitizer", b"UndefinedBehaviorSanitizer", b"runtime error:",
                 b"terminate called", b"Segmentation fault", b"Aborted", b"core dumped", b"what():")

HYPER_KEYS = ("block_count", "embedding_length", "feed_forward_length", "attention.head_count",
              "attention.head_count_kv", "attention.key_length", "attention.value_length", "context_length",
              "attention.sliding_window", "rope.dimension_count", "rope.freq_base", "rope.scaling.factor",
              "rope.scaling.original_context_length", "attention.layer_norm_rms_epsilon",
              "attention.layer_norm_epsilon", "attn_logit_softcapping", "final_logit_softcapping",
              "attention.sliding_window_pattern", "general.alignment", "tokenizer.ggml.bos_token_id",
              "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id", "vocab_size", "expert_count",
              "expert_used_count", "expert_feed_forward_length", "expert_shared_feed_forward_length")
DIRECTED_INTS = (0, 1, 2, 3, 0xFFFFFFFF, 0x7FFFFFFF, 1 << 24, 1 << 30, (1 << 32) + 64, 1 << 40, (1 << 63) - 1,
                 1 << 63, (1 << 64) - 1)
DIRECTED_FLOATS = (0.0, -0.0, -1.0, 1e-45, 1e38, float("nan"), float("inf"), float("-inf"))
HUGE_COUNTS = (0, 1, 2, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, 1 << 40, (1 << 63) - 1, 1 << 63, (1 << 64) - 1)


@dataclass
class Field:
    """A place in the file a mutation can target."""
    kind: str      # "count", "len", "type", "value", "dim", "ndims", "ttype", "offset", "string"
    at: int        # byte offset
    size: int      # bytes
    key: str = ""  # the metadata key, for values
    vtype: int = -1


@dataclass
class Layout:
    fields: list[Field] = field(default_factory=list)
    header_end: int = 0


def parse(b: bytes) -> Layout:
    """Offsets of every count, length, type and value in a well-formed GGUF file."""
    lay = Layout()
    pos = 4
    lay.fields.append(Field("version", pos, 4))
    pos += 4
    lay.fields.append(Field("count", pos, 8, "n_tensors"))
    (n_tensors,) = struct.unpack_from("<Q", b, pos)
    pos += 8
    lay.fields.append(Field("count", pos, 8, "n_kv"))
    (n_kv,) = struct.unpack_from("<Q", b, pos)
    pos += 8

    def string(key: str) -> tuple[int, str]:
        nonlocal pos
        (n,) = struct.unpack_from("<Q", b, pos)
        lay.fields.append(Field("len", pos, 8, key))
        lay.fields.append(Field("string", pos + 8, n, key))
        s = b[pos + 8:pos + 8 + n].decode("utf-8", "replace")
        pos += 8 + n
        return n, s

    def value(t: int, key: str, depth: int = 0) -> None:
        nonlocal pos
        if t == STR:
            string(key)
        elif t == ARR:
            lay.fields.append(Field("type", pos, 4, key))
            (et,) = struct.unpack_from("<I", b, pos)
            lay.fields.append(Field("count", pos + 4, 8, key))
            (n,) = struct.unpack_from("<Q", b, pos + 4)
            pos += 12
            for i in range(n):
                if et in SCALAR and i >= 4:  # the first few elements are targets; skip the rest fast
                    pos += struct.calcsize(SCALAR[et]) * (n - i)
                    break
                value(et, key, depth + 1)
        else:
            if depth == 0:
                lay.fields.append(Field("value", pos, struct.calcsize(SCALAR[t]), key, t))
            pos += struct.calcsize(SCALAR[t])

    for _ in range(n_kv):
        _, key = string("<key>")
        lay.fields.append(Field("type", pos, 4, key))
        (t,) = struct.unpack_from("<I", b, pos)
        pos += 4
        value(t, key)
    for _ in range(n_tensors):
        _, name = string("<tensor>")
        lay.fields.append(Field("ndims", pos, 4, name))
        (nd,) = struct.unpack_from("<I", b, pos)
        pos += 4
        for _ in range(nd):
            lay.fields.append(Field("dim", pos, 8, name))
            pos += 8
        lay.fields.append(Field("ttype", pos, 4, name))
        pos += 4
        lay.fields.append(Field("offset", pos, 8, name))
        pos += 8
    lay.header_end = pos
    return lay


def put_int(m: bytearray, f: Field, v: int) -> None:
    v &= (1 << (8 * f.size)) - 1
    m[f.at:f.at + f.size] = v.to_bytes(f.size, "little")


def mutate(seed: bytes, lay: Layout, rng: random.Random) -> tuple[bytearray, str]:
    m = bytearray(seed)
    kind = rng.choice(["flip", "flip", "flip_data", "truncate", "count", "type", "tensor", "hyper", "hyper", "hyper",
                       "string"])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(lay.header_end)
            m[i] ^= 1 << rng.randrange(8)
        return m, kind
    if kind == "flip_data":
        for _ in range(rng.randint(1, 64)):
            i = rng.randrange(len(m))
            m[i] ^= 1 << rng.randrange(8)
        return m, kind
    if kind == "truncate":
        cut = rng.choice([rng.randrange(lay.header_end + 1), rng.randrange(len(m))])
        return m[:cut], f"truncate@{cut}"
    if kind == "count":
        f = rng.choice([x for x in lay.fields if x.kind in ("count", "len")])
        v = rng.choice(HUGE_COUNTS + (len(seed), len(seed) + 1, int.from_bytes(m[f.at:f.at + f.size], "little") + 1))
        put_int(m, f, v)
        return m, f"count {f.key}={v}"
    if kind == "type":
        f = rng.choice([x for x in lay.fields if x.kind in ("type", "ttype", "version")])
        v = rng.choice(list(range(0, 40)) + [0x7FFFFFFF, 0xFFFFFFFF])
        put_int(m, f, v)
        return m, f"type {f.kind} {f.key}={v}"
    if kind == "tensor":
        f = rng.choice([x for x in lay.fields if x.kind in ("dim", "ndims", "offset")])
        old = int.from_bytes(m[f.at:f.at + f.size], "little")
        v = rng.choice(HUGE_COUNTS + (old + 1, old - 1, old * 2, old + 16, old + 31))
        put_int(m, f, v)
        return m, f"tensor {f.kind} {f.key}={v}"
    if kind == "hyper":
        cands = [x for x in lay.fields if x.kind == "value" and any(x.key.endswith(k) for k in HYPER_KEYS)]
        if not cands:
            cands = [x for x in lay.fields if x.kind == "value"]
        f = rng.choice(cands)
        if f.vtype in (F32, F64):
            v = rng.choice(DIRECTED_FLOATS)
            m[f.at:f.at + f.size] = struct.pack(SCALAR[f.vtype], v)
        else:
            old = int.from_bytes(m[f.at:f.at + f.size], "little")
            v = rng.choice(DIRECTED_INTS + (old + 1, max(old - 1, 0), old * 2))
            put_int(m, f, v)
        return m, f"hyper {f.key}={v}"
    # string: control characters, invalid UTF-8 or all 'A's, same length so the layout holds
    f = rng.choice([x for x in lay.fields if x.kind == "string" and x.size > 0])
    junk = rng.choice([b"\x1b[2J\x1b]0;x\x07", b"\xff\xfe\xc0\xaf", b"\x00", b"A" * f.size, b"\xe2\x80\xae"])
    data = (junk * (f.size // len(junk) + 1))[:f.size]
    m[f.at:f.at + f.size] = data
    return m, f"string {f.key}"


@dataclass
class Outcome:
    n: int
    what: str
    bad: str = ""  # empty: fine


def run_one(pagoda: str, path: str, n: int, what: str, timeout: float) -> Outcome:
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "detect_leaks=1"),
               UBSAN_OPTIONS=os.environ.get("UBSAN_OPTIONS", "print_stacktrace=1"))
    for cmd in ([pagoda, "inspect", path], [pagoda, "run", "-m", path, "--prompt-ids", "1,2", "-n", "2", "-t", "1",
                                            "-c", "64", "--no-stats"]):
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return Outcome(n, what, f"{cmd[1]}: hang (over {timeout} s)")
        out = r.stderr + r.stdout
        marker = next((k for k in CRASH_MARKERS if k in out), None)
        if r.returncode < 0 or r.returncode not in (0, 1) or marker:
            tail = out.decode(errors="replace")[-600:]
            return Outcome(n, what, f"{cmd[1]}: rc {r.returncode} {marker!r}\n{tail}")
    return Outcome(n, what)


SEED_MODELS = (("llama", "Q8_0", 64), ("gemma3", "Q4_K", 256), ("qwen2", "Q4_0", 64), ("phi3", "F16", 64),
               ("starcoder2", "Q6_K", 256), ("qwen2moe", "Q8_0", 64))


def gen_seeds(gen_model: str, folder: str) -> list[str]:
    paths = []
    for arch, fmt, dim in SEED_MODELS:
        path = os.path.join(folder, f"seed-{arch}-{fmt}.gguf")
        subprocess.run([gen_model, "--arch", arch, "--type", fmt, "--dim", str(dim), "--layers", "2", "--heads", "4",
                        "--kv-heads", "2", "--ff", "256", "--vocab", "512", "--ctx", "512", "-o", path],
                       check=True, capture_output=True, timeout=120)
        paths.append(path)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pagoda", required=True)
    ap.add_argument("--seeds", nargs="+", help="well-formed GGUF files to mutate")
    ap.add_argument("--gen-model", help="pagoda-gen-model, to write the default seeds")
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--keep", help="folder to copy failing mutants into")
    a = ap.parse_args()
    if not a.seeds and not a.gen_model:
        ap.error("give --seeds or --gen-model")
    seed_dir = tempfile.TemporaryDirectory(prefix="pagoda-seeds-")
    paths = a.seeds or gen_seeds(a.gen_model, seed_dir.name)
    seeds = [(open(p, "rb").read(), p) for p in paths]
    layouts = [parse(b) for b, _ in seeds]
    bad: list[Outcome] = []
    kinds: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="pagoda-mutants-") as tmp, \
            concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futures = []
        for n in range(a.count):
            rng = random.Random(a.seed * 1_000_003 + n)
            k = n % len(seeds)
            m, what = mutate(seeds[k][0], layouts[k], rng)
            kinds[what.split()[0].split("@")[0]] = kinds.get(what.split()[0].split("@")[0], 0) + 1
            path = os.path.join(tmp, f"m{n}.gguf")
            with open(path, "wb") as f:
                f.write(m)
            futures.append(pool.submit(run_one, a.pagoda, path, n, f"{os.path.basename(seeds[k][1])}: {what}",
                                       a.timeout))
        for fut in concurrent.futures.as_completed(futures):
            o = fut.result()
            if o.bad:
                bad.append(o)
                print(f"mutant {o.n} ({o.what}): {o.bad}", file=sys.stderr)
                if a.keep:
                    os.makedirs(a.keep, exist_ok=True)
                    with open(os.path.join(tmp, f"m{o.n}.gguf"), "rb") as src, \
                            open(os.path.join(a.keep, f"m{o.n}.gguf"), "wb") as dst:
                        dst.write(src.read())
            else:
                os.unlink(os.path.join(tmp, f"m{o.n}.gguf"))
    print(f"{a.count} mutants ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), "
          f"{2 * a.count} runs: {len(bad)} failing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
