"""Test modules outside a package are imported by their file name alone (pytest's prepend mode), so
two of one name in different folders break collection, depending on which is collected first (on
a machine with PyTorch and a GPU, where neither skips at import)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_top_level_test_modules_share_a_name():
    outside_packages = [p for p in TESTS.rglob("test_*.py") if not (p.parent / "__init__.py").exists()]
    twice = {name: n for name, n in Counter(p.name for p in outside_packages).items() if n > 1}
    assert not twice, f"test modules named alike outside a package: {twice}"
