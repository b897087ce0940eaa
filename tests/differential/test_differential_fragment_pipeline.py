"""Fragments circular-buffered over the k-slice loop (register circular buffers, execution/pipeline.py),
differentially: the lowered kernel runs on the CPU (tests/support/mma_sim.py) against numpy's
float64 A @ B. The kernel's prologue copies slice 0, each slice copies the next one into the
other stage, then issues its mma.sync from its own. The fragments are copied element by element,
or by ldmatrix (the simulator's MatrixCopy: the PTX ISA's row addresses and register map), with
the blocks in groups of M tiles (a group past M guards its warp-collective instructions).

The same kernel with the prefetched copies moved after the mma.sync (what a refill before the
read does) or without its prologue computes a wrong product: the simulator and the rules agree.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.ir import Loop, MatrixCopy, Prefetched, Prologue
from tileproof.model.expr import add, const, substitute, var

from tileproof.recipes import CpAsyncPipeline, GridOrder, MmaGemmParams, MmaTile, mma_gemm

from differential.test_differential_mma import check, check_tf32, inputs, lowered, simulate
from support.mma_sim import SimulationError, run_mma_kernel, tf32, tf32_truncated


def double_buffered(dtype, k_multiple):
    params = MmaGemmParams(dtype=dtype, tile=MmaTile(m=64, n=64),
                           pipeline=CpAsyncPipeline(stages=2, ldmatrix=False, fragment_stages=2))
    fusion = mma_gemm("M", "N", "K", params)
    for a in ("M % 64 == 0", "N % 64 == 0", f"K % {k_multiple} == 0"):
        fusion.assume(a)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [d.message for d in report.errors]
    return fusion


def _loops_with_prefetch(nodes, found):
    for n in nodes:
        if isinstance(n, Loop) and any(isinstance(c, Prefetched) and not c.asynchronous for c in n.body):
            found.append(n)
        if hasattr(n, "body"):
            _loops_with_prefetch(n.body, found)
    return found


@pytest.mark.parametrize("dtype, k", [(tp.bfloat16, 128), (tp.bfloat16, 200), (tp.float32, 96)])
def test_double_buffered_fragments_compute_the_matmul(dtype, k):
    fusion = double_buffered(dtype, 8)
    m, n = 64, 64
    out, a, b, sim = simulate(fusion, m, n, k, {"M": m, "N": n, "K": k})
    (check_tf32(out, a, b) if dtype == tp.float32 else check(out, a, b, 0.0))
    loops = _loops_with_prefetch(lowered(fusion).kernel.body, [])
    assert len(loops) == 1 and loops[0].extent == const(4)  # the k-slice loop, 4 slices


def _broken(fusion, change):
    ir = copy.deepcopy(lowered(fusion).kernel)
    (loop,) = _loops_with_prefetch(ir.body, [])
    change(ir, loop)
    return ir


def _without_prologue(ir, loop):
    def drop(nodes):
        nodes[:] = [n for n in nodes if not (isinstance(n, Prologue) and not n.asynchronous)]
        for n in nodes:
            if hasattr(n, "body"):
                drop(n.body)
    drop(ir.body)


def _into_the_stage_read(ir, loop):
    """The copy of slice s + 1 into slice s's own stage, as a prefetch equal to the stages would
    place it (PIPELINE-WAR's counterexample): slice s's mma.sync reads slice s + 1's fragments."""
    pre = next(c for c in loop.body if isinstance(c, Prefetched))
    ahead = {pre.index: add(var(pre.index), const(1))}

    def restage(nodes):
        for n in nodes:
            if hasattr(n, "body"):
                restage(n.body)
            elif n.out.memory is tp.MemoryType.Local:
                n.out = replace(n.out, offset=substitute(n.out.offset, ahead))
    restage(pre.body)


def test_fragments_without_their_prologue_read_registers_never_written():
    fusion = double_buffered(tp.bfloat16, 8)
    ir = _broken(fusion, _without_prologue)
    args, a, b = inputs(fusion, 64, 64, 128)
    with pytest.raises((SimulationError, AssertionError)):
        (out,), _ = run_mma_kernel(ir, fusion, args, {"M": 64, "N": 64, "K": 128})
        check(out, a, b, 0.0)


def test_fragments_copied_into_the_stage_being_read_compute_a_wrong_product():
    fusion = double_buffered(tp.bfloat16, 8)
    ir = _broken(fusion, _into_the_stage_read)
    args, a, b = inputs(fusion, 64, 64, 128)
    (out,), _ = run_mma_kernel(ir, fusion, args, {"M": 64, "N": 64, "K": 128})
    with pytest.raises(AssertionError, match="max error"):  # slice s multiplied with slice s + 1's fragments
        check(out, a, b, 0.0)


def test_the_rules_reject_what_the_broken_kernels_do():
    """The two broken kernels above are what a negative prefetch (no prologue copy of slice 0 in
    time) and a prefetch equal to the stages build; the rules name both."""
    for prefetch, codes in ((-3, {"PIPELINE-RAW", "PIPELINE-STAGES"}), (2, {"PIPELINE-WAR", "PIPELINE-STAGES"})):
        params = MmaGemmParams(dtype=tp.bfloat16, tile=MmaTile(m=64, n=64),
                               pipeline=CpAsyncPipeline(stages=2, ldmatrix=False))
        fusion = mma_gemm("M", "N", "K", params)
        fusion.assume("M % 64 == 0")
        fusion.assume("N % 64 == 0")
        fusion.assume("K % 64 == 0")
        for t in fusion.tensors:
            if t.memory_type is tp.MemoryType.Local and t.definition is not None and t.definition.name == "set":
                t.circular_buffer(2, prefetch)
        assert {d.code for d in tp.verify(fusion, "sm_90a").errors} == codes


@pytest.mark.parametrize("dtype, fragment_stages, group, size", [
    (tp.bfloat16, 1, 1, (64, 64, 128)), (tp.bfloat16, 2, 4, (128, 64, 192)), (tp.float32, 2, 1, (64, 64, 64))])
def test_ldmatrix_kernels_compute_the_matmul(dtype, fragment_stages, group, size):
    """The tuned schedule as benchmarks/matmul.py runs it, small: swizzled cp.async stages,
    ldmatrix.x4 (32-bit elements for tf32), register stages, groups of M tiles (group 4 over 2
    tiles: blocks 2 and 3 of the group lie past M, and issue no ldmatrix or mma.sync)."""
    params = MmaGemmParams(dtype=dtype, tile=MmaTile(m=64, n=64),
                           pipeline=CpAsyncPipeline(stages=2, fragment_stages=fragment_stages),
                           grid=GridOrder(group=group))
    fusion = mma_gemm("M", "N", "K", params)
    for a in ("M % 64 == 0", "N % 64 == 0", "K % 8 == 0"):
        fusion.assume(a)
    assert tp.verify(fusion, "sm_90a").ok
    m, n, k = size
    out, a, b, sim = simulate(fusion, m, n, k, {"M": m, "N": n, "K": k})
    (check_tf32(out, a, b) if dtype == tp.float32 else check(out, a, b, 0.0))
    tile_n, tile_k = (8, 8) if dtype == tp.float32 else (16, 16)
    # a block past M issues no mma.sync: its tiles' first rows are past M (lower/mma.py _split_conds)
    assert sim.mma_issues == (m // 16) * (n // tile_n) * (k // tile_k)


def test_an_ldmatrix_reading_the_next_chunk_computes_a_wrong_product():
    """Each lane's row address moved by 16 bytes (the next chunk of its row, as a wrong swizzle
    would): the fragments hold other K elements and the product is wrong."""
    params = MmaGemmParams(dtype=tp.bfloat16, tile=MmaTile(m=64, n=64), pipeline=CpAsyncPipeline(stages=2))
    fusion = mma_gemm("M", "N", "K", params)
    for a in ("M % 64 == 0", "N % 64 == 0", "K % 64 == 0"):
        fusion.assume(a)
    ir = copy.deepcopy(lowered(fusion).kernel)
    moved = []

    def shift(nodes):
        for node in nodes:
            if hasattr(node, "body"):
                shift(node.body)
            elif isinstance(node, MatrixCopy):
                node.address = add(node.address, const(16))
                moved.append(node)
    shift(ir.body)
    assert moved
    args, a, b = inputs(fusion, 64, 64, 64)
    with pytest.raises((AssertionError, SimulationError)):
        (out,), _ = run_mma_kernel(ir, fusion, args, {"M": 64, "N": 64, "K": 64})
        check(out, a, b, 0.0)


@pytest.mark.parametrize("rounding", [tp.Tf32Rounding.RNA, tp.Tf32Rounding.Truncate])
def test_tf32_operands_are_rounded_as_declared(rounding):
    """The simulator rounds each float32 operand as the emitted code does (cvt.rna.tf32.f32, or the
    bits as they are where truncation is declared): the product is float64's of the operands so
    rounded, up to the float32 additions, and the two roundings give different products."""
    params = MmaGemmParams(dtype=tp.float32, tile=MmaTile(m=64, n=64),
                           pipeline=CpAsyncPipeline(stages=2, ldmatrix=False, fragment_stages=2),
                           tf32_rounding=rounding)
    fusion = mma_gemm("M", "N", "K", params)
    for a in ("M % 64 == 0", "N % 64 == 0", "K % 8 == 0"):
        fusion.assume(a)
    assert tp.verify(fusion, "sm_90a").ok
    m, n, k = 64, 64, 96
    out, a, b, _ = simulate(fusion, m, n, k, {"M": m, "N": n, "K": k})
    rounded = np.vectorize(tf32 if rounding is tp.Tf32Rounding.RNA else tf32_truncated)
    check(out, rounded(a), rounded(b), 0.0)
    other = np.vectorize(tf32_truncated if rounding is tp.Tf32Rounding.RNA else tf32)
    assert not np.allclose(out, other(a) @ other(b).T, rtol=0, atol=1e-7)
