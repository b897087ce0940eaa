"""Tensor-core (MmaOp) kernels, differentially: what tileproof lowers runs on the CPU
(tests/support/mma_sim.py: mma.sync macro tiles warp by warp through the PTX ISA's fragments,
cp.async groups and circular buffers) against numpy's float64 A @ B.

Bounds: tf32 operands (float32 rounded by cvt.rna to 10 mantissa bits, a relative error of at
most 2^-11 each) give |D - A B| <= 2^-10 |A| |B| plus the float32 additions (k 2^-23 |A| |B|);
against tf32(A) tf32(B), and for bfloat16 / float16 operands (exact products), only the float32
additions remain. The bundled schedules of examples/valid/mma.py run at the smallest sizes they
admit; the MMA-OPERAND-LAYOUT rule's Example, lowered without verifying, computes a wrong
product (its Fix the right one); the simulator's own checks (the warp executes the instruction
whole, a cp.async is waited for and published by a barrier before it is read) are shown to fire
on broken copies of a lowering.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.ir import CpAsyncWait, Loop, MmaIssue, Sync
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime.reference import round_to
from tileproof.execution.statements import Cond
from tileproof.model.expr import const, var
from tileproof.verifier.registry import get_rule

from tileproof.recipes import matmul_fusion
from tileproof.recipes.gemm_blocks import tile_mnk

from support.examples import example_module
from support.lowering import decisions_for
from support.mma_sim import SimulationError, run_mma_kernel, tf32
from support.rule_docs import build_snippet

MMA_EXAMPLES = example_module("valid", "mma")  # the seed's kernels
moye_double_buffered, moye_tf32_double_buffered, moye_tile = (
    MMA_EXAMPLES.moye_double_buffered, MMA_EXAMPLES.moye_tf32_double_buffered, MMA_EXAMPLES.moye_tile)

P = tp.ParallelType
LS = tp.LoadStoreOpType
F32_ADD = 2.0 ** -23  # the float32 additions' relative error, per term
TF32 = 2.0 ** -10  # both operands rounded to tf32


def lowered(fusion):
    """The lowering with the decisions verify would record (whatever the rules find: this lowers
    rejected schedules too)."""
    snapshot = fusion.snapshot()
    return lower(snapshot, tp.get_target("sm_90a"), decisions_for(snapshot))


def inputs(fusion, m, n, k, seed=0, integers=False):
    """Random A [M, 1, K] and B [1, N, K] (logical layout), and their values as the kernel holds
    them (rounded to the operand dtype) as M x K and N x K float64 arrays."""
    rng = np.random.default_rng(seed)
    draw = (lambda s: rng.integers(-8, 8, size=s) / 4.0) if integers else rng.standard_normal
    a, b = draw((m, 1, k)), draw((1, n, k))
    dtype = fusion.inputs[0].dtype
    return [a, b], round_to(a[:, 0, :], dtype), round_to(b[0], dtype)


def simulate(fusion, m, n, k, symbols=None, blocks=None, seed=0, integers=False, st=None):
    st = st or lowered(fusion)
    args, a, b = inputs(fusion, m, n, k, seed, integers)
    (out,), sim = run_mma_kernel(st.kernel, fusion, args, symbols, blocks)
    return out, a, b, sim


def check(out, a, b, unit, rows=slice(None), cols=slice(None)):
    """out (M x N) against a (M x K) b^T within unit |a| |b| plus the float32 additions."""
    want = (a @ b.T)[rows, cols]
    magnitude = (np.abs(a) @ np.abs(b).T)[rows, cols]
    got = out[rows, cols]
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} output elements unwritten or garbage"
    err = np.abs(got - want)
    bound = unit * magnitude + a.shape[1] * F32_ADD * magnitude + 1e-9
    assert (err <= bound).all(), f"max error {err.max()} (bound there {bound.flat[err.argmax()]})"


def check_tf32(out, a, b, **where):
    """Within the tf32 bound of A B, and within the float32 additions of tf32(A) tf32(B): the
    operands were rounded, and rounded the way cvt.rna rounds."""
    check(out, a, b, TF32, **where)
    rounded = np.vectorize(tf32)
    check(out, rounded(a), rounded(b), 0.0, **where)


# -- the bundled schedules -------------------------------------------------------------------------

@pytest.mark.parametrize("m, n, k", [(16, 8, 8), (32, 16, 16)])
def test_moye_tile_computes_the_tf32_matmul(m, n, k):
    out, a, b, sim = simulate(moye_tile(m, n, k), m, n, k)
    check_tf32(out, a, b)
    assert sim.mma_issues == (m // 16) * (n // 8) * (k // 8)  # one warp per 16 x 8 tile, per K tile
    assert sim.garbage == 0


def test_moye_tile_with_an_n_hole_keeps_the_garbage_columns_out_of_the_output():
    """N = 12: the second block's tile has columns 12..15 in a hole; its B registers there are never
    written (the copy into them is predicated), so the instruction reads garbage (NaN here) into C
    columns that the store must skip, and does."""
    m, n, k = 16, 12, 8
    out, a, b, sim = simulate(moye_tile(m, n, k), m, n, k)
    check_tf32(out, a, b)
    assert sim.garbage > 0


def test_moye_double_buffered_computes_the_tf32_matmul():
    m, n, k = 128, 128, 32  # the smallest the schedule admits: one block, two K tiles
    out, a, b, sim = simulate(moye_double_buffered(m, n, k), m, n, k)
    check_tf32(out, a, b)
    assert sim.mma_issues == 4 * (4 * 8) * (k // 8)  # four warps, 4 x 8 tiles each, per K step of 8


def test_moye_double_buffered_symbolic_reuses_its_stages():
    """The symbolic schedule at K = 48: three K tiles in two stages (tile 2 refills stage 0), the
    second block row (blockIdx.x = 1) of M = 256."""
    m, n, k = 256, 128, 48
    fusion = moye_tf32_double_buffered("symbolic")
    out, a, b, sim = simulate(fusion, m, n, k, {"M": m, "N": n, "K": k}, blocks=[(1, 0, 0)])
    check_tf32(out, a, b, rows=slice(128, 256))
    assert np.isnan(out[:128]).all()  # block (0, 0) did not run
    assert sim.copies == 3 * (4 + 4) * 128  # per K tile, 4 copies of A and 4 of B per thread


# -- 16-bit operands ----------------------------------------------------------------------------------

def tile_16bit(m, n, k, macro, dtype):
    """moye_tile's pattern for a 16-bit macro: one macro tile per block and K tile, one warp;
    A and B K-major, copied by cp.async (each thread a run of K-consecutive elements) into shared
    memory, read element by element into their fragments (tp.schedule_mma_fragment)."""
    fusion, a, b, d = matmul_fusion(m, n, k, dtype=dtype)
    d.definition.set_macro(macro)
    sa, sb = a.cache_after(LS.CpAsync), b.cache_after(LS.CpAsync)
    ra, rb = sa.cache_after(), sb.cache_after()
    for t, blocks in ((d, (P.BIDx, P.BIDy)), (sa, (P.BIDx, None)), (ra, (P.BIDx, None)), (sb, (None, P.BIDy)),
                      (rb, (None, P.BIDy))):  # [Mo, No, Ko, tile]: A's No and B's Mo are broadcasts
        tile_mnk(t, macro.m, macro.n, macro.k)
        for axis, block in enumerate(blocks):
            if block is not None:
                t.axis(axis).parallelize(block)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    for i in (3, 4, 5):
        d.axis(i).parallelize(P.Mma)
    for t, rows in ((sa, macro.m), (sb, macro.n)):  # [.., rows, K] -> [.., 32 threads, run]
        t.split(4, rows * macro.k // 32)
        t.merge(3)
        t.axis(3).parallelize(P.TIDx)
        t.axis(4).parallelize(P.Vectorize)
    tp.schedule_mma_fragment(ra, macro, tp.MmaOperand.A)
    tp.schedule_mma_fragment(rb, macro, tp.MmaOperand.B)
    tp.inline_most(fusion)
    return fusion


MACROS_16 = [tp.MmaMacro.Ampere_16_8_16, tp.MmaMacro.Ampere_16_16_16, tp.MmaMacro.Turing_16_8_16,
             tp.MmaMacro.Turing_16_16_16]


@pytest.mark.parametrize("dtype", [tp.bfloat16, tp.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("macro", MACROS_16, ids=lambda mac: mac.name)
def test_16bit_macro_tile_computes_the_matmul(macro, dtype):
    m, n, k = 32, 2 * macro.n, 2 * macro.k
    fusion = tile_16bit(m, n, k, macro, dtype)
    assert tp.verify(fusion, "sm_90a").ok
    st = lowered(fusion)
    out, a, b, sim = simulate(fusion, m, n, k, st=st)
    check(out, a, b, 0.0)  # exact products, float32 additions
    assert sim.mma_issues == (m // macro.m) * (n // macro.n) * (k // macro.k)
    exact, a, b, _ = simulate(fusion, m, n, k, seed=1, integers=True, st=st)  # quarters: every sum is exact
    assert np.array_equal(exact, a @ b.T)


# -- the rule's failure, shown ----------------------------------------------------------------------

def _rule_fusion(section: str):
    fusion, _ = build_snippet(get_rule("MMA-OPERAND-LAYOUT").section(section))
    return fusion


def _run_rule_tile(fusion):
    st = lowered(fusion)  # lower() does not verify
    rng = np.random.default_rng(3)
    a, b = rng.integers(-4, 5, size=(16, 8)).astype(float), rng.integers(-4, 5, size=(8, 8)).astype(float)
    (out,), _ = run_mma_kernel(st.kernel, fusion, [a, b])
    return out, a @ b.T  # small integers: tf32 and float32 are exact


def test_mma_operand_layout_example_computes_a_wrong_product():
    """The rule's Example (A in the bfloat16 register order, columns 2q and 2q + 1) is rejected by
    MMA-OPERAND-LAYOUT; lowered anyway, most of D is wrong: each lane hands the instruction the
    registers the fragment map names, which hold other elements of A."""
    fusion = _rule_fusion("Example")
    assert "MMA-OPERAND-LAYOUT" in {d.code for d in tp.verify(fusion, "sm_90a").diagnostics}
    out, want = _run_rule_tile(fusion)
    assert not np.isnan(out).any()
    assert (out != want).sum() > 64, f"{(out != want).sum()} of 128 elements wrong"


def test_mma_operand_layout_fix_computes_the_product():
    fusion = _rule_fusion("Fix")
    assert "MMA-OPERAND-LAYOUT" not in {d.code for d in tp.verify(fusion, "sm_90a").diagnostics}
    out, want = _run_rule_tile(fusion)
    assert np.array_equal(out, want)


# -- the simulator's checks fire ------------------------------------------------------------------

def _broken(mutate):
    """moye_tile(16, 8, 8)'s lowering with `mutate(body list, node)` applied at every node."""
    fusion = moye_tile(16, 8, 8)
    st = lowered(fusion)
    ir = copy.deepcopy(st.kernel)

    def walk(nodes):
        for node in list(nodes):
            mutate(nodes, node)
            if isinstance(node, Loop):
                walk(node.body)

    walk(ir.body)
    args, _, _ = inputs(fusion, 16, 8, 8)
    return lambda: run_mma_kernel(ir, fusion, args)


def test_a_wait_that_leaves_the_copy_in_flight_is_caught():
    def mutate(nodes, node):
        if isinstance(node, CpAsyncWait):
            node.pending = 1

    with pytest.raises(SimulationError, match="in flight"):
        _broken(mutate)()


def test_a_missing_barrier_after_the_wait_is_caught():
    def mutate(nodes, node):
        if isinstance(node, CpAsyncWait):
            nodes.remove(nodes[nodes.index(node) + 1])  # the barrier that publishes the copies

    with pytest.raises(SimulationError, match="no barrier"):
        _broken(mutate)()


def test_an_mma_issued_by_half_a_warp_is_caught():
    def mutate(nodes, node):
        if isinstance(node, MmaIssue):
            node.conds = node.conds + [Cond(var("threadIdx.x"), "<", const(16), "half the warp")]

    with pytest.raises(SimulationError, match="warp-collective"):
        _broken(mutate)()


def test_the_lowering_places_a_barrier_after_each_wait():
    """What the missing-barrier case removes is there (the test above mutates a real barrier)."""
    body = lowered(moye_tile(16, 8, 8)).kernel.body
    flat = []

    def walk(nodes):
        for node in nodes:
            flat.append(node)
            if isinstance(node, Loop):
                walk(node.body)

    walk(body)
    waits = [i for i, node in enumerate(flat) if isinstance(node, CpAsyncWait)]
    assert waits and all(isinstance(flat[i + 1], Sync) for i in waits)


# -- tf32 rounding ---------------------------------------------------------------------------------

def test_tf32_rounds_to_nearest_ties_away_from_zero():
    ulp = 2.0 ** -10  # of numbers in [1, 2)
    assert tf32(1.0 + ulp / 2) == 1.0 + ulp  # a tie: away from zero
    assert tf32(-(1.0 + ulp / 2)) == -(1.0 + ulp)
    assert tf32(1.0 + 3 * ulp / 2) == 1.0 + 2 * ulp  # a tie, away from zero (not to even)
    assert tf32(1.0 + ulp / 2 - 2.0 ** -23) == 1.0  # below the tie
    assert tf32(1.0 + ulp) == 1.0 + ulp
    assert np.isnan(tf32(float("nan"))) and tf32(float("inf")) == float("inf")
