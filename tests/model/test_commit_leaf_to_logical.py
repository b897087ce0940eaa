"""TensorView.commit_leaf_to_logical (nvFuser's TensorView::commitLeafToLogical, an implicit
transpose; model/logical_commit.py): the domains after the call, what consumers and the fusion
output see, the refusals, and small fusions using it verified, compiled and run on the CPU
simulator (tests/support/reduction_sim.py, mma_sim.py) against the reference and numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.runtime.reference import reference
from tileproof.model.fingerprint import fingerprint
from tileproof.model.global_layout import global_strides
from tileproof.model.mapping import IdMap
from support.logical_commit import committed_sum, mma_nn_tile, transposed_copy
from support.mma_sim import run_mma_kernel
from support.reduction_sim import run_kernel

P = tp.ParallelType


def test_the_loop_becomes_the_logical_domain_and_the_root_stays():
    _, x, y = transposed_copy()
    root = y.get_root_domain()
    logical = y.get_logical_domain()
    assert [i.uid for i in logical] == [root[1].uid, root[0].uid]  # [N, M] of the root [M, N]
    assert [str(i.extent_expr) for i in logical] == ["N", "M"]
    assert y.contiguity == [True, True]


def test_the_op_maps_the_root_and_consumers_read_the_new_logical_domain():
    with tp.Fusion("commit_maps") as fusion:
        x = tp.make_tensor(["M", "N"])
        fusion.add_input(x)
        y = tp.set(x)
        y.reorder({0: 1}).commit_leaf_to_logical()
        z = tp.add(y, 1.0)  # [N, M]
        fusion.add_output(z)
    idmap = IdMap(fusion)
    # the set maps y's root to x's logical axes: y's logical N is x's N
    assert idmap.same(y.get_logical_domain()[0], x.get_logical_domain()[1])
    # z reads y's logical domain: z's axis 0 is N
    assert idmap.same(z.get_logical_domain()[0], x.get_logical_domain()[1])
    assert [str(i.extent_expr) for i in z.get_logical_domain()] == ["N", "M"]


def test_a_fusion_output_is_laid_out_in_its_committed_order():
    fusion, _, y = transposed_copy()
    layout = global_strides(y)
    assert layout.alloc_axes == (0, 1)
    assert [str(s) for s in layout.strides] == ["M", "1"]  # y[n, m] at n * M + m


def test_a_tensor_with_consumers_is_refused():
    with tp.Fusion("commit_consumed") as fusion:
        x = tp.make_tensor(["M", "N"])
        fusion.add_input(x)
        y = tp.set(x)
        z = tp.set(y)
        fusion.add_output(z)
        y.reorder({0: 1})
        with pytest.raises(tp.ScheduleError, match=r"commit_leaf_to_logical: T1 is read by T2; changing the logical "
                                                   r"domain of an intermediate tensor is not supported"):
            y.commit_leaf_to_logical()
    assert [i.uid for i in y.get_logical_domain()] == [i.uid for i in y.get_root_domain()]  # unchanged


def test_a_split_loop_is_refused():
    with tp.Fusion("commit_view") as fusion:
        x = tp.make_tensor(["M", "N"])
        fusion.add_input(x)
        y = tp.set(x)
        fusion.add_output(y)
    y.split(1, 4)
    with pytest.raises(tp.ScheduleError, match=r"loop axis 1 of T1 .* is made by `.*`; tileproof commits a "
                                               r"permutation of the logical axes"):
        y.commit_leaf_to_logical()


def test_the_fingerprint_sees_the_commit():
    def build(commit):
        with tp.Fusion("commit_fp") as fusion:
            x = tp.make_tensor(["M", "N"])
            fusion.add_input(x)
            y = tp.set(x)
            y.reorder({0: 1})
            if commit:
                y.commit_leaf_to_logical()
            fusion.add_output(y)
        return fusion
    assert fingerprint(build(True), "sm_90a") != fingerprint(build(False), "sm_90a")


@pytest.mark.parametrize("m,n", [(3, 40), (33, 5), (64, 64)])
def test_an_implicit_transpose_runs_as_the_reference(m, n):
    fusion, _, _ = transposed_copy()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    x = np.arange(m * n, dtype=np.float32).reshape(m, n)
    (out,) = run_kernel(kernel.ir, kernel.fusion, [x], {"M": m, "N": n})
    np.testing.assert_array_equal(out.astype(np.float64), x.T)
    (want,) = reference(kernel.fusion, [x])
    np.testing.assert_array_equal(want, x.T)


@pytest.mark.parametrize("m,k,n", [(4, 3, 5), (7, 1, 2)])
def test_a_committed_reduction_runs_as_the_reference(m, k, n):
    fusion = committed_sum()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    x = np.random.default_rng(0).integers(-8, 8, (m, k, n)).astype(np.float32)
    (out,) = run_kernel(kernel.ir, kernel.fusion, [x], {"M": m, "K": k, "N": n})
    np.testing.assert_allclose(out.astype(np.float64), x.sum(1).T)
    (want,) = reference(kernel.fusion, [x])
    np.testing.assert_allclose(want, x.sum(1).T)


@pytest.mark.parametrize("macro", ["Ampere_16_8_16", "Turing_16_8_8", "Ampere_16_16_16"])
def test_an_mma_output_committed_to_m_n_runs_as_the_reference(macro):
    macro = getattr(tp.MmaMacro, macro)
    fusion = mma_nn_tile(macro)
    assert [str(i.extent_expr) for i in fusion.outputs[0].get_logical_domain()] == [str(macro.m), str(macro.n)]
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, (1, macro.k, macro.m)).astype(np.float16)
    b = rng.integers(-3, 4, (macro.n, macro.k, 1)).astype(np.float16)
    want = (a.astype(np.float64) * b.astype(np.float64)).sum(1).T  # [N, M] -> [M, N]
    (out,), _ = run_mma_kernel(kernel.ir, kernel.fusion, [a, b])
    np.testing.assert_array_equal(out, want)
    (ref,) = reference(kernel.fusion, [a, b])
    np.testing.assert_array_equal(ref, want)


def test_cache_before_of_a_committed_copy_runs_as_the_reference():
    """nvFuser's cacheBefore gives the producer the whole domain: the copy's definition writes the
    cache's root in the old order, the output copies the cache in the committed order."""
    with tp.Fusion("commit_cache_before") as fusion:
        x = tp.make_tensor(["M", "N"], name="x")
        fusion.add_input(x)
        y = tp.set(x)
        y.reorder({0: 1}).commit_leaf_to_logical()
        fusion.add_output(y)
    c = y.cache_before()
    idmap = IdMap(fusion)
    assert idmap.same(c.get_root_domain()[0], x.get_logical_domain()[0])  # the set maps c's root [M, N]
    assert idmap.same(c.get_logical_domain()[0], x.get_logical_domain()[1])  # c's logical [N, M]
    assert [i.uid for i in y.get_root_domain()] == [i.uid for i in y.get_logical_domain()]  # y copies c as is
    for t in (c, y):
        t.split(1, 32)
        t.axis(0).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    c.inline_at(-1)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    for m, n in ((5, 40), (33, 3), (64, 64)):
        a = np.arange(m * n, dtype=np.float32).reshape(m, n)
        (out,) = run_kernel(kernel.ir, kernel.fusion, [a], {"M": m, "N": n})
        np.testing.assert_array_equal(out.astype(np.float64), a.T)
        np.testing.assert_array_equal(reference(kernel.fusion, [a])[0], a.T)


def test_rfactor_of_a_committed_reduction_keeps_the_op_on_the_root():
    """The partial reduction takes the root the op maps ([M, rK, N]), not the committed [N, M, rK]."""
    with tp.Fusion("commit_rfactor") as fusion:
        t0 = tp.make_tensor(["M", "K", "N"], name="t0")
        fusion.add_input(t0)
        t1 = tp.sum(t0, 1)
        t1.reorder({2: 0}).commit_leaf_to_logical()  # [N, M, rK]
        fusion.add_output(t1)
    t1.split(2, 4)  # [N, M, rKo, rKi]
    part = t1.rfactor([2])
    assert [str(i.extent_expr) for i in part.get_root_domain()] == ["M", "K", "N"]
    assert [str(i.extent_expr) for i in t1.get_logical_domain()] == ["N", "M", "4"]
    for t in (part, t1):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    fusion.assume("M <= 1024")
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    for m, k, n in ((5, 9, 3), (2, 4, 7), (3, 1, 2)):
        x = np.random.default_rng(k).integers(-5, 5, (m, k, n)).astype(np.float32)
        (out,) = run_kernel(kernel.ir, kernel.fusion, [x], {"M": m, "K": k, "N": n})
        np.testing.assert_allclose(out.astype(np.float64), x.sum(1).T)
        np.testing.assert_allclose(reference(kernel.fusion, [x])[0], x.sum(1).T)


def test_a_committed_broadcast_is_no_view_of_its_input():
    """A global broadcast whose logical domain permutes its root reads its input transposed: no view
    (model/producer_aliases.py compares strides through the root the op maps), even where the
    extents are equal and the strides match position for position."""
    with tp.Fusion("commit_no_view") as fusion:
        x = tp.make_contig_concrete_tensor([32, 32])
        fusion.add_input(x)
        y = tp.broadcast(x, [False, True, False])
        y.reorder({0: 2, 2: 0}).commit_leaf_to_logical()  # [32, 1, 32] transposed
        y.set_memory_type(tp.MemoryType.Global)
        z = tp.set(y)
        fusion.add_output(z)
    for t in (y, z):
        t.axis(-1).parallelize(P.TIDx)
    report = tp.verify(fusion)
    assert "GLOBAL-INTERMEDIATE" in report.codes
    assert any("is no view of" in d.message for d in report.errors)


@pytest.mark.parametrize("allocated", [False, True])
def test_a_committed_fusion_input_is_read_in_its_committed_order(allocated):
    """nvFuser commits fusion inputs too (test_allocation_domain.cpp): the input's array is its new
    logical domain [N, M]; an allocation domain set before ([M, N]) stays its memory order."""
    with tp.Fusion("commit_input") as fusion:
        x = tp.make_tensor(["M", "N"])
        fusion.add_input(x)
        if allocated:
            x.set_allocation_domain(x.get_loop_domain(), True)
        x.reorder({0: 1}).commit_leaf_to_logical()
        y = tp.set(x)
        fusion.add_output(y)
    assert [str(i.extent_expr) for i in y.get_logical_domain()] == ["N", "M"]
    assert global_strides(x).alloc_axes == ((1, 0) if allocated else (0, 1))
    y.split(1, 32)
    y.axis(0).parallelize(P.BIDx)
    y.axis(2).parallelize(P.TIDx)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    for m, n in ((5, 40), (33, 2)):
        a = np.arange(m * n, dtype=np.float32).reshape(n, m)
        (out,) = run_kernel(kernel.ir, kernel.fusion, [a], {"M": m, "N": n})
        np.testing.assert_array_equal(out.astype(np.float64), a)
