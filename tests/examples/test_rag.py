"""examples/rag/rag.py end to end against a `pagoda serve` with a tiny generating model and
a tiny BERT as --embedding-model: it indexes, finds each question's sentence (the BM25
half of the fusion makes that certain even with random embeddings), caches the index, and
answers through the chat endpoint. Plus its chunking, whose overlap keeps every sentence
whole in some chunk."""
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "server"))
sys.path.insert(0, str(ROOT / "examples" / "rag"))
import rag  # noqa: E402
from server_util import Server, gen_tiny_model  # noqa: E402

SENTENCES = [f"The {w} of item number {i} was kept in the {p} room." for i, (w, p) in
             enumerate(zip(["lantern", "teapot", "ledger", "kimono", "abacus", "fan", "scroll", "bell"] * 5,
                           ["north", "south", "east", "west", "upper"] * 8))]


def test_chunks_overlap_so_every_sentence_is_whole_somewhere():
    text = "\n\n".join(" ".join(SENTENCES[i:i + 4]) for i in range(0, len(SENTENCES), 4))
    chunks = rag.chunk_text(text, 30)
    assert len(chunks) > 3
    for s in SENTENCES:
        assert any(s in c for c in chunks), s
    assert all(len(c.split()) <= 30 + 12 for c in chunks)


@pytest.fixture(scope="module")
def server(pagoda_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("rag")
    bert = d / "bert.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "bert", "--dim", "64", "--layers", "2",
                        "--heads", "4", "--kv-heads", "4", "--ff", "128", "--ctx", "128", "-o", str(bert)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    s = Server(pagoda_bin, gen_tiny_model(pagoda_bin, d / "tiny.gguf"), "--embedding-model", str(bert))
    yield s
    assert s.terminate() == 0, s.output()


def test_indexes_retrieves_and_answers(server, tmp_path):
    text = tmp_path / "book.txt"
    text.write_text("\n\n".join(" ".join(SENTENCES[i:i + 4]) for i in range(0, len(SENTENCES), 4)))
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps({"questions": [{"question": s.replace("room", "____"), "sentence": s}
                                            for s in SENTENCES[::5]]}))
    base = ["--base-url", server.base + "/v1", "--text", str(text), "--chunk-words", "30"]
    def recall(*extra):
        r = subprocess.run([sys.executable, str(ROOT / "examples" / "rag" / "rag.py"), *base, "--eval", str(qa), "--k",
                            "3", *extra], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["questions"] == len(SENTENCES[::5])
        return out["recall"]
    # A random BERT ranks at random; fused with BM25 the sentences are found (deterministic:
    # the model and the texts are fixed).
    hybrid, dense = recall(), recall("--dense-only")
    assert hybrid >= 0.75 and hybrid - dense >= 0.25, (hybrid, dense)
    assert (tmp_path / "book.txt.rag-index.npz").exists()
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "rag" / "rag.py"), *base, "--question",
                        "Where was the teapot kept?", "--k", "1", "--max-tokens", "4"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    assert "indexed" not in r.stderr  # the second run read the cached index
