"""nvFuser's translated tests on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device):
every case of tests/nvfuser/ that tileproof accepts and that has a `run` is compiled and run, and
its values checked against PyTorch (tests/support/nvfuser.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

pytestmark = pytest.mark.gpu
MODULES = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "nvfuser").glob("test_nvfuser_*.py"))
RUNS = [c for name in MODULES for c in importlib.import_module(f"nvfuser.{name}").CASES
        if c.run is not None and c.gap is None and c.expects_valid]


@pytest.mark.parametrize("case", RUNS, ids=[c.id for c in RUNS])
def test_the_accepted_kernel_computes_what_nvfuser_s_test_validates(case):
    case.run(tp.compile(case.build(), case.target), torch)
