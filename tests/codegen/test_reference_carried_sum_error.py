"""The reference's slack carries a sum's float error through what reads it
(codegen/runtime/reference.py reduction_slack). Found by the fuzzer on the H200 (seed 105, case
1340, then the bundled rows_divided_by_their_sums_across_blocks itself, one launch in a few
hundred): x / sum(x) over a row whose sum nearly cancels was off by the float32 sum's rounding
over the sum squared (0.05 % on every element of the row), where the slack of |inputs| allowed
|x| / sum|x| (0.002 %): a right kernel called wrong."""

import numpy as np

import tileproof as tp
from tileproof.codegen.runtime.reference import reduction_slack, reference, tolerance


def _fusion():
    with tp.Fusion("rows_divided_by_their_sums") as fusion:
        x = tp.make_tensor(["M", "N"], dtype=tp.float32)
        fusion.add_input(x)
        fusion.add_output(tp.div(x, tp.broadcast(tp.sum(x, 1), [False, True])))
    return fusion


def _inputs():
    """Four rows of 512 N(0, 10^2) values in float32, row 0's last value set so that its sum is
    about 1e-3 (its terms' absolute values add to about 4000)."""
    x = (np.random.default_rng(1).standard_normal((4, 512)) * 10).astype(np.float32)
    x[0, -1] = np.float32(-(x[0, :-1].astype(np.float64).sum()) + 1e-3)
    return x


def _kernel(x, drop_block: bool = False):
    """What a block-and-grid reduction computes: float32 partials of 128 terms (each in 32
    strided lanes' order), combined in float32, then x / the sum in float32; `drop_block` forgets
    each row's last partial (a wrong kernel: a block's partial not combined)."""
    terms = x.copy()
    if drop_block:
        terms[:, -128:] = 0
    parts = [terms[:, j:j + 128] for j in range(0, terms.shape[1], 128)]
    total = np.zeros(x.shape[0], np.float32)
    for part in parts:
        lanes = np.zeros((x.shape[0], 32), np.float32)
        for k in range(0, part.shape[1], 32):
            lanes += part[:, k:k + 32]
        total += lanes.sum(1, dtype=np.float32)
    return (x / total[:, None]).astype(np.float64)


def _outside(got, want, slack) -> int:
    rtol, atol = tolerance(tp.float32)
    return int((np.abs(got - want) > atol + slack + rtol * np.abs(want)).sum())


def test_a_cancelling_sum_divided_into_its_row_is_within_the_slack():
    fusion, x = _fusion(), _inputs()
    want, got = reference(fusion, [x])[0], _kernel(x)
    old = 4 * tolerance(tp.float32)[0] * np.abs(reference(fusion, [np.abs(x)])[0])
    assert _outside(got[0], want[0], old[0]) > 256  # the slack of |inputs| alone calls row 0 wrong
    assert _outside(got, want, reduction_slack(fusion, [x])[0]) == 0


def test_a_dropped_partial_is_outside_the_slack():
    fusion, x = _fusion(), _inputs()
    want, bad = reference(fusion, [x])[0], _kernel(x, drop_block=True)
    slack = reduction_slack(fusion, [x])[0]
    assert _outside(bad[1:], want[1:], slack[1:]) == bad[1:].size  # the rows whose sums do not cancel


def test_a_sum_not_read_by_anything_else_gets_its_own_error_once_more():
    with tp.Fusion("row_sums") as fusion:
        x = tp.make_tensor(["M", "N"], dtype=tp.float32)
        fusion.add_input(x)
        fusion.add_output(tp.sum(x, 1))
    x = _inputs()
    magnitudes = 4 * tolerance(tp.float32)[0] * np.abs(reference(fusion, [np.abs(x)])[0])
    np.testing.assert_allclose(reduction_slack(fusion, [x])[0], 2 * magnitudes, rtol=1e-4)  # the moved sum rounds to float32
