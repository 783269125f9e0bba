#!/usr/bin/env python3
"""llama.cpp as the reference for Pagoda's tokenizer and greedy decoding.

Uses the ctypes bindings (llama_cpp/llama_cpp.py) from the llama-cpp-python sdist that
scripts/build_llamacpp extracted, loaded against the libllama.so that script built, so
nothing is compiled twice and the bindings match the library exactly. Only the low-level
module is imported (the package's __init__ pulls in the high-level API and its extra
dependencies, which we neither need nor want between us and the C API).

Commands (JSON on stdout, llama.cpp's own log on stderr only with -v):

  tokenize MODEL TEXT [--no-add-special] [--no-parse-special]
      -> {"ids": [...], "pieces": [...]}
      add_special: prepend BOS (etc.) when the model asks for it (default on).
      parse_special: text like "<start_of_turn>" becomes the special token rather than
      plain text (default on, as llama-cli does for prompts).

  detokenize MODEL --ids 1,2,3 [--no-special]
      -> {"text": "...", "pieces": [...]}

  greedy MODEL (--prompt-ids 1,2,3 | --prompt TEXT) -n N [--logits-out F.npy]
         [--prompt-logits-out F.npy] [-t 2] [--ctx C] [--kv-type f16|f32] [--flash-attn]
      -> {"prompt_ids", "generated_ids", "logits": path, "n_vocab", "text", "config"}
      logits[i] (float32, shape [N, n_vocab]) is the row whose argmax is generated_ids[i]:
      row 0 comes from the last prompt position, row i from feeding generated_ids[i-1].
      The argmax is ours (numpy, first index on ties), so no sampler config can interfere;
      EOS does not stop generation (exactly N tokens are produced).

Locating llama.cpp (first match wins):
  LLAMACPP_BIN    dir with libllama.so and libggml*.so
                  (default: newest $PAGODA_CACHE/llama.cpp-build-*/bin)
  LLAMACPP_SDIST  extracted sdist dir holding llama_cpp/ (default: the one recorded by
                  build_llamacpp in <build>/SDIST_SRC, else $PAGODA_CACHE/sdist/llama_cpp_python-<v>)
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

CACHE = Path(os.environ.get("PAGODA_CACHE", Path.home() / ".cache" / "pagoda"))

GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1


def _version_key(p: str):
    v = p.rsplit("-", 1)[-1] if "build-" in p else p
    return [int(x) if x.isdigit() else x for x in v.replace("/bin", "").split(".")]


def find_llamacpp() -> tuple[Path, Path]:
    """Return (bin_dir, sdist_dir)."""
    bin_dir = os.environ.get("LLAMACPP_BIN")
    if bin_dir:
        bin_path = Path(bin_dir)
    else:
        builds = sorted(glob.glob(str(CACHE / "llama.cpp-build-*")), key=_version_key)
        builds = [b for b in builds if (Path(b) / "bin" / "libllama.so").exists()]
        if not builds:
            sys.exit(f"llamacpp_oracle: no llama.cpp build under {CACHE}; run scripts/build_llamacpp")
        bin_path = Path(builds[-1]) / "bin"
    if not (bin_path / "libllama.so").exists():
        sys.exit(f"llamacpp_oracle: {bin_path}/libllama.so not found")

    sdist = os.environ.get("LLAMACPP_SDIST")
    if sdist:
        sdist_path = Path(sdist)
    else:
        rec = bin_path.parent / "SDIST_SRC"
        if rec.exists():
            sdist_path = Path(rec.read_text().strip())
        else:
            version = bin_path.parent.name.replace("llama.cpp-build-", "")
            sdist_path = CACHE / "sdist" / f"llama_cpp_python-{version}"
    if not (sdist_path / "llama_cpp" / "llama_cpp.py").exists():
        sys.exit(f"llamacpp_oracle: {sdist_path}/llama_cpp/llama_cpp.py not found")
    return bin_path, sdist_path


def load_bindings():
    """Import llama_cpp.llama_cpp (the ctypes layer) against our libllama.so."""
    if "llama_cpp.llama_cpp" in sys.modules:
        return sys.modules["llama_cpp.llama_cpp"]
    bin_path, sdist_path = find_llamacpp()
    # This version's loader (llama_cpp.py) honours LLAMA_CPP_LIB_PATH: a directory in
    # which it opens lib<llama>.so. libllama.so finds libggml*.so through its RUNPATH
    # (the build's bin dir); preload them anyway so a relocated build still works.
    os.environ["LLAMA_CPP_LIB_PATH"] = str(bin_path)
    for dep in ("libggml-base.so", "libggml-cpu.so", "libggml.so"):
        p = bin_path / dep
        if p.exists():
            ctypes.CDLL(str(p), mode=ctypes.RTLD_GLOBAL)
    # A stub package, so that `import llama_cpp.llama_cpp` skips llama_cpp/__init__.py.
    pkg = types.ModuleType("llama_cpp")
    pkg.__path__ = [str(sdist_path / "llama_cpp")]
    sys.modules["llama_cpp"] = pkg
    import llama_cpp.llama_cpp as L  # noqa: E402
    return L


_LOG_CB = None  # module-level: llama.cpp keeps calling it (even on free)


def _quiet_logs(L, quiet: bool):
    global _LOG_CB
    if quiet and _LOG_CB is None:
        _LOG_CB = L.llama_log_callback(lambda level, text, user: None)
        L.llama_log_set(_LOG_CB, ctypes.c_void_p(0))


class Oracle:
    """One loaded model plus a context; reuse it for several prompts."""

    def __init__(self, model_path: str, n_ctx: int = 256, n_threads: int = 2,
                 kv_type: str = "f16", flash_attn: bool = False, n_batch: int = 512,
                 verbose: bool = False):
        self.L = L = load_bindings()
        _quiet_logs(L, not verbose)
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        mp.use_mmap = True
        self.model = L.llama_model_load_from_file(str(model_path).encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp failed to load {model_path}")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.config = dict(n_ctx=n_ctx, n_threads=n_threads, kv_type=kv_type,
                           flash_attn=flash_attn, n_batch=n_batch)
        self.ctx = None
        self.model_path = str(model_path)

    # ---- context -------------------------------------------------------------
    def _new_context(self, need_ctx: int):
        L = self.L
        if self.ctx is not None:
            L.llama_free(self.ctx)
            self.ctx = None
        cfg = self.config
        cp = L.llama_context_default_params()
        cp.n_ctx = max(cfg["n_ctx"], (need_ctx + 255) // 256 * 256)
        cp.n_batch = max(cfg["n_batch"], need_ctx)
        cp.n_ubatch = cp.n_batch          # prompt in one physical batch
        cp.n_seq_max = 1
        cp.n_threads = cfg["n_threads"]
        cp.n_threads_batch = cfg["n_threads"]
        cp.flash_attn_type = (L.LLAMA_FLASH_ATTN_TYPE_ENABLED if cfg["flash_attn"]
                              else L.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        kt = {"f16": GGML_TYPE_F16, "f32": GGML_TYPE_F32}[cfg["kv_type"]]
        cp.type_k = kt
        cp.type_v = kt
        cp.no_perf = True
        cp.embeddings = False
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise RuntimeError("llama.cpp failed to create a context")

    # ---- tokenizer -----------------------------------------------------------
    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        L = self.L
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (L.llama_token * cap)()
        n = L.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (L.llama_token * cap)()
            n = L.llama_tokenize(self.vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            raise RuntimeError("llama_tokenize failed")
        return list(buf[:n])

    def piece(self, tok: int, special: bool = True) -> bytes:
        L = self.L
        buf = ctypes.create_string_buffer(256)
        n = L.llama_token_to_piece(self.vocab, tok, buf, 256, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = L.llama_token_to_piece(self.vocab, tok, buf, -n, 0, special)
        return buf.raw[:n]

    def detokenize(self, ids: list[int], special: bool = True) -> str:
        return b"".join(self.piece(t, special) for t in ids).decode("utf-8", errors="replace")

    # ---- greedy decoding -----------------------------------------------------
    def _decode(self, tokens: list[int], pos0: int, want_all: bool):
        L = self.L
        n = len(tokens)
        batch = L.llama_batch_init(n, 0, 1)
        try:
            for i, t in enumerate(tokens):
                batch.token[i] = t
                batch.pos[i] = pos0 + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if (want_all or i == n - 1) else 0
            batch.n_tokens = n
            rc = L.llama_decode(self.ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
        finally:
            L.llama_batch_free(batch)

    def _logits_row(self, i: int) -> np.ndarray:
        p = self.L.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(p, shape=(self.n_vocab,)).astype(np.float32, copy=True)

    def greedy(self, prompt_ids: list[int], n: int, prompt_logits: bool = False):
        """Return (generated_ids, logits[n, n_vocab], prompt_logits[len(prompt), n_vocab] or None)."""
        if not prompt_ids:
            raise ValueError("empty prompt")
        bad = [t for t in prompt_ids if not 0 <= t < self.n_vocab]
        if bad:
            raise ValueError(f"token ids out of range [0,{self.n_vocab}): {bad[:5]}")
        self._new_context(len(prompt_ids) + n + 8)
        self._decode(prompt_ids, 0, want_all=prompt_logits)
        plog = None
        if prompt_logits:
            plog = np.stack([self._logits_row(i) for i in range(len(prompt_ids))])
            row = plog[-1].copy()
        else:
            row = self._logits_row(-1)
        out_ids, rows = [], []
        pos = len(prompt_ids)
        for step in range(n):
            rows.append(row)
            tok = int(np.argmax(row))
            out_ids.append(tok)
            if step == n - 1:
                break
            self._decode([tok], pos, want_all=False)
            pos += 1
            row = self._logits_row(-1)
        logits = np.stack(rows) if rows else np.zeros((0, self.n_vocab), np.float32)
        return out_ids, logits, plog

    def close(self):
        L = self.L
        if self.ctx is not None:
            L.llama_free(self.ctx)
            self.ctx = None
        if self.model is not None:
            L.llama_model_free(self.model)
            self.model = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


def _parse_ids(s: str) -> list[int]:
    s = s.strip().strip("[]")
    return [int(x) for x in s.replace(" ", "").split(",") if x != ""]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp's log on stderr")
    sub = ap.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("tokenize")
    t.add_argument("model")
    t.add_argument("text")
    t.add_argument("--no-add-special", action="store_true", help="do not add BOS/EOS")
    t.add_argument("--no-parse-special", action="store_true", help="treat <special> text literally")

    d = sub.add_parser("detokenize")
    d.add_argument("model")
    d.add_argument("--ids", required=True)
    d.add_argument("--no-special", action="store_true", help="do not render special tokens")

    g = sub.add_parser("greedy")
    g.add_argument("model")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt-ids", help="comma-separated token ids (used as is: no BOS added)")
    src.add_argument("--prompt", help="text, tokenized with add_special and parse_special")
    g.add_argument("-n", type=int, default=64)
    g.add_argument("-t", "--threads", type=int, default=2)
    g.add_argument("--ctx", type=int, default=256,
                   help="minimum n_ctx (raised to prompt+n, rounded up to 256)")
    g.add_argument("--kv-type", choices=["f16", "f32"], default="f16",
                   help="KV cache type (llama.cpp's default is f16)")
    g.add_argument("--flash-attn", action="store_true",
                   help="use llama.cpp's flash attention (CPU FA accumulates V in f16; off by default)")
    g.add_argument("--logits-out", help=".npy path for the [N, n_vocab] logits (default: a temp file)")
    g.add_argument("--prompt-logits-out", help="also save logits of every prompt position (.npy)")

    a = ap.parse_args(argv)

    if a.cmd == "tokenize":
        with Oracle(a.model, verbose=a.verbose) as o:
            ids = o.tokenize(a.text, not a.no_add_special, not a.no_parse_special)
            pieces = [o.piece(i).decode("utf-8", errors="replace") for i in ids]
            print(json.dumps({"ids": ids, "pieces": pieces}, ensure_ascii=False))
        return 0

    if a.cmd == "detokenize":
        with Oracle(a.model, verbose=a.verbose) as o:
            ids = _parse_ids(a.ids)
            sp = not a.no_special
            print(json.dumps({"text": o.detokenize(ids, sp),
                              "pieces": [o.piece(i, sp).decode("utf-8", errors="replace") for i in ids]},
                             ensure_ascii=False))
        return 0

    # greedy
    with Oracle(a.model, n_ctx=a.ctx, n_threads=a.threads, kv_type=a.kv_type,
                flash_attn=a.flash_attn, verbose=a.verbose) as o:
        prompt_ids = _parse_ids(a.prompt_ids) if a.prompt_ids is not None else o.tokenize(a.prompt)
        gen, logits, plog = o.greedy(prompt_ids, a.n, prompt_logits=bool(a.prompt_logits_out))
        out = a.logits_out
        if not out:
            fd, out = tempfile.mkstemp(prefix="llamacpp_logits_", suffix=".npy")
            os.close(fd)
        np.save(out, logits)
        res = {
            "model": str(a.model),
            "prompt_ids": prompt_ids,
            "generated_ids": gen,
            "logits": str(Path(out).resolve()),
            "n_vocab": o.n_vocab,
            "text": o.detokenize(gen),
            "config": o.config,
        }
        if plog is not None:
            np.save(a.prompt_logits_out, plog)
            res["prompt_logits"] = str(Path(a.prompt_logits_out).resolve())
        print(json.dumps(res, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
