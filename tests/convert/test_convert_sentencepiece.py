"""SentencePiece vocabularies through `pagoda convert`, against a GGUF that llama.cpp's
converter wrote: Gemma 3 270M's (cached by the test-data scripts). Its vocabulary is
written back as the Hugging Face files it came from (tokenizer.model serialized with
sentencepiece's own protobuf module, tokenizer_config.json with Gemma's special tokens
and added_tokens_decoder, a tokenizer.json carrying the added tokens and Gemma's
post-processor) beside a random gemma3 checkpoint of the same vocabulary size; the
converted file must hold exactly llama.cpp's tokens, scores, token types, special ids
and flags, and tokenize the text set exactly as the original GGUF does."""
import json
import pathlib
import sys

import numpy as np
import pytest

from oracles import CACHE, import_oracle, oracle_missing

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tokenizer"))
from tokenizer_oracle_util import encode_many  # noqa: E402
from tokenizer_texts import TEXTS  # noqa: E402

from convert_test_util import gguf_fields, run_convert, write_safetensors  # noqa: E402

GEMMA = CACHE / "models" / "gemma-3-270m-q4_k_m-dequant-f32.gguf"
# GGUF token type -> sentencepiece's ModelProto.SentencePiece.Type
SPM_TYPE = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6}


@pytest.fixture(scope="module")
def gemma_vocab():
    gguf = import_oracle("gguf")
    if not GEMMA.exists():
        oracle_missing(f"{GEMMA} is not present (scripts/fetch_test_data writes it)")
    return gguf_fields(gguf.GGUFReader(GEMMA))


def write_tokenizer_files(folder, f):
    pb2 = import_oracle("sentencepiece.sentencepiece_model_pb2", "scripts/setup installs sentencepiece")
    tokens, scores, types = f["tokenizer.ggml.tokens"], f["tokenizer.ggml.scores"], f["tokenizer.ggml.token_type"]
    m = pb2.ModelProto()
    for tok, score, typ in zip(tokens, scores, types):
        p = m.pieces.add()
        p.piece, p.score, p.type = tok, score, SPM_TYPE[typ]
    m.normalizer_spec.add_dummy_prefix = False
    (folder / "tokenizer.model").write_bytes(m.SerializeToString())
    specials = {i: t for i, (t, ty) in enumerate(zip(tokens, types)) if ty in (3, 4)}
    decoder = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                        "special": types[i] == 3} for i, t in specials.items()}
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
        "pad_token": "<pad>", "unk_token": "<unk>", "added_tokens_decoder": decoder}))
    added = [{"id": i, "content": t, "special": types[i] == 3, "normalized": False} for i, t in specials.items()]
    (folder / "tokenizer.json").write_text(json.dumps({
        "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<bos>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}]},
        "model": {"type": "BPE", "byte_fallback": True, "vocab": {}, "merges": []}}))


def test_gemma3_sentencepiece_vocabulary(gemma_vocab, tmp_path, pagoda_bin):
    gguf = import_oracle("gguf")
    f = gemma_vocab
    n_vocab = len(f["tokenizer.ggml.tokens"])
    folder = tmp_path / "gemma"
    folder.mkdir()
    write_tokenizer_files(folder, f)
    config = {"architectures": ["Gemma3ForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
              "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
              "max_position_embeddings": 256, "sliding_window": 8, "rope_theta": 1000000.0,
              "rope_local_base_freq": 10000.0, "vocab_size": n_vocab, "bos_token_id": 2, "eos_token_id": 1,
              "pad_token_id": 0}
    (folder / "config.json").write_text(json.dumps(config))
    emb = np.random.default_rng(0).standard_normal((n_vocab, 8)).astype(np.float16)
    write_safetensors(folder / "model.safetensors", {"model.embed_tokens.weight": emb,
                                                     "model.norm.weight": np.zeros(8, np.float32)})
    out = tmp_path / "gemma.gguf"
    run_convert(pagoda_bin("pagoda"), folder, out)
    c = gguf_fields(gguf.GGUFReader(out))
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id",
                "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_sep_token",
                "tokenizer.ggml.add_space_prefix"):
        assert c.get(key) == f[key], (key, c.get(key), f[key])
    assert c["tokenizer.ggml.tokens"] == f["tokenizer.ggml.tokens"]
    assert c["tokenizer.ggml.token_type"] == f["tokenizer.ggml.token_type"]
    np.testing.assert_array_equal(np.array(c["tokenizer.ggml.scores"], np.float32),
                                  np.array(f["tokenizer.ggml.scores"], np.float32))
    assert c["gemma3.rope.freq_base_swa"] == 10000.0

    texts = [t for _, t in TEXTS] + ["<start_of_turn>user\nHi<end_of_turn>\n"]
    tool = pagoda_bin("pagoda-tokenize-tool")
    assert encode_many(tool, out, texts) == encode_many(tool, GEMMA, texts)


def test_a_tiktoken_file_named_tokenizer_model_falls_back_to_tokenizer_json(tmp_path, pagoda_bin):
    # Llama 3 repositories ship tiktoken's file under that name; llama.cpp's converter then
    # reads tokenizer.json, and so does this one, with a note.
    from test_convert_errors import good_folder
    m = good_folder(tmp_path / "m")
    (m / "tokenizer.model").write_text("IQ== 0\nIg== 1\nIw== 2\n")
    r = run_convert(pagoda_bin("pagoda"), m, tmp_path / "o.gguf")
    assert "not a SentencePiece model" in r.stderr.decode() and "tokenizer.json" in r.stderr.decode()


def test_gemma3_270m_round_trip(gemma_vocab, tmp_path, pagoda_bin):
    """The whole Gemma 3 270M: its GGUF (F32) written out as the Hugging Face folder it came
    from (norms back to w, the stored 1 + w minus one), converted again: every tensor, the
    hyper-parameter keys and 16 greedy tokens must come back."""
    gguf = import_oracle("gguf")
    from convert_test_util import gguf_tensor
    reader = gguf.GGUFReader(GEMMA)
    f = gemma_vocab
    folder = tmp_path / "gemma-3-270m"
    folder.mkdir()
    write_tokenizer_files(folder, f)
    a = "gemma3"
    config = {"architectures": ["Gemma3ForCausalLM"], "hidden_size": f[f"{a}.embedding_length"],
              "intermediate_size": f[f"{a}.feed_forward_length"], "num_hidden_layers": f[f"{a}.block_count"],
              "num_attention_heads": f[f"{a}.attention.head_count"],
              "num_key_value_heads": f[f"{a}.attention.head_count_kv"], "head_dim": f[f"{a}.attention.key_length"],
              "max_position_embeddings": f[f"{a}.context_length"],
              "sliding_window": f[f"{a}.attention.sliding_window"], "sliding_window_pattern": 6,
              "rope_theta": f[f"{a}.rope.freq_base"], "rope_local_base_freq": 10000.0,
              "rms_norm_eps": float(np.float32(f[f"{a}.attention.layer_norm_rms_epsilon"])),
              "query_pre_attn_scalar": 256, "vocab_size": len(f["tokenizer.ggml.tokens"]), "bos_token_id": 2,
              "eos_token_id": 1, "pad_token_id": 0}
    (folder / "config.json").write_text(json.dumps(config))
    names = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "attn_norm": "input_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
             "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
             "post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
             "post_ffw_norm": "post_feedforward_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
             "ffn_down": "mlp.down_proj"}
    tensors, shifted = {}, {}
    for t in reader.tensors:
        parts = t.name.split(".")
        if parts[0] == "blk":
            hf = f"model.layers.{parts[1]}.{names[parts[2]]}.{parts[3]}"
        else:
            hf = f"{names[parts[0]]}.{parts[1]}"
        w = gguf_tensor(t)
        if t.name.endswith("norm.weight"):
            w = w - np.float32(1)
            shifted[t.name] = w + np.float32(1)  # what the converter must write back
        tensors[hf] = w
    write_safetensors(folder / "model.safetensors", tensors)
    del tensors
    out = tmp_path / "gemma-converted.gguf"
    run_convert(pagoda_bin("pagoda"), folder, out, "--type", "F32")
    conv = gguf.GGUFReader(out)
    got = {t.name: t for t in conv.tensors}
    assert set(got) == {t.name for t in reader.tensors}
    for t in reader.tensors:
        want = shifted[t.name] if t.name in shifted else gguf_tensor(t)
        np.testing.assert_array_equal(gguf_tensor(got[t.name]), want, err_msg=t.name)
    c = gguf_fields(conv)
    for k, v in f.items():
        if k.startswith("gemma3."):
            assert c[k] == pytest.approx(v, rel=1e-6), k
    from test_convert_decoders import greedy
    assert greedy(pagoda_bin("pagoda"), out, tmp_path / "b.json") == greedy(pagoda_bin("pagoda"), GEMMA,
                                                                          tmp_path / "a.json")
