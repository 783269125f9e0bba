#!/usr/bin/env python3
"""Prompt compression on a QA set built from the evaluation text: does a model answer a
question about a ~2,000-token passage the same when the passage is compressed 2x and 4x,
and is compressing and answering faster than answering the whole passage?

  bench/compression_qa.py                       # 100+ questions, Qwen2.5-Coder-1.5B answers, Gemma 3 270M scores
  bench/compression_qa.py --limit 3             # a quick end-to-end check on 3 questions
  bench/compression_qa.py --sample 5            # 5 questions spread over the passages
  bench/compression_qa.py --qa-only             # only build and save the QA set
  bench/compression_qa.py --json-out run.json   # every answer and timing

The QA set (saved as JSON, --qa-out; the RAG example reuses it): the text
($PAGODA_CACHE/eval/botchan.txt, scripts/fetch_eval_text) cut at line ends into passages
of about --passage-tokens scorer tokens (counted by the server's /v1/compress at ratio 1,
which only tokenizes), and --per-passage cloze questions per passage: a sentence of the
passage with one name or number blanked, asked as "Fill in the blank". Each question is
answerable from its passage by construction (the sentence is in it), its answer is the
blanked word, and the questions are spread over the passage (one sentence from each
stretch of it), so a compressor cannot pass by keeping only the start.

One `pagoda serve -m TARGET --compress-scorer SCORER --no-prefix-caching` (no reuse
between the questions of a passage, so every prefill is a real one). For each question,
greedy chat answers (temperature 0, --max-tokens) with:
  full   the passage and the question, streamed: time to first token is the target's
         prefill of the full prompt, the whole request the end-to-end time
  2x/4x  POST /v1/compress (ratio 0.5 / 0.25, the question kept whole), then the same chat
         request with the compressed text; end to end = compression + that request
Reported: answer agreement with the full prompt's answer at 2x and 4x (bars 90% and 75%),
accuracy against the blanked word for all three, compression time as a share of the
full prompt's prefill (bar <= 15%), and mean end-to-end times over the prompts of at
least 2,000 target tokens (bar: compressed faster)."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("PAGODA_CACHE", Path.home() / ".cache" / "pagoda"))
MODELS = CACHE / "models"

SYSTEM = "You fill in blanks using a passage. Reply with only the missing word or words, nothing else."
BLANK = "____"
# Capitalized words that are not names (sentence-inner uses in the novel).
NOT_NAMES = {"I", "Mr", "Mrs", "Oh", "Ah", "Well", "Yes", "No", "The", "But", "And", "Sir", "God", "English",
             "Japanese", "Chinese", "Heaven", "Madonna", "Hurrah"}


def question_text(cloze: str) -> str:
    return f"Fill in the blank ({BLANK}) with the missing word from the passage:\n{cloze}"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Server:
    def __init__(self, binary: Path, target: Path, scorer: Path, threads: int, extra: list[str]):
        self.log = tempfile.TemporaryFile(mode="w+b")
        cmd = [str(binary), "serve", "-m", str(target), "--compress-scorer", str(scorer), "--no-prefix-caching",
               "--port", "0", "-t", str(threads), *extra]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        self.base = None
        while time.time() < deadline and self.base is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pagoda serve exited early:\n{self.output()}")
            m = re.search(r"listening on http://[^:]+:(\d+)", self.output())
            if m:
                self.base = f"http://127.0.0.1:{m.group(1)}"
            else:
                time.sleep(0.1)
        if self.base is None:
            self.stop()
            raise RuntimeError(f"pagoda serve did not start:\n{self.output()}")
        self.http = httpx.Client(base_url=self.base, timeout=1800)

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def compress(self, prompt: str, ratio: float, question: str = "", question_words: bool = True,
                 **options) -> dict:
        t0 = time.perf_counter()
        body = {"prompt": prompt, "question": question, "ratio": ratio, "question_words": question_words}
        body.update({k: v for k, v in options.items() if v is not None})
        r = self.http.post("/v1/compress", json=body)
        r.raise_for_status()
        j = r.json()
        j["wall"] = time.perf_counter() - t0
        return j

    def tokens(self, text: str) -> int:
        # Ratio 1 keeps everything and only tokenizes: the scorer's token count.
        return self.compress(text, 1.0)["origin_tokens"]

    def answer(self, content: str, max_tokens: int) -> dict:
        body = {"model": "target", "messages": [{"role": "system", "content": SYSTEM},
                                                {"role": "user", "content": content}],
                "temperature": 0, "max_tokens": max_tokens, "stream": True,
                "stream_options": {"include_usage": True}}
        t0 = time.perf_counter()
        ttft = None
        text = ""
        usage = {}
        with self.http.stream("POST", "/v1/chat/completions", json=body) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                ev = json.loads(line[6:])
                if ev.get("usage"):
                    usage = ev["usage"]
                for ch in ev.get("choices", []):
                    delta = ch.get("delta", {}).get("content") or ""
                    if delta and ttft is None:
                        ttft = time.perf_counter() - t0
                    text += delta
        total = time.perf_counter() - t0
        return {"text": text, "ttft": ttft if ttft is not None else total, "seconds": total,
                "prompt_tokens": usage.get("prompt_tokens", 0)}


# ---- the QA set ----------------------------------------------------------------------

def body_of(text: str) -> str:
    # Project Gutenberg's header and licence are not the novel.
    start = re.search(r"\*\*\* ?START OF.*\n", text)
    end = re.search(r"\*\*\* ?END OF", text)
    return text[start.end() if start else 0:end.start() if end else len(text)]


def cut_passages(text: str, target_tokens: int, count_tokens) -> list[str]:
    lines = text.splitlines(keepends=True)
    chars_per_token = len(text) / max(count_tokens(text), 1)
    size = int(target_tokens * chars_per_token)
    passages, cur = [], ""
    for line in lines:
        cur += line
        if len(cur) >= size and line.rstrip().endswith((".", "!", "?", '"')):
            passages.append(cur.strip())
            cur = ""
    return passages  # the short rest is dropped


def sentences(passage: str) -> list[tuple[int, str]]:
    flat = re.sub(r"\s+", " ", passage)
    out = []
    for m in re.finditer(r"[^.!?]+[.!?]+[\"']?", flat):
        out.append((m.start(), m.group().strip()))
    return out


def blank_candidates(sentence: str) -> list[str]:
    # A name is a capitalized word right after a lower-case word (so not a sentence's or
    # a quotation's first word); a possessive's "'s" stays outside the blank.
    names = re.findall(r"(?<=[a-z,;] )[A-Z][a-z][A-Za-z-]*", sentence)
    numbers = re.findall(r"(?<![A-Za-z0-9])\d[\d,]*\d(?![A-Za-z0-9])|(?<![A-Za-z0-9])\d(?![A-Za-z0-9])", sentence)
    return [w for w in names if w not in NOT_NAMES and len(w) > 2] + numbers


def make_questions(pid: int, passage: str, per_passage: int) -> list[dict]:
    sents = sentences(passage)
    flat_len = len(re.sub(r"\s+", " ", passage))
    qs = []
    for k in range(per_passage):
        lo, hi = flat_len * k // per_passage, flat_len * (k + 1) // per_passage
        best = None
        for start, s in sents:
            if not lo <= start < hi:
                continue
            n = len(s.split())
            cands = blank_candidates(s)
            # Headings and title lines (words in capitals) are no sentences to ask about.
            if not 8 <= n <= 45 or not cands or re.search(r"\b[A-Z]{3,}\b", s):
                continue
            # Prefer the rarest entity in the passage: a blank with one right answer.
            answer = min(cands, key=lambda w: (passage.count(w), -len(w)))
            key = (passage.count(answer), abs(n - 20))
            if best is None or key < best[0]:
                best = (key, s, answer)
        if best is None:
            continue
        _, s, answer = best
        cloze = re.sub(rf"(?<![A-Za-z0-9]){re.escape(answer)}(?![A-Za-z0-9])", BLANK, s, count=1)
        qs.append({"id": f"p{pid}q{k}", "passage_id": pid, "sentence": s, "question": question_text(cloze),
                   "cloze": cloze, "answer": answer})
    return qs


def build_qa(server: Server, text_path: Path, passage_tokens: int, per_passage: int) -> dict:
    text = body_of(text_path.read_text(encoding="utf-8", errors="replace"))
    passages = cut_passages(text, passage_tokens, server.tokens)
    qa = {"source": str(text_path), "passage_tokens": passage_tokens, "token_counts": "scorer", "passages": [],
          "questions": []}
    for pid, p in enumerate(passages):
        qa["passages"].append({"id": pid, "text": p, "tokens": server.tokens(p)})
        qa["questions"] += make_questions(pid, p, per_passage)
    return qa


# ---- scoring -------------------------------------------------------------------------

def norm(s: str) -> str:
    s = s.strip().lower()
    s = re.sub(r"^(the|a|an)\s+", "", s)
    s = re.sub(r"[^a-z0-9 ]", " ", s)
    return " ".join(s.split()[:3])


def agrees_exactly(a: str, b: str) -> bool:
    return norm(a) == norm(b)


def agrees(a: str, b: str) -> bool:
    # The same answer, or one the other with words added ("Instructor" and "Head
    # Instructor"): both point at the same place in the passage.
    x, y = norm(a).split(), norm(b).split()
    if not x or not y:
        return x == y
    short, long = (x, y) if len(x) <= len(y) else (y, x)
    return any(long[i:i + len(short)] == short for i in range(len(long) - len(short) + 1))


def correct(answer: str, gold: str) -> bool:
    return norm(gold) in norm(answer).split() or norm(answer) == norm(gold)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pagoda", type=Path, default=ROOT / "build" / "bin" / "pagoda")
    ap.add_argument("--target", type=Path, default=MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--scorer", type=Path, default=MODELS / "gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--text", type=Path, default=CACHE / "eval" / "botchan.txt")
    ap.add_argument("--passage-tokens", type=int, default=2100)
    ap.add_argument("--per-passage", type=int, default=4)
    ap.add_argument("--ratios", default="0.5,0.25")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--no-question-words", action="store_true",
                    help="compress without protecting the passage's words that repeat the question's")
    ap.add_argument("--question-share", type=float,
                    help="/v1/compress question_share: the budget share of the sentences the question is about "
                         "(default: the server's, 0.25; 0 turns it off)")
    ap.add_argument("--scorer-vocab", type=int,
                    help="/v1/compress scorer_vocab: normalize over this many frequent tokens (default: the "
                         "server's, 32768; 0: the whole vocabulary)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="answer only the first N questions (0: all)")
    ap.add_argument("--sample", type=int, default=0, help="answer N questions spread evenly over the set (0: all)")
    ap.add_argument("--qa-out", type=Path, default=CACHE / "eval" / "botchan_qa.json")
    ap.add_argument("--qa-only", action="store_true")
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--serve-arg", action="append", default=[], help="extra pagoda serve flag (repeatable)")
    a = ap.parse_args()
    for p, what in ((a.pagoda, "build it"), (a.target, "pagoda pull"), (a.scorer, "pagoda pull"),
                    (a.text, "scripts/fetch_eval_text")):
        if not p.exists():
            log(f"error: {p} is missing ({what})")
            return 1
    threads = a.threads or os.cpu_count() or 1
    ratios = [float(r) for r in a.ratios.split(",")]
    server = Server(a.pagoda, a.target, a.scorer, threads, a.serve_arg)
    try:
        qa = build_qa(server, a.text, a.passage_tokens, a.per_passage)
        a.qa_out.parent.mkdir(parents=True, exist_ok=True)
        a.qa_out.write_text(json.dumps(qa, indent=1, ensure_ascii=False))
        log(f"QA set: {len(qa['passages'])} passages (median {statistics.median(p['tokens'] for p in qa['passages'])} "
            f"scorer tokens), {len(qa['questions'])} questions -> {a.qa_out}")
        if a.qa_only:
            return 0
        questions = qa["questions"][:a.limit] if a.limit else qa["questions"]
        if a.sample:
            step = len(questions) / a.sample
            questions = [questions[int(i * step)] for i in range(min(a.sample, len(questions)))]
        rows = []
        for i, q in enumerate(questions):
            t_q = time.perf_counter()
            passage = qa["passages"][q["passage_id"]]["text"]
            row = {"id": q["id"], "answer": q["answer"]}
            full = server.answer(passage + "\n\n" + q["question"], a.max_tokens)
            row["full"] = full
            for r in ratios:
                c = server.compress(passage, r, q["question"], not a.no_question_words,
                                    question_share=a.question_share, scorer_vocab=a.scorer_vocab)
                ans = server.answer(c["compressed_prompt"], a.max_tokens)
                row[f"r{r}"] = {**ans, "compress_seconds": c["wall"], "compress_server_seconds": c["seconds"],
                                "origin_tokens": c["origin_tokens"], "compressed_tokens": c["compressed_tokens"],
                                "scorer_vocab": c.get("scorer_vocab"),
                                "e2e": c["wall"] + ans["seconds"]}
            row["question_seconds"] = time.perf_counter() - t_q
            rows.append(row)
            log(f"[{i + 1}/{len(questions)}] {q['id']} gold {q['answer']!r}: full {full['text']!r} "
                + " ".join(f"{1 / r:.0f}x {row[f'r{r}']['text']!r}" for r in ratios)
                + f" ({row['question_seconds']:.1f} s)")
        report = summarize(rows, ratios)
        print(json.dumps(report, indent=1))
        if a.json_out:
            a.json_out.write_text(json.dumps({"report": report, "rows": rows}, indent=1))
        return 0
    finally:
        server.stop()


def summarize(rows: list[dict], ratios: list[float]) -> dict:
    n = len(rows)
    out = {"questions": n, "full_accuracy": sum(correct(r["full"]["text"], r["answer"]) for r in rows) / n,
           "seconds_per_question": statistics.mean(r["question_seconds"] for r in rows)}
    prefill = sum(r["full"]["ttft"] for r in rows)
    long_rows = [r for r in rows if r["full"]["prompt_tokens"] >= 2000]
    out["full_prompt_tokens_median"] = statistics.median(r["full"]["prompt_tokens"] for r in rows)
    out["long_prompts"] = len(long_rows)
    if long_rows:
        out["e2e_full_seconds"] = statistics.mean(r["full"]["seconds"] for r in long_rows)
    for r in ratios:
        k = f"r{r}"
        name = f"{1 / r:g}x"
        out[name] = {
            "agreement": sum(agrees(x[k]["text"], x["full"]["text"]) for x in rows) / n,
            "agreement_exact": sum(agrees_exactly(x[k]["text"], x["full"]["text"]) for x in rows) / n,
            "accuracy": sum(correct(x[k]["text"], x["answer"]) for x in rows) / n,
            "achieved_ratio": statistics.mean(x[k]["compressed_tokens"] / x[k]["origin_tokens"] for x in rows),
            "compress_share_of_prefill": sum(x[k]["compress_seconds"] for x in rows) / prefill,
            "compress_seconds_mean": statistics.mean(x[k]["compress_seconds"] for x in rows),
        }
        masses = [x[k]["scorer_vocab"]["mass"] for x in rows if x[k].get("scorer_vocab")]
        if masses:
            out[name]["scorer_vocab_mass_min"] = min(masses)
            out[name]["scorer_vocab_exact_fallbacks"] = sum(x[k]["scorer_vocab"]["tokens"] == 0 for x in rows
                                                            if x[k].get("scorer_vocab"))
        if long_rows:
            out[name]["e2e_seconds"] = statistics.mean(x[k]["e2e"] for x in long_rows)
    out["full_prefill_seconds_mean"] = prefill / n
    out["bars"] = {"agreement_2x>=0.90": out.get("2x", {}).get("agreement", 0) >= 0.90,
                   "agreement_4x>=0.75": out.get("4x", {}).get("agreement", 0) >= 0.75,
                   "compress_share<=0.15": all(out[f"{1 / r:g}x"]["compress_share_of_prefill"] <= 0.15 for r in ratios),
                   "e2e_faster": bool(long_rows) and all(out[f"{1 / r:g}x"].get("e2e_seconds", 1e9) <
                                                         out["e2e_full_seconds"] for r in ratios)}
    return out


if __name__ == "__main__":
    sys.exit(main())
