"""Pagoda's Unigram tokenizer (tokenizer.ggml.model = "t5") against sentencepiece and
llama.cpp. Small Unigram models are trained here with sentencepiece on a generated text,
one per normalizer setting (nmt_nfkc, nmt_nfkc_cf, nfkc, identity, extra whitespace kept,
no dummy prefix, byte fallback, user-defined symbols), converted to GGUF the way
llama.cpp's converter writes T5 vocabularies (tokenizer_oracle_util.ugm_to_gguf), and
every text of tokenizer_texts plus the normalization cases below is compared.

llama.cpp is the reference (Pagoda loads llama.cpp's files) and must agree exactly, ids
and decoded bytes. Where sentencepiece differs from llama.cpp, the comparison with
sentencepiece states the difference instead of skipping the text:
  - remove_extra_whitespaces without add_dummy_prefix: llama.cpp still puts "▁" before
    the first word (it puts one before every word when merging spaces), so its ids are
    sentencepiece's with add_dummy_prefix turned on.
  - add_dummy_prefix without remove_extra_whitespaces: a text of nothing but spaces gets
    no dummy "▁" in llama.cpp; sentencepiece adds one.
  - byte_fallback: llama.cpp's UGM has none; a run of characters no piece covers is one
    <unk> where sentencepiece spells their bytes.
  - ties: llama.cpp sums piece scores in double, sentencepiece in float, so two
    segmentations of equal score (e.g. runs of "a" cut 14+15 or 15+14) may resolve
    differently; both must then spell the same text with the same score.
  - user-defined symbols: the converter writes them as normal pieces, so llama.cpp
    normalizes text that spells them; one that normalization changes (the full-width
    "ＵＤ") is then not matched, where sentencepiece keeps it whole.
Not compared with sentencepiece: invalid UTF-8 (both read U+FFFD, sentencepiece per
invalid sequence, llama.cpp per byte) and control-token text (sentencepiece never parses
it); llama.cpp covers both.

No PyPI package was found shipping a T5/mT5 spiece.model or tokenizer.json (flan-t5-hf
does not build, nai-t5 and tokenizers-pegasus ship code only, mon-tokenizer is a
tokenizers Unigram with regex normalizers, not a SentencePiece model), so there is no
real-vocabulary case.
"""
import ctypes
import io
import math
import pathlib
import random
import subprocess
import sys

import pytest

from oracles import import_oracle, oracle_missing

from tokenizer_oracle_util import decode_many, encode_many, ugm_to_gguf
from tokenizer_texts import INVALID_UTF8, TEXTS, random_texts

spm = import_oracle("sentencepiece")
pb = import_oracle("sentencepiece.sentencepiece_model_pb2")

REPO = pathlib.Path(__file__).resolve().parents[2]

USER_SYMBOLS = ["<extra_id_0>", "<extra_id_1>", "@@", "ＵＤ"]

# Trainer options per case; T5's special ids: <pad> 0, </s> 1, <unk> 2, no <s>.
CONFIGS = {
    "nmt_nfkc": {},  # sentencepiece's default normalizer, as T5 uses it
    "nmt_nfkc_cf": dict(normalization_rule_name="nmt_nfkc_cf"),
    "nfkc": dict(normalization_rule_name="nfkc"),
    "identity": dict(normalization_rule_name="identity"),
    "keep_spaces": dict(remove_extra_whitespaces=False),
    "no_prefix": dict(add_dummy_prefix=False),
    "identity_raw": dict(normalization_rule_name="identity", remove_extra_whitespaces=False,
                         add_dummy_prefix=False),
    "byte_fallback": dict(byte_fallback=True, vocab_size=800),
    "user_symbols": dict(user_defined_symbols=USER_SYMBOLS),
}

# What NFKC and sentencepiece's nmt rules change: full-width forms, ligatures, circled
# and squared compatibility characters, half-width kana, combining sequences, the
# Angstrom sign, soft hyphen / zero-width / BOM (removed), C0 controls, odd spaces.
UGM_TEXTS = [
    "ＨＥＬＬＯ　ｗｏｒｌｄ！　１２３，ｆｕｌｌ－ｗｉｄｔｈ",
    "ﬁﬂ ﬃ ① ⑳ ㍿ ㌀ ｶﾀｶﾅ ﾊﾟﾝ ™ ½ x² H₂O",
    "e\u0301 a\u0308 \u212b \u2126 \u1e9b\u0323",
    "a\u00adb\u200bc\ufeffd\u200de",
    "a\x01b\x7fc\x1bd",
    "tab\tand\u000bvertical\u000cfeed\rreturn",
    "  two  spaces\u00a0nbsp\u2003em\u3000ideographic  ",
    " \t\n ",
    "\u3000",
    "x <extra_id_0> y<extra_id_1>z @@ ＵＤ UD @@@",
    "<extra_id_0>",
    "  <extra_id_1>  tail",
    "[PAD5] <pad> </s> <unk>",
]

# Control-token text: parsed into </s>, <pad>, <unk> only with parse_special.
SPECIAL_TEXTS = ["</s>", "hello</s>", "</s>hello", "<pad><unk>x", "a</s> b</s>\n", "<unk>"]


def _corpus(seed=7):
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "an", "en", "the", "ing", "qu", "ss", "é", "ñ", "ß", "Ж", "я",
                 "中", "文", "の", "한", "λ", "ab", "x", "1", "23", ",", ".", "!", "'", "aa"]
    lines = []
    for _ in range(3000):
        words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
                 for _ in range(rng.randint(1, 12))]
        lines.append(" ".join(words))
    lines += [t.replace("\n", " ") for _, t in TEXTS if t.strip()]
    return lines


def _train(options):
    out = io.BytesIO()
    opts = dict(options)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_corpus()), model_writer=out, model_type="unigram",
        vocab_size=opts.pop("vocab_size", 400), character_coverage=0.9995,
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, minloglevel=2, num_threads=1, **opts)
    return out.getvalue()


def _with_normalizer(model_proto, **fields):
    """A sentencepiece processor for the model with normalizer_spec fields changed."""
    proto = pb.ModelProto()
    proto.ParseFromString(model_proto)
    for k, v in fields.items():
        setattr(proto.normalizer_spec, k, v)
    return spm.SentencePieceProcessor(model_proto=proto.SerializeToString())


class Case:
    def __init__(self, name, model_proto, path):
        self.name = name
        self.proto = model_proto
        self.path = path
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    d = tmp_path_factory.mktemp("ugm")
    out = {}
    for name, options in CONFIGS.items():
        proto = _train(options)
        out[name] = Case(name, proto, ugm_to_gguf(proto, d / f"{name}.gguf"))
    # The same vocabulary with its user-defined symbols typed USER_DEFINED, as the
    # converter types added_tokens.json entries: llama.cpp splits them out first.
    out["added_tokens"] = Case("added_tokens", out["user_symbols"].proto,
                               ugm_to_gguf(out["user_symbols"].proto, d / "added_tokens.gguf",
                                           user_defined=USER_SYMBOLS))
    return out


@pytest.fixture(scope="module")
def llamacpp():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import llamacpp_oracle
        lib = llamacpp_oracle.load_bindings()
    except (ImportError, SystemExit, OSError) as e:
        oracle_missing(f"llama.cpp is not built (scripts/build_llamacpp): {e}")
    quiet = lib.llama_log_callback(lambda level, text, user: None)
    lib.llama_log_set(quiet, ctypes.c_void_p(0))
    lib.llama_backend_init()
    models = []

    class Vocab:
        def __init__(self, path):
            params = lib.llama_model_default_params()
            params.vocab_only = True
            model = lib.llama_model_load_from_file(str(path).encode(), params)
            assert model, f"llama.cpp could not load {path}"
            models.append(model)
            self.vocab = lib.llama_model_get_vocab(model)

        def tokenize(self, data: bytes, special: bool):
            cap = len(data) * 4 + 16
            buf = (lib.llama_token * cap)()
            n = lib.llama_tokenize(self.vocab, data, len(data), buf, cap, special, special)
            assert n >= 0
            return list(buf[:n])

        def detokenize(self, ids, render_special: bool) -> bytes:
            arr = (lib.llama_token * max(1, len(ids)))(*ids)
            cap = 64 + 64 * len(ids)
            buf = ctypes.create_string_buffer(cap)
            n = lib.llama_detokenize(self.vocab, arr, len(ids), buf, cap, False, render_special)
            assert n >= 0
            return buf.raw[:n]

    yield Vocab
    for m in models:
        lib.llama_model_free(m)
    del quiet


@pytest.fixture(scope="module")
def tool(pagoda_bin):
    return pagoda_bin("pagoda-tokenize-tool")


def _texts():
    return [t for _, t in TEXTS] + UGM_TEXTS + random_texts()


def _is_tie(sp, a, b):
    """Both id lists spell the same normalized text with equal total score (float rounding
    apart): a tie that llama.cpp (double) and sentencepiece (float) may break differently."""
    if sp.unk_id() in a or sp.unk_id() in b:
        return False
    spell = lambda ids: "".join(sp.id_to_piece(i) for i in ids)  # noqa: E731
    total = lambda ids: math.fsum(sp.get_score(i) for i in ids)  # noqa: E731
    return spell(a) == spell(b) and math.isclose(total(a), total(b), rel_tol=1e-6, abs_tol=1e-4)


def _sentencepiece_expected(case, text):
    """sentencepiece's ids with the documented llama.cpp differences applied (docstring)."""
    sp = case.sp
    if case.name == "no_prefix":
        return _with_normalizer(case.proto, add_dummy_prefix=True).encode(text)
    if case.name == "keep_spaces" and set(sp.normalize(text)) <= {"▁"}:
        return _with_normalizer(case.proto, add_dummy_prefix=False).encode(text)
    ids = sp.encode(text)
    if case.name == "byte_fallback":
        out = []
        for i in ids:
            if sp.is_byte(i):
                if not out or out[-1] != sp.unk_id():
                    out.append(sp.unk_id())
            else:
                out.append(i)
        ids = out
    return ids


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_ids_match_sentencepiece(name, cases, tool):
    case = cases[name]
    texts = _texts()
    if name == "user_symbols":
        texts = [t for t in texts if "ＵＤ" not in t]
    ours = encode_many(tool, case.path, texts, "--no-special")
    bad, ties = [], 0
    for text, got in zip(texts, ours):
        want = _sentencepiece_expected(case, text)
        if got == want:
            continue
        if _is_tie(case.sp, got, want):
            ties += 1
            continue
        bad.append((text, [case.sp.id_to_piece(i) for i in got], [case.sp.id_to_piece(i) for i in want]))
    assert not bad, f"{name}: {len(bad)} of {len(texts)} differ, first: {bad[0]!r}"
    assert ties <= 3, f"{name}: {ties} ties resolved differently"


def test_byte_fallback_difference_is_real(cases, tool):
    """The byte_fallback vocabulary does spell bytes in sentencepiece for the texts where
    Pagoda and llama.cpp give <unk>, so the comparison above exercised the difference."""
    case = cases["byte_fallback"]
    text = "안녕하세요 😀"
    assert any(case.sp.is_byte(i) for i in case.sp.encode(text))
    assert case.sp.unk_id() in encode_many(tool, case.path, [text], "--no-special")[0]


@pytest.mark.parametrize("special", [False, True], ids=["plain", "special"])
@pytest.mark.parametrize("name", sorted(CONFIGS) + ["added_tokens"])
def test_ids_match_llamacpp(name, special, cases, tool, llamacpp):
    case = cases[name]
    reference = llamacpp(case.path)
    texts = [t.encode() for t in _texts() + SPECIAL_TEXTS] + [raw for _, raw in INVALID_UTF8]
    ours = encode_many(tool, case.path, texts, *(() if special else ("--no-special",)))
    bad = [(t, got, want) for t, got in zip(texts, ours) if got != (want := reference.tokenize(t, special))]
    assert not bad, f"{name}: {len(bad)} of {len(texts)} differ, first: {bad[0]!r}"


@pytest.mark.parametrize("name", sorted(CONFIGS) + ["added_tokens"])
def test_decode_matches_llamacpp(name, cases, tool, llamacpp):
    case = cases[name]
    reference = llamacpp(case.path)
    texts = _texts() + SPECIAL_TEXTS
    id_lists = encode_many(tool, case.path, texts)  # with </s> at the end
    id_lists += [case.sp.encode(t) for t in texts]   # byte pieces for byte_fallback
    id_lists += [[0, 1, 2], [1] + id_lists[3], [2] + id_lists[3], []]
    for render in (False, True):
        ours = decode_many(tool, case.path, id_lists, *(("--render-special",) if render else ()))
        bad = [(ids, got, want) for ids, got in zip(id_lists, ours)
               if got != (want := reference.detokenize(ids, render))]
        assert not bad, f"{name} (render_special={render}): {len(bad)} differ, first: {bad[0]!r}"


def test_decode_matches_sentencepiece(cases, tool):
    """Byte pieces and spaces decode as sentencepiece decodes them (lists without <unk>,
    which sentencepiece renders as " ⁇ ")."""
    for name in ("byte_fallback", "identity_raw", "nmt_nfkc"):
        case = cases[name]
        id_lists = [ids for ids in (case.sp.encode(t) for t in _texts()) if case.sp.unk_id() not in ids]
        ours = decode_many(tool, case.path, id_lists)
        bad = [(ids, got) for ids, got in zip(id_lists, ours) if got.decode() != case.sp.decode(ids)]
        assert not bad, f"{name}: {len(bad)} of {len(id_lists)} differ, first: {bad[0]!r}"


def test_streaming_decode_never_splits_characters(cases, tool):
    case = cases["byte_fallback"]
    for text in _texts()[:40]:
        ids = case.sp.encode(text)
        out = decode_many(tool, case.path, [ids], "--stream")[0].decode()
        chunks = [bytes.fromhex(h) for h in out.split("\n")[:-1]]
        for c in chunks:
            c.decode("utf-8")  # raises if a chunk holds part of a character
        assert b"".join(chunks) == decode_many(tool, case.path, [ids])[0], text


def test_info_names_the_kind(cases, tool):
    out = subprocess.run([str(tool), str(cases["nmt_nfkc"].path), "--info"], capture_output=True,
                         check=True, text=True).stdout
    info = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert info["kind"] == "t5"
    assert (info["bos"], info["eos"], info["unk"], info["add_bos"], info["add_eos"]) == ("-1", "1", "2", "false", "true")
