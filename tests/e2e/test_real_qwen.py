"""The real instruction-tuned models from the catalog (Qwen2.5-Coder 0.5B and 1.5B,
Q4_K_M, `pagoda pull`): they load by name, `pagoda chat` and `pagoda serve` answer with
their own ChatML template (rendered as jinja2 renders it: tests/chat), and greedy decoding
stays as close to llama.cpp's as llama.cpp's two attention paths are to each other
(scripts/compare_real_models.py)."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

from oracles import CACHE, oracle_missing, require_llamacpp

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "server"))
from server_util import Server  # noqa: E402

MODELS = {"qwen2.5-coder-0.5b-instruct": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
          "qwen2.5-coder-1.5b-instruct": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"}


def cached(name):
    path = CACHE / "models" / MODELS[name]
    if not path.exists():
        oracle_missing(f"{path} is missing; `pagoda pull {name}` (scripts/fetch_test_data) fetches it")
    return path


@pytest.mark.parametrize("name", sorted(MODELS))
def test_chat_answers_a_coding_question(pagoda_bin, name):
    cached(name)
    r = subprocess.run([str(pagoda_bin("pagoda")), "chat", "-m", name, "-n", "96", "--temp", "0"],
                       input="Write a Python function named add that returns the sum of two numbers.\n",
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "def add(" in r.stdout and "return" in r.stdout, r.stdout


def test_serve_answers_chat_completions(pagoda_bin):
    name = "qwen2.5-coder-0.5b-instruct"
    cached(name)
    s = Server(pagoda_bin, name, "--max-num-seqs", "4")
    try:
        r = s.post("/v1/chat/completions", json={
            "model": name, "temperature": 0, "max_tokens": 32,
            "messages": [{"role": "system", "content": "Answer with a single number."},
                         {"role": "user", "content": "What is 17 + 25?"}]})
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        assert "42" in choice["message"]["content"], choice
        assert choice["finish_reason"] == "stop"  # <|im_end|> ends the turn
    finally:
        assert s.terminate() == 0, s.output()


def test_greedy_text_tracks_llamacpp(pagoda_bin, llamacpp_bin, tmp_path):
    """The 0.5B on 5 prompts (about 90 s on two cores; 10 took 3 to 9 minutes of CI's 30,
    depending on load); the full 20-prompt run of both models is in docs/models.md."""
    require_llamacpp(llamacpp_bin, "libllama.so", purpose="greedy text of the Qwen2.5-Coder models")
    name = "qwen2.5-coder-0.5b-instruct"
    cached(name)
    out = tmp_path / "cmp.json"
    build = pagoda_bin("pagoda").parent.parent
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "compare_real_models.py"), "--build-dir", str(build), "--prompts", "5", "--models", name,
                        "--json", str(out)], capture_output=True, text=True, timeout=1800)
    assert out.exists(), r.stdout + r.stderr
    for res in json.loads(out.read_text()):
        s = res["summary"]
        assert s["tokenized_same"] == s["prompts"], r.stdout
        # Under identical contexts Pagoda's logits are as close to llama.cpp's reference as
        # llama.cpp's flash-attention path is, and every token where the free runs part ways
        # is a near tie (a gap well inside that logit error).
        assert s["pagoda_err_median"] <= 1.25 * s["fa_err_median"], r.stdout
        assert s["pagoda_gap_max"] <= s["fa_err_median"], r.stdout


@pytest.mark.parametrize("name", list(MODELS))
def test_prompt_lookup_speculation_keeps_the_greedy_text(pagoda_bin, name, tmp_path):
    """Speculative decoding by prompt lookup on an input-grounded request: exactly the
    tokens of plain decoding, with most drafts accepted; and as a tree of three branches
    (each node attending to its own branch), the same tokens again."""
    model = cached(name)
    code = (pathlib.Path(__file__).resolve().parents[2] / "src" / "engine" / "speculative.cpp").read_text()[:1500]
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Here is a C++ file:\n\n" + code + "\n\nThe same file again, unchanged:\n\n")
    got = {}
    for label, extra in (("plain", []), ("spec", ["--speculative-config",
                                                  '{"method": "ngram", "num_speculative_tokens": 4}']),
                         ("tree", ["--speculative-config",
                                   '{"method": "ngram", "num_speculative_tokens": 4, "branches": 3}'])):
        ids = tmp_path / f"{label}.json"
        r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(model), "-f", str(prompt), "-n", "64",
                            "--temp", "0", "-t", "2", "--ids-out", str(ids), *extra],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        got[label] = json.loads(ids.read_text())["generated_ids"]
        if label != "plain":
            m = re.search(r"of (\d+) draft tokens, (\d+) accepted", r.stderr)
            assert m, r.stderr
            # A tree verifies its other branches too, most of which lose.
            assert int(m.group(2)) > (0.5 if label == "spec" else 0.2) * int(m.group(1)), r.stderr
    assert got["spec"] == got["plain"]
    assert got["tree"] == got["plain"]


def test_draft_model_speculation_keeps_the_greedy_text(pagoda_bin, tmp_path):
    """The 0.5B drafting for the 1.5B (llama.cpp's -md, vLLM's draft_model) on code
    generation: exactly the tokens of plain decoding, and the draft guesses most of them."""
    target, draft = cached("qwen2.5-coder-1.5b-instruct"), cached("qwen2.5-coder-0.5b-instruct")
    prompt = "Write a Python function that checks whether a number is prime, then one that lists the first n primes."
    got = {}
    for label, extra in (("plain", []), ("md", ["-md", str(draft), "--draft-max", "6"]),
                         ("config", ["--speculative-config",
                                     json.dumps({"model": str(draft), "num_speculative_tokens": 3})])):
        ids = tmp_path / f"{label}.json"
        r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(target), "-p", prompt, "-n", "48",
                            "--temp", "0", "-t", "2", "--ids-out", str(ids), *extra],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        got[label] = json.loads(ids.read_text())["generated_ids"]
        if label != "plain":
            m = re.search(r"\(draft_model\): \d+ drafts of (\d+) draft tokens, (\d+) accepted", r.stderr)
            assert m, r.stderr
            assert int(m.group(2)) > 0.5 * int(m.group(1)), r.stderr
    assert got["md"] == got["plain"]
    assert got["config"] == got["plain"]


PEOPLE = """Staff list of the Matsuyama middle school, 1906:
- Hotta, head teacher of mathematics, age 31, from Aizu.
- Koga, teacher of English, age 27, from Matsuyama.
- Yoshikawa, teacher of drawing, age 40, from Edo.
- Kiyo, housekeeper, age 63, from Tokyo.
"""

PEOPLE_SCHEMA = {"type": "object", "properties": {"staff": {"type": "array", "items": {
    "type": "object", "properties": {"name": {"type": "string"}, "role": {"type": "string"},
                                     "age": {"type": "integer"}, "from": {"type": "string"}},
    "required": ["name", "role", "age", "from"], "additionalProperties": False}}},
    "required": ["staff"], "additionalProperties": False}


def test_prompt_lookup_speculation_keeps_constrained_json(pagoda_bin):
    """A json_schema request that copies facts from its prompt (input-grounded, so prompt
    lookup drafts well): with speculation the document is the plain server's, and valid;
    drafts are accepted through the grammar's masks (about half of them here)."""
    name = "qwen2.5-coder-0.5b-instruct"
    cached(name)
    body = {"model": name, "temperature": 0, "max_tokens": 300,
            "messages": [{"role": "user", "content": PEOPLE + "\nList every person above as JSON."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "staff", "schema": PEOPLE_SCHEMA}}}
    got = {}
    for label, extra in (("plain", []), ("spec", ["--speculative-config",
                                                  '{"method": "ngram", "num_speculative_tokens": 4}'])):
        s = Server(pagoda_bin, name, "--max-num-seqs", "4", *extra)
        try:
            r = s.post("/v1/chat/completions", json=body, timeout=600)
            assert r.status_code == 200, r.text
            choice = r.json()["choices"][0]
            assert choice["finish_reason"] == "stop", choice
            got[label] = choice["message"]["content"]
            metrics = s.get("/metrics").text
        finally:
            assert s.terminate() == 0, s.output()
    # The same document. On SIMD kernels a verification step rounds like a batch of its
    # tokens and may flip a near tie (docs/speculative.md); a schema leaves the whitespace
    # between tokens free, and those choices are near ties, so the text may differ there
    # (the tiny-model test in tests/server/test_structured_output.py compares tokens).
    assert json.loads(got["spec"]) == json.loads(got["plain"])
    staff = json.loads(got["plain"])["staff"]
    assert [p["age"] for p in staff] == [31, 27, 40, 63], staff
    count = {k: float(re.search(rf"^pagoda:spec_decode_{k}_total(?:{{[^}}]*}})? ([0-9.e+]+)$", metrics, re.M).group(1))
             for k in ("num_draft_tokens", "num_accepted_tokens")}
    assert count["num_accepted_tokens"] > 0.3 * count["num_draft_tokens"] > 0, count


def test_a_draft_model_of_another_vocabulary_is_refused(pagoda_bin, write_gen_model, tmp_path):
    target = cached("qwen2.5-coder-0.5b-instruct")
    other = write_gen_model(tmp_path / "other.gguf")
    r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(target), "-md", str(other), "-p", "hi", "-n", "4"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "cannot draft for this model" in r.stderr and "tokenizer is llama, the target's gpt2" in r.stderr, r.stderr


def test_amx_tiles_leave_every_logit_as_the_vnni_ones(pagoda_bin, tmp_path):
    """Where the CPU has AMX-INT8, Q4_K and Q6_K prefill tiles run on it; each output must
    equal the VNNI kernels' bit for bit (docs/kernels.md, "AMX tiles"), so perplexity over
    512-token windows (every logit row through 64-token tiles) and greedy text after a long
    prompt are the same digits and tokens with PAGODA_CPU=avx512 (AMX off)."""
    import os
    path = cached("qwen2.5-coder-1.5b-instruct")
    exe = str(pagoda_bin("pagoda"))
    probe = subprocess.run([exe, "bench", "-m", str(path), "-p", "8", "-n", "0", "-r", "1"],
                           capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr
    if "amx-int8" not in probe.stdout:
        pytest.skip("this CPU (or its kernel) offers no AMX-INT8: the VNNI tiles are the only ones here")
    book = CACHE / "eval" / "botchan.txt"
    if not book.exists():
        oracle_missing(f"{book} is not present (scripts/fetch_eval_text)")
    prompt = book.read_text(encoding="utf-8")[:6000]
    outs = {}
    for mode in ("amx", "avx512"):
        env = dict(os.environ)
        env.pop("PAGODA_CPU", None)
        if mode == "avx512":
            env["PAGODA_CPU"] = "avx512"
        ppl = subprocess.run([exe, "perplexity", "-m", str(path), "-f", str(book), "-c", "512", "--chunks", "2",
                              "--json"], capture_output=True, text=True, timeout=600, env=env)
        assert ppl.returncode == 0, ppl.stderr
        ids = tmp_path / f"{mode}.json"
        run = subprocess.run([exe, "run", "-m", str(path), "-p", prompt, "-n", "24", "--temp", "0", "--ignore-eos",
                              "--ids-out", str(ids)], capture_output=True, text=True, timeout=600, env=env)
        assert run.returncode == 0, run.stderr
        j = json.loads(ppl.stdout)
        outs[mode] = ({k: j[k] for k in ("chunk_ppl", "nll_mean", "ppl", "scored_tokens")},
                      json.loads(ids.read_text())["generated_ids"])
    assert outs["amx"][0] == outs["avx512"][0], (outs["amx"][0], outs["avx512"][0])
    assert outs["amx"][1] == outs["avx512"][1]
