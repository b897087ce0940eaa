"""torch stays optional: the package imports, verifies and compiles without it, and
tp.as_torch_op says what it needs."""

from __future__ import annotations

import sys

import pytest

import tileproof as tp

from support.codegen_schedules import BUILDERS

pytestmark = pytest.mark.usefixtures("private_cache")


def test_as_torch_op_without_torch_says_what_it_needs(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    kernel = tp.compile(BUILDERS["pointwise_add"]())
    with pytest.raises(ImportError, match="as_torch_op needs PyTorch"):
        tp.as_torch_op(kernel)
