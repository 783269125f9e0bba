"""`pagoda serve` under load and at its edges: Prometheus metrics that parse and move,
200 concurrent streaming clients of which a third hang up mid-stream (the server stays
up, every completed stream is well formed, and afterwards no KV block is held), a full
queue answered with 429 and Retry-After, SIGTERM draining the running requests, and the
web playground driven by headless Chromium."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from oracles import oracle_missing

from server_util import GEMMA, Server


def metrics(server) -> dict[str, float]:
    r = server.get("/metrics")
    assert r.status_code == 200
    out = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            key = s.name + ("" if "le" not in s.labels else f"[le={s.labels['le']}]")
            if "finished_reason" in s.labels:
                key += f"[{s.labels['finished_reason']}]"
            out[key] = out.get(key, 0.0) + s.value
    return out


def test_metrics_parse_and_move(server):
    before = metrics(server)
    for name in ("pagoda:num_requests_running", "pagoda:num_requests_waiting", "pagoda:kv_cache_usage_perc",
                 "pagoda:prompt_tokens_total", "pagoda:generation_tokens_total", "pagoda:num_preemptions_total",
                 "pagoda:prefix_cache_queries_total", "pagoda:prefix_cache_hits_total",
                 "pagoda:time_to_first_token_seconds_count", "pagoda:inter_token_latency_seconds_count",
                 "pagoda:e2e_request_latency_seconds_count"):
        assert name in before, f"{name} missing from /metrics"
    r = server.post("/v1/completions", json={"prompt": [1, 50, 51, 52, 53], "max_tokens": 6, "temperature": 0})
    assert r.status_code == 200
    after = metrics(server)
    assert after["pagoda:generation_tokens_total"] - before["pagoda:generation_tokens_total"] == 6
    assert after["pagoda:prompt_tokens_total"] - before["pagoda:prompt_tokens_total"] == 5
    assert after["pagoda:time_to_first_token_seconds_count"] == before["pagoda:time_to_first_token_seconds_count"] + 1
    assert after["pagoda:inter_token_latency_seconds_count"] == before["pagoda:inter_token_latency_seconds_count"] + 5
    assert after["pagoda:e2e_request_latency_seconds_count"] == before["pagoda:e2e_request_latency_seconds_count"] + 1
    assert after["pagoda:request_success_total[length]"] == before["pagoda:request_success_total[length]"] + 1


def test_moe_metrics_count_the_routing(pagoda_bin, tmp_path):
    """An MoE model's expert statistics on /metrics: bounded labels (per-layer summaries as a
    histogram), counters that move with the tokens routed."""
    model = tmp_path / "moe.gguf"
    r = subprocess.run([str(pagoda_bin("pagoda-gen-model")), "--arch", "qwen3moe", "--experts", "8", "--experts-used",
                        "2", "--layers", "3", "--router-skew", "4", "-o", str(model)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    srv = Server(pagoda_bin, model)
    try:
        before = metrics(srv)
        assert before["pagoda:moe_experts"] == 8 and before["pagoda:moe_experts_used"] == 2
        r = srv.post("/v1/completions", json={"prompt": [1, 50, 51, 52, 53], "max_tokens": 6, "temperature": 0})
        assert r.status_code == 200
        after = metrics(srv)
        # 5 prompt tokens and 5 fed-back tokens through every layer.
        assert after["pagoda:moe_routed_tokens_total"] - before["pagoda:moe_routed_tokens_total"] == 10
        assert after["pagoda:moe_steps_total"] - before["pagoda:moe_steps_total"] == 6
        assert after["pagoda:moe_layer_imbalance_count"] == 3
        assert after["pagoda:moe_max_imbalance"] >= 1.0
        assert 0 < after["pagoda:moe_routing_seconds_total"] < after["pagoda:moe_forward_seconds_total"]
        assert 0 < after["pagoda:moe_expert_active_share"] <= 1
        labels = [line for line in srv.get("/metrics").text.splitlines() if line.startswith("pagoda:moe")]
        assert len(labels) < 30, labels  # bounded whatever the expert count
    finally:
        srv.terminate()


def test_200_streaming_clients_with_a_third_hanging_up(server):
    results = []
    lock = threading.Lock()

    def client(i: int):
        body = {"prompt": f"client {i} says", "max_tokens": 40, "temperature": 0.8, "seed": i, "stream": True}
        hang_up = i % 3 == 0
        events = []
        try:
            with httpx.stream("POST", server.base + "/v1/completions", json=body, timeout=300) as r:
                status = r.status_code
                for line in r.iter_lines():
                    if line:
                        events.append(line)
                    if hang_up and len(events) >= 3:
                        break  # closes the connection mid-stream
        except httpx.HTTPError as e:
            status = f"error {e!r}"
        with lock:
            results.append((i, hang_up, status, events))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert len(results) == 200
    completed = 0
    for i, hang_up, status, events in results:
        assert status == 200, (i, status)
        if hang_up:
            continue
        completed += 1
        assert events[-1] == "data: [DONE]", (i, events[-3:])
        payloads = [json.loads(e[len("data: "):]) for e in events[:-1]]
        assert all(e.startswith("data: ") for e in events)
        assert payloads[-1]["choices"][0]["finish_reason"] in ("length", "stop")
    assert completed == 133
    assert server.get("/health").status_code == 200
    # Every hung-up request was aborted and every finished one released: no block held.
    deadline = time.time() + 30
    while True:
        m = metrics(server)
        if m["pagoda:kv_cache_usage_perc"] == 0 and m["pagoda:num_requests_running"] == 0:
            break
        assert time.time() < deadline, f"KV blocks still held: {m['pagoda:kv_cache_usage_perc']}"
        time.sleep(0.2)
    assert m["pagoda:request_success_total[abort]"] >= 1


def test_full_queue_answers_429_with_retry_after(pagoda_bin, tiny_model):
    s = Server(pagoda_bin, tiny_model, "--max-num-seqs", "1", "--max-queued-requests", "2")
    try:
        statuses = []
        lock = threading.Lock()

        def go():
            r = s.post("/v1/completions", json={"prompt": "x", "max_tokens": 200, "temperature": 0, "ignore_eos": True})
            with lock:
                statuses.append((r.status_code, r.headers.get("retry-after"), r.json()))

        threads = [threading.Thread(target=go) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rejected = [x for x in statuses if x[0] == 429]
        assert rejected, [x[0] for x in statuses]
        assert all(r[1] is not None and r[2]["error"]["message"] for r in rejected)
        assert any(x[0] == 200 for x in statuses)
    finally:
        assert s.terminate() == 0


def test_sigterm_lets_running_streams_finish(pagoda_bin, tiny_model):
    s = Server(pagoda_bin, tiny_model)
    events = []
    done = threading.Event()

    def stream():
        body = {"prompt": "long", "max_tokens": 300, "temperature": 0, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", s.base + "/v1/completions", json=body, timeout=120) as r:
            for line in r.iter_lines():
                if line:
                    events.append(line)
                    if len(events) == 5:
                        done.set()
        done.set()

    t = threading.Thread(target=stream)
    t.start()
    assert done.wait(60)
    s.proc.send_signal(signal.SIGTERM)
    t.join(120)
    rc = s.proc.wait(60)
    s.kill()
    assert rc == 0
    assert events[-1] == "data: [DONE]"
    assert json.loads(events[-2][6:])["choices"][0]["finish_reason"] == "length"


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class DevTools:
    """Just enough of the Chrome DevTools protocol: evaluate JavaScript, take a screenshot."""

    def __init__(self, ws_url: str):
        import websocket
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def js(self, expr: str):
        return self.call("Runtime.evaluate", expression=expr, returnByValue=True)["result"].get("value")


def test_playground_streams_a_reply_in_headless_chromium(pagoda_bin, tiny_model, tmp_path):
    browser = chromium()
    if browser is None:
        oracle_missing("no chromium on this machine (scripts/setup installs Debian's chromium)")
    model = GEMMA if GEMMA.exists() else tiny_model
    s = Server(pagoda_bin, model)
    profile = tmp_path / "profile"
    proc = subprocess.Popen([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                             "--remote-debugging-port=0", "--window-size=1100,800", f"--user-data-dir={profile}",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert "Pagoda" in s.get("/").text
        port_file = profile / "DevToolsActivePort"
        deadline = time.time() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            assert time.time() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        pages = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=30).json()
        page = next(p for p in pages if p.get("type") == "page")
        dt = DevTools(page["webSocketDebuggerUrl"])
        dt.call("Page.enable")
        dt.call("Page.navigate", url=s.base + "/")
        deadline = time.time() + 30
        while dt.js("document.readyState") != "complete" or not dt.js("!!document.getElementById('input')"):
            assert time.time() < deadline, "the playground did not load"
            time.sleep(0.1)
        dt.js("document.getElementById('input').value = 'Write one sentence about the sea.';"
              "document.getElementById('form').requestSubmit();")
        # The reply streams in: wait until the request finished (the Send button is enabled again).
        deadline = time.time() + 240
        while True:
            state = dt.js("({n: document.querySelectorAll('.msg.assistant').length,"
                          " text: (document.querySelector('.msg.assistant .text') || {}).textContent || '',"
                          " busy: document.getElementById('send').disabled,"
                          " stats: document.getElementById('stats').textContent})")
            if state["n"] == 1 and state["text"] and not state["busy"]:
                break
            assert time.time() < deadline, f"no streamed reply: {state}"
            time.sleep(0.2)
        assert "[error" not in state["text"], state
        assert "tokens/s:" in state["stats"] and "tokens/s: –" not in state["stats"], state
        shot = pathlib.Path(os.environ.get("PAGODA_ARTIFACTS", tmp_path)) / "playground.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        import base64
        shot.write_bytes(base64.b64decode(dt.call("Page.captureScreenshot", format="png")["data"]))
        assert shot.stat().st_size > 1000
    finally:
        proc.kill()
        proc.wait()
        assert s.terminate() == 0


# OpenAI clients take the API root (".../v1") as the base URL; both forms work.
@pytest.mark.parametrize("root", ["", "/v1/"])
def test_bench_serve_measures_a_running_server(pagoda_bin, server, root):
    r = subprocess.run([str(pagoda_bin("pagoda")), "bench", "serve", "--base-url", server.base + root, "--vocab", "512",
                        "--num-prompts", "12", "--input-len", "24", "--output-len", "10", "--max-concurrency", "4",
                        "--json"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    j = json.loads(r.stdout)
    assert j["successful"] == 12 and j["failed"] == 0
    assert j["output_tokens"] == 120 and j["input_tokens"] == 12 * 24
    for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert set(j[k]) == {"mean", "p50", "p90", "p99"}
    assert 0 < j["ttft_ms"]["p50"] <= j["e2e_ms"]["p50"]


def test_bench_serve_reports_an_unreachable_server(pagoda_bin):
    r = subprocess.run([str(pagoda_bin("pagoda")), "bench", "serve", "--base-url", "http://127.0.0.1:9", "--num-prompts",
                        "2"], capture_output=True, timeout=60)
    assert r.returncode != 0 and b"error" in r.stderr


def test_speculative_decoding_serves_the_same_greedy_tokens(pagoda_bin, tmp_path, monkeypatch):
    """`--speculative-config` (prompt lookup): concurrent greedy requests get exactly the
    tokens of a server without it, sampled ones are served as before, and the draft
    counters move. On the scalar kernels, whose results do not depend on the batch (a
    verification step batches a sequence's drafts; tests/kernels/batch_invariance_test.cpp)."""
    from server_util import gen_tiny_model
    monkeypatch.setenv("PAGODA_CPU", "scalar")
    model = gen_tiny_model(pagoda_bin, tmp_path / "tiny.gguf")
    prompts = [[1] + [50 + (i * 7 + j) % 40 for j in range(30)] * 2 for i in range(6)]

    def run(*flags):
        srv = Server(pagoda_bin, model, *flags)
        try:
            out = []
            threads = []
            results = [None] * len(prompts)

            def one(i):
                r = srv.post("/v1/completions", json={"prompt": prompts[i], "max_tokens": 48, "temperature": 0,
                                                      "logprobs": 1})
                results[i] = r.json()
            for i in range(len(prompts)):
                threads.append(threading.Thread(target=one, args=(i,)))
                threads[-1].start()
            for t in threads:
                t.join()
            for res in results:
                out.append((res["choices"][0]["text"], res["choices"][0]["logprobs"]["tokens"]))
            sampled = srv.post("/v1/completions", json={"prompt": prompts[0], "max_tokens": 8, "temperature": 0.9,
                                                        "seed": 3})
            assert sampled.status_code == 200
            return out, metrics(srv)
        finally:
            srv.terminate()

    plain, _ = run()
    spec, m = run("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}')
    assert spec == plain
    assert 0 < m["pagoda:spec_decode_num_drafts_total"] <= m["pagoda:spec_decode_num_draft_tokens_total"]
    assert 0 < m["pagoda:spec_decode_num_accepted_tokens_total"] <= m["pagoda:spec_decode_num_draft_tokens_total"]
    # A draft model (here a copy of the target, so it guesses right) through the same
    # concurrent requests: the same tokens, drafting time counted.
    draft = gen_tiny_model(pagoda_bin, tmp_path / "draft.gguf")
    with_draft, m = run("--model-draft", str(draft), "--draft-max", "4")
    assert with_draft == plain
    assert m["pagoda:spec_decode_num_accepted_tokens_total"] > 0.5 * m["pagoda:spec_decode_num_draft_tokens_total"]
    assert m["pagoda:spec_decode_draft_seconds_total"] > 0
