"""Issue 22: hostile input never takes the server down. The HTTP transport (Beast over
Asio, src/server/http_transport.cpp) keeps idle and half-open connections off the handler
threads, refuses connections over --max-connections with a quick 503, cuts off headers that
arrive too slowly, answers malformed framing with 400 at once, answers pipelined requests
in order, aborts a non-streaming completion whose client hung up, and ignores Range."""
from __future__ import annotations

import json
import resource
import socket
import time

import httpx
import pytest

from server_util import Server, gen_tiny_model


def raise_fd_limit(n: int = 4096) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n if hard == resource.RLIM_INFINITY else min(n, hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def connect(port: int, timeout: float = 5) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_until_closed(s: socket.socket, limit: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes (or `limit` seconds pass)."""
    t0 = time.monotonic()
    s.settimeout(0.1)
    data = b""
    while time.monotonic() - t0 < limit:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data, time.monotonic() - t0


def read_response(f) -> tuple[int, dict, bytes]:
    """One Content-Length-framed response from a buffered reader, leaving the rest."""
    line = f.readline()
    assert line.startswith(b"HTTP/1.1 "), line
    status = int(line.split()[1])
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, v = h.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = f.read(int(headers.get("content-length", "0")))
    return status, headers, body


def metric(server: Server, name: str, label: str = "") -> float:
    text = server.get("/metrics").text
    for line in text.splitlines():
        if line.startswith("pagoda:" + name) and label in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric {name} {label}")


def test_half_open_connections_do_not_starve_health(pagoda_bin, tiny_model):
    raise_fd_limit()
    s = Server(pagoda_bin, tiny_model, "--header-timeout", "60")
    socks = []
    try:
        for _ in range(1000):
            c = connect(s.port)
            c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never finished
            socks.append(c)
        time.sleep(0.2)
        t0 = time.monotonic()
        r = httpx.get(s.base + "/health", timeout=30)
        elapsed = time.monotonic() - t0
        print(f"/health under 1000 half-open connections: {elapsed * 1000:.1f} ms")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        assert elapsed < 2.0, elapsed
        r = s.post("/v1/completions", json={"prompt": "a", "max_tokens": 2})
        assert r.status_code == 200, r.text
    finally:
        for c in socks:
            c.close()
    assert s.terminate() == 0, s.output()


def test_connections_over_the_limit_get_503(pagoda_bin, tiny_model):
    s = Server(pagoda_bin, tiny_model, "--max-connections", "50", "--header-timeout", "60")
    socks = []
    try:
        for _ in range(50):
            c = connect(s.port)
            c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            socks.append(c)
        time.sleep(0.3)
        for _ in range(5):
            c = connect(s.port)
            data, elapsed = read_until_closed(c, 3)
            c.close()
            assert data.startswith(b"HTTP/1.1 503"), data[:200]
            assert b"connection: close" in data.lower() and elapsed < 1.0, elapsed
            body = json.loads(data.split(b"\r\n\r\n", 1)[1])
            assert body["error"]["type"] == "server_error"
        for c in socks:
            c.close()
        socks = []
        deadline = time.monotonic() + 5
        while True:  # the closed ones are noticed and counted out
            try:
                if httpx.get(s.base + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        for c in socks:
            c.close()
    assert s.terminate() == 0, s.output()


def test_partial_headers_are_cut_off_at_the_header_timeout(pagoda_bin, tiny_model):
    s = Server(pagoda_bin, tiny_model, "--header-timeout", "1")
    try:
        c = connect(s.port)
        c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        data, elapsed = read_until_closed(c, 10)
        c.close()
        assert data == b"" and 0.7 < elapsed < 2.5, (data, elapsed)
        assert s.get("/health").status_code == 200
    finally:
        assert s.terminate() == 0, s.output()


TLS_CLIENT_HELLO = bytes.fromhex("16030100c4010000c00303") + bytes(32) + bytes.fromhex("000004130113020100")
MALFORMED = {
    "huge content-length": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
    "negative content-length": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    "bad chunk size": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "tls client hello": TLS_CLIENT_HELLO,
    "garbage line": b"\x00\xffhello there\r\n",
    "garbage request": b"this is not http\r\n\r\n",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_framing_is_refused_at_once(server, name):
    c = connect(server.port)
    c.sendall(MALFORMED[name])
    data, elapsed = read_until_closed(c, 5)
    c.close()
    assert elapsed < 1.0, (name, elapsed)
    assert data == b"" or data.startswith(b"HTTP/1.1 400"), data[:200]
    if data:
        body = json.loads(data.split(b"\r\n\r\n", 1)[1])
        assert body["error"]["type"] == "invalid_request_error"
        assert b"\xff" not in data and b"hello" not in data  # the request is never echoed
    assert server.get("/health").status_code == 200


def test_pipelined_requests_are_answered_in_order(server):
    c = connect(server.port, timeout=30)
    c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" * 9 + b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    f = c.makefile("rb")
    for i in range(10):
        status, _, body = read_response(f)
        assert status == 200
        assert (json.loads(body)["object"] == "list") if i == 9 else (json.loads(body) == {"status": "ok"})
    reqs = b""
    for i in range(5):
        body = json.dumps({"prompt": f"p{i}", "max_tokens": 2 + i, "ignore_eos": True}).encode()
        reqs += (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body)) + body
    c.sendall(reqs)
    for i in range(5):
        status, _, body = read_response(f)
        assert status == 200, body
        assert json.loads(body)["usage"]["completion_tokens"] == 2 + i  # in the order sent
    c.close()


@pytest.fixture(scope="module")
def long_model(pagoda_bin, tmp_path_factory):
    # A long context, so that a request cannot finish before its client leaves.
    model = gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("transport") / "tiny-long.gguf", ctx=32768)
    return model


def send_long_completion(port: int) -> socket.socket:
    body = json.dumps({"prompt": "hello", "n": 4, "max_tokens": 30000, "ignore_eos": True}).encode()
    c = connect(port)
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return c


def test_busy_handler_threads_queue_then_503(pagoda_bin, long_model):
    s = Server(pagoda_bin, long_model, "--http-threads", "2", "--max-queued-http", "1")
    socks = []
    try:
        a = send_long_completion(s.port)  # holds one handler thread
        socks.append(a)
        time.sleep(0.5)
        b = send_long_completion(s.port)  # the other
        socks.append(b)
        time.sleep(0.5)
        queued = connect(s.port)
        socks.append(queued)
        queued.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.2)
        over = connect(s.port)
        socks.append(over)
        over.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        data, elapsed = read_until_closed(over, 3)
        assert data.startswith(b"HTTP/1.1 503") and elapsed < 1.0, (data[:100], elapsed)
        assert b"retry-after: 1" in data.lower()
        assert json.loads(data.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "server_error"
        a.close()  # a thread frees up: the queued request is answered
        queued.settimeout(5)
        assert queued.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        for c in socks:  # hung up: their requests abort and the server can drain
            c.close()
        assert s.terminate() == 0, s.output()


def test_non_streaming_client_leaving_aborts_it(pagoda_bin, long_model):
    s = Server(pagoda_bin, long_model)
    try:
        aborted0 = metric(s, "request_success_total", 'finished_reason="abort"')
        c = send_long_completion(s.port)
        time.sleep(1.0)
        assert metric(s, "num_requests_running") > 0, "the request finished before the client left"
        c.close()
        t0 = time.monotonic()
        while metric(s, "request_success_total", 'finished_reason="abort"') == aborted0 or \
                metric(s, "num_requests_running") > 0:
            assert time.monotonic() - t0 < 5, "still generating for a client that left"
            time.sleep(0.02)
        elapsed = time.monotonic() - t0
        print(f"non-streaming request aborted {elapsed * 1000:.0f} ms after its client left")
        assert elapsed < 1.5, elapsed
        assert s.get("/health").status_code == 200
    finally:
        assert s.terminate() == 0, s.output()


def test_range_is_ignored(server):
    r = server.post("/v1/completions", json={"prompt": "a", "max_tokens": 4}, headers={"Range": "bytes=0-10"})
    assert r.status_code == 200, r.text
    assert r.json()["object"] == "text_completion"
    r = server.post("/v1/completions", json={"prompt": "a", "max_tokens": 4}, headers={"Range": "bytes=99999-"})
    assert r.status_code == 200 and r.json()["choices"]


def test_oversized_headers_get_431(server):
    c = connect(server.port)
    c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (64 << 10) + b"\r\n\r\n")
    data, elapsed = read_until_closed(c, 5)
    c.close()
    assert data.startswith(b"HTTP/1.1 431") and elapsed < 1.0, (data[:100], elapsed)
    assert json.loads(data.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "invalid_request_error"
    assert server.get("/health").status_code == 200
