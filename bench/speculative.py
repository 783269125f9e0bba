#!/usr/bin/env python3
"""Speculative decoding against plain decoding: the same binary and model, `pagoda run` with
and without `--speculative-config`, alternating rounds, medians. Prompt lookup by default;
with --draft, a draft model (the draft_model method) instead.

  bench/speculative.py [--build build] [--model PATH|qwen-0.5b] [--draft PATH] [--rounds 3]
                       [-n 256] [-k 4] [--verify-curve] [--llamacpp] [--concurrent 8]

--llamacpp runs llama.cpp's own speculative programs in the same rounds, on the same file,
prompt, thread count and token count (greedy, EOS ignored): `llama-lookup` (its n-gram
prompt lookup) with --spec-draft-n-max k and with 16, or with --draft
`llama-speculative` (-md, the same two draft lengths), each reporting its decode speed
("decoded N tokens in T seconds"), and with --draft also `llama-server --model-draft` (one
slot, the same draft lengths, the decode rate of its /completion timings: speculation as a
server user gets it). Built on demand by scripts/build_llamacpp
(LLAMACPP_TARGETS); the best llama.cpp mode per prompt is reported beside Pagoda's.

--concurrent N also measures a batch: `pagoda bench throughput` with N requests of 128
generated prompt tokens and 128 output tokens running at once (--max-num-seqs N), with and
without the same speculative config, alternating rounds: aggregate output tokens/s on and
off. A wide batch is where verifying drafts stops being free (the step is no longer bound
by reading the weights), so this is where the adaptive draft length has to keep
speculation from costing throughput.

--verify-curve also reports what verification costs: the time of one forward of 1, 2, 4, 8
and 16 tokens of one sequence at a 128-token context (`pagoda bench -p N -d 128`), as
milliseconds and as multiples of a one-token decode step.

Six prompts: two input-grounded ones (a source file from this repository, then the request
to write it out again; a function and the request to rename a variable in it: the answers
copy long runs of the prompt, where prompt lookup drafts well), a free one (a story: few
n-gram hits, where the adaptive draft length must keep speculation from costing anything)
code generation (where a draft model, not the prompt, has something to offer), a table
of facts given in the prompt (rows that begin alike and end differently: where a tree of
drafts, --branches, finds more than one earlier occurrence can), and structured output (json: facts of the prompt copied into a document under --json-schema,
the grammar masking every verified row; ends when the document does). Greedy, --ignore-eos,
the same number of tokens either way; the outputs are compared (identical on the scalar kernels; on SIMD
ones a verification step rounds like a batch and may flip a near tie, reported with its
position). Reported per prompt: decode
tok/s on and off (medians), their ratio, the acceptance rate, and the other CPU load seen.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_llamacpp as cl  # noqa: E402

GROUNDED = (cl.REPO / "src" / "engine" / "speculative.cpp").read_text()[:2500]
PROMPTS = {
    "grounded": "Here is a C++ file:\n\n" + GROUNDED + "\n\nThe same file again, unchanged:\n\n",
    "edit": "Here is a C++ function:\n\n" + GROUNDED[GROUNDED.index("Result<SpeculativeConfig>"):][:1200].rsplit("\n", 1)[0] +
            "\n\nThe same function with the variable `value` renamed to `field` everywhere:\n\n",
    "free": "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "code": "Write a Python function that checks whether a number is prime, then a function that lists the "
            "first n primes.",
}
# Structured output: facts to copy from the prompt into a JSON document (the json prompt
# runs with --json-schema, so every verified row is masked by the grammar).
STAFF = "".join(f"- {n}, {r}, age {a}, from {f}.\n" for n, r, a, f in [
    ("Hotta", "head teacher of mathematics", 31, "Aizu"), ("Koga", "teacher of English", 27, "Matsuyama"),
    ("Yoshikawa", "teacher of drawing", 40, "Edo"), ("Kiyo", "housekeeper", 63, "Tokyo"),
    ("Tanuki", "principal", 52, "Osaka"), ("Akashatsu", "head teacher", 38, "Kyoto"),
    ("Nodaiko", "teacher of drawing", 45, "Edo"), ("Uranari", "teacher of English", 29, "Matsuyama")])
# A table of the same facts, unconstrained: its rows repeat the same beginnings ("| Teacher
# of ") before different endings, where one earlier occurrence is a poor guess and a tree
# of several (--branches) has the right one more often.
PROMPTS["table"] = ("Staff list of the Matsuyama middle school, 1906:\n" + STAFF +
                    "\nThe same staff list as a Markdown table with the columns Name, Role, Age and From:\n\n")
PROMPTS["json"] = ("Staff list of the Matsuyama middle school, 1906:\n" + STAFF +
                   "\nList every person above as JSON, with name, role, age and from.\n")
SCHEMAS = {"json": json.dumps({"type": "object", "properties": {"staff": {"type": "array", "items": {
    "type": "object", "properties": {"name": {"type": "string"}, "role": {"type": "string"},
                                     "age": {"type": "integer"}, "from": {"type": "string"}},
    "required": ["name", "role", "age", "from"], "additionalProperties": False}}},
    "required": ["staff"], "additionalProperties": False})}
CONFIG = '{{"method": "ngram", "num_speculative_tokens": {k}, "prompt_lookup_max": 4, "prompt_lookup_min": 2}}'
TREE_CONFIG = ('{{"method": "ngram", "num_speculative_tokens": {k}, "prompt_lookup_max": 4, "prompt_lookup_min": 2, '
               '"branches": {b}}}')


def verify_curve(pagoda: Path, model: Path, threads: int) -> dict:
    """Milliseconds of one forward of n tokens of one sequence after 128 cached ones."""
    out = {}
    for n in (1, 2, 4, 8, 16):
        r = subprocess.run([str(pagoda), "bench", "-m", str(model), "-t", str(threads), "-p", str(n), "-n", "0",
                            "-d", "128", "-r", "5", "--json"], capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            raise SystemExit(f"pagoda bench failed:\n{r.stderr[-2000:]}")
        tps = json.loads(r.stdout)
        tps = tps[0] if isinstance(tps, list) else tps
        out[n] = 1e3 * n / tps["tokens_per_second_median"]
    return {str(n): {"ms": ms, "x_decode_step": ms / out[1]} for n, ms in out.items()}


def run(pagoda: Path, model: Path, prompt: Path, n: int, threads: int, spec: str | None,
        schema: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as d:
        ids = Path(d) / "ids.json"
        cmd = [str(pagoda), "run", "-m", str(model), "-f", str(prompt), "-n", str(n), "--temp", "0", "--ignore-eos",
               "-t", str(threads), "--ids-out", str(ids)]
        if spec:
            cmd += ["--speculative-config", spec]
        if schema:
            # The document ends the reply when complete, EOS ignored or not.
            cmd += ["--json-schema", schema]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
        decode = float(re.search(r"decode ([0-9.]+) tok/s", r.stderr).group(1))
        m = re.search(r"of (\d+) draft tokens, (\d+) accepted", r.stderr)
        b = re.search(r"(\d+) accepted off the first branch", r.stderr)
        return {"decode_tok_s": decode, "ids": json.loads(ids.read_text())["generated_ids"],
                "drafted": int(m.group(1)) if m else 0, "accepted": int(m.group(2)) if m else 0,
                "branch_accepted": int(b.group(1)) if b else 0}


def llama_peer(bin_dir: Path, model: Path, draft: Path | None, prompt: Path, n: int, threads: int,
               k: int) -> dict:
    """llama.cpp's lookup (or, with a draft, speculative) example on the same request."""
    exe = bin_dir / ("llama-speculative" if draft else "llama-lookup")
    cmd = [str(exe), "-m", str(model), "-f", str(prompt), "-n", str(n), "-t", str(threads), "-c", "4096",
           "--temp", "0", "--ignore-eos", "--spec-draft-n-max", str(k)]
    if draft:
        cmd += ["-md", str(draft), "-td", str(threads), "--spec-draft-n-min", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    out = r.stdout + r.stderr
    m = re.search(r"decoded\s+(\d+) tokens in\s+([0-9.]+) seconds, speed:\s+([0-9.]+) t/s", out)
    if r.returncode != 0 or not m:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {r.returncode}):\n{out[-2000:]}")
    acc = re.search(r"accept\s+=\s+([0-9.]+)%", out)
    return {"decode_tok_s": float(m.group(3)), "tokens": int(m.group(1)),
            "acceptance": float(acc.group(1)) / 100 if acc else None}


def llama_server_peer(bin_dir: Path, model: Path, draft: Path, prompt: Path, n: int, threads: int, k: int) -> dict:
    """llama-server --model-draft on the same request: one slot, greedy, the decode rate it reports."""
    import socket
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [str(bin_dir / "llama-server"), "-m", str(model), "-md", str(draft), "-t", str(threads), "-td", str(threads),
           "-c", "4096", "-np", "1", "--spec-draft-n-max", str(k), "--spec-draft-n-min", "0", "--host", "127.0.0.1",
           "--port", str(port)]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.time() + 300
            while True:
                try:
                    with urllib.request.urlopen(url + "/health", timeout=5) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.time() > deadline:
                    log.seek(0)
                    raise SystemExit(f"{' '.join(cmd)} did not come up:\n{log.read().decode(errors='replace')[-2000:]}")
                time.sleep(0.5)
            body = json.dumps({"prompt": prompt.read_text(), "n_predict": n, "temperature": 0, "ignore_eos": True,
                               "cache_prompt": False}).encode()
            req = urllib.request.Request(url + "/completion", data=body, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=1800) as r:
                j = json.loads(r.read())
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    # This llama-server's timings carry no draft counts (newer ones add draft_n and
    # draft_n_accepted): the decode rate is what is compared.
    t = j["timings"]
    drafted, accepted = t.get("draft_n"), t.get("draft_n_accepted")
    return {"decode_tok_s": float(t["predicted_per_second"]), "tokens": int(t["predicted_n"]),
            "acceptance": accepted / drafted if drafted else None}


def throughput(pagoda: Path, model: Path, n: int, threads: int, spec: str | None) -> dict:
    cmd = [str(pagoda), "bench", "throughput", "-m", str(model), "--num-prompts", str(n), "--max-num-seqs", str(n),
           "--input-len", "128", "--output-len", "128", "--range-ratio", "0", "-t", str(threads), "--json"]
    if spec:
        cmd += ["--speculative-config", spec]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def concurrent(pagoda: Path, model: Path, n: int, threads: int, spec: str, rounds: int) -> dict:
    on, off, load, spec_stats = [], [], [], []
    for r in range(rounds):
        for flag in ((True, False) if r % 2 == 0 else (False, True)):
            j = throughput(pagoda, model, n, threads, spec if flag else None)
            (on if flag else off).append(j["output_tokens_per_second"])
            if flag:
                spec_stats.append(j.get("speculative"))
            load.append(cl.other_load(0.5) or 0.0)
        print(f"{n} concurrent round {r + 1}/{rounds}: on {on[-1]:.1f}  off {off[-1]:.1f} output tok/s",
              file=sys.stderr)
    row = {"sequences": n, "on_median": statistics.median(on), "off_median": statistics.median(off),
           "ratio": statistics.median(on) / statistics.median(off), "on": on, "off": off,
           "max_other_load": max(load), "speculative": spec_stats[-1]}
    print(f"{n} concurrent: {row['on_median']:.1f} vs {row['off_median']:.1f} output tok/s = {row['ratio']:.2f}x, "
          f"other load up to {row['max_other_load']:.2f} cores", file=sys.stderr)
    return row


def build_llamacpp() -> Path:
    import os
    env = dict(os.environ, LLAMACPP_TARGETS="llama llama-lookup llama-speculative llama-server")
    return Path(cl.last_line([str(cl.REPO / "scripts" / "build_llamacpp")], "build_llamacpp", env=env))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=Path, default=cl.REPO / "build")
    ap.add_argument("--model", default="qwen-0.5b", help="a GGUF path or a compare_llamacpp.py row")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=256)
    ap.add_argument("-k", type=int, default=4, help="num_speculative_tokens")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--draft", type=Path, help="a draft model GGUF: the draft_model method instead of prompt lookup")
    ap.add_argument("--verify-curve", action="store_true")
    ap.add_argument("--llamacpp", action="store_true", help="also run llama-lookup / llama-speculative")
    ap.add_argument("--concurrent", type=int, default=0, help="also N sequences at once (bench throughput)")
    ap.add_argument("--prompts", default=",".join(PROMPTS), help="which prompts (comma-separated)")
    ap.add_argument("--branches", type=int, default=1,
                    help="prompt lookup as a tree of this many branches; each round then also runs the chain "
                         "(branches 1), and the tree is reported against it")
    a = ap.parse_args()
    llama_bin = build_llamacpp() if a.llamacpp else None
    model = Path(a.model) if Path(a.model).exists() else cl.make_model(cl.ROWS[a.model], a.build, False, a.threads)
    pagoda = a.build / "bin" / "pagoda"
    draft_chain = json.dumps({"method": "draft_model", "model": str(a.draft), "num_speculative_tokens": a.k})
    if a.draft:
        spec = (json.dumps({"method": "draft_model", "model": str(a.draft), "num_speculative_tokens": a.k,
                            "branches": a.branches}) if a.branches > 1 else draft_chain)
    else:
        spec = TREE_CONFIG.format(k=a.k, b=a.branches) if a.branches > 1 else CONFIG.format(k=a.k)
    chain = (draft_chain if a.draft else CONFIG.format(k=a.k)) if a.branches > 1 else None
    report = {"model": str(model), "speculative_config": spec, "n_gen": a.n, "k": a.k, "threads": a.threads,
              "prompts": {}}
    if a.verify_curve:
        report["verify_curve"] = verify_curve(pagoda, model, a.threads)
        print("verify cost: " + ", ".join(f"{n} tokens {v['ms']:.0f} ms ({v['x_decode_step']:.2f}x)"
                                          for n, v in report["verify_curve"].items()), file=sys.stderr)
    with tempfile.TemporaryDirectory() as d:
        for name, text in PROMPTS.items():
            if name not in a.prompts.split(","):
                continue
            prompt = Path(d) / f"{name}.txt"
            prompt.write_text(text)
            on, off, chain_on, load, diverged = [], [], [], [], []
            peers: dict[str, list[float]] = {}
            drafted = accepted = branch_accepted = 0
            for r in range(a.rounds):
                order = (True, False) if r % 2 == 0 else (False, True)
                if chain:
                    order = (True, "chain", False) if r % 2 == 0 else (False, "chain", True)
                got = {}
                for flag in order:
                    cfg = chain if flag == "chain" else spec if flag else None
                    got[flag] = run(pagoda, model, prompt, a.n, a.threads, cfg, SCHEMAS.get(name))
                    load.append(cl.other_load(0.5) or 0.0)
                if chain:
                    chain_on.append(got["chain"]["decode_tok_s"])
                    if got["chain"]["ids"] != got[False]["ids"]:
                        print(f"{name} round {r + 1}: the chain's output differs from plain decoding", file=sys.stderr)
                a_ids, b_ids = got[True]["ids"], got[False]["ids"]
                if a_ids != b_ids:
                    # On SIMD kernels a verification step (several tokens of one sequence)
                    # rounds differently from single-token decode, as batching does; on the
                    # scalar kernels the outputs are identical (tests/engine).
                    first = next((i for i in range(min(len(a_ids), len(b_ids))) if a_ids[i] != b_ids[i]), None)
                    diverged.append(first)
                    print(f"{name} round {r + 1}: outputs differ from token {first} on (SIMD rounding where "
                          f"kernels are not batch-invariant, docs/speculative.md)", file=sys.stderr)
                if llama_bin:
                    for kk in sorted({a.k, 16}):
                        peer = llama_peer(llama_bin, model, a.draft, prompt, a.n, a.threads, kk)
                        peers.setdefault(f"{'llama-speculative' if a.draft else 'llama-lookup'} --spec-draft-n-max {kk}",
                                         []).append(peer["decode_tok_s"])
                        load.append(cl.other_load(0.5) or 0.0)
                    if a.draft:
                        for kk in sorted({a.k, 16}):
                            peer = llama_server_peer(llama_bin, model, a.draft, prompt, a.n, a.threads, kk)
                            peers.setdefault(f"llama-server --model-draft --spec-draft-n-max {kk}",
                                             []).append(peer["decode_tok_s"])
                            load.append(cl.other_load(0.5) or 0.0)
                on.append(got[True]["decode_tok_s"])
                off.append(got[False]["decode_tok_s"])
                drafted += got[True]["drafted"]
                branch_accepted += got[True]["branch_accepted"]
                accepted += got[True]["accepted"]
                print(f"{name} round {r + 1}/{a.rounds}: on {on[-1]:.1f}  off {off[-1]:.1f} tok/s", file=sys.stderr)
            row = {"on_median": statistics.median(on), "off_median": statistics.median(off),
                   "speedup": statistics.median(on) / statistics.median(off), "acceptance": accepted / max(1, drafted),
                   "drafted": drafted, "accepted": accepted, "branch_accepted": branch_accepted, "max_other_load": max(load), "on": on, "off": off,
                   "first_divergence": diverged}
            if chain_on:
                row["chain_median"] = statistics.median(chain_on)
                row["tree_over_chain"] = row["on_median"] / row["chain_median"]
                row["chain"] = chain_on
            if peers:
                row["llamacpp"] = {mode: statistics.median(v) for mode, v in peers.items()}
                best = max(row["llamacpp"], key=row["llamacpp"].get)
                row["llamacpp_best"] = {"mode": best, "tok_s": row["llamacpp"][best],
                                        "pagoda_over_best": row["on_median"] / row["llamacpp"][best]}
            report["prompts"][name] = row
            if chain_on:
                print(f"{name}: tree {row['on_median']:.1f} vs chain {row['chain_median']:.1f} tok/s = "
                      f"{row['tree_over_chain']:.2f}x", file=sys.stderr)
            print(f"{name}: decode {row['on_median']:.1f} vs {row['off_median']:.1f} tok/s = {row['speedup']:.2f}x, "
                  f"{100 * row['acceptance']:.0f}% of {drafted} drafts accepted, other load up to "
                  f"{row['max_other_load']:.2f} cores", file=sys.stderr)
            if peers:
                b = row["llamacpp_best"]
                print(f"{name}: llama.cpp best {b['mode']} {b['tok_s']:.1f} tok/s; pagoda with drafts "
                      f"{b['pagoda_over_best']:.2f}x of it", file=sys.stderr)
    if a.concurrent:
        report["concurrent"] = concurrent(pagoda, model, a.concurrent, a.threads, spec, a.rounds)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
