"""A tiny BERT cross-encoder (Hugging Face's BertForSequenceClassification, one label) for
the rerank tests, independently of Pagoda's code: the folder is written here with numpy
(config.json, model.safetensors with random weights, a WordPiece tokenizer.json and
tokenizer_config.json), and the reference score is a float64 numpy forward of the Hugging
Face model from those safetensors:

  ids, type_ids = the `tokenizers` pair encoding of (query, document): [CLS] q [SEP] d [SEP],
                  type 0 through the first [SEP], type 1 after (the post-processor's "$B:1")
  x     = LayerNorm(word[ids] + position[0..n) + token_type[type_ids])
  layer = post-LN BERT: x = LN(x + attn(x)); x = LN(x + W2 gelu_erf(W1 x))
  score = classifier . tanh(pooler . x[0] + pooler_b) + classifier_b   (the raw logit)

The weights are scaled so that every part shows in the score: the two token-type rows
differ by about as much as a word's embedding, and the pooler's inputs reach the curved
part of tanh."""
import json
import math
import pathlib
import struct

import numpy as np

from minilm_reference import bert_hidden_states

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a an of to in on and is are was for with that this it as by from at be or not what which how when "
         "who does do cat dog sat mat paris france capital city river rain weather engine model token tokens "
         "attention cache block blocks batch query document rank score memory paged kv prefix").split()
CHARS = list("abcdefghijklmnopqrstuvwxyz0123456789") + list(".,?!'-:;()")


def vocabulary():
    pieces = SPECIALS + CHARS + [w for w in WORDS if w not in CHARS] + ["##" + c for c in
                                                                         "abcdefghijklmnopqrstuvwxyz0123456789"]
    return {p: i for i, p in enumerate(pieces)}


def tokenizer_json(vocab):
    special = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for t in SPECIALS]

    def tok(t, type_id):
        return {"SpecialToken": {"id": t, "type_id": type_id}}

    def seq(s, type_id):
        return {"Sequence": {"id": s, "type_id": type_id}}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0)],
            "pair": [tok("[CLS]", 0), seq("A", 0), tok("[SEP]", 0), seq("B", 1), tok("[SEP]", 1)],
            "special_tokens": {t: {"id": t, "ids": [vocab[t]], "tokens": [t]} for t in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


def write_safetensors(path, tensors):
    """{name: float32 array} as one safetensors file (8-byte header length, JSON, data)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    return {k: np.frombuffer(data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             dtype=np.float32).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def write_folder(folder, seed=1, equal_type_rows=False, hidden=32, layers=2, heads=4, ff=64, ctx=128,
                 config_extra=None, drop=()):
    """The Hugging Face folder of a random BertForSequenceClassification with one label.
    equal_type_rows: token type 1's embedding equals type 0's (for an oracle that adds
    type 0 to every token). config_extra: keys to set (None deletes); drop: tensor names
    to leave out."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    rng = np.random.default_rng(seed)

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)
    E = hidden
    t = {
        "bert.embeddings.word_embeddings.weight": normal((len(vocab), E), 1.0),
        "bert.embeddings.position_embeddings.weight": normal((ctx, E), 0.3),
        "bert.embeddings.token_type_embeddings.weight": normal((2, E), 1.0),
        "bert.embeddings.LayerNorm.weight": 1.0 + normal((E,), 0.1),
        "bert.embeddings.LayerNorm.bias": normal((E,), 0.1),
        "bert.pooler.dense.weight": normal((E, E), 1.5 / math.sqrt(E)),
        "bert.pooler.dense.bias": normal((E,), 0.1),
        "classifier.weight": normal((1, E), 3.0 / math.sqrt(E)),
        "classifier.bias": normal((1,), 0.1),
    }
    if equal_type_rows:
        types = t["bert.embeddings.token_type_embeddings.weight"]
        types[1] = types[0]
    for layer in range(layers):
        p = f"bert.encoder.layer.{layer}."
        for name, rows, cols in (("attention.self.query", E, E), ("attention.self.key", E, E),
                                 ("attention.self.value", E, E), ("attention.output.dense", E, E),
                                 ("intermediate.dense", ff, E), ("output.dense", E, ff)):
            t[p + name + ".weight"] = normal((rows, cols), 1.0 / math.sqrt(cols))
            t[p + name + ".bias"] = normal((rows,), 0.1)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + name + ".weight"] = 1.0 + normal((E,), 0.1)
            t[p + name + ".bias"] = normal((E,), 0.1)
    for name in drop:
        del t[name]
    write_safetensors(folder / "model.safetensors", t)
    config = {
        "architectures": ["BertForSequenceClassification"], "model_type": "bert", "hidden_size": E,
        "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": ff, "hidden_act": "gelu",
        "max_position_embeddings": ctx, "type_vocab_size": 2, "vocab_size": len(vocab), "layer_norm_eps": 1e-12,
        "position_embedding_type": "absolute", "pad_token_id": 0, "id2label": {"0": "LABEL_0"},
        "label2id": {"LABEL_0": 0},
    }
    for k, v in (config_extra or {}).items():
        if v is None:
            config.pop(k, None)
        else:
            config[k] = v
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json(vocab)))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "do_lower_case": True, "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
        "cls_token": "[CLS]", "mask_token": "[MASK]", "tokenizer_class": "BertTokenizer", "model_max_length": ctx}))
    return folder


class CrossEncoder:
    """The float64 reference of a folder written by write_folder."""

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        self.config = json.loads((self.folder / "config.json").read_text())
        self.t = {k.removeprefix("bert."): v.astype(np.float64)
                  for k, v in read_safetensors(self.folder / "model.safetensors").items()}

    def tokenizer(self):
        import tokenizers
        tok = tokenizers.Tokenizer.from_str((self.folder / "tokenizer.json").read_text())
        tok.no_padding()
        tok.no_truncation()
        return tok

    def encode(self, query, document):
        """(ids, type_ids) of the pair as Hugging Face's tokenizer encodes it."""
        e = self.tokenizer().encode(query, document)
        return e.ids, e.type_ids

    def score(self, ids, type_ids, tanh=True):
        t = self.t

        def lin(x, p):
            return x @ t[p + ".weight"].T + t[p + ".bias"]
        x = bert_hidden_states(t, self.config, ids, type_ids)
        pooled = lin(x[0], "pooler.dense")
        if tanh:
            pooled = np.tanh(pooled)
        return float(lin(pooled, "classifier")[0])

    def scores(self, query, documents):
        return [self.score(*self.encode(query, d)) for d in documents]
