"""Texts the tokenizer oracle tests compare on (imported by test_tokenizer_vs_*.py).

Each entry is (name, text). They cover what tends to break tokenizers: scripts without
spaces, characters outside the BMP, whitespace runs of every kind, digit runs (the BPE
pre-tokenizers split them differently), contractions, code, and empty/blank input.
"""

TEXTS = [
    ("empty", ""),
    ("space", " "),
    ("spaces", "   "),
    ("english", "Hello world! The quick brown fox jumps over the lazy dog."),
    ("sentence_punct", "Wait... what?! \"Quoted\", (parenthesised) [bracketed] {braced}; a-b_c"),
    ("contractions", "I'm sure you'll see it's what they've done, isn't it? I'D SAY WE'RE DONE."),
    ("leading_trailing", "  leading and trailing spaces  "),
    ("tabs", "\tcol1\tcol2\t\tcol4\t"),
    ("newlines", "line one\nline two\n\nline four\r\nwindows line\n"),
    ("newline_runs", "\n\n\n   \n\t \n  x"),
    ("space_runs", "a  b   c    d     e                f"),
    ("only_newlines", "\n\n"),
    ("digits", "1 12 123 1234 12345 123456789 3.14159 1,000,000 0x1F 2024-06-01"),
    ("chinese", "你好，世界！今天天气很好，我们去公园散步吧。"),
    ("japanese", "こんにちは世界。カタカナとひらがな、そして漢字を混ぜた文章です。"),
    ("korean", "안녕하세요 세계"),
    ("emoji", "I ❤️ tokenizers 😀👍🏽 🇫🇷 👨‍👩‍👧‍👦!"),
    ("mixed_scripts", "English, Русский, Ελληνικά, עברית, العربية, हिन्दी, ไทย and 中文 mixed."),
    ("accents", "naïve café résumé façade Ångström déjà vu"),
    ("code", "def f(x):\n    return x ** 2  # square\n\nfor i in range(10):\n\tprint(f(i), end='')\n"),
    ("code_c", "int main(void) { printf(\"%d\\n\", a[i] >= 0 && b != NULL); return 0; }"),
    ("symbols", "$100 @user #tag 50% a&b <tag> ~/path |pipe| `tick` ^caret \\back"),
    ("special_looking", "<s> </s> <unk> <|endoftext|> <start_of_turn>"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism"),
    ("url", "https://example.com/path?q=a+b&x=%20y#frag"),
    ("math", "∑ x² + √y ≤ ∞ → α β γ ∂f/∂x"),
    ("repeated", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    ("unicode_spaces", "a\u00a0b\u3000c\u2009d"),
]

# Byte strings that are not valid UTF-8: a lone continuation byte, bytes that never
# occur in UTF-8, a truncated 3-byte and 4-byte sequence, an overlong encoding and an
# encoded UTF-16 surrogate.
INVALID_UTF8 = [
    ("lone_continuation", b"ab\x80cd"),
    ("ff_fe", b"x \xff\xfe y"),
    ("truncated_cjk", "中".encode()[:2] + b"A"),
    ("truncated_emoji_end", b"smile " + "😀".encode()[:3]),
    ("overlong_slash", b"a\xc0\xafb"),
    ("surrogate", b"s\xed\xa0\x80t"),
]


def random_texts(count=300, seed=1234):
    """Short random strings from an alphabet chosen to hit the pre-tokenizer's edges:
    apostrophes before letters of either case, digits next to letters, space/tab/newline
    mixtures, punctuation runs, non-Latin letters and marks, emoji with joiners."""
    import random
    rng = random.Random(seed)
    alphabet = (list("aAbsStTdDmMlLrReEvVxyz") + list("0123456789") + [" "] * 8 +
                ["\t", "\n", "\r", "\r\n", "\u00a0", "\u3000"] + list("'''.,!?-_()[]{}<>/\\\"#$%&*+=@^`|~") +
                ["é", "ß", "ñ", "Ж", "я", "λ", "中", "文", "字", "の", "カ", "한", "ا", "ب", "ह", "्", "ि",
                 "\u0301", "😀", "👍", "🏽", "\u200d", "❤", "\ufe0f", "①", "½", "٣", "Ⅻ"])
    texts = []
    for _ in range(count):
        n = rng.randint(1, 40)
        texts.append("".join(rng.choice(alphabet) for _ in range(n)))
    return texts
