"""Shared fixtures."""

from __future__ import annotations

import pytest

from tileproof.codegen.compile import clear_memory_cache


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden rendered reports under tests/golden/ instead of comparing")


@pytest.fixture
def update_golden(request) -> bool:
    """True under `pytest --update-golden`: golden-file tests write what they render."""
    return request.config.getoption("--update-golden")


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """Each test compiles into its own disk cache, from an empty memory cache."""
    monkeypatch.setenv("TILEPROOF_CACHE_DIR", str(tmp_path / "cache"))
    clear_memory_cache()
    yield
    clear_memory_cache()
