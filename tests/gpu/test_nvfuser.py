"""nvFuser's translated tests on the GPU (marker `gpu`; skipped without PyTorch or a CUDA device):
every case of tests/nvfuser/ that tileproof accepts and that has a `run` is compiled and run, and
its values checked against PyTorch (tests/support/nvfuser.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tileproof as tp  # noqa: E402

pytestmark = pytest.mark.gpu


def _cases(path: Path) -> list:
    """A translated module's CASES (loaded by path: an installed `nvfuser` package may shadow the folder)."""
    spec = importlib.util.spec_from_file_location(f"translated_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


MODULES = sorted((Path(__file__).resolve().parents[1] / "nvfuser").glob("test_nvfuser_*.py"))
RUNS = [c for path in MODULES for c in _cases(path) if c.run is not None and c.gap is None and c.expects_valid]


@pytest.mark.parametrize("case", RUNS, ids=[c.id for c in RUNS])
def test_the_accepted_kernel_computes_what_nvfuser_s_test_validates(case):
    case.run(tp.compile(case.build(), case.target), torch)
