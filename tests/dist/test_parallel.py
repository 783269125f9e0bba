"""Tensor and pipeline parallelism over MPI (src/dist, docs/parallel.md), run with mpirun on
this machine: every split gives exactly the logits of one process (so the same greedy
tokens), the server answers the same over a split model, the traffic counters match the
formula of the split, and a rank that dies or hangs makes rank 0 fail its open requests
and exit. The oracle is the one-process run of the same binary on the same file."""
from __future__ import annotations

import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import threading
import time

import httpx
import numpy as np
import pytest

import oracles
from oracles import cached_model

# Root in CI containers; ranks over shared memory without the cross-memory-attach
# syscalls a container may forbid; more ranks than the two cores.
MPI_ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_rmaps_base_oversubscribe": "1"}

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED_MODELS = pathlib.Path(os.environ.get("PAGODA_SHARED_MODELS", REPO.parent / "shared" / "models"))

MODES = {"tp2": (2, ["--tp", "2"]), "pp2": (2, ["--pp", "2"]), "tp2pp2": (4, ["--tp", "2", "--pp", "2"]),
         "sp2": (2, ["--sp", "2"])}


@pytest.fixture(scope="session")
def mpirun():
    path = shutil.which("mpirun")
    if path is None:
        oracles.oracle_missing("mpirun is not installed (Debian's openmpi-bin; scripts/setup installs it)")
    return path


def mpi(mpirun, n, argv, timeout=180, **kw):
    return subprocess.run([mpirun, "-np", str(n), *map(str, argv)], env=MPI_ENV, capture_output=True,
                          timeout=timeout, **kw)


def run_ids(pagoda_bin, model, ids, tmp, tag, n_predict=24, mpirun=None, ranks=1, extra=()):
    """Greedy ids and raw logits rows of `pagoda run` on the prompt ids."""
    out_ids, out_logits = tmp / f"{tag}.json", tmp / f"{tag}.bin"
    argv = [pagoda_bin("pagoda"), "run", "-m", model, "--prompt-ids", ",".join(map(str, ids)), "-n", n_predict,
            "--temp", "0", "--ignore-eos", "--ids-out", out_ids, "--logits-out", out_logits, *extra]
    if mpirun is None:
        r = subprocess.run(list(map(str, argv + ["-t", "2"])), capture_output=True, timeout=180)
    else:
        r = mpi(mpirun, ranks, argv + ["-t", "1"])
    assert r.returncode == 0, (r.stdout.decode(errors="replace")[-2000:], r.stderr.decode(errors="replace")[-3000:])
    return json.loads(out_ids.read_text())["generated_ids"], np.fromfile(out_logits, dtype=np.float32)


@pytest.fixture(scope="module")
def models(write_gen_model, tmp_path_factory):
    d = tmp_path_factory.mktemp("dist_models")
    stories = SHARED_MODELS / "stories260K.gguf"
    if not stories.exists():
        oracles.oracle_missing(f"{stories} is not present (the shared models folder beside the repository)")
    return {
        "stories260K": (stories, 512, 400),
        # GQA (4 query heads per KV head) in a repacked format.
        "llama_gqa_q8": (write_gen_model(d / "gqa.gguf", "llama", "Q8_0", dim=256, layers=4, heads=8, kv_heads=2,
                                         ff=512, vocab=1000), 1000, 600),
        # One KV head shared by both ranks, sliding-window layers, K-quants.
        "gemma3_q4k": (write_gen_model(d / "gemma3.gguf", "gemma3", "Q4_K", dim=256, layers=6, heads=4, kv_heads=1,
                                       head_dim=64, ff=512, vocab=1000, sliding_window=32), 1000, 600),
        # Q/K/V biases.
        "qwen2_q4_0": (write_gen_model(d / "qwen2.gguf", "qwen2", "Q4_0", dim=256, layers=3, heads=8, kv_heads=4,
                                       ff=512, vocab=1000), 1000, 600),
    }


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", ["stories260K", "llama_gqa_q8", "gemma3_q4k", "qwen2_q4_0"])
def test_split_runs_give_the_logits_of_one_process(pagoda_bin, mpirun, models, tmp_path, name, mode):
    """Bit-identical logits rows (hence greedy ids) for every split: a 600-token prompt
    (two 512-token pieces of prefill; 400 in stories260K's 512-token context) then decode."""
    model, vocab, length = models[name]
    ids = [random.Random(7).randrange(3, vocab) for _ in range(length)]
    ranks, flags = MODES[mode]
    want_ids, want = run_ids(pagoda_bin, model, ids, tmp_path, "one")
    got_ids, got = run_ids(pagoda_bin, model, ids, tmp_path, "split", mpirun=mpirun, ranks=ranks, extra=flags)
    assert got_ids == want_ids
    assert got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("mode", ["tp2", "pp2", "tp2pp2", "sp2"])
def test_gemma3_270m_split_gives_the_same_tokens(pagoda_bin, mpirun, tmp_path, mode):
    path = cached_model("gemma-3-270m-q4_k_m.gguf", "scripts/fetch_test_data")
    ids = [2, 818, 5279, 529, 7001, 563, 107, 236761, 1018, 563, 496, 1630, 529]
    ranks, flags = MODES[mode]
    want_ids, want = run_ids(pagoda_bin, path, ids, tmp_path, "one", n_predict=32)
    got_ids, got = run_ids(pagoda_bin, path, ids, tmp_path, "split", n_predict=32, mpirun=mpirun, ranks=ranks,
                           extra=flags)
    assert got_ids == want_ids
    assert np.array_equal(got, want)


# Expert widths that split unevenly over two ranks' 16-row panels (160: 80 + 80, 384), and
# a K-quant one (its columns a multiple of 256).
@pytest.mark.parametrize("arch,fmt,widths", [("qwen2moe", "Q8_0", {"expert_ff": 160, "shared_expert_ff": 384}),
                                             ("qwen3moe", "Q4_K", {"expert_ff": 512, "experts": 8, "experts_used": 2})])
def test_mixture_of_experts_splits_give_the_logits_of_one_process(pagoda_bin, mpirun, write_gen_model, tmp_path,
                                                                   arch, fmt, widths):
    """Every expert split by rows under TP (the router whole on each rank), by layers under
    PP, by tokens under SP: the same logits rows as one process, bit for bit, over a prompt
    of two 512-token pieces (many tokens per expert) and then decode (k rows a step)."""
    model = write_gen_model(tmp_path / f"{arch}.gguf", arch, fmt, dim=256, layers=4, heads=4, kv_heads=2, ff=256,
                            vocab=1000, **widths)
    ids = [random.Random(3).randrange(3, 1000) for _ in range(600)]
    want_ids, want = run_ids(pagoda_bin, model, ids, tmp_path, "one")
    for mode in MODES:
        ranks, flags = MODES[mode]
        got_ids, got = run_ids(pagoda_bin, model, ids, tmp_path, mode, mpirun=mpirun, ranks=ranks, extra=flags)
        assert got_ids == want_ids and np.array_equal(got, want), mode


def test_bad_launches_say_what_to_do(pagoda_bin, mpirun, models):
    model = models["llama_gqa_q8"][0]
    r = subprocess.run([str(pagoda_bin("pagoda")), "run", "-m", str(model), "--prompt-ids", "1,2", "--tp", "2"],
                       capture_output=True, timeout=60)
    assert r.returncode == 1 and b"mpirun -np 2" in r.stderr, r.stderr
    r = mpi(mpirun, 3, [pagoda_bin("pagoda"), "run", "-m", model, "--prompt-ids", "1,2", "--tp", "2"], timeout=60)
    assert r.returncode != 0 and b"needs 2 processes, but mpirun started 3" in r.stderr, r.stderr
    r = mpi(mpirun, 3, [pagoda_bin("pagoda"), "run", "-m", model, "--prompt-ids", "1,2", "--tp", "3"], timeout=60)
    assert r.returncode != 0 and b"KV heads" in r.stderr, r.stderr


def test_bench_traffic_is_the_formula_of_the_split(pagoda_bin, mpirun, models):
    """Rank 1 sends, per token through a layer, its slices of the four gathered
    activations (attention output, attention projection, FFN activation, FFN projection),
    and per logits row its best (logit, id) pair, since greedy sampling reads nothing else
    (Batch::top_candidates): the counters say exactly that."""
    model, vocab, _ = models["llama_gqa_q8"]
    r = mpi(mpirun, 2, [pagoda_bin("pagoda"), "bench", "throughput", "-m", model, "--num-prompts", "3",
                        "--input-len", "20", "--output-len", "10", "-t", "1", "--tp", "2", "--json"])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    j = json.loads(r.stdout)
    par = j["parallel"]
    assert par["tp"] == 2 and len(par["ranks"]) == 2
    layers, heads, head_dim, embd, ff = 4, 8, 32, 256, 512
    processed = j["input_tokens"] + j["output_tokens"] - j["num_prompts"]  # each request's last token is not fed back
    per_token_layer = 4 * (heads * head_dim // 2 + embd // 2 + ff // 2 + embd // 2)
    logits = 8 * j["output_tokens"]
    assert par["ranks"][1]["bytes_sent"] == processed * layers * per_token_layer + logits
    assert 0 <= par["comm_share_max"] < 1


def test_bench_traffic_of_experts_is_the_formula_of_their_split(pagoda_bin, mpirun, write_gen_model, tmp_path):
    """An MoE layer's rank 1 sends, per token, its columns of the attention output and
    projection, then one block with its columns of the k experts' and the shared expert's
    SwiGLU rows, and one with its rows of their k + 1 down projections (moe_down_split)."""
    model = write_gen_model(tmp_path / "moe.gguf", "qwen2moe", "Q8_0", dim=256, layers=4, heads=4, kv_heads=2, ff=256,
                            vocab=1000, expert_ff=160, shared_expert_ff=384)
    r = mpi(mpirun, 2, [pagoda_bin("pagoda"), "bench", "throughput", "-m", model, "--num-prompts", "3",
                        "--input-len", "20", "--output-len", "10", "-t", "1", "--tp", "2", "--json"])
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    j = json.loads(r.stdout)
    layers, q_dim, embd, k, expert_ff, shared_ff = 4, 256, 256, 2, 160, 384
    processed = j["input_tokens"] + j["output_tokens"] - j["num_prompts"]
    per_token_layer = 4 * (q_dim // 2 + embd // 2 + k * expert_ff // 2 + shared_ff // 2 + (k + 1) * embd // 2)
    assert j["parallel"]["ranks"][1]["bytes_sent"] == processed * layers * per_token_layer + 8 * j["output_tokens"]


class MpiServer:
    def __init__(self, mpirun, pagoda_bin, model, ranks, *extra):
        self.proc = subprocess.Popen([mpirun, "-np", str(ranks), str(pagoda_bin("pagoda")), "serve", "-m", str(model),
                                      "--port", "0", "-t", "1", *map(str, extra)], env=MPI_ENV,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.time() + 90
        self.base = None
        while time.time() < deadline and self.base is None:
            m = re.search(r"listening on http://[^:]+:(\d+)", self.output())
            if m:
                self.base = f"http://127.0.0.1:{m.group(1)}"
            elif self.proc.poll() is not None:
                break
            time.sleep(0.05)
        assert self.base, self.output()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.decode(errors="replace"))

    def output(self):
        return "".join(self.lines)

    def rank_pid(self, rank):
        for p in pathlib.Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                env = (p / "environ").read_bytes().split(b"\0")
                cmd = (p / "cmdline").read_bytes()
            except OSError:
                continue
            if b"serve" in cmd and f"OMPI_COMM_WORLD_RANK={rank}".encode() in env and self._descends(int(p.name)):
                return int(p.name)
        raise AssertionError(f"rank {rank} not found")

    def _descends(self, pid):
        while pid > 1:
            if pid == self.proc.pid:
                return True
            try:
                pid = int((pathlib.Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                return False
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def completions(base, prompts, **kw):
    out = [None] * len(prompts)

    def one(i):
        r = httpx.post(base + "/v1/completions", json={"prompt": prompts[i], "temperature": 0, **kw}, timeout=120)
        # (kw's temperature, when given, replaces the 0)
        assert r.status_code == 200, r.text
        out[i] = [c["text"] for c in r.json()["choices"]]
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_server_over_a_split_model_answers_as_one_process(pagoda_bin, mpirun, models):
    """Concurrent requests (continuous batching), a shared prefix (prefix caching) and n=2
    (the forked samples' copy-on-write of their shared block, which the other ranks
    repeat) give the one-process server's text."""
    model = models["llama_gqa_q8"][0]
    prompts = ["once upon a time " * 6 + str(i) for i in range(4)] + ["the same prefix " * 8] * 2
    want, got = None, None
    for ranks, flags in [(1, []), (2, ["--tp", "2"]), (4, ["--tp", "2", "--pp", "2"]), (2, ["--sp", "2"])]:
        s = MpiServer(mpirun, pagoda_bin, model, ranks, *flags)
        try:
            got = completions(s.base, prompts, max_tokens=24, n=2, ignore_eos=True)
            # Sampled with a seed: top-k sampling (each rank sends its 40 best per row),
            # the whole row (top_k 0), and logprobs (whole rows) draw the same tokens.
            for extra in ({"top_k": 40}, {"top_k": 0}, {"top_k": 40, "logprobs": 2}):
                got += completions(s.base, prompts[:3], max_tokens=16, ignore_eos=True, temperature=0.9, seed=11,
                                   **extra)
        finally:
            s.stop()
        # mpirun itself exits 1 when it was signalled; the server's own words say how it ended.
        assert "pagoda serve: stopped" in s.output() and "error" not in s.output(), s.output()
        if want is None:
            want = got
        assert got == want, flags


@pytest.mark.parametrize("how", ["killed", "hung"])
def test_a_lost_rank_fails_open_requests_and_ends_the_job(pagoda_bin, mpirun, models, how):
    model = models["llama_gqa_q8"][0]
    s = MpiServer(mpirun, pagoda_bin, model, 2, "--tp", "2", "--dist-timeout", "3")
    try:
        events = []

        def stream():
            with httpx.stream("POST", s.base + "/v1/completions", timeout=60,
                              json={"prompt": "hello", "max_tokens": 1500, "ignore_eos": True, "stream": True}) as r:
                for line in r.iter_lines():
                    events.append(line)
        t = threading.Thread(target=stream)
        t.start()
        while not any("text" in e for e in events):
            time.sleep(0.01)
        t0 = time.time()
        os.kill(s.rank_pid(1), signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        rc = s.proc.wait(20)
        took = time.time() - t0
        t.join(10)
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
    assert rc != 0
    # Killed: mpirun's SIGTERM fails the stuck transfer at once; hung: the 3 s deadline.
    assert took < (5 if how == "killed" else 10), took
    errors = [e for e in events if '"error"' in e]
    assert errors and "cluster is lost" in errors[0], events[-3:]
    assert [e for e in events if e][-1] == "data: [DONE]"


@pytest.mark.parametrize("mode", ["tp2", "pp2", "sp2"])
def test_sampled_tokens_match_one_process(pagoda_bin, mpirun, models, tmp_path, mode):
    """Seeded sampling draws the same tokens: with top-k each rank sends only its k best
    (logit, id) per row, which hold the row's k best; with top-k off, whole rows."""
    model = models["qwen2_q4_0"][0]
    ranks, flags = MODES[mode]
    for filters in (["--top-k", "40"], ["--top-k", "5", "--top-p", "0.9"], ["--top-k", "0"]):
        argv = [pagoda_bin("pagoda"), "run", "-m", model, "--prompt-ids", "1,2,3,4", "-n", "40", "--temp", "0.9",
                "-s", "7", "--ignore-eos", *filters]
        one = subprocess.run(list(map(str, argv + ["-t", "2", "--ids-out", tmp_path / "one.json"])),
                             capture_output=True, timeout=120)
        assert one.returncode == 0, one.stderr
        split = mpi(mpirun, ranks, argv + ["-t", "1", "--ids-out", tmp_path / "split.json", *flags])
        assert split.returncode == 0, split.stderr.decode(errors="replace")[-2000:]
        assert json.loads((tmp_path / "split.json").read_text()) == json.loads((tmp_path / "one.json").read_text()), \
            filters


# The dense model, and one of experts (8 per layer, their rows split by tensor ranks).
SHARDED = {"llama": {}, "qwen2moe": {"experts": 8, "experts_used": 2, "expert_ff": 704, "shared_expert_ff": 1408}}


@pytest.mark.parametrize("mode,arch", [("tp2", "llama"), ("pp2", "llama"), ("tp2pp2", "llama"), ("tp2", "qwen2moe"),
                                       ("tp2pp2", "qwen2moe")])
def test_plan_predicts_every_ranks_peak_rss(pagoda_bin, mpirun, write_gen_model, tmp_path, mode, arch):
    """`pagoda plan --tp/--pp` sizes each rank from its own shard (its rows and layers of
    the matrices, its heads' and stage's KV); the benchmark then measures each rank's
    VmHWM with the same split. A KV cache of 256 MiB and 100 MiB of weights make the
    split visible: a plan that gave every rank the whole model is off by far more than the
    bar."""
    ranks, flags = MODES[mode]
    model = write_gen_model(tmp_path / "m.gguf", arch, "Q8_0", dim=1024, layers=8, heads=16, kv_heads=4, ff=2816,
                            vocab=8000, **SHARDED[arch])
    common = ["-c", "4096", "--max-num-seqs", "8", "--kv-cache-dtype", "f16"]
    p = subprocess.run([str(pagoda_bin("pagoda")), "plan", "-m", str(model), "-t", "1", "--json", "--hardware", "none",
                        *common, *flags], capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    plan = json.loads(p.stdout)
    planned = plan["parallel"]["ranks"]
    assert [r["rank"] for r in planned] == list(range(ranks))
    # The shards add up to the whole: every KV head of every layer is held once (this
    # model has more KV heads than tensor ranks, so none is shared).
    assert sum(r["memory"]["kv_bytes"] for r in planned) == pytest.approx(plan["memory"]["kv_bytes"], rel=1e-6)
    r = mpi(mpirun, ranks, [pagoda_bin("pagoda"), "bench", "throughput", "-m", model, "-t", "1", *common,
                            "--num-prompts", "8", "--input-len", "64", "--output-len", "8", "--range-ratio", "0",
                            "--json", *flags], timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-3000:]
    measured = json.loads(r.stdout)["parallel"]["ranks"]
    MiB = 1 << 20
    for want, got in zip(planned, measured):
        rss, pred = got["peak_rss_bytes"], want["memory"]["total_bytes"]
        assert abs(pred - rss) <= max(0.03 * rss, 32 * MiB), (mode, want["rank"], pred / MiB, rss / MiB)
    whole = plan["memory"]["total_bytes"]
    assert max(x["memory"]["total_bytes"] for x in planned) < whole - 100 * MiB
