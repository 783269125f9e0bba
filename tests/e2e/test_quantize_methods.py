"""`pagoda quantize --method gptq|awq` end to end, judged by an independent measure: the
KL divergence of the quantized model's next-token distributions from the F32 source's
(`pagoda perplexity --kl-base`, itself checked against llama-perplexity in tests/eval),
on a text other than the calibration text. Also: the files stay standard (gguf-py reads
them; GPTQ's bytes decode to values on each block's grid), AWQ's folded scales leave the
unquantized function unchanged, and bad options fail cleanly."""
from __future__ import annotations

import json
import re
import pathlib
import subprocess

import numpy as np
import pytest
from gguf import GGUFReader, quants

REPO = pathlib.Path(__file__).resolve().parents[2]
CALIB = REPO / "README.md"          # calibration text


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    d = tmp_path_factory.mktemp("texts")
    evaluation = d / "eval.txt"
    # The source tree's header comments: English prose the README does not contain.
    body = ""
    for h in sorted((REPO / "src").rglob("*.h")):
        if len(body) > 60000:
            break
        body += "\n" + h.read_text(encoding="utf-8", errors="replace")
    evaluation.write_text(body, encoding="utf-8")
    return CALIB, evaluation


@pytest.fixture(scope="module")
def f32_model(write_gen_model, tmp_path_factory):
    # Rows of 256 and 512: every matrix takes the K-quants without falling back.
    out = write_gen_model(tmp_path_factory.mktemp("model") / "llama-f32.gguf", dim=256, ff=512, seed=11,
                          sliding_window=None)
    # Real models have a few input channels with much larger activations than the rest
    # (what AWQ protects); random weights do not, so give the norms some: 8 channels x 10.
    reader = GGUFReader(str(out), "r+")
    channels = np.random.default_rng(5).choice(256, size=8, replace=False)
    for t in reader.tensors:
        if t.name.endswith(("attn_norm.weight", "ffn_norm.weight")):
            t.data[channels] *= 10.0
    reader.data.flush()
    del reader
    return out


def run_pagoda(pagoda_bin, *args, timeout=300):
    r = subprocess.run([str(pagoda_bin("pagoda")), *map(str, args)], capture_output=True, timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def quantize(pagoda_bin, src, out, typ, method, calib):
    args = ["quantize", src, out, "--type", typ, "--method", method, "-t", 2]
    if method != "rtn":
        args += ["--calib", calib, "--calib-tokens", 1024, "--calib-ctx", 128]
    rc, stdout, err = run_pagoda(pagoda_bin, *args)
    assert rc == 0, err
    return err


def kld(pagoda_bin, model, base, text, monkeypatch_cache):
    rc, out, err = run_pagoda(pagoda_bin, "perplexity", "-m", model, "-f", text, "-c", 128, "--chunks", 4, "-t", 2,
                              "--json", "--kl-base", base)
    assert rc == 0, err
    return json.loads(out)["kl"]["kld_mean"]


@pytest.fixture
def kl_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGODA_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("typ", ["Q4_K", "Q3_K"])
def test_gptq_and_awq_lower_the_kl_divergence_below_round_to_nearest(pagoda_bin, f32_model, texts, tmp_path, kl_cache,
                                                                      typ):
    calib, evaluation = texts
    got = {}
    for method in ("rtn", "gptq", "awq", "awq+gptq"):
        out = tmp_path / f"{typ}-{method}.gguf"
        log = quantize(pagoda_bin, f32_model, out, typ, method, calib)
        if method.startswith("awq"):
            assert "AWQ:" in log and "alpha" in log, log
        got[method] = kld(pagoda_bin, out, f32_model, evaluation, kl_cache)
    print(typ, got)
    assert got["gptq"] < 0.9 * got["rtn"], got
    assert got["awq"] < got["rtn"], got
    assert got["awq+gptq"] < got["awq"], got


def test_gptq_calibrates_each_expert_on_its_routed_tokens(pagoda_bin, write_gen_model, texts, tmp_path, kl_cache):
    """An MoE model (Qwen2-MoE: routed experts and a shared one): GPTQ gets each expert's
    Hessian from the tokens routed to it and says how many each saw, AWQ searches each
    expert's down on its routed rows; each lowers the KL divergence below round to nearest."""
    calib, evaluation = texts
    src = write_gen_model(tmp_path / "moe-f32.gguf", arch="qwen2moe", dim=256, ff=512, seed=11, experts=8,
                          experts_used=2, sliding_window=None)
    got = {}
    for method in ("rtn", "gptq", "awq", "awq+gptq"):
        out = tmp_path / f"moe-{method}.gguf"
        log = quantize(pagoda_bin, src, out, "Q4_K", method, calib)
        if method.startswith("awq"):
            assert len(re.findall(r"layer +\d+ down x 8 experts", log)) == 2, log
        if method == "gptq":
            lines = re.findall(r"GPTQ: layer +(\d+): 8 experts calibrated on the tokens routed to each: min (\d+), "
                               r"median (\d+), max (\d+) tokens", log)
            assert len(lines) == 2, log
            for _, lo, _, hi in lines:
                assert 0 < int(lo) <= int(hi)
        got[method] = kld(pagoda_bin, out, src, evaluation, kl_cache)
    print(got)
    assert got["gptq"] < 0.9 * got["rtn"], got
    assert got["awq"] < got["rtn"], got
    assert got["awq+gptq"] < got["awq"], got


def test_gptq_writes_values_on_each_blocks_grid_and_standard_files(pagoda_bin, f32_model, texts, tmp_path):
    calib, _ = texts
    out = tmp_path / "q4k-gptq.gguf"
    quantize(pagoda_bin, f32_model, out, "Q4_K", "gptq", calib)
    rtn = tmp_path / "q4k-rtn.gguf"
    quantize(pagoda_bin, f32_model, rtn, "Q4_K", "rtn", calib)
    a, b = GGUFReader(str(out)), GGUFReader(str(rtn))
    src = {t.name: np.array(t.data) for t in GGUFReader(str(f32_model)).tensors}
    differ = 0
    for ta, tb in zip(a.tensors, b.tensors):
        assert ta.name == tb.name and ta.tensor_type == tb.tensor_type
        if ta.tensor_type.name != "Q4_K":
            continue
        da = quants.dequantize(ta.data, ta.tensor_type)
        # GPTQ moves values, but never far: within a few steps of the source.
        s = src[ta.name].reshape(da.shape)
        assert np.max(np.abs(da - s)) < 0.5 * np.max(np.abs(s)), ta.name
        differ += int(not np.array_equal(np.array(ta.data), np.array(tb.data)))
    assert differ > 0, "GPTQ wrote round to nearest's bytes everywhere"


def test_awq_scales_fold_into_the_model_without_changing_its_function(pagoda_bin, f32_model, texts, tmp_path, kl_cache):
    # AWQ at F16 (scales searched against F16 rounding): the folded model is the source's
    # function up to F16 rounding, so its KL divergence from the source is tiny.
    calib, evaluation = texts
    out = tmp_path / "f16-awq.gguf"
    quantize(pagoda_bin, f32_model, out, "F16", "awq", calib)
    plain = tmp_path / "f16-rtn.gguf"
    quantize(pagoda_bin, f32_model, plain, "F16", "rtn", calib)
    assert kld(pagoda_bin, out, f32_model, evaluation, kl_cache) < 1e-4
    names = {t.name: np.array(t.data) for t in GGUFReader(str(out)).tensors}
    ref = {t.name: np.array(t.data) for t in GGUFReader(str(plain)).tensors}
    assert any(not np.allclose(names[n], ref[n]) for n in names if n.endswith("attn_norm.weight")), \
        "AWQ folded no scale into a norm"


def greedy_logits(pagoda_bin, model, workdir):
    ids_out, logits_out = workdir / "ids.json", workdir / "logits.f32"
    rc, _, err = run_pagoda(pagoda_bin, "run", "-m", model, "--prompt-ids", "1,300,301,45,77,99,12,400", "-n", 8,
                            "--temp", 0, "--ignore-eos", "-t", 2, "--no-stats", "--ids-out", ids_out,
                            "--logits-out", logits_out)
    assert rc == 0, err
    return np.fromfile(logits_out, dtype=np.float32)


# What AWQ can fold where an architecture differs from Llama: the groups it searches, the
# ones it cannot have, and tensors its folds must move (F16, so any moved value shows).
AWQ_SHAPES = {
    # LayerNorms (scales divide weight and bias) and biased V (a KV head per query head,
    # so the output group folds into V's rows and bias); no down group behind GELU(up).
    "starcoder2": dict(searched=["q,k,v", "up", "o"], absent=["down"],
                       moved=["attn_norm.bias", "ffn_norm.bias", "attn_v.bias", "attn_norm.weight"]),
    # No pre-norms: nothing before q,k,v and gate,up to fold into (said in the log); down
    # folds into up's rows and o into V's.
    "olmo2": dict(searched=["down", "o"], absent=["q,k,v", "gate,up"], moved=["ffn_up.weight"]),
}


@pytest.mark.parametrize("arch", sorted(AWQ_SHAPES))
def test_awq_folds_where_the_architecture_allows(pagoda_bin, write_gen_model, tmp_path, arch):
    """AWQ at F16 on architectures whose folds differ from Llama's: the folded model
    computes the source's logits up to F16 rounding, as round to nearest does."""
    shape = AWQ_SHAPES[arch]
    src = write_gen_model(tmp_path / f"{arch}.gguf", arch=arch, dim=256, ff=512, kv_heads=4, seed=11)
    log = quantize(pagoda_bin, src, tmp_path / "awq.gguf", "F16", "awq", CALIB)
    groups = set(re.findall(r"layer\s+\d+ (\S+)\s*:", log))
    assert groups == set(shape["searched"]), log
    assert not groups & set(shape["absent"]), log
    if arch == "olmo2":
        assert "olmo2 has no norm before q,k,v and gate,up" in log, log
    quantize(pagoda_bin, src, tmp_path / "rtn.gguf", "F16", "rtn", CALIB)
    want = greedy_logits(pagoda_bin, src, tmp_path)
    err_awq = np.abs(greedy_logits(pagoda_bin, tmp_path / "awq.gguf", tmp_path) - want).max() / want.std()
    err_rtn = np.abs(greedy_logits(pagoda_bin, tmp_path / "rtn.gguf", tmp_path) - want).max() / want.std()
    print(f"{arch}: F16 logit error / std: awq {err_awq:.2e}, rtn {err_rtn:.2e}")
    assert err_awq < max(3 * err_rtn, 1e-3), (err_awq, err_rtn)
    folded = {t.name: np.array(t.data) for t in GGUFReader(str(tmp_path / "awq.gguf")).tensors}
    plain = {t.name: np.array(t.data) for t in GGUFReader(str(tmp_path / "rtn.gguf")).tensors}
    for suffix in shape["moved"]:
        assert any(n.endswith(suffix) and not np.allclose(folded[n], plain[n]) for n in folded), suffix
    # GPTQ needs no fold: it runs on every architecture, and the file runs.
    quantize(pagoda_bin, src, tmp_path / "gptq.gguf", "Q4_K", "gptq", CALIB)
    assert np.isfinite(greedy_logits(pagoda_bin, tmp_path / "gptq.gguf", tmp_path)).all()


def test_w8a8_with_awq_runs_end_to_end(pagoda_bin, f32_model, texts, tmp_path, kl_cache):
    calib, evaluation = texts
    out = tmp_path / "w8a8-awq.gguf"
    quantize(pagoda_bin, f32_model, out, "W8A8", "awq", calib)
    rc, stdout, err = run_pagoda(pagoda_bin, "inspect", out)
    assert rc == 0 and "W8A8" in stdout + err
    assert kld(pagoda_bin, out, f32_model, evaluation, kl_cache) < 0.05


@pytest.mark.parametrize("args,message", [
    (["--method", "gptq"], "--calib"),
    (["--method", "awq", "--calib", "/nonexistent/calib.txt"], "cannot read the calibration text"),
    (["--method", "smooth"], "unknown --method"),
    (["--type", "W8A8", "--method", "gptq", "--calib", "x.txt"], "does not apply to W8A8"),
])
def test_bad_method_options_fail_with_a_message_and_no_file(pagoda_bin, f32_model, tmp_path, args, message):
    out = tmp_path / "never.gguf"
    rc, _, err = run_pagoda(pagoda_bin, "quantize", f32_model, out, *(["--type", "Q4_K"] if "--type" not in args else []),
                            *args)
    assert rc != 0 and message in err, err
    assert not out.exists()
