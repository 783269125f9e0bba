import pytest

from server_util import Server, gen_tiny_model


@pytest.fixture(scope="module")
def tiny_model(pagoda_bin, tmp_path_factory):
    return gen_tiny_model(pagoda_bin, tmp_path_factory.mktemp("server") / "tiny-q8.gguf")


@pytest.fixture(scope="module")
def server(pagoda_bin, tiny_model):
    s = Server(pagoda_bin, tiny_model, "--max-num-seqs", "32")
    yield s
    rc = s.terminate()
    assert rc == 0, f"the server did not exit cleanly on SIGTERM (rc {rc}):\n{s.output()}"
