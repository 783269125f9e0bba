"""`pagoda convert` on bad input: each case ends with exit code 1 and one error line that
says what is wrong (never a crash, a signal or a half-written output file)."""
import json
import struct

import numpy as np
import pytest

from convert_test_util import run_convert, write_safetensors

CONFIG = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
          "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
          "rope_theta": 10000.0, "vocab_size": 258}


def tokenizer_json():
    vocab = {chr(0x100 + i) if i < 2 else f"t{i}": i for i in range(256)}
    vocab["ab"] = 256
    return {"added_tokens": [{"id": 257, "content": "<|endoftext|>", "special": True}],
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "model": {"type": "BPE", "vocab": vocab, "merges": ["a b"]}}


def good_folder(path):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(CONFIG))
    (path / "tokenizer.json").write_text(json.dumps(tokenizer_json()))
    rng = np.random.default_rng(0)
    t = {"model.embed_tokens.weight": rng.standard_normal((258, 8), dtype=np.float32),
         "model.norm.weight": np.ones(8, np.float32)}
    write_safetensors(path / "model.safetensors", t)
    return path


def expect_error(pagoda, folder, out, *needles):
    r = run_convert(pagoda, folder, out, check=False)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, (r.returncode, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert not out.exists()
    return lines[0]


@pytest.fixture
def pagoda(pagoda_bin):
    return pagoda_bin("pagoda")


def test_good_folder_converts(pagoda, tmp_path):
    # The baseline the damaged folders below start from.
    run_convert(pagoda, good_folder(tmp_path / "m"), tmp_path / "out.gguf")
    assert (tmp_path / "out.gguf").exists()


def test_missing_folder(pagoda, tmp_path):
    expect_error(pagoda, tmp_path / "nowhere", tmp_path / "o.gguf", "no such folder")


def test_missing_config(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    (m / "config.json").unlink()
    expect_error(pagoda, m, tmp_path / "o.gguf", "config.json", "no such file")


def test_bad_config_json(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    (m / "config.json").write_text('{"architectures": ["Qwen2ForCausalLM"], ')
    expect_error(pagoda, m, tmp_path / "o.gguf", "config.json", "not valid JSON")


def test_unsupported_architecture_lists_the_supported(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    (m / "config.json").write_text(json.dumps({**CONFIG, "architectures": ["MambaForCausalLM"]}))
    line = expect_error(pagoda, m, tmp_path / "o.gguf", "MambaForCausalLM", "not supported")
    for name in ("BertModel", "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Gemma3ForCausalLM"):
        assert name in line


def test_missing_weights(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    (m / "model.safetensors").unlink()
    expect_error(pagoda, m, tmp_path / "o.gguf", "safetensors")


@pytest.mark.parametrize("keep", [3, 8, 40, -16, -1])
def test_truncated_safetensors(pagoda, tmp_path, keep):
    m = good_folder(tmp_path / "m")
    data = (m / "model.safetensors").read_bytes()
    (m / "model.safetensors").write_bytes(data[:keep] if keep > 0 else data[:keep])
    expect_error(pagoda, m, tmp_path / "o.gguf", "model.safetensors")


def test_safetensors_header_that_is_not_json(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    header = b'{"model.norm.weight": {"dtype": "F32", '
    (m / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 32)
    expect_error(pagoda, m, tmp_path / "o.gguf", "not valid JSON")


def test_missing_tokenizer(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    (m / "tokenizer.json").unlink()
    expect_error(pagoda, m, tmp_path / "o.gguf", "tokenizer.json")


def test_sentencepiece_style_tokenizer_is_refused(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    tj = tokenizer_json()
    tj["model"]["byte_fallback"] = True
    (m / "tokenizer.json").write_text(json.dumps(tj))
    expect_error(pagoda, m, tmp_path / "o.gguf", "byte_fallback")


def test_unknown_pre_tokenizer_is_refused(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    tj = tokenizer_json()
    tj["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581"}
    (m / "tokenizer.json").write_text(json.dumps(tj))
    expect_error(pagoda, m, tmp_path / "o.gguf", "Metaspace")


def test_unknown_tensor_is_refused(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    write_safetensors(m / "model.safetensors", {"model.norm.weight": np.ones(8, np.float32),
                                                "model.mystery.weight": np.ones((2, 8), np.float32)})
    expect_error(pagoda, m, tmp_path / "o.gguf", "model.mystery.weight")


def test_unknown_type(pagoda, tmp_path):
    m = good_folder(tmp_path / "m")
    r = run_convert(pagoda, m, tmp_path / "o.gguf", "--type", "Q9_9", check=False)
    assert r.returncode == 1
    assert "Q9_9" in r.stderr.decode() and "Q8_0" in r.stderr.decode()


def sharded_folder(path):
    m = good_folder(path)
    (m / "model.safetensors").unlink()
    rng = np.random.default_rng(1)
    write_safetensors(m / "model-00001-of-00002.safetensors",
                      {"model.embed_tokens.weight": rng.standard_normal((258, 8), dtype=np.float32)})
    write_safetensors(m / "model-00002-of-00002.safetensors", {"model.norm.weight": np.ones(8, np.float32)})
    index = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                                            "model.norm.weight": "model-00002-of-00002.safetensors"}}
    (m / "model.safetensors.index.json").write_text(json.dumps(index))
    return m, index


def test_sharded_checkpoint_converts(pagoda, tmp_path):
    gguf = pytest.importorskip("gguf")
    m, _ = sharded_folder(tmp_path / "m")
    run_convert(pagoda, m, tmp_path / "out.gguf", "--type", "F32")
    names = {t.name for t in gguf.GGUFReader(tmp_path / "out.gguf").tensors}
    assert names == {"token_embd.weight", "output_norm.weight"}


def test_shard_index_naming_a_missing_tensor(pagoda, tmp_path):
    m, index = sharded_folder(tmp_path / "m")
    index["weight_map"]["model.layers.0.mlp.up_proj.weight"] = "model-00002-of-00002.safetensors"
    (m / "model.safetensors.index.json").write_text(json.dumps(index))
    expect_error(pagoda, m, tmp_path / "o.gguf", "model.layers.0.mlp.up_proj.weight", "not found")


def test_shard_index_naming_a_missing_file(pagoda, tmp_path):
    m, index = sharded_folder(tmp_path / "m")
    (m / "model-00002-of-00002.safetensors").unlink()
    expect_error(pagoda, m, tmp_path / "o.gguf", "model-00002-of-00002.safetensors")


def test_merges_given_as_pairs_are_written_as_gguf_py_writes_them(pagoda, tmp_path):
    # tokenizers >= 0.20 stores merges as pairs, whose parts may hold spaces; gguf-py joins
    # them with one space and writes a space inside a part as U+0120.
    gguf = pytest.importorskip("gguf")
    m = good_folder(tmp_path / "m")
    tj = tokenizer_json()
    tj["model"]["merges"] = [["a", "b"], ["x y", "z"]]
    (m / "tokenizer.json").write_text(json.dumps(tj))
    run_convert(pagoda, m, tmp_path / "out.gguf")
    merges = gguf.GGUFReader(tmp_path / "out.gguf").fields["tokenizer.ggml.merges"].contents()
    assert merges == ["a b", "x\u0120y z"]
