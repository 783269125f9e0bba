"""`pagoda compress` end to end: a generated tiny model (runs everywhere) and Gemma 3 270M
(the scorer the issue names; skipped when not fetched, failing under PAGODA_PARITY=1):
the ratio is reached, the instruction and question come back whole, sentence-final
punctuation and line breaks stay, whole words are dropped (never pieces of one), and
bad input is one clear error line."""
import difflib
import json
import re
import subprocess

import pytest

from oracles import CACHE, cached_model, oracle_missing
from server_util import gen_tiny_model

TEXT = ("The old house stood at the end of a quiet lane near Matsuyama. Its garden held a chestnut tree that "
        "the boy loved more than anything! Every autumn he climbed it to shake down the nuts, and his "
        "brother laughed at him from the porch. Why did he climb so high?\n"
        "One day a neighbour named Kantaro came over the fence to steal the chestnuts. The boy caught him "
        "and they wrestled in the dirt until the sun went down. Twelve years later he still remembered "
        "the fight, and the scar on his thumb.\n")


@pytest.fixture(scope="module")
def tiny(pagoda_bin, tmp_path_factory):
    return gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("compress") / "tiny.gguf", ctx=4096)


def compress(pagoda_bin, model, *args, text=TEXT, tmp_path=None, check=True):
    path = tmp_path / "in.txt"
    path.write_text(text)
    r = subprocess.run([str(pagoda_bin("pagoda")), "compress", "-m", str(model), "-f", str(path), "-t", "2", *args],
                       capture_output=True, text=True, timeout=600)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def structure(text):
    return [c for c in text if c in ".!?\n"]


def test_tiny_ratio_structure_and_parts_whole(pagoda_bin, tiny, tmp_path):
    r = compress(pagoda_bin, tiny, "--ratio", "0.5", "--json", "--question", "Who stole the chestnuts?",
                 "--instruction", "Answer from the text.", tmp_path=tmp_path)
    j = json.loads(r.stdout)
    assert j["origin_tokens"] > 200
    assert abs(j["compressed_tokens"] / j["origin_tokens"] - 0.5) < 0.06, j
    out = j["compressed_prompt"]
    assert out.startswith("Answer from the text.\n\n")
    assert out.endswith("\n\nWho stole the chestnuts?")
    context = out[len("Answer from the text.\n\n"):-len("\n\nWho stole the chestnuts?")]
    assert structure(context) == structure(TEXT.rstrip("\n"))
    assert j["seconds"] > 0 and j["token_counts"] == "scorer"


def test_tiny_text_output_and_counts_on_stderr(pagoda_bin, tiny, tmp_path):
    r = compress(pagoda_bin, tiny, "--ratio", "0.25", tmp_path=tmp_path)
    m = re.search(r"compressed (\d+) -> (\d+) tokens \(the scorer's tokens\), ratio ([0-9.]+)", r.stderr)
    assert m, r.stderr
    assert abs(int(m.group(2)) / int(m.group(1)) - 0.25) < 0.06
    assert len(r.stdout) < 0.6 * len(TEXT)


def test_tiny_ratio_one_keeps_everything_and_iterative_reaches_the_ratio(pagoda_bin, tiny, tmp_path):
    r = compress(pagoda_bin, tiny, "--ratio", "1", "--json", tmp_path=tmp_path)
    assert json.loads(r.stdout)["compressed_prompt"] == TEXT.rstrip("\n")
    r = compress(pagoda_bin, tiny, "--ratio", "0.5", "--json", "--iterative", "--segment-tokens", "64",
                 tmp_path=tmp_path)
    j = json.loads(r.stdout)
    assert abs(j["compressed_tokens"] / j["origin_tokens"] - 0.5) < 0.06, j
    assert structure(j["compressed_prompt"]) == structure(TEXT.rstrip("\n"))


@pytest.mark.parametrize("args,needle", [
    (["--ratio", "0"], "--ratio 0 is outside (0, 1]"),
    (["--ratio", "1.5"], "--ratio 1.5 is outside (0, 1]"),
    (["--ratio", "-1"], "--ratio -1 is outside (0, 1]"),
    (["--granularity", "char"], "--granularity char is not word or token"),
])
def test_bad_flags_are_one_error_line(pagoda_bin, tiny, tmp_path, args, needle):
    r = compress(pagoda_bin, tiny, *args, tmp_path=tmp_path, check=False)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [f"error: {needle}"], r.stderr


def test_empty_text_is_one_error_line(pagoda_bin, tiny, tmp_path):
    r = compress(pagoda_bin, tiny, "--ratio", "0.5", text=" \n\n", tmp_path=tmp_path, check=False)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == ["error: the prompt is empty: nothing to compress"], r.stderr


def words(text):
    return {w.strip(".,;:!?\"'()-") for w in text.split()} - {""}


def gemma_and_book():
    """Gemma 3 270M and the evaluation text (skipped outside CI when not fetched)."""
    gemma = cached_model("gemma-3-270m-q4_k_m.gguf", "`pagoda pull` (scripts/fetch_test_data)")
    book = CACHE / "eval" / "botchan.txt"
    if not book.exists():
        oracle_missing(f"{book} is not present (scripts/fetch_eval_text)")
    return gemma, book.read_text()


def test_gemma_drops_whole_words_and_keeps_names(pagoda_bin, tmp_path):
    gemma, book = gemma_and_book()
    text = book[20000:24000]
    question = "Who was the boy's friend?"
    r = compress(pagoda_bin, gemma, "--ratio", "0.5", "--json", "--question", question, text=text,
                 tmp_path=tmp_path)
    j = json.loads(r.stdout)
    assert abs(j["compressed_tokens"] / j["origin_tokens"] - 0.5) < 0.05, j
    out = j["compressed_prompt"]
    assert out.endswith("\n\n" + question)
    context = out[:-len("\n\n" + question)]
    # Every word left is a word of the text: whole words go, never a piece of one.
    assert words(context) <= words(text), words(context) - words(text)
    assert structure(context) == structure(text.strip())
    # Names and numbers are protected (within their share of the budget, which this
    # passage's do not exceed): those of the text mostly survive, common words do not.
    names = {w for w in re.findall(r"(?<=[a-z,;] )[A-Z][a-z]+", text) if w != "I"}
    kept = {w for w in names if re.search(rf"\b{w}\b", context)}
    assert len(kept) >= 0.9 * len(names), names - kept
    common = re.findall(r"\b(?:the|a|of|to|and)\b", text)
    assert len(re.findall(r"\b(?:the|a|of|to|and)\b", context)) < 0.6 * len(common)


def test_tiny_question_words_are_protected(pagoda_bin, tiny, tmp_path):
    question = "Why did the neighbour wrestle near the chestnut fence?"
    asked = {"neighbour", "wrestled", "chestnut", "fence"} & set(re.findall(r"[a-z]+", TEXT))
    # The tiny vocabulary spells words letter by letter: a share of 0.6 leaves room for
    # the names and these words.
    r = compress(pagoda_bin, tiny, "--ratio", "0.5", "--name-share", "0.6", "--json", "--question", question,
                 tmp_path=tmp_path)
    context = json.loads(r.stdout)["compressed_prompt"][:-len(question)]
    got = set(re.findall(r"[a-z]+", context))
    assert {"neighbour", "chestnut", "fence"} <= got, got
    r = compress(pagoda_bin, tiny, "--ratio", "0.5", "--name-share", "0.6", "--json", "--question", question,
                 "--no-question-words", "--question-share", "0",
                 tmp_path=tmp_path)
    context = json.loads(r.stdout)["compressed_prompt"][:-len(question)]
    assert not {"neighbour", "chestnut", "fence"} <= set(re.findall(r"[a-z]+", context)), asked


ASKED = "One day a neighbour named Kantaro came over the fence to steal the chestnuts."


def spaced(text):
    # The tiny vocabulary has no piece for a space before a capital: SentencePiece's
    # marker comes back spelled in bytes.
    return text.replace("\u2581", " ")


def test_tiny_the_sentence_the_question_is_about_stays_whole(pagoda_bin, tiny, tmp_path):
    question = "Who came over the fence to steal the chestnuts?"
    # The tiny vocabulary spells words letter by letter: the sentence (68 tokens) needs
    # half of the context's budget at 2x.
    args = ["--ratio", "0.5", "--json", "--question", question, "--no-question-words"]
    j = json.loads(compress(pagoda_bin, tiny, *args, "--question-share", "0.5", tmp_path=tmp_path).stdout)
    assert abs(j["compressed_tokens"] / j["origin_tokens"] - 0.5) < 0.06, j
    assert ASKED in spaced(j["compressed_prompt"]), j["compressed_prompt"]
    # Too long for the default share, or no share: pruned like the rest (the scorer is random).
    for share in ("0.25", "0"):
        j = json.loads(compress(pagoda_bin, tiny, *args, "--question-share", share, tmp_path=tmp_path).stdout)
        assert ASKED not in spaced(j["compressed_prompt"])
    # Without a question nothing is pinned.
    j = json.loads(compress(pagoda_bin, tiny, "--ratio", "0.5", "--question-share", "0.5", "--json",
                            tmp_path=tmp_path).stdout)
    assert ASKED not in spaced(j["compressed_prompt"])


def test_tiny_a_subset_that_holds_too_little_falls_back_to_the_exact_normalizer(pagoda_bin, tiny, tmp_path):
    # 512 tokens: the default subset (32,768) is the whole vocabulary, so exact.
    exact = json.loads(compress(pagoda_bin, tiny, "--ratio", "0.5", "--json", tmp_path=tmp_path).stdout)
    assert exact["scorer_vocab"] is None
    # 100 frequent tokens plus the text's hold far less than 0.9 of a random model's rows.
    r = compress(pagoda_bin, tiny, "--ratio", "0.5", "--json", "--scorer-vocab", "100", tmp_path=tmp_path)
    j = json.loads(r.stdout)
    assert j["scorer_vocab"]["tokens"] == 0 and 0 < j["scorer_vocab"]["mass"] < 0.9, j["scorer_vocab"]
    assert j["compressed_prompt"] == exact["compressed_prompt"]
    r = compress(pagoda_bin, tiny, "--ratio", "0.5", "--scorer-vocab", "100", tmp_path=tmp_path)
    assert "(exact normalizer; a subset would have held 0." in r.stderr, r.stderr


def kept_share(exact, approx):
    """The share of the exact result's words the approximate one keeps, in order."""
    a, b = exact.split(), approx.split()
    same = sum(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
    return same / len(a)


def test_gemma_frequent_token_normalizer_keeps_what_the_exact_one_keeps(pagoda_bin, tmp_path):
    gemma, book = gemma_and_book()
    text = book[30000:38000]
    for ratio in ("0.5", "0.25"):
        exact = json.loads(compress(pagoda_bin, gemma, "--ratio", ratio, "--json", "--scorer-vocab", "0", text=text,
                                    tmp_path=tmp_path).stdout)
        assert exact["scorer_vocab"] is None
        j = json.loads(compress(pagoda_bin, gemma, "--ratio", ratio, "--json", text=text, tmp_path=tmp_path).stdout)
        # The 32,768 most frequent of 262,144 tokens plus the text's hold most of each row's
        # probability, and the ranking of the words hardly moves.
        assert j["scorer_vocab"]["tokens"] >= 32768 and 0.9 < j["scorer_vocab"]["mass"] < 1.0, j["scorer_vocab"]
        assert j["compressed_tokens"] == pytest.approx(exact["compressed_tokens"], abs=3)
        assert kept_share(exact["compressed_prompt"], j["compressed_prompt"]) >= 0.95
