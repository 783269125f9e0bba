#!/usr/bin/env python3
"""Reads Pagoda's KL base files: the cache `pagoda perplexity --kl-base MODEL` writes and the
distillation dump `pagoda distill-dump` writes (format: src/eval/kl_base_file.h).

As a library (numpy only):

    from read_kl_base import read_kl_base
    header, rows = read_kl_base("teacher.dump")
    for row in rows:          # one per scored position, chunk after chunk
        row.ids, row.logprobs, row.tail, row.entropy, row.nll, row.argmax

As a command, a summary (or every row with --rows):

    scripts/read_kl_base.py teacher.dump [--rows]

Top-k rows hold the k most likely tokens (ascending ids) with their log-probabilities, the
probability of all the other tokens together (`tail`) and the whole distribution's entropy
in nats; cache rows hold every token above log-probability -16 and no tail (None).
"""
from __future__ import annotations

import argparse
import dataclasses
import struct
import sys
from pathlib import Path
from typing import Iterator

import numpy as np

MAGIC = b"PGDKLBAS"
DENSE, SPARSE, TOP_K = 0, 1, 2


@dataclasses.dataclass
class Header:
    version: int
    n_vocab: int
    n_ctx: int
    n_chunks: int
    rows_per_chunk: int
    top_k: int
    key: int
    vocab_hash: int | None
    tokens: np.ndarray  # int32, n_chunks * n_ctx

    @property
    def rows(self) -> int:
        return self.n_chunks * self.rows_per_chunk


@dataclasses.dataclass
class Row:
    nll: float          # exact -log p(the token that followed)
    argmax: int
    ids: np.ndarray     # uint32, ascending
    logprobs: np.ndarray  # float64, one per id (16-bit grid: within 1.3e-4 nats)
    tail: float | None  # top-k rows: probability of every token not in ids
    entropy: float | None


def read_kl_base(path: str | Path) -> tuple[Header, Iterator[Row]]:
    f = open(path, "rb")
    if f.read(8) != MAGIC:
        raise ValueError(f"{path} is not a Pagoda KL base file")
    version, n_vocab, n_ctx, n_chunks, rows_per_chunk, top_k = struct.unpack("<6I", f.read(24))
    if version not in (1, 2):
        raise ValueError(f"{path}: version {version} is not 1 or 2")
    (key,) = struct.unpack("<Q", f.read(8))
    vocab_hash = struct.unpack("<Q", f.read(8))[0] if version == 2 else None
    tokens = np.frombuffer(f.read(4 * n_ctx * n_chunks), dtype="<i4")
    header = Header(version, n_vocab, n_ctx, n_chunks, rows_per_chunk, top_k if version == 2 else 0, key,
                    vocab_hash, tokens)

    def rows() -> Iterator[Row]:
        with f:
            for _ in range(header.rows):
                lo, step, nll, argmax, layout, n = struct.unpack("<3fiII", f.read(24))
                ids = np.frombuffer(f.read(4 * n), dtype="<u4") if layout != DENSE else None
                codes = np.frombuffer(f.read(2 * n), dtype="<u2").astype(np.float64)
                tail = entropy = None
                if layout == TOP_K:
                    tail, entropy = struct.unpack("<2f", f.read(8))
                if ids is None:  # dense: code 0 means dropped
                    ids = np.nonzero(codes)[0].astype(np.uint32)
                    codes = codes[ids]
                logprobs = lo + (codes - 1) * step
                yield Row(float(nll), int(argmax), ids, logprobs, tail, entropy)

    return header, rows()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--rows", action="store_true", help="print every row's top tokens")
    a = ap.parse_args()
    h, rows = read_kl_base(a.file)
    kind = f"distillation dump, top {h.top_k}" if h.top_k else "KL base cache"
    print(f"{a.file}: {kind}, vocabulary {h.n_vocab}, {h.n_chunks} chunks of {h.n_ctx}, {h.rows} rows")
    tails = []
    for i, r in enumerate(rows):
        if r.tail is not None:
            tails.append(r.tail)
        if a.rows:
            top = np.argsort(-r.logprobs)[:5]
            print(f"{i}: nll {r.nll:.4f} argmax {r.argmax} tail {r.tail} "
                  + " ".join(f"{int(r.ids[j])}:{r.logprobs[j]:.3f}" for j in top))
    if tails:
        print(f"tail probability: mean {np.mean(tails):.4f}, max {np.max(tails):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
