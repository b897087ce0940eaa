"""Grid reductions (execution/grid_reduction.py): REDUCTION-GRID and REDUCTION-GRID-WORKSPACE on
failing and passing schedules, a grid total read in the last block (and elsewhere: a visibility
counterexample, a combine entered in a loop, two totals: refused apart, accepted grouped in one round),
allreduces (accepted, in a serial loop
too; refused in clusters and in global memory; their barrier's generation bit by brute force), and the workspace layout checked by brute force at small launches
(every writer's slot its own and inside the workspace, the last block's reads covering each slot,
one semaphore per entrance and segment), which REDUCTION-GRID-WORKSPACE's docstring relies on."""

from __future__ import annotations

import itertools

import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.ir import GridReduce, GroupedGridReduce, walk
from tileproof.codegen.lower import lower
from tileproof.execution.grid_reduction import ALLREDUCE_LIMIT, GENERATION_BIT, entrance_loops, grid_layout, is_allreduce
from tileproof.execution.indexing import block_dims
from tileproof.execution.reduction import reduction_loops
from tileproof.execution.statements import CondKind, tensor_execution
from tileproof.model.expr import const, evaluate, var
from tileproof.model.targets import get_target
from tileproof.model.types import BLOCK_TYPES, THREAD_TYPES

P = tp.ParallelType


def _codes(fusion):
    return sorted({d.code for d in tp.verify(fusion).diagnostics if d.severity.value == "error"})


def _row_sum(name, consumer=None, blocks=(P.BIDx,)):
    """Row sums over [M BIDy, rN/32 on blocks[0], r32 TIDx]; with `consumer` (a schedule of it),
    T2 = T1 + 1 is the output, reading the grid total in the same kernel."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.add(t1, 1.0) if consumer else t1
        fusion.add_output(t2)
    fusion.assume("M <= 65535")
    t1.split(1, 32)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(blocks[0])
    t1.axis(2).parallelize(P.TIDx)
    if consumer:
        consumer(t2)
    return fusion


def _rows_on_bidy(t2):
    t2.axis(0).parallelize(P.BIDy)


def test_a_grid_reduction_stored_by_its_last_block_is_accepted():
    assert _codes(_row_sum("rows_over_the_grid")) == []


def test_a_grid_total_read_in_the_last_block_is_accepted():
    """T2 reads T1's total where it exists: its statement runs under `blockIdx.x == tp_last_x_T1`
    (in place of the single writer's blockIdx.x == 0), which THREAD/SMEM-BLOCK-VISIBILITY prove."""
    fusion = _row_sum("rows_then_add", _rows_on_bidy)
    assert _codes(fusion) == []
    snap = fusion.snapshot()
    ex = tensor_execution(snap.tensor("T2"), block_dims(snap))
    writers = [(str(c.lhs), c.op, str(c.rhs)) for c in ex.conds_of(CondKind.SINGLE_WRITER)]
    assert ("blockIdx.x", "==", "tp_last_x_T1") in writers and ("blockIdx.x", "==", "0") not in writers
    assert ex.ranges["tp_last_x_T1"] == block_dims(snap)[P.BIDx]


def test_a_grid_total_read_by_another_block_has_a_counterexample():
    """T2 not on BIDy: block (tp_last, 0) computes every row, but T1's row sums are in the
    registers of the last block of each row's own segment."""
    report = tp.verify(_row_sum("rows_then_add_in_one_block", lambda t2: None))
    (d,) = [d for d in report.diagnostics if d.code == "SMEM-BLOCK-VISIBILITY"]
    ce = d.counterexample
    assert ce["reader blockIdx.x"] == ce["writer blockIdx.x"] == ce["tp_last_x_T1"]
    assert ce["reader blockIdx.y"] != ce["writer blockIdx.y"]
    assert "REDUCTION-GRID" not in report.codes


def test_a_global_total_read_by_threads_that_did_not_store_it_has_a_counterexample():
    """T1 is an output too: thread 0 of the last block stores it, and every thread of that block
    reads it back for T2 (registers): no barrier orders the store with the others' loads."""
    with tp.Fusion("rows_kept_then_scaled") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [1]); fusion.add_output(t1)
        t2 = tp.mul(t1, 2.0)
        fusion.add_output(tp.add(t2, 1.0))
    fusion.assume("M <= 65535")
    t1.split(1, 32)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    for t in fusion.outputs[1:] + [t2]:
        t.axis(0).parallelize(P.BIDy)
    report = tp.verify(fusion)
    assert report.codes == ["GLOBAL-VISIBILITY"]
    ce = report.errors[0].counterexample
    assert ce["reader threadIdx.x"] != ce["writer threadIdx.x"] == 0
    assert ce["reader blockIdx.x"] == ce["writer blockIdx.x"] == ce["tp_last_x_T1"]


def _row_allreduce(name, *, serial_rows=False, global_total=False, clusters=None, assumptions=("M <= 65535",)):
    """T3 = T0 + broadcast(T1), T1 = sum(T0, 1) of [M, N]: the row on [BIDx, TIDx{32}] in both, so
    every block of a row reads its sum (an allreduce); rows on BIDy, or `serial_rows` a serial loop
    around the reduction (an entrance per row)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t3 = tp.add(t0, tp.broadcast(t1, [False, True])); fusion.add_output(t3)
    for a in assumptions:
        fusion.assume(a)
    t3.split(1, 32)
    tp.propagate_transforms(t3)
    if serial_rows:
        tp.inline_all_at(t3, 1)
    t3.axis(1).parallelize(P.BIDx)
    t3.axis(2).parallelize(P.TIDx)
    if not serial_rows:
        t3.axis(0).parallelize(P.BIDy)
    tp.parallelize_all_like(t3)
    if global_total:
        t1.set_memory_type(tp.MemoryType.Global)
    if clusters:
        fusion.cluster_dims = clusters
    return fusion


def test_a_grid_total_every_block_reads_is_an_allreduce():
    """Every block of a row reads the row's sum: no reader waits for a last block (no tp_last
    predicate), the lowering puts a grid-wide barrier (GridReduce.allreduce) and launches the
    kernel cooperatively."""
    fusion = _row_allreduce("rows_then_add_everywhere")
    assert _codes(fusion) == []
    snap = fusion.snapshot()
    t1 = snap.tensor("T1")
    assert is_allreduce(t1)
    for name in ("T2", "T3"):
        ex = tensor_execution(snap.tensor(name), block_dims(snap))
        assert not [c for c in ex.conds if "tp_last" in str(c.rhs)], name
    kernel = lower(snap, get_target("sm_90a")).kernel
    (node,) = [n for n in walk(kernel.body) if isinstance(n, GridReduce)]
    assert node.allreduce and str(node.rank) == "blockIdx.x" and kernel.cooperative


def test_an_allreduce_in_a_serial_loop_is_accepted():
    """Each row's sum entered once per iteration of the serial loop over rows: a plain grid total
    read there is refused (the last block can differ each time), an allreduce's barrier has a
    semaphore and workspace slots per entrance, and every block enters each in the same order."""
    assert _codes(_row_allreduce("rows_in_a_loop", serial_rows=True)) == []


def test_an_allreduce_in_clusters_is_refused_with_its_numbers():
    report = tp.verify(_row_allreduce("rows_in_clusters", clusters=(2, 1, 1)))
    (d,) = [d for d in report.errors if d.code == "REDUCTION-GRID"]  # CLUSTER-MULTICAST: M, N need not divide
    assert "an allreduce" in d.message and "clusters of 2 x 1 x 1" in d.message and "cooperative" in d.message
    assert d.counterexample == {"cluster blocks": 2, "readers": 2}


def test_an_allreduce_total_in_global_memory_is_refused():
    """One block stores a global total after the barrier; the others read it unordered."""
    report = tp.verify(_row_allreduce("rows_total_in_global", global_total=True))
    d = next(d for d in report.errors if d.code == "REDUCTION-GRID")
    assert "in Global memory" in d.message and "nothing orders that store" in d.message


def test_a_total_read_in_another_segment_has_a_counterexample():
    """T2 spreads the rows over [BIDy, BIDx{4}]: an allreduce over BIDx, but block (x, y) reads row
    4y + x's sum, which the blocks of segment y do not hold: the visibility rules find the block."""
    def spread(t2):
        t2.split(0, 4)
        t2.axis(0).parallelize(P.BIDy)
        t2.axis(1).parallelize(P.BIDx)
    report = tp.verify(_row_sum("rows_then_add_elsewhere", spread))
    assert report.codes == ["SMEM-BLOCK-VISIBILITY"]
    ce = report.errors[0].counterexample
    assert ce["reader blockIdx.y"] != ce["writer blockIdx.y"]


def test_an_allreduce_segment_past_the_barriers_generation_bit_has_a_counterexample():
    """A segment of M * N blocks (both reduced) fits the plain semaphore's 2^32 - 1 but not the
    allreduce barrier's 2^31."""
    def build(name, reader):
        with tp.Fusion(name) as fusion:
            t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
            t1 = tp.sum(t0, [0, 1])
            fusion.add_output(tp.add(t0, tp.broadcast(t1, [True, True])) if reader else t1)
        fusion.assume("M <= 65535")
        fusion.assume("N <= 65535")
        for t in fusion.outputs + [t1]:
            t.axis(0).parallelize(P.BIDy)
            t.axis(1).parallelize(P.BIDx)
        return fusion
    assert "REDUCTION-GRID-WORKSPACE" not in _codes(build("plain", False))
    report = tp.verify(build("all", True))
    (d,) = [d for d in report.diagnostics if d.code == "REDUCTION-GRID-WORKSPACE"]
    blocks = d.counterexample["blocks per segment"]
    assert (1 << 31) < blocks <= (1 << 32) - 1 and "barrier" in d.message


@pytest.mark.parametrize("ranks", [1, 2, 3, 5, 8])
def test_the_barrier_flips_bit_31_at_the_last_arrival_in_every_order(ranks):
    """tp_grid_allreduce's barrier on a 32-bit semaphore: from either generation, over every order
    of arrival, bit 31 changes exactly when the last block arrives, and the low 31 bits end where
    they began (the next use and the next launch wait for the next flip)."""
    for start in (0, GENERATION_BIT):
        for order in itertools.permutations(range(ranks)):
            value = start
            for n, rank in enumerate(order, 1):
                value = (value + ((GENERATION_BIT - (ranks - 1)) if rank == ranks - 1 else 1)) % (1 << 32)
                assert bool((start ^ value) & GENERATION_BIT) == (n == ranks), (start, order, n)
            assert value == start ^ GENERATION_BIT


@pytest.mark.parametrize("ranks, sound", [(ALLREDUCE_LIMIT, True), (ALLREDUCE_LIMIT + 1, False)])
def test_no_proper_subset_of_arrivals_flips_the_bit_up_to_the_limit(ranks, sound):
    """The arrivals of a proper subset add k (k < ranks ones) or 2^31 - (ranks - 1) + k (the last
    rank's and k < ranks - 1 ones): bit 31 stays unless ranks exceeds 2^31, where ranks - 1 ones
    already add 2^31 (REDUCTION-GRID-WORKSPACE's allreduce limit)."""
    big = (GENERATION_BIT - (ranks - 1)) % (1 << 32)
    sums = [ranks - 1, big, big + ranks - 2]  # the extremes of the subsets without and with the last rank
    early = any(s % (1 << 32) & GENERATION_BIT for s in sums)
    assert early != sound


def test_a_grid_total_entered_in_a_loop_is_refused_when_read():
    """Rows in a serial loop: each row enters the grid combine, and its last block can differ."""
    with tp.Fusion("rows_in_a_loop_then_add") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.add(t1, 1.0); fusion.add_output(t2)
    t1.split(1, 32)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    tp.inline_most(fusion)
    report = tp.verify(fusion)
    (d,) = [d for d in report.errors if d.code == "REDUCTION-GRID"]
    assert "enters its grid combine at each point of its loops" in d.message
    assert d.counterexample == {"readers": 1, "entrance_loops": 1}


def test_a_grid_total_read_outside_the_combines_loop_is_refused():
    """T1's axis 0 (extent 1) is a loop of the kernel (a scope) that T2, not inlined, is not in:
    the combine's `tp_last_x_T1` would not be declared where T2 tests it."""
    with tp.Fusion("one_row_then_add") as fusion:
        t0 = tp.make_contig_concrete_tensor([1, 4096]); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.add(t1, 1.0); fusion.add_output(t2)
    t1.split(1, 128)
    t1.axis(1).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)
    (d,) = tp.verify(fusion).errors
    assert d.code == "REDUCTION-GRID" and "T2, which reads it, is not nested in the loop of T1 axis 0" in d.message


def _two_totals(grouped: bool):
    """T3 = sum(T0, 1) + max(T0, 1) of [M, N], both rows on [BIDy, rN/32 BIDx, r32 TIDx]: two grid
    totals read by one statement; `grouped`: the two reductions grouped (tp.group_reductions)."""
    with tp.Fusion("two_totals") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [1])
        t2 = tp.max(t0, [1])
        t3 = tp.add(t1, t2); fusion.add_output(t3)
    fusion.assume("M <= 65535")
    if grouped:
        tp.group_reductions([t1, t2])
    for t in (t1, t2):
        t.split(1, 32)
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    t3.axis(0).parallelize(P.BIDy)
    return fusion


def test_two_grid_totals_read_by_one_statement_are_refused():
    """Ungrouped, each total has its own semaphore: the block that arrives last at one need not be
    the one that arrives last at the other, so no block holds both."""
    (d, *_) = [d for d in tp.verify(_two_totals(grouped=False)).errors if d.code == "REDUCTION-GRID"]
    assert "T3 reads the totals of T1, T2, whose last blocks need not be one block" in d.message
    assert "they combine in 2 rounds (T1; T2), each with its own semaphore" in d.message
    assert d.counterexample == {"readers": 1, "totals": 2, "rounds": 2}
    assert "tp.group_reductions" in d.hint


def test_two_grouped_grid_totals_read_by_one_statement_are_accepted():
    """Grouped, the two combine in one round (nvFuser's GroupedGridReduction): one semaphore, one last
    block holding both totals, where T3 runs (its predicate and both stores test tp_last_x_T1)."""
    fusion = _two_totals(grouped=True)
    assert _codes(fusion) == []
    kernel = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    (round_,) = [n for n in walk(kernel.body) if isinstance(n, GroupedGridReduce)]
    assert [m.acc for m in round_.members] == ["tp_acc_T1", "tp_acc_T2"] and not round_.allreduce
    src = emit(kernel, cuda_headers=False)
    assert "const bool tp_grid_last_T1 = tp_grid_arrive(" in src and "tp_grid_arrive(" in src.split("tp_grid_last_T1")[1]
    assert src.count("tp_grid_arrive(") == 2 and "tp_sems_T2" not in src and "tp_last_x_T2" not in src
    assert "tp_grid_reduce<" not in src


def test_a_reader_of_one_grouped_and_one_other_grid_total_is_refused():
    """sum and max grouped (one round), min apart (a round of its own): the output reads totals of two
    rounds, whose last blocks need not be one."""
    with tp.Fusion("three_totals") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1, t2, t4 = tp.sum(t0, [1]), tp.max(t0, [1]), tp.min(t0, [1])
        fusion.add_output(tp.add(tp.add(t1, t2), t4))
    fusion.assume("M <= 65535")
    tp.group_reductions([t1, t2])
    for t in (t1, t2, t4):
        t.split(1, 32)
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
        t.axis(2).parallelize(P.TIDx)
    tp.inline_most(fusion)
    for t in fusion.tensors:
        if not t.is_fusion_input and t.definition.name != "sum" and t.ndim and not t.axis(0).is_reduction:
            t.axis(0).parallelize(P.BIDy)
    errors = [d for d in tp.verify(fusion).errors if d.code == "REDUCTION-GRID"]
    assert errors and all(d.counterexample.get("rounds") == 2 for d in errors), [d.message for d in errors]
    assert f"they combine in 2 rounds (T1, T2; {t4.name})" in errors[0].message


def _two_d_grid(*assumptions):
    with tp.Fusion("sum_over_a_2d_grid") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.sum(t0, [0, 1]); fusion.add_output(t1)
    for a in assumptions:
        fusion.assume(a)
    t1.axis(0).parallelize(P.BIDy)
    t1.axis(1).parallelize(P.BIDx)
    return fusion


def test_a_segment_of_more_blocks_than_the_semaphore_counts_has_a_counterexample():
    report = tp.verify(_two_d_grid("M <= 65535"))
    (d,) = [d for d in report.diagnostics if d.code == "REDUCTION-GRID-WORKSPACE"]
    blocks = d.counterexample["blocks per segment"]
    assert blocks > (1 << 32) - 1 and blocks == d.counterexample["M"] * d.counterexample["N"]


def test_a_segment_the_semaphore_counts_is_accepted():
    assert _codes(_two_d_grid("M <= 65535", "N <= 65535")) == []


# -- the layout, by brute force ---------------------------------------------------------------------

def _rows_in_a_loop():
    """[M serial, rN/2 BIDx, r2 TIDy, 3 TIDx iteration...]: entrances, a reduced thread type, lanes."""
    with tp.Fusion("layout") as fusion:
        t0 = tp.make_contig_concrete_tensor([2, 3, 12]); fusion.add_input(t0)
        t1 = tp.sum(t0, [2]); fusion.add_output(t1)
    t1.split(2, 2)  # [2, 3, r6, r2]
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.BIDx)
    t1.axis(3).parallelize(P.TIDy)
    return fusion, t1


def _columns():
    """[rM BIDx, N/2 BIDy, 2 TIDx, 2 serial (registers)]: segments, lanes and N = 2."""
    with tp.Fusion("layout2") as fusion:
        t0 = tp.make_contig_concrete_tensor([3, 8]); fusion.add_input(t0)
        t1 = tp.sum(t0, [0]); fusion.add_output(t1)
    t1.split(1, 2).split(1, 2)  # [r3, 2, 2, 2]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.BIDy)
    t1.axis(2).parallelize(P.TIDx)
    return fusion, t1


@pytest.mark.parametrize("build", [_rows_in_a_loop, _columns])
def test_the_workspace_layout_gives_each_partial_its_slot_and_the_last_block_reads_all(build):
    fusion, t1 = build()
    assert tp.verify(fusion).ok
    r = reduction_loops(t1)

    launch = {p: const(evaluate(e, {})) for p, e in block_dims(fusion).items()}
    loops = entrance_loops(r)
    g = grid_layout(r, launch, {uid: var(f"e{k}") for k, (uid, _) in enumerate(loops)})
    n = g.elements
    dims = {p: evaluate(launch[p], {}) for p in launch}
    types = [p for p in THREAD_TYPES + BLOCK_TYPES if p in dims]
    work, sems = evaluate(g.work_elements, {}), evaluate(g.semaphore_count, {})
    written, semaphores = {}, {}
    for point in itertools.product(*[range(dims[p]) for p in types], *[range(evaluate(e, {})) for _, e in loops]):
        env = {p.cuda_name: v for p, v in zip(types, point)}
        env.update({f"e{k}": v for k, v in enumerate(point[len(types):])})
        block = tuple(env[p.cuda_name] for p in BLOCK_TYPES if p in dims)
        entrance = point[len(types):]
        key = (evaluate(g.segment, env), entrance)
        sem = evaluate(g.semaphore, env)
        assert 0 <= sem < sems and semaphores.setdefault(sem, key) == key  # one semaphore per (segment, entrance)
        if all(env[name] == evaluate(value, env) for name, value in g.writer):
            lane = tuple(env[p.cuda_name] for p in THREAD_TYPES if p in dims and p not in r.threads)
            for k in range(n):
                slot = evaluate(g.slot, env) + k
                assert 0 <= slot < work
                assert written.setdefault(slot, (block, lane, entrance, k)) == (block, lane, entrance, k)
    # the last block of each segment: any of them; its threads read first + j * stride + k for their j
    for point in itertools.product(*[range(dims[p]) for p in types], *[range(evaluate(e, {})) for _, e in loops]):
        env = {p.cuda_name: v for p, v in zip(types, point)}
        env.update({f"e{k}": v for k, v in enumerate(point[len(types):])})
        ranks, reducers = evaluate(g.ranks, env), evaluate(g.reducers, env)
        read = {evaluate(g.first, env) + j * evaluate(g.stride, env) + k
                for j in range(evaluate(g.reducer, env), ranks, reducers) for k in range(n)}
        assert read <= set(range(work))
    # every written slot is read by the last block's thread of its lane, whichever block that is
    for slot, (block, lane, entrance, k) in written.items():
        readers = set()
        for last in itertools.product(*[range(dims[p]) for p in BLOCK_TYPES if p in dims and p in r.blocks]):
            env = {p.cuda_name: v for p, v in zip([p for p in BLOCK_TYPES if p in dims], block)}
            env.update({p.cuda_name: v for p, v in zip([p for p in BLOCK_TYPES if p in dims and p in r.blocks], last)})
            env.update({p.cuda_name: v for p, v in zip([p for p in THREAD_TYPES if p in dims and p not in r.threads], lane)})
            env.update({p.cuda_name: 0 for p in r.threads if p in dims})
            env.update({f"e{i}": v for i, v in enumerate(entrance)})
            for reducer in range(evaluate(g.reducers, env)):
                first, stride = evaluate(g.first, env), evaluate(g.stride, env)
                readers |= {first + j * stride + k for j in range(reducer, evaluate(g.ranks, env), evaluate(g.reducers, env))}
            assert slot in readers
