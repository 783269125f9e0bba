"""Two hosts on one machine (scripts/netns_cluster: network namespaces, Open MPI over TCP
only, 1 ms of one-way latency between them): a split model gives the tokens of one
process across a real network path. Everything the test creates lives in namespaces of
its own prefix and is removed at the end."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest

import oracles

CLUSTER = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "netns_cluster"
PREFIX = "pgt"  # not the scripts' default, so a user's own pair is left alone


@pytest.fixture(scope="module")
def hosts():
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("mpirun") is None \
            or not os.path.exists("/dev/net/tun"):
        oracles.oracle_missing("two-host tests need root, iproute2, /dev/net/tun and mpirun (scripts/setup)")
    env = {**os.environ, "PAGODA_NETNS_PREFIX": PREFIX}

    def up(delay_us):
        r = subprocess.run([str(CLUSTER), "up", str(delay_us)], env=env, capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
    yield env, up
    subprocess.run([str(CLUSTER), "down"], env=env, timeout=60)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{PREFIX}0" not in listed and f"{PREFIX}1" not in listed


@pytest.mark.parametrize("delay_us,flags", [(1000, ["--tp", "2"]), (0, ["--pp", "2"])])
def test_split_over_two_hosts_gives_the_tokens_of_one_process(pagoda_bin, write_gen_model, tmp_path, hosts,
                                                              delay_us, flags):
    env, up = hosts
    up(delay_us)
    model = write_gen_model(tmp_path / "gqa.gguf", "llama", "Q8_0", dim=128, layers=2, heads=4, kv_heads=2, ff=256,
                            vocab=600)
    argv = [str(pagoda_bin("pagoda")), "run", "-m", str(model), "--prompt-ids", "5,6,7,8,9", "-n", "12", "--temp", "0",
            "--ignore-eos", "-t", "1"]
    one = subprocess.run(argv + ["--ids-out", str(tmp_path / "one.json")], capture_output=True, timeout=120)
    assert one.returncode == 0, one.stderr
    two = subprocess.run([str(CLUSTER), "mpirun", "-np", "2", *argv, "--ids-out", str(tmp_path / "two.json"), *flags],
                         env=env, capture_output=True, timeout=180)
    assert two.returncode == 0, two.stderr.decode(errors="replace")[-3000:]
    assert json.loads((tmp_path / "two.json").read_text()) == json.loads((tmp_path / "one.json").read_text())
