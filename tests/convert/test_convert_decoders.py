"""`pagoda convert` on decoder checkpoints, round trip: a random GGUF from pagoda-gen-model
is written out as the Hugging Face folder it would have come from (config.json, a
safetensors file written by hand, a byte-level BPE tokenizer.json), with llama.cpp's
conversions undone (Llama's Q/K row permutation back to HF's rotate-half layout, Gemma's
stored 1 + w back to w); `pagoda convert --type F32` must give back every tensor exactly,
the same hyper-parameter keys, and the same greedy tokens from `pagoda run`.

The tokenizer.json is built here: the 256 GPT-2 byte symbols, merges of letter pairs,
two special tokens, and the family's pre-tokenizer (Llama 3's or Qwen2's Split regex);
the converted vocabulary must tokenize the varied text set as Hugging Face `tokenizers`
does on that file.
"""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from oracles import import_oracle

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tokenizer"))
from tokenizer_oracle_util import encode_many  # noqa: E402
from tokenizer_texts import TEXTS  # noqa: E402

from convert_test_util import gguf_fields, gguf_tensor, run_convert, write_safetensors  # noqa: E402

LLAMA3_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN2_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
               "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")

FAMILIES = {
    # arch: (HF class, pre-tokenizer regex, llama.cpp's tokenizer.ggml.pre)
    "llama": ("LlamaForCausalLM", LLAMA3_REGEX, "llama-bpe"),
    "qwen2": ("Qwen2ForCausalLM", QWEN2_REGEX, "qwen2"),
    "qwen3": ("Qwen3ForCausalLM", QWEN2_REGEX, "qwen2"),
    "gemma3": ("Gemma3ForCausalLM", QWEN2_REGEX, "qwen2"),
}


def byte_symbols():
    """GPT-2's byte-to-unicode table: the printable bytes as themselves, the rest shifted past 255."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


def bpe_tokenizer(n_vocab, regex):
    """(tokenizer.json, its pieces by id) with n_vocab tokens: 256 byte symbols, merges, 2 specials."""
    pieces = byte_symbols()
    letters = "etaoinshrdlucmfwypvbgk"
    space = "\u0120"  # GPT-2's symbol for the space byte
    merges = []
    candidates = [(space, c) for c in letters] + [(a, b) for a in letters for b in letters]
    for a, b in candidates:
        if len(pieces) >= n_vocab - 2:
            break
        merges.append([a, b])
        pieces.append(a + b)
    specials = ["<|endoftext|>", "<|im_end|>"]
    base = len(pieces)
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": base + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in enumerate(specials)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {p: i for i, p in enumerate(pieces)}, "merges": merges},
    }
    return tj, pieces + specials


def undo_permute(w, n_head):
    """HF's rotate-half row order from llama.cpp's interleaved one (inverse of its permute())."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(arch, gguf_name):
    fixed = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    if gguf_name in fixed:
        return fixed[gguf_name]
    _, layer, rest = gguf_name.split(".", 2)
    stem, kind = rest.rsplit(".", 1)
    post = "post_attention_layernorm"
    table = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
             "attn_norm": "input_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj",
             "ffn_norm": "pre_feedforward_layernorm" if arch == "gemma3" else post,
             "post_attention_norm": post, "post_ffw_norm": "post_feedforward_layernorm"}
    return f"model.layers.{layer}.{table[stem]}.{kind}"


def write_hf_folder(gguf_mod, src, arch, folder):
    reader = gguf_mod.GGUFReader(src)
    f = gguf_fields(reader)
    a = arch
    heads, kv_heads = f[f"{a}.attention.head_count"], f[f"{a}.attention.head_count_kv"]
    n_vocab = len(f["tokenizer.ggml.tokens"])
    names = {t.name for t in reader.tensors}
    config = {
        "architectures": [FAMILIES[arch][0]], "model_type": arch,
        "hidden_size": f[f"{a}.embedding_length"], "intermediate_size": f[f"{a}.feed_forward_length"],
        "num_hidden_layers": f[f"{a}.block_count"], "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "head_dim": f[f"{a}.attention.key_length"], "max_position_embeddings": f[f"{a}.context_length"],
        "rms_norm_eps": float(np.float32(f[f"{a}.attention.layer_norm_rms_epsilon"])),
        "rope_theta": f[f"{a}.rope.freq_base"], "vocab_size": n_vocab,
        "tie_word_embeddings": "output.weight" not in names, "torch_dtype": "float32",
    }
    if arch == "gemma3":
        config.update(sliding_window=f["gemma3.attention.sliding_window"], sliding_window_pattern=6,
                      rope_local_base_freq=10000.0, query_pre_attn_scalar=config["head_dim"])
    tensors = {}
    for t in reader.tensors:
        w = gguf_tensor(t)
        if arch == "llama" and t.name.split(".")[-2] in ("attn_q", "attn_k"):
            w = undo_permute(w, heads if t.name.split(".")[-2] == "attn_q" else kv_heads)
        if arch == "gemma3" and t.name.endswith("norm.weight"):
            w = w - np.float32(1)  # exact for these values? checked below by the round trip itself
        tensors[hf_name(arch, t.name)] = w.astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    write_safetensors(folder / "model.safetensors", tensors)
    tj, _ = bpe_tokenizer(n_vocab, FAMILIES[arch][1])
    (folder / "tokenizer.json").write_text(json.dumps(tj))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"add_bos_token": False, "eos_token": "<|endoftext|>", "pad_token": "<|im_end|>", "model_max_length": 2048}))
    return tensors


def greedy(pagoda, model, out_json):
    r = subprocess.run([str(pagoda), "run", "-m", str(model), "--prompt-ids", "5,17,42,99,300,7,250", "-n", "16",
                        "--temp", "0", "--ignore-eos", "--no-stats", "-t", "2", "--ids-out", str(out_json)],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return json.loads(pathlib.Path(out_json).read_text())


@pytest.mark.parametrize("arch", list(FAMILIES))
def test_decoder_round_trip(arch, tmp_path, write_gen_model, pagoda_bin):
    gguf = import_oracle("gguf")
    src = write_gen_model(tmp_path / f"{arch}.gguf", arch=arch)
    folder = tmp_path / f"hf-{arch}"
    hf_tensors = write_hf_folder(gguf, src, arch, folder)
    out = tmp_path / f"{arch}-converted.gguf"
    r = run_convert(pagoda_bin("pagoda"), folder, out, "--type", "F32")
    assert sum(1 for line in r.stderr.decode().splitlines() if line.startswith("[")) == len(hf_tensors)

    orig, conv = gguf.GGUFReader(src), gguf.GGUFReader(out)
    got = {t.name: t for t in conv.tensors}
    assert set(got) == {t.name for t in orig.tensors}
    for t in orig.tensors:
        c = got[t.name]
        assert c.tensor_type == gguf.GGMLQuantizationType.F32, t.name
        assert list(c.shape) == list(t.shape), t.name
        if arch == "gemma3" and t.name.endswith("norm.weight"):
            # w - 1 + 1 in float32 may round; the converter adds 1 to what the checkpoint holds.
            want = hf_tensors[hf_name(arch, t.name)] + np.float32(1)
        else:
            want = gguf_tensor(t)
        np.testing.assert_array_equal(gguf_tensor(c), want, err_msg=t.name)

    fo, fc = gguf_fields(orig), gguf_fields(conv)
    keys = {k for k in fo if k.startswith(arch + ".")}
    # llama.cpp writes rope.dimension_count for Llama only (the others rotate whole heads).
    not_written = {f"{arch}.rope.dimension_count"} if arch != "llama" else set()
    for k in keys - not_written:
        assert k in fc, k
        assert fc[k] == pytest.approx(fo[k], rel=1e-6), (k, fc[k], fo[k])
    extra = {k for k in fc if k.startswith(arch + ".")} - keys
    assert extra <= {"llama.vocab_size", "gemma3.rope.freq_base_swa"}, extra
    assert fc["general.architecture"] == arch
    assert fc["tokenizer.ggml.model"] == "gpt2"
    assert fc["tokenizer.ggml.pre"] == FAMILIES[arch][2]
    n_vocab = len(fo["tokenizer.ggml.tokens"])
    assert fc["tokenizer.ggml.eos_token_id"] == n_vocab - 2
    assert fc["tokenizer.ggml.padding_token_id"] == n_vocab - 1
    assert fc["tokenizer.ggml.add_bos_token"] is False
    assert fc["tokenizer.ggml.token_type"][-2:] == [3, 3]

    a = greedy(pagoda_bin("pagoda"), src, tmp_path / "a.json")
    b = greedy(pagoda_bin("pagoda"), out, tmp_path / "b.json")
    assert a == b
    assert len(json.dumps(a)) > 0


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_converted_bpe_vocabulary_tokenizes_as_hf(arch, tmp_path, write_gen_model, pagoda_bin):
    gguf = import_oracle("gguf")
    tokenizers = import_oracle("tokenizers")
    src = write_gen_model(tmp_path / f"{arch}.gguf", arch=arch)
    folder = tmp_path / "hf"
    write_hf_folder(gguf, src, arch, folder)
    out = tmp_path / "converted.gguf"
    run_convert(pagoda_bin("pagoda"), folder, out, "--type", "F16")
    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    texts = [t for _, t in TEXTS] + ["<|endoftext|> the theater<|im_end|>"]
    got = encode_many(pagoda_bin("pagoda-tokenize-tool"), out, texts)
    for text, ids in zip(texts, got):
        assert ids == ref.encode(text).ids, repr(text)


def llama3_factors(dim, base, factor, low, high, old_ctx):
    """llama.cpp's LlamaModel.generate_extra_tensors, in float32 as torch computes it."""
    freqs = (1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))).astype(np.float32)
    out = []
    for f in freqs:
        wavelen = np.float32(2 * np.pi) / f
        if wavelen < old_ctx / high:
            out.append(1.0)
        elif wavelen > old_ctx / low:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def test_llama3_rope_scaling_becomes_rope_freqs(tmp_path, write_gen_model, pagoda_bin):
    gguf = import_oracle("gguf")
    src = write_gen_model(tmp_path / "llama.gguf", arch="llama")
    folder = tmp_path / "hf"
    write_hf_folder(gguf, src, "llama", folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_theta"] = 500000.0
    config["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192}
    (folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "converted.gguf"
    run_convert(pagoda_bin("pagoda"), folder, out, "--type", "F32")
    reader = gguf.GGUFReader(out)
    t = {t.name: t for t in reader.tensors}["rope_freqs.weight"]
    want = llama3_factors(config["head_dim"], 500000.0, 8.0, 1.0, 4.0, 8192)
    assert set(np.round(want, 3)) >= {1.0, 8.0} and len(set(np.round(want, 3))) > 2  # all three branches
    np.testing.assert_allclose(gguf_tensor(t), want, rtol=2e-6)
    f = gguf_fields(reader)
    assert "llama.rope.scaling.type" not in f  # llama3 scaling lives in the tensor, as llama.cpp writes it
    assert f["llama.rope.freq_base"] == 500000.0
    greedy(pagoda_bin("pagoda"), out, tmp_path / "ids.json")  # Pagoda runs it


@pytest.mark.parametrize("scaling,keys", [
    ({"type": "linear", "factor": 8.0}, {"rope.scaling.type": "linear", "rope.scaling.factor": 8.0}),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
     {"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0, "rope.scaling.original_context_length": 32768}),
    ({"rope_type": "dynamic", "factor": 2.0}, None),
])
def test_rope_scaling_keys(scaling, keys, tmp_path, write_gen_model, pagoda_bin):
    gguf = import_oracle("gguf")
    src = write_gen_model(tmp_path / "qwen2.gguf", arch="qwen2")
    folder = tmp_path / "hf"
    write_hf_folder(gguf, src, "qwen2", folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_scaling"] = scaling
    (folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "converted.gguf"
    r = run_convert(pagoda_bin("pagoda"), folder, out, "--type", "F32", check=keys is not None)
    if keys is None:
        assert r.returncode == 1 and "RoPE scaling type 'dynamic'" in r.stderr.decode()
        return
    f = gguf_fields(gguf.GGUFReader(out))
    for k, v in keys.items():
        assert f["qwen2." + k] == v, k
