"""A grid reduction: how the blocks of a segment combine a reduction over BIDx/BIDy/BIDz, derived
once for the verifier (REDUCTION-GRID, REDUCTION-GRID-WORKSPACE) and the code generator
(codegen/lower/reduction.py GridReduce).

After its accumulation (and the block's combine over its reduced thread types), a reduction T
whose reduction axes are bound to block types runs its grid combine (Phase.GRID_COMBINE), as
nvFuser's non-persistent gridReduce (runtime/grid_reduction.cu) does, with one difference: the
block that combines is the last to arrive, not the last by index, so no block ever waits:

    segment     the blocks that differ only in the reduced block indices (`ranks` of them, each
                with its `rank`); the other block indices number the segments
    entrance    each time a block reaches the combine: a point of T's loops left of its first
                reduction axis (serial, unrolled), numbered row-major (`entrance`, `entrances`)
    partials    every thread at index 0 of the reduced thread types (`writer`) writes its
                accumulator's N registers to its own slot of the workspace: slot = (((entrance *
                segments + segment) * ranks + rank) * lanes + lane) * N, `lane` the thread's
                index over the thread types not reduced
    arrival     __threadfence, __syncthreads, then thread 0 adds 1 to the semaphore of (entrance,
                segment); the block that reads ranks - 1 is the last: every other block of the
                segment has written its partials and fenced them
    combine     in the last block each thread starts at the neutral element and combines the
                slots of its lane for ranks j = reducer, reducer + reducers, ... (`reducer`: its
                index over the reduced thread types), then the block combines across those
                thread types: every thread ends with its segment's total; it then returns the
                semaphore to 0, so the next launch finds it as the runtime allocated it
    store       T's elements are stored by the last block only: along each reduced block type p
                the single writer is `blockIdx.p == tp_last_<p>_<T>`, which the combine sets to
                the last block's index there and, in the other blocks, to gridDim.p (no index)
    readers     a statement of the kernel that reads T's total, directly or through other
                statements (`read_totals`), runs in the last block only, under the same
                `blockIdx.p == tp_last_<p>_<T>` in place of a single writer's `blockIdx.p == 0`
                (nvFuser's ThreadPredicateMap predicates a grid reduction's consumers on the
                reduced block types); REDUCTION-GRID says where that holds (one entrance, the
                readers in the combine's scope, none of them spread over the reduced block types)

An allreduce (`is_allreduce`: a statement reading T's total spreads its elements over a block
type T reduces, so every block of the segment needs the total; nvFuser's persistent gridReduce)
runs the same partials through a grid-wide barrier instead of a count, so every block combines:

    barrier     after the partials, __threadfence, __syncthreads, then thread 0 adds to the
                semaphore of (entrance, segment): 1 in every block but the one of rank ranks - 1,
                which adds 2^31 - (ranks - 1); the arrivals of all `ranks` blocks
                add exactly 2^31, and no proper subset of them changes bit 31 (ranks <= 2^31,
                REDUCTION-GRID-WORKSPACE), so each block's thread 0 waits until bit 31 differs
                from the value its own add returned (nvFuser's grid_sync::sync), then fences, and
                the block passes a __syncthreads: every block's partials are written and fenced
                before any block reads one (`GENERATION_BIT`)
    combine     in every block, as the last block combines above: every thread ends with the
                segment's total, the same in each block (one order of combination)
    re-entry    the semaphore's low 31 bits are back where they started and bit 31 flipped: the
                next launch (or a next use) waits for the next flip, whichever value bit 31 has;
                each entrance has its own semaphore and slots, so no block overwrites a partial
                another may still read (the slots of a launch are reused only by the next launch)
    readers     run in every block, each reading its own block's copy (registers or shared
                memory; REDUCTION-GRID refuses a total in global memory, stored by one block)
    residency   a block waits for every block of its segment, so all must be on the GPU at
                once: the kernel is launched cooperatively (cuLaunchCooperativeKernel), which
                fails, rather than hangs, for a grid the GPU cannot hold (codegen/compile.py)

A round (`grid_round`): the grid reductions of one group (tp.group_reductions) that reduce over
the same block and thread types with the same entrances, all plain or all allreduces, combine in
one round, as nvFuser's GroupedGridReduction (runtime/grid_reduction.cu gridReduceGroup) does:

    partials    every member's writers write its partials, each member to its own workspace at
                the same slot (the members share the loops, so the layout; REDUCTION-GROUP)
    arrival     one __threadfence, __syncthreads and count (a plain round) or one grid-wide
                barrier (an allreduce round) on the semaphore of the round's first member (its
                `leader`): the block that reads ranks - 1 has every member's partials of every
                block of its segment
    combine     that block (every block, after an allreduce's barrier) combines each member's
                partials in turn, then returns the semaphore to 0 once
    last block  one block holds every member's total: the stores and readers of each member
                test the leader's `tp_last_<p>_<leader>`, so a statement reading several totals
                of one round runs where all of them are (REDUCTION-GRID refuses a reader of
                totals of two rounds, whose last blocks may differ)

A grid Welford (tp.welford over block indices, model/welford.py; nvFuser's gridWelford) is the round
of its three outputs (avg, var_sum, n: their group), whose leader (execution/reduction.py
welford_leader) holds the states and does the steps for all three:

    partials    each writer writes its states' avg, M2 and N at its slot of three workspaces, one per
                field (`welford_work_names`, the leader's; the N workspace of the count's type), all
                three at the layout's slots
    arrival     one count on the leader's semaphore, as a plain round's
    combine     the last block starts each state empty and combines the states of ranks j =
                reducer, reducer + reducers, ... in that order by Chan's formula (an empty partial,
                N = 0, leaves the state unchanged), then across the reduced thread types: the same
                bits whichever block arrives last; the semaphore back to 0
    last block  the three outputs' stores and readers test the leader's `tp_last_<p>_<leader>`
    allreduce   is_allreduce holds for the three together (one of them read in every block): the
                partials as above, then one grid-wide barrier on the leader's semaphore (an
                allreduce round's), and every block combines the states as the last block does
                above; the semaphore's bit 31 flipped, its low bits as they began

The workspace holds `work_elements` values of the compute type, the semaphores `semaphores`
32-bit counters; the runtime allocates them, the semaphores zeroed once (codegen/compile.py).
A round has one semaphore array (its leader's) and a workspace per member.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.expr import Expr, add, const, mul, product, try_int, var
from ..model.grouped_reduction import group_of
from ..model.loop_map import computed_tensors
from ..model.reduction import is_reduction_tensor
from ..model.tensor import TensorView
from ..model.welford import is_welford, welford_siblings
from ..model.types import BLOCK_TYPES, DEVICE_TYPES, THREAD_TYPES, ParallelType
from .derive import per_fusion
from .promotion import loop_extents
from .reduction import ReductionLoops, reduction_loops

SEMAPHORE_LIMIT = (1 << 32) - 1  # a 32-bit semaphore counts the arrivals of a segment
GENERATION_BIT = 1 << 31  # an allreduce's barrier flips bit 31 of its semaphore once all ranks arrive
ALLREDUCE_LIMIT = GENERATION_BIT  # ... which no proper subset of arrivals does while ranks <= 2^31


def last_name(tv_name: str, p: ParallelType) -> str:
    """The variable (in the algebra and in C++) of the last block's index along reduced block type p."""
    return f"tp_last_{p.cuda_name.split('.')[-1]}_{tv_name}"


def work_name(tv_name: str) -> str:
    """The kernel parameter of T's workspace (its partials)."""
    return f"tp_work_{tv_name}"


WELFORD_FIELDS = ("avg", "m2", "n")  # a Welford state's fields, each with a workspace of its own


def welford_work_names(leader_name: str) -> tuple[str, str, str]:
    """The kernel parameters of a grid Welford's three workspaces (its state's avg, M2 and N
    partials, each at the same slots), named by the Welford's leader (execution/reduction.py
    welford_leader): all three exist even where a sibling (a var_mean's N) is no output."""
    return tuple(f"{work_name(leader_name)}_{field}" for field in WELFORD_FIELDS)  # type: ignore[return-value]


def semaphores_name(tv_name: str) -> str:
    """The kernel parameter of T's semaphores."""
    return f"tp_sems_{tv_name}"


def entrance_loops(r: ReductionLoops) -> list[tuple[int, Expr]]:
    """(uid, extent) of T's loops left of its first reduction axis that a block runs as loops:
    each point of them enters the grid combine once (extent-1 loops aside)."""
    tv = r.tensor
    out = []
    for i, extent in list(zip(tv.loop, loop_extents(tv)))[:r.start]:
        if i.parallel_type in THREAD_TYPES + BLOCK_TYPES + DEVICE_TYPES or try_int(extent) == 1:
            continue
        out.append((i.uid, extent))
    return out


def _linear(types, index_of, launch: dict[ParallelType, Expr]) -> tuple[Expr, Expr]:
    """The row-major index over the launched `types` (x fastest) and their count."""
    index: Expr = const(0)
    count: Expr = const(1)
    for p in reversed([p for p in types if p in launch]):  # z, y, x: x varies fastest
        index = add(mul(index, launch[p]), index_of(p))
        count = mul(count, launch[p])
    return index, count


@dataclass(frozen=True)
class GridLayout:
    """Where the partials of one grid reduction go, as index expressions of the block and thread
    indices (their CUDA names) and the entrance loops' indices (the names of `env`)."""

    reduction: ReductionLoops
    segment: Expr
    segments: Expr
    rank: Expr
    ranks: Expr
    lane: Expr
    lanes: Expr
    reducer: Expr
    reducers: Expr
    entrance: Expr
    entrances: Expr
    writer: tuple[tuple[str, Expr], ...]  # (thread index, 0): the threads that write their partials

    @property
    def elements(self) -> int:
        n = try_int(self.reduction.elements)
        assert n is not None, "REDUCTION-ACCUMULATOR rejects a symbolic accumulator"
        return n

    def slot_at(self, entrance: Expr, segment: Expr, rank: Expr, lane: Expr) -> Expr:
        """The offset of the first of N partials of (entrance, segment, rank, lane)."""
        return mul(add(mul(add(mul(add(mul(entrance, self.segments), segment), self.ranks), rank), self.lanes), lane),
                   const(self.elements))

    @property
    def slot(self) -> Expr:
        """The offset this thread (a writer) writes its partials at."""
        return self.slot_at(self.entrance, self.segment, self.rank, self.lane)

    @property
    def first(self) -> Expr:
        """The offset of rank 0's partials of this thread's lane: the last block reads rank j at
        first + j * stride."""
        return self.slot_at(self.entrance, self.segment, const(0), self.lane)

    @property
    def stride(self) -> Expr:
        return mul(self.lanes, const(self.elements))

    @property
    def semaphore(self) -> Expr:
        """The semaphore of this block's segment at this entrance."""
        return add(mul(self.entrance, self.segments), self.segment)

    @property
    def semaphore_count(self) -> Expr:
        return mul(self.entrances, self.segments)

    @property
    def work_elements(self) -> Expr:
        return product([self.entrances, self.segments, self.ranks, self.lanes, const(self.elements)])


def grid_layout(r: ReductionLoops, launch: dict[ParallelType, Expr], env: dict[int, Expr]) -> GridLayout:
    """The layout of grid reduction r in a kernel launched with `launch`; `env`: the index of
    each of T's loop IDs (execution/statements.py tensor_execution's env, or the code
    generator's loop counters)."""
    def index_of(p: ParallelType) -> Expr:
        return var(p.cuda_name)

    others = [p for p in BLOCK_TYPES if p not in r.blocks]
    segment, segments = _linear(others, index_of, launch)
    rank, ranks = _linear(r.blocks, index_of, launch)
    lane, lanes = _linear([p for p in THREAD_TYPES if p not in r.threads], index_of, launch)
    reducer, reducers = _linear(r.threads, index_of, launch)
    entrance: Expr = const(0)
    entrances: Expr = const(1)
    for uid, extent in entrance_loops(r):
        entrance = add(mul(entrance, extent), env[uid])
        entrances = mul(entrances, extent)
    writer = tuple((p.cuda_name, const(0)) for p in r.threads if p in launch)
    return GridLayout(r, segment, segments, rank, ranks, lane, lanes, reducer, reducers, entrance, entrances, writer)


def last_block_ranges(r: ReductionLoops, launch: dict[ParallelType, Expr]) -> dict[str, Expr]:
    """The range of each last-block variable as the verifier models it: the index of the last
    block of the segment (below the launch); the code's is gridDim.p in the other blocks, where
    the store's `blockIdx.p == tp_last_p` fails as `blockIdx.p == last` does. A round's members
    share their leader's (grid_round)."""
    return {last_block_name(r.tensor, p): launch[p] for p in r.blocks if p in launch}


def last_block_name(tv: TensorView, p: ParallelType) -> str:
    """The last-block variable along p that tv's store and readers test: its round leader's, the
    one block that holds every total of the round."""
    return last_name(round_leader(tv).name, p)


def is_grid_reduction(tv: TensorView) -> bool:
    """Whether tv is a reduction with a reduction axis bound to a block index."""
    return tv.definition is not None and is_reduction_tensor(tv) and bool(reduction_loops(tv).blocks)


def spread_blocks(reader: TensorView, total: TensorView) -> tuple[ParallelType, ...]:
    """The block types `total` (a grid reduction) reduces that `reader` spreads its elements over
    (a loop axis neither broadcast nor reduction bound to one): each of those blocks needs the total."""
    bound = {i.parallel_type for i in reader.loop if not i.is_broadcast and not i.is_reduction}
    return tuple(p for p in reduction_loops(total).blocks if p in bound)


@per_fusion
def is_allreduce(tv: TensorView) -> bool:
    """Whether tv is a grid reduction whose total a statement of the kernel reads in every block
    of its segment (one reading it spreads over a block type tv reduces): its blocks meet at a
    grid-wide barrier and each combines the partials (the module docstring's allreduce). A Welford's
    outputs combine as one state (model/welford.py): one of them read so makes all three allreduces."""
    return spread_reader(tv) is not None


def spread_reader(tv: TensorView) -> tuple[TensorView, TensorView] | None:
    """(a statement reading a total over a block type tv reduces, that total: tv, else for a
    Welford output one of its siblings), the first in the kernel's tensors; None where there is
    none (tv is no allreduce)."""
    if not is_grid_reduction(tv):
        return None
    outputs = (tv, *(u for u in welford_siblings(tv) if u is not tv)) if is_welford(tv) else (tv,)  # tv's first
    return next(((t, u) for u in outputs for t in computed_tensors(tv.fusion)
                 if u in read_totals(t) and spread_blocks(t, u)), None)


@per_fusion
def read_totals(tv: TensorView) -> tuple[TensorView, ...]:
    """The grid reductions whose totals tv's statement reads, directly or through the statements
    between (every value computed from a total exists in the last block of its segment only)."""
    seen: set[str] = set()
    stack = list(tv.definition.inputs) if tv.definition is not None else []
    found: list[TensorView] = []
    while stack:
        t = stack.pop()
        if t.name in seen:
            continue
        seen.add(t.name)
        if is_grid_reduction(t):
            found.append(t)
        if t.definition is not None:
            stack.extend(t.definition.inputs)
    return tuple(sorted(found, key=lambda t: t.name))


def grid_totals(tv: TensorView) -> tuple[TensorView, ...]:
    """The grid reductions whose totals tv's elements hold (tv itself, a grid reduction, and those
    it reads): what stores them runs in the last block of the segment only."""
    own = (tv,) if is_grid_reduction(tv) else ()
    return own + tuple(t for t in read_totals(tv) if t is not tv)


def _round_key(tv: TensorView) -> tuple:
    """What the members of one round share: the reduced block and thread types, the entrance
    loops' extents, the accumulator's registers, and whether it is an allreduce."""
    r = reduction_loops(tv)
    return (r.blocks, r.threads, tuple(str(extent) for _, extent in entrance_loops(r)), str(r.elements),
            is_allreduce(tv))


@per_fusion
def grid_round(tv: TensorView) -> tuple[TensorView, ...]:
    """The grid reductions that combine in one round with tv (the module docstring's round, nvFuser's
    GroupedGridReduction): the members of tv's group (tp.group_reductions) that the kernel computes,
    that are grid reductions and that share tv's reduced types, entrances, registers and kind, in the
    group's order; (tv,) where tv is not grouped. Its first member is the round's leader."""
    group = group_of(tv)
    if group is None or not is_grid_reduction(tv):
        return (tv,)
    computed = {t.name for t in computed_tensors(tv.fusion)}
    key = _round_key(tv)
    members = tuple(tv.fusion.tensor(t.name) for t in group if t.name in computed)
    return tuple(t for t in members if is_grid_reduction(t) and _round_key(t) == key) or (tv,)


def round_leader(tv: TensorView) -> TensorView:
    """The first member of tv's round (grid_round): its semaphores and last-block names are the round's."""
    return grid_round(tv)[0]


def last_block_totals(totals) -> tuple[TensorView, ...]:
    """Of the grid reductions `totals`, those whose total only the last block of a segment holds
    (an allreduce's every block holds)."""
    return tuple(t for t in totals if not is_allreduce(t))


def last_block_types(tv: TensorView, launch: dict[ParallelType, Expr] | None = None) -> tuple[ParallelType, ...]:
    """The block types (launched ones, given `launch`) along which only the last block holds tv's
    elements (those its grid totals reduce): a reader of tv must be that block."""
    types = {p for t in last_block_totals(grid_totals(tv)) for p in reduction_loops(t).blocks
             if launch is None or p in launch}
    return tuple(p for p in BLOCK_TYPES if p in types)


__all__ = ["ALLREDUCE_LIMIT", "GENERATION_BIT", "GridLayout", "SEMAPHORE_LIMIT", "WELFORD_FIELDS", "entrance_loops",
           "grid_layout", "grid_round", "grid_totals", "is_allreduce", "is_grid_reduction", "last_block_name",
           "last_block_ranges", "last_block_totals", "last_block_types", "last_name", "read_totals", "round_leader", "semaphores_name",
           "spread_blocks", "spread_reader", "welford_work_names", "work_name"]
