"""Shared pytest fixtures: where the built binaries and the shared models are.

The C++ build directory comes from PAGODA_BUILD_DIR (default: build/ at the repo root);
tests that need a binary that is not built fail with a clear message rather than skip,
because a missing binary means the build is broken.
"""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
BUILD = pathlib.Path(os.environ.get("PAGODA_BUILD_DIR", REPO / "build"))
SHARED_MODELS = pathlib.Path(os.environ.get("PAGODA_SHARED_MODELS", REPO.parent / "shared" / "models"))


def binary(name: str) -> pathlib.Path:
    for cand in (BUILD / "bin" / name, BUILD / "tests" / name, BUILD / name):
        if cand.exists():
            return cand
    pytest.fail(f"binary {name!r} not found under {BUILD}; build the project first (scripts/test does)")


@pytest.fixture(scope="session")
def pagoda_bin():
    return binary


@pytest.fixture
def shared_model():
    def get(name: str) -> pathlib.Path:
        p = SHARED_MODELS / name
        if not p.exists():
            pytest.skip(f"{p} is not present (shared models folder missing)")
        return p
    return get
