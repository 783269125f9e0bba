"""Where the test suite's oracles and outside models are, and what a test does when one
is missing: outside CI it skips and says where the oracle comes from; under
PAGODA_PARITY=1 (what .ci/run sets, after scripts/fetch_test_data has built and fetched
everything) it fails, so CI cannot pass by skipping the comparisons it exists to make.
Imported by conftest.py and by the test files (tests/ is on pytest's path)."""
import importlib
import os
import pathlib

import pytest

CACHE = pathlib.Path(os.environ.get("PAGODA_CACHE", pathlib.Path.home() / ".cache" / "pagoda"))
PARITY = os.environ.get("PAGODA_PARITY") == "1"


def oracle_missing(message: str):
    """Skips the calling test because an oracle or model it compares against is missing,
    or fails it under PAGODA_PARITY=1. `message` says what is missing and where it comes from."""
    if PARITY:
        pytest.fail(f"oracle missing under PAGODA_PARITY=1: {message} (scripts/fetch_test_data provides it)",
                    pytrace=False)
    pytest.skip(message, allow_module_level=True)


def import_oracle(module: str, source: str = "scripts/setup installs it"):
    """pytest.importorskip for a reference library, failing under PAGODA_PARITY=1."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        oracle_missing(f"Python module {module} is not installed ({e}); {source}")


def require_llamacpp(bin_dir, *tools, purpose="the llama.cpp oracle"):
    """bin_dir if every llama.cpp tool in `tools` is built there; otherwise oracle_missing."""
    missing = [t for t in tools if bin_dir is None or not (pathlib.Path(bin_dir) / t).exists()]
    if bin_dir is None or missing:
        oracle_missing(f"llama.cpp is not built ({', '.join(missing) or 'no build'}; scripts/build_llamacpp "
                       f"builds it): {purpose}")
    return pathlib.Path(bin_dir)


def cached_model(name: str, source: str) -> pathlib.Path:
    """A model under the cache's models/ folder, or oracle_missing naming its `source`."""
    path = CACHE / "models" / name
    if not path.exists():
        oracle_missing(f"{path} is not present ({source})")
    return path
