"""Shared fixtures."""

from __future__ import annotations

import pytest

from tileproof.codegen.compile import clear_memory_cache


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """Each test compiles into its own disk cache, from an empty memory cache."""
    monkeypatch.setenv("TILEPROOF_CACHE_DIR", str(tmp_path / "cache"))
    clear_memory_cache()
    yield
    clear_memory_cache()
