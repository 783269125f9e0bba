#!/usr/bin/env python3
"""Greedy text of real models: Pagoda against llama.cpp, measured against llama.cpp's own
spread (its flash-attention-on and -off paths round differently, so they can part ways).

  scripts/compare_real_models.py [--build-dir build] [--models qwen2.5-coder-0.5b-instruct,...] [-n 64]

For each model (a catalog name, `pagoda pull` fetches it) and each of the prompts below
(ten chat turns rendered with the model's own template by jinja2, ten plain code
completions; --prompts K takes the first K/2 of each), three greedy continuations of N tokens: llama.cpp with flash attention off
(the reference), llama.cpp with it on, and `pagoda run --temp 0`. Each is cut after its
first end-of-generation token. Per prompt the table shows how many leading tokens each
agrees with the reference for, and whether the whole text is the same.

The bar (exit status 1 when missed): over all prompts of a model, Pagoda agrees with the
reference for at least as many tokens, and on at least as many whole texts, as
llama.cpp's flash-attention-on run does.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from compare_llamacpp import Case, Result, compare_case, run_pagoda  # noqa: E402
from llamacpp_oracle import Oracle  # noqa: E402
import numpy as np  # noqa: E402

CHAT = [
    "Write a Python function that checks whether a string is a palindrome.",
    "What is the difference between a list and a tuple in Python?",
    "Explain what a mutex is in two sentences.",
    "Write a SQL query that returns the ten most recent orders from a table named orders.",
    "How do I reverse a linked list in C? Show the code.",
    "Write a bash one-liner that counts the lines of every .py file under the current folder.",
    "What does the `yield` keyword do in Python?",
    "Write a Go function that returns the maximum of a slice of ints.",
    "Explain big-O notation to a beginner.",
    "Write a regular expression that matches an IPv4 address.",
]
COMPLETE = [
    "def quicksort(arr):\n",
    "#include <stdio.h>\n\nint main(void) {\n",
    "// A JavaScript function that debounces another function\nfunction debounce(fn, ms) {\n",
    "class Stack:\n    \"\"\"A LIFO stack backed by a list.\"\"\"\n\n    def __init__(self):\n",
    "fn gcd(a: u64, b: u64) -> u64 {\n",
    "import numpy as np\n\ndef softmax(x):\n",
    "SELECT customers.name, COUNT(orders.id)\nFROM customers\n",
    "public class BinarySearch {\n    public static int search(int[] a, int key) {\n",
    "# Merge two sorted lists into one sorted list\ndef merge(a, b):\n",
    "<!DOCTYPE html>\n<html>\n<head>\n",
]


def render_chat(template: str, user: str, bos: str, eos: str) -> str:
    import jinja2
    import jinja2.sandbox
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = lambda m: (_ for _ in ()).throw(jinja2.TemplateError(m))
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False, **_: json.dumps(
        x, indent=indent, ensure_ascii=ensure_ascii)
    return env.from_string(template).render(messages=[{"role": "user", "content": user}],
                                            add_generation_prompt=True, bos_token=bos, eos_token=eos)


def cut(ids: list[int], stops: set[int]) -> list[int]:
    for i, t in enumerate(ids):
        if t in stops:
            return ids[:i + 1]
    return ids


def prefix(a: list[int], b: list[int]) -> int:
    k = 0
    while k < len(a) and k < len(b) and a[k] == b[k]:
        k += 1
    return k


def model_path(pagoda: Path, name: str) -> Path:
    p = subprocess.run([str(pagoda), "pull", "-q", name], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"pagoda pull {name} failed: {p.stderr.strip()}")
    return Path(p.stdout.strip().splitlines()[-1])


def forced(name: str, path: Path, prompt: list[int], ref_ids, ref_logits, first, rerun) -> Result:
    """Rows under identical contexts (compare_llamacpp's teacher forcing), tolerance 1."""
    res = Result(Case(name, "real", path, "Q4_K_M"))
    compare_case(res, prompt, ref_ids, ref_logits, first, rerun, tol=1.0, strict=False, max_resync=64)
    return res


def compare_model(pagoda: Path, name: str, n: int, threads: int, n_prompts: int) -> dict:
    path = model_path(pagoda, name)
    import gguf
    r = gguf.GGUFReader(str(path))
    field = lambda k: r.fields[k].contents() if k in r.fields else None  # noqa: E731
    template = field("tokenizer.chat_template")
    tokens = field("tokenizer.ggml.tokens")
    eos_id = field("tokenizer.ggml.eos_token_id")
    stops = {i for i, t in enumerate(tokens) if t in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>")}
    if eos_id is not None:
        stops.add(int(eos_id))
    bos_id = field("tokenizer.ggml.bos_token_id")
    bos = tokens[int(bos_id)] if bos_id is not None else ""
    half = max(1, n_prompts // 2)
    prompts = [("chat", render_chat(template, u, bos, tokens[int(eos_id)])) for u in CHAT[:half]] + \
              [("code", c) for c in COMPLETE[:half]]
    rows = []
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        ref_o = Oracle(str(path), n_threads=threads, flash_attn=False)
        ids = [ref_o.tokenize(t) for _, t in prompts]
        ref_runs = [ref_o.greedy(p, n)[:2] for p in ids]
        fa_o = Oracle(str(path), n_threads=threads, flash_attn=True)
        for (kind, text), p_ids, (r_full, r_logits) in zip(prompts, ids, ref_runs):
            r_ids = cut(r_full, stops)
            fa_first = fa_o.greedy(p_ids, n)[:2]
            f_ids = cut(fa_first[0], stops)
            fa_res = forced("fa", path, p_ids, r_full, r_logits, fa_first, lambda q, m: fa_o.greedy(q, m)[:2])
            pp, pg, pl, _ = run_pagoda(pagoda, path, n, threads, work, text=text)
            pg_res = forced("pagoda", path, p_ids, r_full, r_logits, (pg, pl),
                            lambda q, m: run_pagoda(pagoda, path, m, threads, work, ids=q)[1:3])
            pg = cut(pg, stops)
            rows.append({"kind": kind, "prompt": text, "prompt_tokens": len(p_ids), "tokenized_same": pp == p_ids,
                         "ref_len": len(r_ids), "fa_prefix": prefix(f_ids, r_ids), "fa_same": f_ids == r_ids,
                         "pagoda_prefix": prefix(pg, r_ids), "pagoda_same": pg == r_ids,
                         "fa_err": fa_res.rc, "pagoda_err": pg_res.rc, "fa_divs": fa_res.n_div,
                         "pagoda_divs": pg_res.n_div, "fa_gap": fa_res.gap, "pagoda_gap": pg_res.gap,
                         "text": ref_o.detokenize(r_ids)})
        fa_o.close()
        ref_o.close()
    tot = lambda k: sum(int(x[k]) for x in rows)  # noqa: E731
    summary = {"model": name, "n": n, "prompts": len(rows), "ref_tokens": tot("ref_len"),
               "fa_prefix": tot("fa_prefix"), "fa_same": tot("fa_same"),
               "pagoda_prefix": tot("pagoda_prefix"), "pagoda_same": tot("pagoda_same"),
               "tokenized_same": tot("tokenized_same")}
    med = lambda k: float(np.median([x[k] for x in rows]))  # noqa: E731
    summary.update({"fa_err_median": med("fa_err"), "pagoda_err_median": med("pagoda_err"),
                    "fa_err_max": max(x["fa_err"] for x in rows), "pagoda_err_max": max(x["pagoda_err"] for x in rows),
                    "fa_gap_max": max((x["fa_gap"] or 0.0) for x in rows),
                    "pagoda_gap_max": max((x["pagoda_gap"] or 0.0) for x in rows)})
    summary["ok"] = (summary["pagoda_prefix"] >= summary["fa_prefix"] and summary["pagoda_same"] >= summary["fa_same"]
                     and summary["tokenized_same"] == len(rows))
    return {"summary": summary, "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", type=Path, default=REPO / "build")
    ap.add_argument("--models", default="qwen2.5-coder-0.5b-instruct,qwen2.5-coder-1.5b-instruct")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--json", type=Path, help="write the rows and summaries here")
    a = ap.parse_args(argv)
    pagoda = a.build_dir / "bin" / "pagoda"
    results = [compare_model(pagoda, m.strip(), a.n, a.threads, a.prompts) for m in a.models.split(",") if m.strip()]
    for res in results:
        s = res["summary"]
        print(f"\n{s['model']}: {s['prompts']} prompts, N={s['n']}, reference {s['ref_tokens']} tokens "
              f"(cut at the first end token)")
        print(f"  {'#':>2} {'kind':<5} {'prompt':>6} {'tok':>4} {'ref':>4} {'FA on':>7} {'pagoda':>7}"
              f" {'FA err':>8} {'pg err':>8} {'FA gap':>8} {'pg gap':>8}")
        for i, r in enumerate(res["rows"]):
            fa = f"{r['fa_prefix']}{'=' if r['fa_same'] else '<'}"
            pg = f"{r['pagoda_prefix']}{'=' if r['pagoda_same'] else '<'}"
            print(f"  {i:>2} {r['kind']:<5} {r['prompt_tokens']:>6} {'ok' if r['tokenized_same'] else 'DIFF':>4} "
                  f"{r['ref_len']:>4} {fa:>7} {pg:>7} {r['fa_err']:>8.2e} {r['pagoda_err']:>8.2e}"
                  f" {r['fa_gap'] or 0:>8.2e} {r['pagoda_gap'] or 0:>8.2e}")
        print(f"  agreeing tokens: llama.cpp FA on {s['fa_prefix']}, pagoda {s['pagoda_prefix']}; whole texts the "
              f"same: FA on {s['fa_same']}, pagoda {s['pagoda_same']}  -> {'PASS' if s['ok'] else 'FAIL'}")
        print(f"  logits under identical contexts, max |diff| / range per prompt: median FA on "
              f"{s['fa_err_median']:.2e}, pagoda {s['pagoda_err_median']:.2e}; worst FA on {s['fa_err_max']:.2e}, "
              f"pagoda {s['pagoda_err_max']:.2e}; largest flip gap FA on {s['fa_gap_max']:.2e}, "
              f"pagoda {s['pagoda_gap_max']:.2e}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0 if all(r["summary"]["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
