"""What runs where: the execution model of one tensor's statement, derived once.

For a computed tensor: the index of each of its loop IDs (a thread/block index, a loop
counter, or 0 for an axis of extent 1), the ranges those indices take over the launch,
the predicates under which a loop point executes, and the index of every IterDomain of
the tensor and of each operand at that point (hence every address). The code generator
renders exactly these (codegen/lower/statements.py) and the verifier's access and visibility
rules prove facts about exactly these: nothing about execution is derived elsewhere.

Predicates (one `Cond` each):
  thread extent   a thread/block index runs over the launch dimension, which is the
                  largest extent bound to that parallel type; a shorter axis is guarded
  hole            a point of an indivisible split beyond the extent it covers
                  (only the bounds not implied by others: needed_bounds; none for a
                  statement whose holes only a TMA store reads, nor for a TMA load and
                  the copies and MmaOps reading it, which run there on its zeros, nor for
                  register arithmetic whose hole values only other holes read:
                  execution/clipped_holes.py)
  single writer   a shared or global store that the tensor does not parallelize across a
                  launched thread (and, for global memory, block) dimension is done by
                  index 0 alone: the others would write the same values
                  (a warp-specialized load on its WarpSpecialized axis: by the producer's
                  first index, indexing.producer_start, which the kernel's producer branch holds)
Registers (Local) have no single writer: every thread along an unbound dimension
computes the tensor for itself.

A reduction (model/reduction.py) reads its input at every point of its loop nest and stores
each element once, after its loops and the block's combine: tensor_execution is its
accumulation (no single writer: every thread adds its part), store_execution its store
(no reduction loop, no predicate on a reduction axis, and a single writer along the thread
types the reduction combines: the axes bound to them are not its elements'; along the block
types a grid reduction combines, the last block of its segment: execution/grid_reduction.py).
A statement that reads a grid reduction's total (read_totals) runs in that last block only, but
for an allreduce's, which every block holds (and stores, into its own registers or shared memory).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .allocation import Allocation
from .clipped_holes import clipped, filled, reduced_at_holes, unread_holes
from ..model.expr import Expr, add, const, substitute, try_int, var
from ..model.global_layout import global_offset, global_strides
from .indexing import (
    indices_from_logical, indices_from_loop, linear_offset, loop_var, producer_logical, producer_start,
    valid_item_bounds,
)
from .circular import specialization
from .promotion import loop_extents
from ..model.reduction import is_reduction_tensor
from .grid_reduction import grid_totals, last_block_name, last_block_ranges, last_block_totals, read_totals, round_leader
from .reduction import reduction_loops
from ..model.tensor import TensorView
from ..model.types import BLOCK_TYPES, THREAD_TYPES, MemoryType, OpKind, ParallelType
from .zero_padding import is_zero_filled, zero_padded
from ..model.fusion import is_mma_op
from .promotion import needed_bounds
from .derive import per_fusion

LAUNCH_TYPES = THREAD_TYPES + BLOCK_TYPES


class CondKind(enum.Enum):
    THREAD_EXTENT = "thread extent"
    HOLE = "hole"
    PADDING = "past K"  # not a predicate: the point runs on zeros (TensorExecution.padding)
    SINGLE_WRITER = "single writer"


@dataclass(frozen=True)
class Cond:
    """`lhs < rhs` or `lhs == rhs`: one conjunct of a statement's predicate."""

    lhs: Expr
    op: str  # "<" or "=="
    rhs: Expr
    why: str  # for the reader of the generated code: "thread extent", "hole of T1.i3", ...
    kind: CondKind | None = None

    def renamed(self, names: dict[str, Expr]) -> "Cond":
        return Cond(substitute(self.lhs, names), self.op, substitute(self.rhs, names), self.why, self.kind)


@dataclass(frozen=True)
class TensorExecution:
    """The loop points of `tensor`'s statement and what each one touches."""

    tensor: TensorView
    env: dict[int, Expr]  # loop ID uid -> its index
    ranges: dict[str, Expr]  # index variable -> exclusive bound (thread/block indices over the launch)
    indices: dict[int, Expr]  # uid of every ID of the tensor -> its index
    conds: tuple[Cond, ...]
    launch_index: dict[ParallelType, Expr] = field(default_factory=dict)  # launched type -> its index
    # bounds of K the point runs past on zeros (execution/zero_padding.py): not predicates; a cp.async
    # reads no global byte where one fails (src-size 0)
    padding: tuple[Cond, ...] = ()

    @property
    def op(self):
        return self.tensor.definition

    def reads_within(self) -> "TensorExecution":
        """The points that read the op's inputs: all of them but, for a zero-filled tensor
        (execution/zero_padding.py), those past K, which write 0 and read nothing (the padding
        bounds then hold as predicates)."""
        if not self.padding or not is_zero_filled(self.tensor):
            return self
        return TensorExecution(self.tensor, self.env, self.ranges, self.indices, self.conds + self.padding,
                               self.launch_index, ())

    def without_unread_holes(self) -> "TensorExecution":
        """The points whose values are read: for a register tensor computed at its holes,
        unpredicated (clipped_holes.unread_holes), those past them dropped. A hole's value
        reaches only other holes, so what it reads there (a promoted operand's register its
        predicated statement left unwritten) matters to no one."""
        tv = self.tensor
        at_holes = _reduced_at_holes(tv)  # its iteration axes' holes, those of the reduction predicated
        if tv.name not in unread_holes(tv.fusion) and not at_holes:
            return self
        needed = needed_bounds(tv)
        holes = tuple(Cond(b.value, "<", b.extent, f"hole of {b.id.label()}", CondKind.HOLE)
                      for b in valid_item_bounds(tv, self.indices) if b.id.uid in needed
                      and not (at_holes and b.id.is_reduction))
        return TensorExecution(tv, self.env, self.ranges, self.indices, self.conds + holes, self.launch_index,
                               self.padding)

    def operand_indices(self, k: int) -> dict[int, Expr]:
        """uid -> index of every ID of the op's k-th input, read at this point."""
        producer = self.op.inputs[k]
        return indices_from_logical(producer, producer_logical(self.op, k, self.indices))

    def read_logical(self, k: int) -> list[Expr]:
        """The logical indices of the op's k-th input read at this point."""
        return producer_logical(self.op, k, self.indices)

    def written_logical(self) -> list[Expr]:
        return [self.indices[i.uid] for i in self.tensor.logical]

    @property
    def guarded_ranges(self) -> dict[str, Expr]:
        """Each loop index's bound where the statement runs (a thread index under its
        thread-extent predicate is below the tensor's own extent)."""
        out = {e.value: extent for i, extent in zip(self.tensor.loop, loop_extents(self.tensor))  # type: ignore[misc]
               if (e := self.env[i.uid]).op == "var"}
        return {**self.ranges, **out}

    def conds_of(self, *kinds: CondKind) -> list[Cond]:
        return [c for c in self.conds if c.kind in kinds]

    def launched_apart(self, prefix: str) -> "TensorExecution":
        """The same statement run by other threads and blocks: every thread/block index gets
        `prefix` (a writer's indices beside a reader's in one query)."""
        return self.renamed({p.cuda_name: var(prefix + p.cuda_name) for p in LAUNCH_TYPES})

    def renamed(self, names: dict[str, Expr]) -> "TensorExecution":
        """The same statement with index variables renamed (e.g. a writer apart from a reader)."""
        def ren(e: Expr) -> Expr:
            return substitute(e, names)

        ranges = {}
        for name, bound in self.ranges.items():
            new = names.get(name, var(name))
            ranges[new.value if new.op == "var" else name] = ren(bound)
        return TensorExecution(self.tensor, {u: ren(e) for u, e in self.env.items()}, ranges,
                               {u: ren(e) for u, e in self.indices.items()},
                               tuple(c.renamed(names) for c in self.conds),
                               {p: ren(e) for p, e in self.launch_index.items()},
                               tuple(c.renamed(names) for c in self.padding))


@per_fusion
def tensor_execution(tv: TensorView, launch: dict[ParallelType, Expr],
                     names: dict[int, str] | None = None) -> TensorExecution:
    """The execution model of tv's statement in a kernel launched with `launch` (the extent
    of each launched thread/block type). `names` gives a loop ID's index variable (the code
    generator's loop class); by default `loop_var` (thread/block indices by their CUDA name)."""
    env: dict[int, Expr] = {}
    ranges: dict[str, Expr] = {}
    for i, extent in zip(tv.loop, loop_extents(tv)):
        index = var(names[i.uid]) if names and i.uid in names else loop_var(tv, i)
        env[i.uid] = const(0) if try_int(extent) == 1 else index  # one point, whoever runs it
        p = i.parallel_type
        ranges[index.value] = launch[p] if p in LAUNCH_TYPES and p in launch else extent  # type: ignore[index]
    for p in LAUNCH_TYPES:
        if p in launch:
            ranges.setdefault(p.cuda_name, launch[p])
    indices = indices_from_loop(tv, env)
    writers = [] if is_reduction_tensor(tv) else _writer_conds(tv, launch)  # a reduction stores after its loops
    padded = zero_padded(tv.fusion).get(tv.name)
    padding = tuple(Cond(b.value, "<", b.extent, f"{b.id.label()} past K: zeros", CondKind.PADDING)
                    for b in valid_item_bounds(tv, indices) if b.id.uid == padded and padded in needed_bounds(tv))
    conds = _extent_conds(tv, launch) + _hole_conds(tv, indices, skip=padded) + writers
    conds, ranges = _in_last_blocks(read_totals(tv), conds, ranges, launch)
    launch_index = {p: var(p.cuda_name) for p in LAUNCH_TYPES if p in launch}
    return TensorExecution(tv, env, ranges, indices, tuple(conds), launch_index, padding)


@per_fusion
def store_execution(tv: TensorView, launch: dict[ParallelType, Expr],
                    names: dict[int, str] | None = None) -> TensorExecution:
    """The points that store tv's elements: its statement (tensor_execution), but for a
    reduction the store after its loops: the predicates that involve a reduction axis (its
    thread extent, holes its loops reach) dropped, its serial reduction loops' indices 0 (the
    store is outside them), and one writer along the thread types its reduction axes bind
    (the combine left the same total in all of them) for a shared or global tensor."""
    ex = tensor_execution(tv, launch, names)
    if not is_reduction_tensor(tv):
        return ex
    # an element is a point of the iteration IDs: the bounds of reduction IDs (a reduced root, a split
    # of it, a reduction axis's thread extent) bound the terms, not the elements; every element is
    # stored, the neutral value where no term is valid
    # an MmaOp's accumulators copied into registers: every element, holes included (rows past M
    # hold values no store reads); a predicated copy would keep both register tiles live

    registers = tv.memory_type is MemoryType.Local and tv.definition is not None and is_mma_op(tv.definition)
    conds = (_extent_conds(tv, launch, elements=True)
             + ([] if registers else _hole_conds(tv, ex.indices, elements=True, skip=zero_padded(tv.fusion).get(tv.name)))
             + _writer_conds(tv, launch))
    loops = {ex.env[i.uid].value: const(0) for i in tv.loop
             if i.is_reduction and ex.env[i.uid].op == "var" and i.parallel_type not in LAUNCH_TYPES}
    # a grid reduction, or a reduction of a grid total: the segment's last block stores
    conds, ranges = _in_last_blocks(grid_totals(tv), conds, ex.ranges, launch)
    stored = TensorExecution(tv, ex.env, ranges, ex.indices, tuple(conds), ex.launch_index, ex.padding)
    return stored.renamed(loops) if loops else stored


def _in_last_blocks(totals, conds: list[Cond], ranges: dict[str, Expr],
                    launch: dict[ParallelType, Expr]) -> tuple[list[Cond], dict[str, Expr]]:
    """conds and ranges of a statement that stores or reads the totals of the grid reductions
    `totals` (execution/grid_reduction.py): it runs where `blockIdx.p == tp_last_<p>_<T>` along
    each block type p that T reduces, in place of a single writer's `blockIdx.p == 0`; an allreduce's
    total is in every block (grid_reduction.is_allreduce), and asks for nothing. The totals of one
    round (grid_reduction.grid_round) are in one block: its leader's `tp_last_<p>_<leader>`, once."""
    totals = tuple({round_leader(t).name: round_leader(t) for t in last_block_totals(totals)}.values())
    if not totals:
        return conds, ranges
    reduced = [var(p.cuda_name) for t in totals for p in reduction_loops(t).blocks]
    conds = [c for c in conds if not (c.kind is CondKind.SINGLE_WRITER and c.lhs in reduced)]
    for t in totals:
        r = reduction_loops(t)
        conds += [Cond(var(p.cuda_name), "==", var(last_block_name(t, p)), "the last block to arrive",
                       CondKind.SINGLE_WRITER) for p in r.blocks if p in launch]
        ranges = {**ranges, **last_block_ranges(r, launch)}
    return conds, ranges


def element_offset(tv: TensorView, idx: dict[int, Expr], allocation: Allocation | None) -> Expr:
    """The element offset a point with IterDomain indices `idx` touches: the global layout for
    fusion inputs and outputs, the allocation's strides on chip (in the tile of its iteration,
    for a circular buffer). A KeyError names an ID without an index (a tileproof bug)."""
    if tv.memory_type is MemoryType.Global:
        layout = global_strides(tv)
        if layout is None:
            raise KeyError(f"{tv.name}: allocation domain not a permutation of the logical domain")
        return global_offset(tv, layout, idx)
    strides = allocation.strides() if allocation is not None else {}
    offset = linear_offset(strides, idx) if strides else const(0)
    if allocation is not None and allocation.stages > 1:  # a circular buffer: the iteration's tile
        return add(offset, allocation.stage_offset(idx))
    return offset


def vector_axis(tv: TensorView):
    """The Vectorize loop ID whose elements a statement moves as one access, or None: its innermost
    loop of a thread, the loop IDs after it bound to thread or block indices (no loop of the thread
    runs inside it, so `[BIDx, Vectorize{4}, TIDx]` moves a thread's 4 elements at once, as nvFuser
    lowers it)."""
    k = vector_position(tv)
    return None if k is None else tv.loop[k]


def vector_position(tv: TensorView) -> int | None:
    """The position in tv's loop domain of vector_axis(tv), or None."""
    for k in range(len(tv.loop) - 1, -1, -1):
        p = tv.loop[k].parallel_type
        if p is ParallelType.Vectorize:
            return k
        if p not in LAUNCH_TYPES:
            return None
    return None


def bound_types(tv: TensorView) -> set[ParallelType]:
    """The launched types a non-broadcast, non-reduction loop axis of tv binds (it splits tv's
    elements; a reduction axis splits the terms of a sum, which the block combines)."""
    return {i.parallel_type for i in tv.loop
            if i.parallel_type in LAUNCH_TYPES and not i.is_broadcast and not i.is_reduction}


def _extent_conds(tv: TensorView, launch: dict[ParallelType, Expr], elements: bool = False) -> list[Cond]:
    out = []
    for i, extent in zip(tv.loop, loop_extents(tv)):  # a promoted loop runs over its reference's extent
        p = i.parallel_type
        if i.is_broadcast or p not in LAUNCH_TYPES or (elements and i.is_reduction):
            continue  # a broadcast axis: one value, computed alike by every thread/block along p
        if launch.get(p) != extent:
            out.append(Cond(var(p.cuda_name), "<", extent, "thread extent", CondKind.THREAD_EXTENT))
    return out


def _hole_conds(tv: TensorView, indices: dict[int, Expr], elements: bool = False,
                skip: int | None = None) -> list[Cond]:
    """The holes tv's points are predicated on: none where only a TMA store reads them (clipped),
    only those of reduction IDs where it runs on a TMA's zeros (filled); `skip`: the uid of the K
    it runs past on zeros."""
    needed = predicated_bounds(tv, skip)
    return [Cond(b.value, "<", b.extent, f"hole of {b.id.label()}", CondKind.HOLE)
            for b in valid_item_bounds(tv, indices) if b.id.uid in needed and not (elements and b.id.is_reduction)]


def predicated_bounds(tv: TensorView, skip: int | None = None) -> set[int]:
    """The uids of the IDs whose bound predicates tv's statement: the needed bounds but `skip`,
    none where it is clipped or its holes are unread, only those of reduction IDs where it is filled
    or a register reduction computed at its iteration axes' holes."""
    if tv.name in clipped(tv.fusion) or tv.name in unread_holes(tv.fusion):
        return set()
    needed = needed_bounds(tv) - {skip}
    if tv.name in filled(tv.fusion) or _reduced_at_holes(tv):
        needed &= {i.uid for i in tv.all_ids() if i.is_reduction}
    return needed


def _reduced_at_holes(tv: TensorView) -> bool:
    """tv in clipped_holes.reduced_at_holes, asked only of reductions (a live fusion's analyses are
    computed at each call)."""
    op = tv.definition
    return op is not None and op.kind is OpKind.REDUCTION and tv.name in reduced_at_holes(tv.fusion)


def _writer_conds(tv: TensorView, launch: dict[ParallelType, Expr]) -> list[Cond]:
    """One thread (and, for global memory, one block) writes what all would write alike."""
    if tv.memory_type not in (MemoryType.Shared, MemoryType.Global):
        return []
    own = bound_types(tv)
    kinds = THREAD_TYPES + (BLOCK_TYPES if tv.memory_type is MemoryType.Global else ())
    spec = specialization(tv)  # a warp-specialized load: the producer's first thread issues it
    return [Cond(var(p.cuda_name), "==", producer_start(launch, p), "the producer's first thread issues the loads",
                 CondKind.SINGLE_WRITER) if spec is not None and p is spec.on else
            Cond(var(p.cuda_name), "==", const(0), "single writer", CondKind.SINGLE_WRITER)
            for p in kinds if p in launch and p not in own]


