#!/usr/bin/env python3
"""Retrieval-augmented answering against one `pagoda serve`: index a text with
/v1/embeddings, retrieve the chunks nearest a question, optionally compress them
(the server's prompt compression), and answer with /v1/chat/completions.

  examples/rag/rag.py --base-url http://127.0.0.1:8080/v1 --text book.txt --question "Who ...?"
  examples/rag/rag.py --base-url ... --text book.txt --eval qa.json [--k 5]   # retrieval recall@k

Retrieval is hybrid by default: the embedding ranking (cosine to the question's
/v1/embeddings vector) and a BM25 ranking of the same chunks, fused by reciprocal rank
(each chunk scores 1/(60 + rank) in each list), the usual remedy for an embedding model's
weakness on exact names and rare words; --dense-only keeps the embedding ranking alone.

The server is one base URL: the generating model answers and `--embedding-model` embeds
(see run.sh). The index is cached beside the text (FILE.rag-index.npz, keyed by the text's
hash, the chunking and the embedding model's reply width), so asking again costs one
embedding of the question.

Chunking: paragraphs (blank-line separated; single newlines are line wraps) are cut into
chunks of about --chunk-words words at sentence ends, each chunk overlapping the previous
by its last sentence, so an answer near a cut is whole in one of them."""
from __future__ import annotations

import argparse
import collections
import hashlib
import math
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
from openai import OpenAI

# A sentence ends at . ! or ? and any closing quotes or brackets, before whitespace.
SENTENCE = re.compile(r"\S.*?(?:[.!?][\"')\]]*(?=\s)|$)", re.S)


def sentences(paragraph: str) -> list[str]:
    return [m.group(0).strip() for m in SENTENCE.finditer(paragraph) if m.group(0).strip()]


def chunk_text(text: str, chunk_words: int) -> list[str]:
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]
    chunks: list[str] = []
    current: list[str] = []
    words = 0
    for p in paragraphs:
        for s in sentences(p):
            n = len(s.split())
            if current and words + n > chunk_words:
                chunks.append(" ".join(current))
                current = current[-1:]  # one sentence of overlap
                words = len(current[0].split())
            current.append(s)
            words += n
    if current:
        chunks.append(" ".join(current))
    return chunks


def embed(client: OpenAI, texts: list[str], batch: int = 256) -> np.ndarray:
    out = []
    for i in range(0, len(texts), batch):
        r = client.embeddings.create(model="embedding", input=texts[i:i + batch])
        out.extend(d.embedding for d in r.data)
    v = np.array(out, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class Bm25:
    """Okapi BM25 (k1 1.2, b 0.75) over the chunks, from an inverted index."""

    def __init__(self, chunks: list[str], k1: float = 1.2, b: float = 0.75):
        docs = [words(c) for c in chunks]
        self.n = len(docs)
        avg = sum(len(d) for d in docs) / max(1, self.n)
        self.postings: dict[str, list[tuple[int, float]]] = collections.defaultdict(list)
        for i, d in enumerate(docs):
            norm = k1 * (1 - b + b * len(d) / avg)
            for w, f in collections.Counter(d).items():
                self.postings[w].append((i, f * (k1 + 1) / (f + norm)))

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n)
        for w in set(words(query)):
            posting = self.postings.get(w)
            if not posting:
                continue
            idf = math.log(1 + (self.n - len(posting) + 0.5) / (len(posting) + 0.5))
            for i, tf in posting:
                out[i] += idf * tf
        return out


class Index:
    def __init__(self, client: OpenAI, text_path: Path, chunk_words: int):
        text = text_path.read_text(encoding="utf-8", errors="replace")
        self.chunks = chunk_text(text, chunk_words)
        self.bm25 = Bm25(self.chunks)
        key = hashlib.sha256(f"{chunk_words}\0{text}".encode()).hexdigest()[:16]
        cache = text_path.with_name(text_path.name + ".rag-index.npz")
        if cache.exists():
            saved = np.load(cache)
            if str(saved["key"]) == key:
                self.vectors = saved["vectors"]
                return
        t0 = time.perf_counter()
        self.vectors = embed(client, self.chunks)
        print(f"indexed {len(self.chunks)} chunks in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        try:
            np.savez(cache, key=key, vectors=self.vectors)
        except OSError:
            pass  # a read-only folder: index again next time

    def search(self, client: OpenAI, question: str, k: int, dense_only: bool = False) -> list[int]:
        q = embed(client, [question])[0]
        dense = np.argsort(-(self.vectors @ q))
        if dense_only:
            return [int(i) for i in dense[:k]]
        fused: collections.Counter = collections.Counter()
        for ranking in (dense[:50], np.argsort(-self.bm25.scores(question))[:50]):
            for rank, i in enumerate(ranking):
                fused[int(i)] += 1.0 / (60 + rank)
        return [i for i, _ in fused.most_common(k)]


def answer(client: OpenAI, question: str, context: str, compress: float | None, max_tokens: int) -> str:
    system = "Answer the question from the context. Reply with the answer only, in a few words."
    user = f"Context:\n{context}\n\nQuestion: {question}"
    extra = {"compress_prompt": {"ratio": compress}} if compress else {}
    r = client.chat.completions.create(model="chat", temperature=0, max_tokens=max_tokens,
                                       messages=[{"role": "system", "content": system},
                                                 {"role": "user", "content": user}],
                                       extra_body=extra or None)
    return r.choices[0].message.content.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--text", type=Path, required=True, help="the text to index")
    ap.add_argument("--question", help="a question to answer")
    ap.add_argument("--eval", type=Path, help="a QA set (JSON, bench/compression_qa.py's): report recall@k")
    ap.add_argument("--k", type=int, default=5, help="chunks retrieved (default 5)")
    ap.add_argument("--chunk-words", type=int, default=60)
    ap.add_argument("--dense-only", action="store_true", help="rank by the embeddings alone (no BM25 fusion)")
    ap.add_argument("--compress", type=float, help="compress the retrieved context to this ratio before answering")
    ap.add_argument("--max-tokens", type=int, default=32)
    a = ap.parse_args()
    client = OpenAI(base_url=a.base_url, api_key="none", timeout=600, max_retries=0)
    index = Index(client, a.text, a.chunk_words)
    if a.eval:
        qa = json.loads(a.eval.read_text())
        items = qa["questions"] if isinstance(qa, dict) else qa
        hits = 0
        for item in items:
            top = index.search(client, item["question"], a.k, a.dense_only)
            # The sentence the question was made from (bench/compression_qa.py's "sentence").
            evidence = " ".join(item.get("sentence", item.get("evidence", "")).split())
            hits += any(evidence in index.chunks[i] for i in top)
        print(json.dumps({"questions": len(items), "k": a.k, "recall": hits / len(items),
                          "chunks": len(index.chunks), "retrieval": "dense" if a.dense_only else "hybrid"}))
        return 0
    if not a.question:
        ap.error("give --question or --eval")
    top = index.search(client, a.question, a.k, a.dense_only)
    context = "\n\n".join(index.chunks[i] for i in sorted(top))
    print(answer(client, a.question, context, a.compress, a.max_tokens))
    return 0


if __name__ == "__main__":
    sys.exit(main())
