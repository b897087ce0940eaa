"""Reductions, differentially: lowered kernels run on the CPU (tests/support/reduction_sim.py)
against exact expectations.

Holes never contribute, by construction (codegen/lower/reduction.py predicates the accumulation
on every hole bound; the accumulator starts at the neutral element): here every accepted random
schedule of tests/support/reduction_gen.py (indivisible splits, block reductions over odd thread
counts, rfactor, cached and vectorized inputs, shared partials) is lowered and run with values
that are the multisets of the input elements they sum, and each output element must be the sum
of exactly its own inputs, each once; max schedules run on numbers against the float64
reference. The block combine is run by the algorithm of codegen/emit/reduction.py's helper for
every block shape below, each thread's result checked against its group. Allreduces run with
their grid-wide barrier honoured (blocks park there until every block of the segment arrives):
each block's outputs hold the whole row's sum, at indivisible sizes, in a serial loop, across
three launches from the semaphore state the last left, and a missing block hangs.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.ir import BlockReduce, Buffer, GridReduce, GroupedGridReduce, KernelIR, walk
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime.reference import reference
from tileproof.model.expr import const, evaluate
from tileproof.model.targets import get_target
from tileproof.model.types import MemoryType

from support.grouped_schedules import shared_producer_sum_and_max
from support.reduction_gen import reduction_case
from support.reduction_sim import Numbers, SimulationError, Simulator, Terms, run_kernel
from nvfuser.test_nvfuser_reduction import (cross_iteration_grouped_grid_allreduce,
                                            cross_iteration_grouped_grid_allreduce_4, persistent_bn_backward_allreduce)

ROOT = Path(__file__).resolve().parents[2]
CASES = 120
# block shapes (x, y, z) with the thread indices combined: warps, partial warps, odd group sizes,
# groups that are not runs of lanes (TIDy with TIDx > 1)
SHAPES = [((32, 1, 1), "x"), ((96, 1, 1), "x"), ((48, 1, 1), "x"), ((48, 2, 1), "x"), ((24, 3, 1), "x"),
          ((7, 5, 1), "x"), ((200, 1, 1), "x"), ((33, 1, 1), "x"), ((128, 8, 1), "x"), ((16, 3, 2), "xy"),
          ((32, 8, 1), "y"), ((4, 6, 1), "y"), ((1, 12, 1), "y"), ((5, 3, 4), "z"), ((3, 2, 5), "xz"),
          ((2, 3, 4), "yz"), ((6, 5, 3), "xyz"), ((32, 12, 1), "xy"), ((1, 1, 64), "z"), ((1, 1, 1), "x")]


def _block_ir(shape, reduced: str, elements: int) -> KernelIR:
    total = shape[0] * shape[1] * shape[2]
    scratch = Buffer("tp_scratch", MemoryType.Shared, tp.int8, const(total * elements * 4))
    node = BlockReduce("acc", elements, tp.float32, "add", tuple(c in reduced for c in "xyz"), "tp_scratch")
    return KernelIR("k", [], [scratch, Buffer("acc", MemoryType.Local, tp.float32, const(elements))], [node], [],
                    tuple(const(d) for d in shape), (const(1),) * 3, const(0), {})


@pytest.mark.parametrize("shape, reduced", SHAPES, ids=lambda v: str(v))
def test_block_combine_leaves_each_thread_its_groups_total(shape, reduced):
    elements = 2
    ir = _block_ir(shape, reduced, elements)
    sim = Simulator(ir, {}, Terms)
    sim.buffers, sim.block_env = {}, {}
    bx, by, bz = shape
    sim.threads = [{"threadIdx.x": x, "threadIdx.y": y, "threadIdx.z": z}
                   for z in range(bz) for y in range(by) for x in range(bx)]
    sim.shared = {"tp_scratch": [None] * (bx * by * bz * elements * 4)}
    sim.local = [{"acc": [Counter({(k, e): 1}) for e in range(elements)]} for k in range(len(sim.threads))]
    sim.nodes(ir.body, {})

    def group(t):
        return tuple(t[f"threadIdx.{c}"] for c in "xyz" if c not in reduced)

    for k, t in enumerate(sim.threads):
        members = [j for j, u in enumerate(sim.threads) if group(u) == group(t)]
        for e in range(elements):
            assert sim.local[k]["acc"][e] == Counter({(j, e): 1 for j in members}), (k, e)


def _expected_terms(case) -> dict:
    kept = [k for k in range(len(case.shape)) if k not in case.axes]
    out: dict = {}
    for full in itertools.product(*(range(n) for n in case.shape)):
        out.setdefault(tuple(full[k] for k in kept), Counter())[("T0", full)] += 1
    return out


TALLY = Counter()


@pytest.mark.parametrize("seed", range(CASES))
def test_random_reduction_schedule_sums_each_term_once(seed):
    case = reduction_case(seed)
    report = tp.verify(case.fusion, "sm_90a")
    internal = [d.message for d in report.diagnostics if "tileproof bug" in d.message]
    assert not internal, f"{case}: {internal[0]}"
    if not report.ok:
        TALLY["rejected"] += 1
        return
    TALLY["accepted"] += 1
    st = lower(case.fusion.snapshot(), get_target("sm_90a"))
    x = np.random.default_rng(seed).integers(-50, 50, size=case.shape).astype(float)
    if case.op == "sum":
        (out,) = run_kernel(st.kernel, case.fusion, [x], {}, Terms)
        for point, want in _expected_terms(case).items():
            assert out[point] == want, f"{case}: element {point} sums {out[point]}, not {want}"
    else:
        (out,) = run_kernel(st.kernel, case.fusion, [x], {}, Numbers)
        assert np.array_equal(out.astype(float), reference(case.fusion, [x])[0]), case


def test_the_random_schedules_are_mostly_accepted():
    """The generator exercises the lowering: most schedules it makes verify (the others are
    rejected for a reason the verifier names, checked above)."""
    accepted = sum(tp.verify(reduction_case(seed).fusion, "sm_90a").ok for seed in range(40))
    assert accepted >= 25


def _examples():
    from tileproof.schedule_files import discover

    return [c for c in discover([str(ROOT / "examples" / "valid" / "reductions.py")])]


# symbolic sizes to run each bundled example at, and the blocks to run (None: all)
SIZES = {"row_sum_symbolic": ({"M": 3, "N": 300}, None), "column_sum_symbolic": ({"M": 37, "N": 300}, None),
         "row_max_forty_eight_threads": ({"M": 2}, None), "row_sum_rfactor": ({"M": 2, "N": 2048}, None),
         "column_sum_rfactor_vectorized": ({"M": 24}, [(0, 0, 0), (7, 0, 0)]),
         "row_sum_ninety_six_threads": ({}, [(0, 0, 0), (511, 0, 0)]), "bfloat16_row_sum_in_float32": ({}, [(0, 0, 0)]),
         "int8_column_max": ({}, None)}
TOO_BIG = {"column_sum_across_tidy"}  # 512 threads x 1024 rows per block: tests/gpu/test_reductions.py runs it


@pytest.mark.parametrize("case", [c for c in _examples() if c.name not in TOO_BIG], ids=lambda c: c.name)
def test_bundled_reduction_example_computes_the_reference(case):
    fusion = case.build()
    sizes, blocks = SIZES.get(case.name, ({}, None))
    st = lower(fusion.snapshot(), get_target("sm_90a"))
    rng = np.random.default_rng(0)
    shapes = [[sizes.get(str(i.extent), None) or i.static_extent for i in t.logical] for t in fusion.inputs]
    inputs = [rng.integers(-8, 8, size=s).astype(float) for s in shapes]
    outs = run_kernel(st.kernel, fusion, inputs, sizes, Numbers, blocks)
    for got, want in zip(outs, reference(fusion, inputs)):
        written = np.vectorize(lambda v: v is not None)(got) if got.ndim else np.array(got.item() is not None)
        assert written.any(), case.name
        values = np.where(written, got, 0).astype(float)
        assert np.allclose(values[written], np.asarray(want)[written], rtol=1e-6, atol=1e-6), case.name


def _grouped_sum_and_max(grid: bool):
    """T1 = sum(T0, 1) and T2 = max(T0, 1) of [M, N] grouped (tp.group_reductions), only T1 scheduled
    (T2, its sibling, takes T1's parallel types): rows on BIDx and the row on TIDx{32} (block
    reductions, T3 = T1 + T2 the output), or `grid`: rows on BIDy and the row on [BIDx, TIDx{32}]
    (grid reductions combined in one round: a workspace each, one semaphore; T1 and T2 the outputs)."""
    with tp.Fusion("grouped_grid" if grid else "grouped_block") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.max(t0, [1])
        if grid:
            fusion.add_output(t1)
            fusion.add_output(t2)
        else:
            fusion.add_output(tp.add(t1, t2))
    fusion.assume("M <= 65535")
    fusion.assume("N <= 65535 * 32")
    tp.group_reductions([t1, t2])
    t1.split(1, 32)
    tp.propagate_transforms(t1)
    tp.inline_most(fusion)
    t1.axis(0).parallelize(P_BIDY if grid else P_BIDX)
    if grid:
        t1.axis(1).parallelize(P_BIDX)
    else:
        fusion.outputs[0].axis(0).parallelize(P_BIDX)
    t1.axis(2).parallelize(tp.ParallelType.TIDx)
    return fusion


P_BIDX, P_BIDY = tp.ParallelType.BIDx, tp.ParallelType.BIDy


@pytest.mark.parametrize("grid", [False, True], ids=["block", "grid"])
@pytest.mark.parametrize("sizes", [{"M": 3, "N": 96}, {"M": 2, "N": 70}], ids=str)
def test_grouped_reductions_compute_the_separate_reductions(grid, sizes):
    """A group changes no value: each member's elements are its own reduction's (the group's block
    reductions are lowered one per tensor, as nvFuser lowers block reductions; its grid reductions
    in one round, nvFuser's GroupedGridReduction, whose two members the simulator combines in turn)."""
    fusion = _grouped_sum_and_max(grid)
    assert tp.verify(fusion, "sm_90a").ok, tp.verify(fusion, "sm_90a").codes
    st = lower(fusion.snapshot(), get_target("sm_90a"))
    if grid:
        (round_,) = [n for n in walk(st.kernel.body) if isinstance(n, GroupedGridReduce)]
        assert [m.acc for m in round_.members] == ["tp_acc_T1", "tp_acc_T2"]
        assert not [n for n in walk(st.kernel.body) if isinstance(n, GridReduce)]
    else:
        assert len([n for n in walk(st.kernel.body) if isinstance(n, BlockReduce)]) == 2  # a combine each
    x = np.random.default_rng(1).integers(-50, 50, size=(sizes["M"], sizes["N"])).astype(float)
    outs = run_kernel(st.kernel, fusion, [x], sizes, Numbers)
    want = [x.sum(1), x.max(1)] if grid else [x.sum(1) + x.max(1)]
    for got, expected in zip(outs, want):
        assert np.array_equal(got.astype(float), expected)


def _grouped_totals_read_together(op: str):
    """T3 = T1 + T2 of two grid reductions of [M, N] grouped (T1 = sum, T2 = `op`, rows on BIDy, the row
    on [BIDx, TIDx{32}]): T3 reads both totals, in the one last block of their round."""
    with tp.Fusion("grouped_grid_totals") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = getattr(tp, op)(t0, [1])
        fusion.add_output(tp.add(t1, t2))
    fusion.assume("M <= 65535")
    fusion.assume("N <= 65535 * 32")
    tp.group_reductions([t1, t2])
    t1.split(1, 32)
    tp.propagate_transforms(t1)
    tp.inline_most(fusion)
    t1.axis(0).parallelize(P_BIDY)
    t1.axis(1).parallelize(P_BIDX)
    t1.axis(2).parallelize(tp.ParallelType.TIDx)
    tp.parallelize_all_like(t1)
    return fusion


@pytest.mark.parametrize("op", ["max", "sum"])
@pytest.mark.parametrize("sizes", [{"M": 3, "N": 96}, {"M": 2, "N": 70}, {"M": 1, "N": 33}, {"M": 2, "N": 1}], ids=str)
def test_a_reader_of_two_grouped_grid_totals_runs_in_their_rounds_last_block(op, sizes):
    """The round's one semaphore names one last block, which holds both totals: T3 = T1 + T2 stored
    there, equal to the reference, whatever order the blocks arrive in (forward, backward, shuffled);
    the round's semaphore is back at 0 after each launch (the simulator checks)."""
    fusion = _grouped_totals_read_together(op)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, report.codes
    kernel = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    (round_,) = [n for n in walk(kernel.body) if isinstance(n, GroupedGridReduce)]
    assert {m.semaphores for m in round_.members} == {"tp_sems_T1"} and not round_.allreduce
    assert [p.name for p in kernel.params if p.kind.value == "semaphores"] == ["tp_sems_T1"]
    x = np.random.default_rng(sizes["N"]).integers(-50, 50, size=(sizes["M"], sizes["N"])).astype(float)
    want = x.sum(1) + getattr(x, op)(1)
    grid = [evaluate(e, sizes) for e in kernel.grid]
    blocks = list(itertools.product(*(range(g) for g in grid)))
    shuffled = list(blocks)
    np.random.default_rng(0).shuffle(shuffled)
    for order in (blocks, blocks[::-1], shuffled):
        (got,) = run_kernel(kernel, fusion, [x], sizes, Numbers, order)
        assert np.array_equal(got.astype(float), want)


@pytest.mark.parametrize("sizes", [{"M": 3, "N": 64}, {"M": 2, "N": 27}, {"M": 1, "N": 5}], ids=str)
def test_grouped_reductions_of_one_inlined_producer_compute_the_reference_in_one_nest(sizes):
    """nvFuser's GroupedReductionAfterComputeAt with a sum and a max (support/grouped_schedules.py):
    T1 = T0 + 1 computed once per step of the loop the grouped partials share, on numbers at a
    divisible size, an indivisible one and a row shorter than the thread tile; each output
    element is the reference's."""
    fusion = shared_producer_sum_and_max()
    assert tp.verify(fusion, "sm_90a").ok
    kernel = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    x = np.random.default_rng(7).integers(-50, 50, size=(sizes["M"], sizes["N"])).astype(float)
    (got,) = run_kernel(kernel, fusion, [x], sizes, Numbers)
    assert np.array_equal(got.astype(float), (x + 1).sum(1) + (x + 1).max(1))


# -- allreduces: the grid-wide barrier, simulated (blocks park there until every block of the segment arrives) --

def _row_allreduce(serial_rows: bool):
    """T3 = T0 + broadcast(sum(T0, 1)) of [M, N], the row on [BIDx, TIDx{32}] in the sum and the add
    (every block of a row reads its sum: an allreduce); rows on BIDy, or `serial_rows` a serial loop
    around the reduction (the barrier entered once per row, a semaphore each)."""
    with tp.Fusion("row_allreduce") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        fusion.add_output(tp.add(t0, tp.broadcast(t1, [False, True])))
    fusion.assume("M <= 65535")
    t3 = fusion.outputs[0]
    t3.split(1, 32)
    tp.propagate_transforms(t3)
    if serial_rows:
        tp.inline_all_at(t3, 1)
    else:
        t3.axis(0).parallelize(P_BIDY)
    t3.axis(1).parallelize(P_BIDX)
    t3.axis(2).parallelize(tp.ParallelType.TIDx)
    tp.parallelize_all_like(t3)
    return fusion


def _allreduce_kernel(serial_rows: bool):
    fusion = _row_allreduce(serial_rows)
    assert tp.verify(fusion, "sm_90a").ok, tp.verify(fusion, "sm_90a").codes
    kernel = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    assert kernel.cooperative and [n.allreduce for n in walk(kernel.body) if isinstance(n, GridReduce)] == [True]
    return fusion, kernel


@pytest.mark.parametrize("serial_rows", [False, True], ids=["rows_on_bidy", "rows_in_a_loop"])
@pytest.mark.parametrize("sizes", [{"M": 2, "N": 96}, {"M": 3, "N": 70}, {"M": 1, "N": 33}], ids=str)
def test_an_allreduce_gives_every_block_the_whole_rows_sum(serial_rows, sizes):
    """Each output element is its own input plus every element of its row, each once (Terms), in
    every block: the barrier released each block only after all partials of its row were written."""
    fusion, kernel = _allreduce_kernel(serial_rows)
    x = np.zeros((sizes["M"], sizes["N"]))
    sim = Simulator(kernel, sizes, Terms)
    buffers_out = _simulate(sim, kernel, fusion, x, sizes)
    blocks = -(-sizes["N"] // 32)
    assert sim.barrier_waits == blocks * (1 if serial_rows else sizes["M"]) * (sizes["M"] if serial_rows else 1)
    for i in range(sizes["M"]):
        row = Counter({("T0", (i, j)): 1 for j in range(sizes["N"])})
        for j in range(sizes["N"]):
            assert buffers_out[i, j] == row + Counter({("T0", (i, j)): 1}), (i, j)


def _simulate(sim, kernel, fusion, x, sizes):
    """run_kernel's steps with a Simulator of our own (its barrier semaphores kept between runs)."""
    from support.reduction_sim import global_view, _flat_size

    buffers = {g.name: [None] * _flat_size(g, sizes) for g in kernel.globals}
    g_in = next(g for g in kernel.globals if g.name == fusion.inputs[0].name)
    strides = [evaluate(s, sizes) for s in g_in.strides]
    for point in itertools.product(*(range(n) for n in x.shape)):
        at = sum(point[a] * s for a, s in zip(g_in.alloc_axes, strides))
        buffers[g_in.name][at] = Counter({("T0", point): 1})
    sim.run(buffers)
    g_out = next(g for g in kernel.globals if g.name == fusion.outputs[0].name)
    return global_view(g_out, buffers[g_out.name], sizes)


def test_an_allreduce_runs_again_from_the_state_its_last_launch_left():
    """A second launch finds every barrier semaphore with bit 31 flipped and the low bits 0, and
    waits for the next flip: the same values again (re-entrancy across launches)."""
    sizes = {"M": 2, "N": 70}
    fusion, kernel = _allreduce_kernel(serial_rows=True)
    x = np.random.default_rng(3).integers(-50, 50, size=(2, 70)).astype(float)
    sim = Simulator(kernel, sizes, Numbers)
    for launch in range(3):
        (out,) = run_kernel(kernel, fusion, [x], sizes, Numbers, simulator=lambda *a: sim)
        assert np.array_equal(out.astype(float), x + x.sum(1, keepdims=True)), launch
        generation = {v for sems in sim.barrier_semaphores.values() for v in sems.values()}
        assert generation == {(launch + 1) % 2 << 31}


def test_an_allreduce_whose_blocks_are_not_all_launched_hangs_in_the_simulator():
    """The barrier is honoured: with one block of a row missing (not resident), the others wait
    for ever (the simulator says so instead of hanging), which is why the kernel launches
    cooperatively."""
    sizes = {"M": 1, "N": 96}
    fusion, kernel = _allreduce_kernel(serial_rows=False)
    x = np.ones((1, 96))
    with pytest.raises(SimulationError, match="hangs"):
        run_kernel(kernel, fusion, [x], sizes, Numbers, blocks=[(0, 0, 0), (1, 0, 0)])


def test_an_allreduce_of_max_and_sum_grouped_computes_the_reference():
    """nvFuser's GroupAllreduce3 (a sum, a max and a min allreduce grouped, [BIDx, TIDx{128}]) on
    numbers at indivisible sizes: one round, so each block meets the others at one grid-wide barrier
    (one semaphore), not one per member."""
    with tp.Fusion("group_allreduce") as fusion:
        t0 = tp.make_tensor(["N"]); fusion.add_input(t0)
        t1, t4, t7 = tp.sum(t0, [0]), tp.max(t0, [0]), tp.min(t0, [0])
        for t in (tp.div(t0, tp.broadcast(t1, [True])), tp.div(t0, tp.broadcast(t4, [True])),
                  tp.sub(t0, tp.broadcast(t7, [True]))):
            fusion.add_output(t)
    tp.group_reductions([t1, t4, t7])
    t1.split(0, 128)
    tp.propagate_transforms(t1)
    t1.axis(0).parallelize(P_BIDX)
    t1.axis(1).parallelize(tp.ParallelType.TIDx)
    tp.parallelize_all_like(t1)
    assert tp.verify(fusion, "sm_90a").ok
    kernel = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    (round_,) = [n for n in walk(kernel.body) if isinstance(n, GroupedGridReduce)]
    assert round_.allreduce and len(round_.members) == 3 and kernel.cooperative
    for n in (300, 128, 1):
        x = np.random.default_rng(5).integers(1, 50, size=(n,)).astype(float)
        sim = Simulator(kernel, {"N": n}, Numbers)
        outs = run_kernel(kernel, fusion, [x], {"N": n}, Numbers, simulator=lambda *a: sim)
        for got, want in zip(outs, reference(fusion, [x])):
            assert np.allclose(got.astype(float), want)
        assert sim.barrier_waits == -(-n // 128)  # one barrier per block for the three totals


def test_persistent_batch_norm_backward_with_scalars_of_extents_computes_the_reference():
    """nvFuser's PersistentBNBackwardAllreduce: two grouped allreduces over N, H, W scaled by
    reciprocal(double(N) * H * W), a scalar of extents the kernel computes from its sizes; at
    indivisible sizes (N = 9 over [BIDx, TIDy{8}], C = 5 over [C/4, BIDy{4}]) against the float64
    reference and numpy's batchnorm backward."""
    fusion = persistent_bn_backward_allreduce()
    assert tp.verify(fusion, "sm_90a").ok
    kernel = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    n, c, h, w = 9, 5, 2, 6
    rng = np.random.default_rng(11)
    inputs = [rng.integers(-8, 8, size=shape).astype(float) / 4
              for shape in ((n, c, h, w), (n, c, h, w), (c,), (c,), (c,))]
    sizes = {f"T{k}_{d}": s for k, shape in enumerate(x.shape for x in inputs) for d, s in enumerate(shape)}
    got = run_kernel(kernel, fusion, inputs, sizes, Numbers)[0].astype(float)
    inp, grad_output, weight, mean, invstd = inputs
    channel = (None, slice(None), None, None)
    norm = 1.0 / (n * h * w)
    centered = inp - mean[channel]
    proj_scale = (grad_output * centered).sum((0, 2, 3)) * norm * invstd * invstd
    want = ((grad_output - centered * proj_scale[channel] - (grad_output.sum((0, 2, 3)) * norm)[channel])
            * (invstd * weight)[channel])
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.allclose(reference(fusion, inputs)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("build, sizes", [
    (lambda: cross_iteration_grouped_grid_allreduce([2, 32], [4]), (19, 70)),
    (lambda: cross_iteration_grouped_grid_allreduce([2, 32], [4]), (1, 1)),
    (lambda: cross_iteration_grouped_grid_allreduce([2, 3, 16], [4, 5]), (9, 100)),
    (cross_iteration_grouped_grid_allreduce_4, (19, 70)),
], ids=["group_right_of_the_reduction", "one_element", "two_group_axes", "group_left_of_the_reduction"])
def test_cross_iteration_grouped_allreduces_compute_the_column_sums(build, sizes):
    """nvFuser's CrossIterationGroupedGridAllreduce1, 2 and 4 (ParallelType.Group on the column
    axes of a column allreduce): T0 + its column sums in every block, at indivisible sizes, as a
    loop of separate allreduces would give them."""
    fusion = build()
    assert tp.verify(fusion, "sm_90a").ok
    kernel = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    x = np.random.default_rng(sum(sizes)).integers(-20, 20, size=sizes).astype(float)
    got = run_kernel(kernel, fusion, [x], {"T0_0": sizes[0], "T0_1": sizes[1]}, Numbers)[0].astype(float)
    assert np.array_equal(got, x + x.sum(0, keepdims=True))
    assert np.array_equal(reference(fusion, [x])[0], got)
