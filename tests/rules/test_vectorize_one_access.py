"""A Vectorize axis is one access or the schedule is refused, never moved element by element.

nvFuser vectorizes `[BIDx, Vectorize{4}, TIDx]` (the thread's 4 elements at once: the axes after
it are no loops of the thread) and refuses a tensor with two Vectorize axes
(csrc/device_lower/validation.cpp, "Found two vectorized domains"). tileproof emitted both as
unrolled scalar accesses, and its bank-conflict warning counted a 4 MB "vector" word by word
(fuzz seed 104 case 312, mutated: 56 s on an H200 host)."""

from __future__ import annotations

import time

import numpy as np

import tileproof as tp
from support.examples import example_module
from support.reduction_sim import run_kernel

P = tp.ParallelType


def _copy(n=1024 * 64):
    with tp.Fusion("vector_before_threads") as fusion:
        t0 = tp.make_contig_concrete_tensor([n], dtype=tp.float32); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    return fusion, t1


def _threads_after_vector(inner_vector=True):
    fusion, t1 = _copy()
    if inner_vector:  # a thread's 4 consecutive elements: [BIDx, Vectorize{4}, TIDx]
        t1.split(0, 4).split(0, 64).reorder([0, 2, 1])
    else:  # the vector strides by 64: the outer output of the split
        t1.split(0, 64).split(0, 4)
    t1.axis(0).parallelize(P.BIDx); t1.axis(1).parallelize(P.Vectorize); t1.axis(2).parallelize(P.TIDx)
    return fusion


def codes(fusion) -> set[str]:
    return {d.code for d in tp.verify(fusion).errors}


def test_a_vector_followed_by_thread_axes_is_one_access_and_runs_as_the_copy():
    fusion = _threads_after_vector()
    kernel = tp.compile(fusion)
    assert "uint4" in kernel.cuda_source and "for (" not in kernel.cuda_source  # one 16-byte access, no loop
    x = np.arange(1024 * 64, dtype=np.float32)
    (out,) = run_kernel(kernel.ir, kernel.fusion, [x])
    np.testing.assert_array_equal(out, x)


def test_a_strided_vector_followed_by_thread_axes_is_refused_not_split():
    report = tp.verify(_threads_after_vector(inner_vector=False))
    (d,) = [d for d in report.errors if d.code == "VECTORIZE-CONTIGUOUS" and "T0" in d.message]
    assert d.counterexample["offset of element v + 1"] - d.counterexample["offset of element v"] == 64


def test_two_vectorize_axes_are_refused_as_nvfuser_does():
    fusion, t1 = _copy()
    t1.split(0, 4).split(0, 2)  # [I, Vectorize{2}, Vectorize{4}]
    t1.axis(0).parallelize(P.TIDx); t1.axis(1).parallelize(P.Vectorize); t1.axis(2).parallelize(P.Vectorize)
    report = tp.verify(fusion)
    (d,) = [d for d in report.errors if d.code == "VECTORIZE-WIDTH"]  # one cause, not a width finding beside it
    assert "has 2 Vectorize axes" in d.message and d.counterexample == {"vectorize_axes": 2}
    assert "merge the axes" in d.hint


def test_a_loop_of_the_thread_inside_a_vectorize_axis_is_refused():
    fusion, t1 = _copy()
    t1.split(0, 4).reorder([1, 0])  # [Vectorize{4}, I{16384}]: a serial loop inside the vector
    t1.axis(0).parallelize(P.Vectorize)
    (d,) = [d for d in tp.verify(fusion).errors if d.code == "VECTORIZE-WIDTH"]
    assert "has a loop of each thread inside it, axis 1" in d.message
    assert d.counterexample == {"vectorize_axis": 0, "inner_loop_axis": 1}
    fixed, t1 = _copy()
    t1.split(0, 4)
    t1.axis(1).parallelize(P.Vectorize)
    assert tp.verify(fixed).ok


def test_a_register_statement_keeps_its_several_vectorize_axes():
    """Register operands take any width: a fragment's element axes (schedule_mma_fragment's
    `v4, v2`) stay unrolled element loops, no access to refuse."""
    with tp.Fusion("registers") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 8], dtype=tp.float32); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.neg(t1); t3 = tp.set(t2); fusion.add_output(t3)
    t2.split(1, 4)
    t2.axis(0).parallelize(P.TIDx); t2.axis(1).parallelize(P.Vectorize); t2.axis(2).parallelize(P.Vectorize)
    assert "VECTORIZE-WIDTH" not in codes(fusion)


def test_fuzz_seed_104_case_312_is_refused_at_once():
    """tma_pointwise_vectorized_store with T2.reorder([1, 2, 0]); T2.axis(1).parallelize(Vectorize);
    T2.inline_at(0): T2 = [Vectorize{4}, Vectorize{1048576}, TIDx{64}] over shared TMA tiles (the
    reorder is refused while T1 is inlined into T2, as nvFuser refuses it: the inlining undone first)."""
    fusion = example_module("valid", "tma_smem").tma_pointwise_vectorized_store()
    t2 = next(t for t in fusion.tensors if t.name == "T2")
    for t in fusion.tensors:  # T1's tile is inlined into T2: its axes are fixed until it is not
        t.inline_at(0)
    t2.reorder([1, 2, 0]); t2.axis(1).parallelize(P.Vectorize)
    start = time.process_time()
    report = tp.verify(fusion)
    assert time.process_time() - start < 10
    assert "VECTORIZE-WIDTH" in {d.code for d in report.errors}
    assert not any(d.internal for d in report.diagnostics)


def test_a_vector_too_wide_for_both_operands_is_one_finding():
    """A copy from global to global with a Vectorize axis of 32 floats: the one vector is 128 bytes
    of the read and of the write, one cause (fuzz seed 120 case 361, mutated: two blocks, one per
    operand, with the same help). A cast's operands whose widths differ are named each with its own."""
    fusion, t1 = _copy(1024)
    t1.split(0, 32)
    t1.axis(1).parallelize(P.Vectorize)
    (d,) = [d for d in tp.verify(fusion).errors]
    assert d.code == "VECTORIZE-WIDTH"
    assert "32 elements of T1 and of T0 (float32) at once: 128 bytes each" in d.message
    with tp.Fusion("wide_cast") as fusion:
        t0 = tp.make_contig_concrete_tensor([1024], dtype=tp.float64); fusion.add_input(t0)
        t1 = tp.cast(t0, tp.float32); fusion.add_output(t1)
    t1.split(0, 32)
    t1.axis(1).parallelize(P.Vectorize)
    (d,) = [d for d in tp.verify(fusion).errors]
    assert "32 elements at once: 128 bytes of T1 (float32), 256 bytes of T0 (float64)" in d.message
