"""`pagoda convert` on a BertForSequenceClassification folder with one label (a
cross-encoder, tests/cross_encoder_reference.py writes it): the GGUF read back with the
`gguf` package holds llama.cpp's reranker keys (pooling_type 4 = rank, the label in
bert.classifier.output_labels) and the head under llama.cpp's names, values exact in F32
(pooler.dense -> cls, classifier -> cls.output); classifiers Pagoda cannot serve and
incomplete checkpoints are refused with one error line and no file."""
import numpy as np
import pytest

import cross_encoder_reference as ce
from convert_test_util import gguf_fields, gguf_tensor, run_convert
from oracles import import_oracle


@pytest.fixture(scope="module")
def pagoda(pagoda_bin):
    return pagoda_bin("pagoda")


def read(path):
    gguf = import_oracle("gguf")
    r = gguf.GGUFReader(str(path))
    return gguf_fields(r), {t.name: t for t in r.tensors}


def test_the_head_and_keys_are_written_as_llama_cpp_names_them(pagoda, tmp_path):
    folder = ce.write_folder(tmp_path / "ce", config_extra={"id2label": {"0": "relevance"},
                                                             "label2id": {"relevance": 0}})
    out = tmp_path / "ce.gguf"
    run_convert(pagoda, folder, out, "--type", "F32")
    fields, tensors = read(out)
    assert fields["general.architecture"] == "bert"
    assert fields["bert.pooling_type"] == 4  # LLAMA_POOLING_TYPE_RANK
    assert fields["bert.classifier.output_labels"] == ["relevance"]
    assert fields["bert.attention.causal"] is False
    assert fields["tokenizer.ggml.token_type_count"] == 2
    # [CLS] a [SEP] b [SEP]: gguf-py's reading of the pair template adds no extra separator.
    assert fields["tokenizer.ggml.add_bos_token"] is True and fields["tokenizer.ggml.add_eos_token"] is True
    assert fields.get("tokenizer.ggml.add_sep_token", False) is False
    st = ce.read_safetensors(folder / "model.safetensors")
    for gguf_name, hf_name in [("cls.weight", "bert.pooler.dense.weight"), ("cls.bias", "bert.pooler.dense.bias"),
                               ("cls.output.weight", "classifier.weight"), ("cls.output.bias", "classifier.bias"),
                               ("token_types.weight", "bert.embeddings.token_type_embeddings.weight")]:
        got = gguf_tensor(tensors[gguf_name])
        np.testing.assert_array_equal(got, st[hf_name], err_msg=gguf_name)
    assert not any(n.startswith("pooler") or n.startswith("classifier") for n in tensors)


def test_quantized_conversion_keeps_the_head_loadable(pagoda, tmp_path):
    folder = ce.write_folder(tmp_path / "ce")
    out = tmp_path / "ce-q8.gguf"
    run_convert(pagoda, folder, out, "--type", "Q8_0")
    fields, tensors = read(out)
    assert fields["bert.classifier.output_labels"] == ["LABEL_0"]
    gguf = import_oracle("gguf")
    assert tensors["cls.weight"].tensor_type == gguf.GGMLQuantizationType.Q8_0
    assert tensors["cls.bias"].tensor_type == gguf.GGMLQuantizationType.F32
    st = ce.read_safetensors(folder / "model.safetensors")
    np.testing.assert_allclose(gguf_tensor(tensors["cls.output.weight"]), st["classifier.weight"], atol=2e-2)


def expect_refused(pagoda, folder, out, *needles):
    r = run_convert(pagoda, folder, out, check=False)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.parametrize("extra,labels", [
    ({"id2label": {"0": "negative", "1": "positive"}, "label2id": None}, "2 labels"),
    # Neither key: transformers' default is two labels.
    ({"id2label": None, "label2id": None}, "2 labels"),
    ({"id2label": {"0": "a", "1": "b", "2": "c"}, "label2id": None}, "3 labels"),
])
def test_classifiers_with_more_than_one_label_are_refused(pagoda, tmp_path, extra, labels):
    folder = ce.write_folder(tmp_path / "ce", config_extra=extra)
    expect_refused(pagoda, folder, tmp_path / "o.gguf", "BertForSequenceClassification", labels, "num_labels 1")


@pytest.mark.parametrize("missing", ["bert.pooler.dense.weight", "classifier.weight"])
def test_a_checkpoint_without_its_head_is_refused(pagoda, tmp_path, missing):
    name = missing.removeprefix("bert.")
    folder = ce.write_folder(tmp_path / "ce", drop=[missing, missing.replace(".weight", ".bias")])
    expect_refused(pagoda, folder, tmp_path / "o.gguf", name)
