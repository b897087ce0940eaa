"""The online max and its rescaled sums (model/online.py, execution/online.py), differentially: the
lowered online log-sum-exp (rule_examples.online_logsumexp: a loop over a row's tiles, the running
max, exp(x - m) and its sum rescaled as the max grows) run on the CPU (tests/support/reduction_sim.py)
against numpy. Rows that rise make the max grow at every tile, so every rescale counts: the same
kernel with the rescale left out is wrong on them.
"""

from __future__ import annotations

import numpy as np
import pytest

from tileproof.codegen.ir import Compute, walk
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime.reference import reference
from tileproof.model.targets import get_target
from tileproof.rule_examples import online_logsumexp

from support.reduction_sim import run_kernel


def _inputs(rows: int, keys: int) -> np.ndarray:
    rng = np.random.default_rng(rows * keys)
    x = rng.normal(size=(rows, keys)) * 4
    x[0] = np.linspace(-20, 20, keys)  # the max grows at every tile
    x[1] = np.linspace(20, -20, keys)  # the first tile holds it
    x[2] = -3.0  # every term equal: the max never grows past the first tile's
    return x.astype(np.float32).astype(np.float64)


def _lowered(rows: int, keys: int, tile: int):
    fusion, *_ = online_logsumexp("online_lse", rows, keys, tile)
    return fusion, lower(fusion.snapshot(), get_target("sm_90a")).kernel


@pytest.mark.parametrize("rows, keys, tile", [(4, 64, 16), (8, 96, 32), (4, 32, 32)])
def test_online_logsumexp_is_exact(rows, keys, tile):
    fusion, kernel = _lowered(rows, keys, tile)
    x = _inputs(rows, keys)
    (got,) = run_kernel(kernel, fusion, [x])
    m = x.max(axis=1, keepdims=True)
    want = np.log(np.exp(x - m).sum(axis=1)) + m[:, 0]
    np.testing.assert_allclose(got.astype(float), want, rtol=1e-5, atol=1e-5)


def test_without_the_rescale_the_sum_is_wrong():
    """The rescale is what makes it exact: dropped from the lowered kernel, rising rows go wrong."""
    fusion, kernel = _lowered(4, 64, 16)
    rescaled = [n for n in walk(kernel.body) if isinstance(n, Compute) and n.rescale is not None]
    assert len(rescaled) == 1
    rescaled[0].rescale = None
    rescaled[0].ins = rescaled[0].ins[:1]
    x = _inputs(4, 64)
    (got,) = run_kernel(kernel, fusion, [x])
    m = x.max(axis=1, keepdims=True)
    want = np.log(np.exp(x - m).sum(axis=1)) + m[:, 0]
    assert abs(got[0] - want[0]) > 1.0  # each tile's terms summed at its own max
    np.testing.assert_allclose(got[1:3].astype(float), want[1:3], rtol=1e-5)  # the max never grew there


def test_the_reference_reads_the_sum_s_terms_at_the_final_max():
    """codegen/runtime/reference.py computes the fusion as it means (every term at the row's max):
    a rescaled sum's second input, the max, is no factor of its terms."""
    fusion, *_ = online_logsumexp("online_lse", 4, 64, 16)
    x = _inputs(4, 64)
    (got,) = reference(fusion, [x])
    m = x.max(axis=1, keepdims=True)
    np.testing.assert_allclose(got, np.log(np.exp(x - m).sum(axis=1)) + m[:, 0], rtol=1e-6)  # float32 outputs
