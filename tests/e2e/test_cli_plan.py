"""`pagoda plan` on generated models: its JSON (stable keys, parts that add up), its KV cache
equal to what the engine then allocates (`bench throughput --json`), its total against the
peak RSS the engine reaches, the hardware probe and its cache, named profiles, fits under a
budget, and the errors of bad options."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

MiB = 1 << 20

MEMORY_KEYS = {"weights_file_bytes", "weights_resident_bytes", "packed_bytes", "packed_matrices",
               "dropped_file_bytes", "embedding_lookup_bytes", "converted_bytes", "vectors_file_bytes", "kv_bytes", "kv_blocks",
               "kv_capped", "max_model_len", "metadata_bytes", "tokenizer_bytes", "tokenizer_build_bytes", "running_bytes", "loading_bytes", "model_scratch_bytes", "engine_scratch_bytes", "runtime_bytes",
               "total_bytes"}
SPEED_KEYS = {"weight_bytes_per_step", "decode_tok_s", "decode_step_s", "decode_memory_bound_share",
              "prefill_tok_s", "ttft_s"}


@pytest.fixture
def pagoda(pagoda_bin, tmp_path):
    env = dict(os.environ, PAGODA_CACHE=str(tmp_path / "cache"))  # the hardware cache stays in the test

    def run(*args, timeout=300):
        r = subprocess.run([str(pagoda_bin("pagoda")), *map(str, args)], capture_output=True, timeout=timeout, env=env)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    return run


@pytest.fixture(scope="module")
def models(tmp_path_factory, pagoda_bin):
    d = tmp_path_factory.mktemp("plan")
    out = {}
    for arch, fmt in (("llama", "Q8_0"), ("gemma3", "Q4_K"), ("qwen2", "F16")):
        path = d / f"{arch}.gguf"
        cmd = [str(pagoda_bin("pagoda-gen-model")), "--arch", arch, "--type", fmt, "--dim", "256", "--layers", "4",
               "--heads", "4", "--kv-heads", "2", "--ff", "512", "--vocab", "2048", "--ctx", "8192",
               "--sliding-window", "64", "-t", "2", "-o", str(path)]
        r = subprocess.run(cmd, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        out[arch] = path
    return out


def plan_json(pagoda, model, *args) -> dict:
    rc, out, err = pagoda("plan", "-m", model, "-t", "2", "--json", *args)
    assert rc == 0, err
    return json.loads(out)


def test_json_keys_are_stable_and_the_parts_add_up(pagoda, models):
    j = plan_json(pagoda, models["llama"], "-c", 2048, "--max-num-seqs", 4, "--hardware", "none")
    assert {"model", "arch", "ctx", "max_num_seqs", "kv_cache_dtype", "threads", "available_bytes", "budget_bytes",
            "memory", "fits"} == set(j)
    m = j["memory"]
    assert set(m) == MEMORY_KEYS
    assert m["running_bytes"] == (m["weights_resident_bytes"] + m["kv_bytes"] + m["metadata_bytes"] + m["tokenizer_bytes"]
                                  + m["model_scratch_bytes"] + m["engine_scratch_bytes"] + m["runtime_bytes"])
    assert m["loading_bytes"] == (m["weights_resident_bytes"] + m["metadata_bytes"] + m["tokenizer_build_bytes"]
                                  + m["runtime_bytes"])
    assert m["total_bytes"] == max(m["running_bytes"], m["loading_bytes"])
    assert m["tokenizer_build_bytes"] >= m["tokenizer_bytes"]
    assert m["tokenizer_bytes"] > 0  # the generated model has a vocabulary
    assert m["weights_resident_bytes"] == (m["weights_file_bytes"] - m["vectors_file_bytes"] - m["embedding_lookup_bytes"]
                                           - m["dropped_file_bytes"] + m["packed_bytes"] + m["converted_bytes"])
    assert m["max_model_len"] == 2048 and j["ctx"] == 2048 and j["max_num_seqs"] == 4


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
@pytest.mark.parametrize("kv", ["f16", "int8"])
def test_kv_cache_is_what_the_engine_allocates(pagoda, models, arch, kv):
    flags = ["-c", 4096, "--max-num-seqs", 3, "--kv-cache-dtype", kv]
    j = plan_json(pagoda, models[arch], *flags, "--hardware", "none")
    rc, out, err = pagoda("bench", "throughput", "-m", models[arch], "-t", "2", *flags, "--num-prompts", 3,
                          "--input-len", 32, "--output-len", 4, "--json")
    assert rc == 0, err
    b = json.loads(out)
    assert j["memory"]["kv_bytes"] == b["kv_bytes"] and j["memory"]["kv_blocks"] == b["kv_blocks"], (j, b)


def test_total_is_the_peak_rss_the_engine_reaches(pagoda_bin, models):
    # The generated model is small: the total is mostly the KV cache (prefaulted by the
    # benchmark) and the process's own baseline, the one measured constant.
    model = models["qwen2"]
    flags = ["-c", "8192", "--max-num-seqs", "8", "--kv-cache-dtype", "f16"]
    p = subprocess.run([str(pagoda_bin("pagoda")), "plan", "-m", str(model), "-t", "2", "--json", "--hardware",
                        "none", *flags], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    predicted = json.loads(p.stdout)["memory"]["total_bytes"]
    # The benchmark's own VmHWM: wait4's ru_maxrss would start from this test runner's
    # resident set (exec keeps the parent's high-water mark), hundreds of MiB late in a run.
    r = subprocess.run([str(pagoda_bin("pagoda")), "bench", "throughput", "-m", str(model), "-t", "2", *flags,
                        "--num-prompts", "8", "--input-len", "64", "--output-len", "8", "--range-ratio", "0", "--json"],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rss = json.loads(r.stdout)["peak_rss_bytes"]
    assert abs(predicted - rss) <= max(0.03 * rss, 32 * MiB), (predicted / MiB, rss / MiB)


def test_auto_hardware_is_measured_once_then_read_from_the_cache(pagoda, models, tmp_path):
    j1 = plan_json(pagoda, models["llama"], "-c", 1024, "--max-num-seqs", 1)
    hw = j1["hardware"]
    assert hw["name"] == "auto" and hw["threads"] == 2
    types = {f["type"] for f in hw["formats"]}
    assert "Q8_0" in types
    assert all(f["gemv_bytes_per_s"] > 1e8 and f["gemm_flops"] > 1e8 for f in hw["formats"])
    cached = list((tmp_path / "cache" / "hardware").glob("*-t2.json"))
    assert len(cached) == 1
    j2 = plan_json(pagoda, models["llama"], "-c", 1024, "--max-num-seqs", 1)
    assert j2["hardware"] == hw  # read back, not measured again
    assert set(j1["speed"]) >= SPEED_KEYS
    s = j1["speed"]
    assert 0 <= s["decode_memory_bound_share"] <= 1
    assert s["prefill_tok_s"] > s["decode_tok_s"] > 0  # a batch of 512 beats one token per matrix read
    # The model's own step on a copy of its shape: the whole model (it is small), and the
    # one-sequence speed is that step's, not the sum of the calls.
    [mt] = hw["models"]
    assert mt["layers"] == mt["n_layer"] == 4 and mt["decode_keys"] > 0 and mt["prefill_tokens"] == 512
    assert mt["prefill_s"] > mt["decode_s"] > mt["output_s"] >= 0
    assert s["decode_step_s"] == pytest.approx(mt["decode_s"], rel=0.5)
    # Another format and another shape are measured and added to the same cache, and each
    # plan shows only its own model's step.
    j3 = plan_json(pagoda, models["gemma3"], "-c", 1024)
    assert "Q4_K" in {f["type"] for f in j3["hardware"]["formats"]}
    cache = json.loads(cached[0].read_text())
    assert {f["type"] for f in cache["formats"]} >= {"Q8_0", "Q4_K"}
    assert len(j3["hardware"]["models"]) == 1 and j3["hardware"]["models"][0]["key"] != mt["key"]
    assert {m["key"] for m in cache["models"]} == {mt["key"], j3["hardware"]["models"][0]["key"]}


def test_a_damaged_cache_is_measured_again(pagoda, models, tmp_path):
    plan_json(pagoda, models["llama"], "-c", 1024)
    cached = next((tmp_path / "cache" / "hardware").glob("*.json"))
    cached.write_text("{not json")
    j = plan_json(pagoda, models["llama"], "-c", 1024)
    assert j["hardware"]["formats"] and json.loads(cached.read_text())["formats"]


def test_named_profile_and_speed_that_follows_bandwidth(pagoda, models):
    slow = plan_json(pagoda, models["llama"], "-c", 1024, "--hardware", "laptop-ddr5-8c")
    fast = plan_json(pagoda, models["llama"], "-c", 1024, "--hardware", "server-12ch-ddr5-64c")
    assert slow["hardware"]["name"] == "laptop-ddr5-8c"
    assert fast["speed"]["decode_tok_s"] > slow["speed"]["decode_tok_s"]
    assert [r["scenario"] for r in slow["recommendations"]] == ["low latency", "high throughput", "long context",
                                                               "small memory"]


def test_depth_slows_decode_and_int8_kv_halves_the_cache(pagoda, models):
    d0 = plan_json(pagoda, models["llama"], "-c", 8192, "--hardware", "laptop-ddr5-8c")
    d8 = plan_json(pagoda, models["llama"], "-c", 8192, "--hardware", "laptop-ddr5-8c", "--depth", 7000)
    assert d8["speed"]["decode_tok_s"] < d0["speed"]["decode_tok_s"]
    assert d8["speed"]["prefill_tok_s"] < d0["speed"]["prefill_tok_s"]
    i8 = plan_json(pagoda, models["llama"], "-c", 8192, "--kv-cache-dtype", "int8", "--hardware", "none")
    f16 = plan_json(pagoda, models["llama"], "-c", 8192, "--hardware", "none")
    # int8 rows: head_dim + 4 bytes of scale per head, against 2 * head_dim.
    assert i8["memory"]["kv_bytes"] == pytest.approx(f16["memory"]["kv_bytes"] * (64 + 4) / 128, rel=0.01)


def test_fits_under_a_budget(pagoda, models):
    j = plan_json(pagoda, models["llama"], "-c", 8192, "--max-num-seqs", 4, "--hardware", "none",
                  "--memory-budget", "200M")
    m = j["memory"]
    per_seq = m["kv_bytes"] / 4
    fixed = m["running_bytes"] - m["kv_bytes"]
    assert j["budget_bytes"] == 200 * MiB
    assert j["fits"]["max_num_seqs_at_ctx"] == int((200 * MiB - fixed) // per_seq)
    assert 0 < j["fits"]["ctx_at_max_num_seqs"] <= 8192
    tiny = plan_json(pagoda, models["llama"], "-c", 8192, "--hardware", "none", "--memory-budget", "1M")
    assert tiny["fits"] == {"max_num_seqs_at_ctx": 0, "ctx_at_max_num_seqs": 0}


def test_bad_options_are_clear_errors(pagoda, models, tmp_path):
    rc, out, err = pagoda("plan", "-m", models["llama"], "--hardware", "no-such-machine")
    assert rc == 1 and "unknown profile 'no-such-machine'" in err and "laptop-ddr5-8c" in err, err
    rc, out, err = pagoda("plan", "-m", models["llama"], "--kv-cache-memory", "100T")
    assert rc == 1 and "--kv-cache-memory" in err, err
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 20)
    rc, out, err = pagoda("plan", "-m", bad)
    assert rc == 1 and err.startswith("error:"), err
    rc, out, err = pagoda("plan", "-m", models["llama"], "--memory-budget", "lots")
    assert rc == 1 and "lots" in err, err


def test_moe_decode_reads_the_experts_a_token_touches(pagoda, pagoda_bin, tmp_path):
    """An MoE model's decode step reads its k experts per layer, not all of them; a batch
    touches more (all of them once the batch is wide), and predicted decode is that much
    faster than the total bytes would say."""
    path = tmp_path / "moe.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "qwen3moe", "--type", "Q8_0", "--dim", "256",
                        "--layers", "2", "--ff", "512", "--experts", "16", "--experts-used", "2", "--vocab", "2048",
                        "-o", str(path)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    from gguf import GGUFReader
    sizes = {t.name: int(t.n_bytes) for t in GGUFReader(str(path)).tensors}
    experts = sum(v for k, v in sizes.items() if k.endswith("_exps.weight"))
    dense = sum(v for k, v in sizes.items() if not k.endswith("_exps.weight") and k != "token_embd.weight"
                and ".weight" in k and "norm" not in k)
    plan = plan_json(pagoda, path, "--hardware", "laptop-ddr5-8c", "--max-num-seqs", 64)
    one, wide = plan["speed"], plan["batch_speed"]
    want = dense + experts * 2 / 16
    # Panels add a few percent over the file's bytes.
    assert want * 0.97 < one["weight_bytes_per_step"] < want * 1.08, (one["weight_bytes_per_step"], want)
    assert wide["weight_bytes_per_step"] > 0.97 * (dense + experts)
