"""Skipped masked iterations (TensorView.skip_masked, execution/skip.py) in the kernel: the loop over
tiles runs min(extent, trip count) iterations a block, the count computed from blockIdx. The
causally masked log-sum-exp compiles with NVRTC for sm_90a, and the CPU simulator running the lowered
kernel gives the float64 reference with the exact count and with one past the loop; one tile short
(lowered without the proof) it does not, which is what ONLINE-SKIP refuses."""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import nvrtc
from tileproof.codegen.runtime.reference import reference
from tileproof.model.targets import get_target
from tileproof.rule_examples import masked_logsumexp

from support.reduction_sim import run_kernel

TARGET = get_target("sm_90a")


def _skipping(extra: int, rows: int = 96, keys: int = 256, tile: int = 64):
    fusion, x, keep, m, l, lse = masked_logsumexp(f"skip_{extra + 1}", rows, keys, tile)
    m.skip_masked(keep, lambda bx, by, bz: (bx * 32 + 31 + keys - rows) // tile + extra)
    return fusion


def _simulated(fusion, rows: int, keys: int):
    report = tp.verify(fusion, target="sm_90a")
    kernel = lower(fusion.snapshot(), TARGET, report.decisions).kernel
    x = np.random.default_rng(7).standard_normal((rows, keys))
    (got,) = run_kernel(kernel, fusion, [x], {})
    (want,) = reference(fusion, [x])
    return report, kernel, np.asarray(got, dtype=np.float64), want


@pytest.mark.parametrize("rows, keys, tile", [(96, 256, 64), (70, 200, 32)])
@pytest.mark.parametrize("extra", [1, 4])
def test_the_proved_count_gives_the_reference(rows, keys, tile, extra):
    fusion = _skipping(extra, rows, keys, tile)
    report, kernel, got, want = _simulated(fusion, rows, keys)
    assert report.ok, report.codes
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_one_tile_short_gives_other_values_and_is_refused():
    fusion = _skipping(0)
    report, kernel, got, want = _simulated(fusion, 96, 256)
    assert report.codes == ["ONLINE-SKIP"]
    assert np.max(np.abs(got - want)) > 0.1


def test_the_kernel_compiles_for_sm_90a():
    fusion = _skipping(1)
    report = tp.verify(fusion, target="sm_90a")
    source = emit(lower(fusion.snapshot(), TARGET, report.decisions).kernel, cuda_headers=True)
    assert nvrtc.compile_to_cubin(source, "sm_90a", nvrtc.cuda_include_dir())[:4] == b"\x7fELF"
