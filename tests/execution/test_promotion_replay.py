"""Loop promotion past the compute-at position (execution/promotion.py, Promotion.replays), on
nvFuser's MemoryTest.RefineCachePolicy: c2 = a[I0, I1] + broadcast(b[I1]), a's cache merged and
split [(I0*I1)/4/32 BIDx, 32 TIDx, 4 Vectorize] and propagated, so b's cache b2 is [I1/4/32, 32,
Vectorize{4}] inlined at 2 into loops over merge(I0, I1). nvFuser's IdModel replays b2's split by 4
on the promoted merge: b2's vector is the inner of (I0*I1) / 4 and its I1 is ((blockIdx.x * 32 +
threadIdx.x) * 4 + v) % I1, one 4-vector per thread, contiguous where I1 % 4 == 0. The kernel is run
on the CPU simulator against numpy; where I1 % 4 != 0 the vector straddles a row and is rejected.
b2's vector split again (2 x Vectorize{2}, its loops past the shared ones: nvFuser replays the split
it splits further) replays the merge's split by 4 on the ID those loops split, indexed from them."""

from __future__ import annotations

import numpy as np
import pytest

import tileproof as tp
from tileproof.execution.indexing import block_dims
from tileproof.execution.promotion import promotion
from tileproof.execution.statements import tensor_execution
from tileproof.model.expr import evaluate, var as tp_var
from tileproof.model.loop_map import propagate_parallel_types
from tileproof.testing import compile_unverified

from nvfuser.test_nvfuser_memory import refine_cache_policy
from support.reduction_sim import SimulationError, run_kernel

P = tp.ParallelType


def _caches(fusion):
    """(a2, b2) of the snapshot verify and compile read (loops aligned, types propagated)."""
    snap = fusion.snapshot()
    propagate_parallel_types(snap)
    return snap, snap.tensor("T2"), snap.tensor("T3")


def test_the_broadcast_cache_takes_the_loops_and_the_vector_of_the_merge():
    snap, a2, b2 = _caches(refine_cache_policy())
    promo = promotion(b2)
    assert promo.consumer is a2 and promo.positions == 2 and promo.replays == ((b2.loop[2].uid, 2),)
    assert [i.parallel_type for i in b2.loop] == [P.BIDx, P.TIDx, P.Vectorize]  # the loop's types, as nvFuser's
    ex = tensor_execution(b2, block_dims(snap))
    (i1,) = ex.written_logical()
    vector = ex.env[b2.loop[2].uid].value
    for n in (4, 1028):
        for block, thread, v in ((0, 0, 0), (0, 31, 3), (2, 7, 1), (5, 0, 2)):
            env = {"T0_0": 3, "T0_1": n, "blockIdx.x": block, "threadIdx.x": thread, vector: v}
            assert evaluate(i1, env) == ((block * 32 + thread) * 4 + v) % n


def test_verified_with_nvfusers_launch_and_loads():
    fusion = refine_cache_policy()
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    assert str(kernel.launch_params.grid[0]) == "ceiling(ceiling(T0_0*T0_1/4)/32)"  # c's, not max(b2's, c's)
    body = kernel.cuda_source[kernel.cuda_source.index("__global__"):]
    # the C++ test's PTX check: one streaming and one cache-all 16-byte load
    assert body.count("tp_ld_global_cs<16>(") == 1 and body.count("tp_ld_global_ca<16>(") == 1
    assert "tp_ld_global_ca<16>(&T3[0ULL], &T1[((((blockIdx.x * 32ULL) + threadIdx.x) * 4ULL) % s_T0_1)]);" in body


@pytest.mark.parametrize("i0, i1", [(3, 1028), (5, 4), (1, 4)])
def test_the_kernel_adds_b_to_every_row_on_the_cpu(i0, i1):
    kernel = tp.compile(refine_cache_policy())
    rng = np.random.default_rng(i0 * i1)
    a = rng.standard_normal((i0, i1)).astype(np.float32)
    b = rng.standard_normal(i1).astype(np.float32)
    (out,) = run_kernel(kernel.ir, kernel.fusion, [a, b], {"T0_0": i0, "T0_1": i1})
    np.testing.assert_array_equal(out.astype(np.float32), a + b[None, :])


def test_concrete_sizes_with_whole_vectors_per_row_are_accepted():
    for shape in ((3, 1028), (5, 4)):
        report = tp.verify(refine_cache_policy(shape))
        assert report.ok, (shape, report.codes)


def test_a_vector_that_straddles_a_row_is_rejected():
    """[2, 6]: a's 12 elements are 3 whole vectors, but the second covers flat 4..7, b's 4, 5, 0, 1:
    b2's vector is no access of b, and c reads b[0] from the register the thread filled with b[4]."""
    report = tp.verify(refine_cache_policy((2, 6)))
    assert report.codes == ["THREAD-VISIBILITY", "VECTORIZE-CONTIGUOUS"]
    contiguous = next(d for d in report.errors if d.code == "VECTORIZE-CONTIGUOUS")
    assert "T3's Vectorize axis is not one access of T1" in contiguous.message
    cx = contiguous.counterexample
    assert cx["offset of element v + 1"] != cx["offset of element v"] + 1
    visibility = next(d for d in report.errors if d.code == "THREAD-VISIBILITY")
    assert visibility.message.startswith("T4 reads T3[")
    cx = visibility.counterexample
    assert cx["reader address"] != cx["writer address"]
    assert cx["reader threadIdx.x"] == cx["writer threadIdx.x"]


def test_the_straddling_vector_built_anyway_reads_past_b_on_the_cpu():
    """What the rejection prevents: the kernel built unverified loads b[4..7] as one vector."""
    kernel = compile_unverified(refine_cache_policy((2, 6)), "sm_90a")
    a, b = np.zeros((2, 6), dtype=np.float32), np.arange(6, dtype=np.float32)
    with pytest.raises(SimulationError, match=r"T3 = set\(T1\): thread 1 reads T1\[6\], outside it"):
        run_kernel(kernel.ir, kernel.fusion, [a, b])


def _serial_cache(shape, threads: bool):
    """The same fusion at `shape`, a2 merged and split [(I0*I1)/4/32, 32, 4] (on TIDx where `threads`,
    else on no launch index), b2 inlined at 2 only (its loop of 4 a plain Serial loop, replayed)."""
    with tp.Fusion("serial_cache") as fusion:
        a = tp.make_contig_concrete_tensor(list(shape))
        b = tp.make_contig_concrete_tensor([shape[1]])
        fusion.add_input(a)
        fusion.add_input(b)
        a2, b2 = tp.set(a), tp.set(b)
        c2 = tp.set(tp.add(a2, tp.broadcast(b2, [True, False])))
        fusion.add_output(c2)
    a2.merge(0).split(0, 4).split(0, 32)
    tp.propagate_transforms(a2)
    if threads:
        a2.axis(1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    b2.inline_at(2)
    return fusion


@pytest.mark.parametrize("threads", [False, True])
def test_a_register_a_later_iteration_overwrote_is_no_witness(threads):
    """[2, 6] with b2's replayed loop Serial: flat 4..7 put b[4], b[5], b[0], b[1] in registers 0..3,
    and flat 6 reads b[0] from register 0. Another iteration of the shared loops wrote b[0] there too,
    but the one read is the reader's own iteration's (rejected even by a single thread)."""
    report = tp.verify(_serial_cache((2, 6), threads))
    assert report.codes == ["THREAD-VISIBILITY"]
    (d,) = report.errors
    assert d.counterexample["reader address"] != d.counterexample["writer address"]
    kernel = compile_unverified(_serial_cache((2, 6), threads), "sm_90a")
    a, b = np.zeros((2, 6), dtype=np.float32), np.arange(6, dtype=np.float32)
    (out,) = run_kernel(kernel.ir, kernel.fusion, [a, b])
    assert not np.array_equal(out.astype(np.float32), a + b[None, :])  # what the rejection prevents


@pytest.mark.parametrize("threads", [False, True])
def test_a_serial_replayed_loop_over_whole_rows_runs_right(threads):
    fusion = _serial_cache((5, 12), threads)
    report = tp.verify(fusion)
    assert report.ok, report.codes
    kernel = tp.compile(fusion)
    a = np.arange(60, dtype=np.float32).reshape(5, 12)
    b = np.arange(12, dtype=np.float32) * 100
    (out,) = run_kernel(kernel.ir, kernel.fusion, [a, b])
    np.testing.assert_array_equal(out.astype(np.float32), a + b[None, :])


def _split_again(shape=None):
    """refine_cache_policy with b2's vector of 4 split again into 2 x Vectorize{2}."""
    return refine_cache_policy(shape, split_vector=True)


def test_a_vector_split_again_replays_the_id_its_loops_split():
    snap = _split_again().snapshot()
    propagate_parallel_types(snap)
    a2, b2 = snap.tensor("T2"), snap.tensor("T3")
    promo = promotion(b2)
    split = next(t for t in b2.history if b2.loop[2] in t.outputs)  # b2's 4 -> 2 x 2
    assert promo.consumer is a2 and promo.replays == ((split.in_.uid, 2),)
    env = {b2.loop[k].uid: e for k, e in enumerate(map(tp_var, ("blockIdx.x", "threadIdx.x", "o", "v")))}
    index = promo.consumer_env(b2, env)[a2.loop[2].uid]  # the reference's vector index: b2's 2 o + v
    assert [evaluate(index, {"o": o, "v": v}) for o in (0, 1) for v in (0, 1)] == [0, 1, 2, 3]


@pytest.mark.parametrize("i0, i1", [(3, 1028), (5, 4), (1, 4), (2, 8)])
def test_a_vector_split_again_is_accepted_and_adds_b_to_every_row_on_the_cpu(i0, i1):
    report = tp.verify(_split_again())
    assert report.ok, report.codes
    kernel = tp.compile(_split_again())
    rng = np.random.default_rng(i0 + i1)
    a = rng.standard_normal((i0, i1)).astype(np.float32)
    b = rng.standard_normal(i1).astype(np.float32)
    (out,) = run_kernel(kernel.ir, kernel.fusion, [a, b], {"T0_0": i0, "T0_1": i1})
    np.testing.assert_array_equal(out.astype(np.float32), a + b[None, :])


def test_a_vector_split_again_that_straddles_a_row_is_rejected_and_runs_wrong():
    """[2, 6]: flat 4..7 hold b[4], b[5], b[0], b[1] (two whole 2-vectors of b, so no vector is
    refused), and c reads b[0] from the register the thread filled with b[4]."""
    report = tp.verify(_split_again((2, 6)))
    assert report.codes == ["THREAD-VISIBILITY"]
    cx = report.errors[0].counterexample
    assert cx["reader address"] != cx["writer address"]
    kernel = compile_unverified(_split_again((2, 6)), "sm_90a")
    a, b = np.zeros((2, 6), dtype=np.float32), np.arange(6, dtype=np.float32)
    (out,) = run_kernel(kernel.ir, kernel.fusion, [a, b])
    assert not np.array_equal(out.astype(np.float32), a + b[None, :])
