"""How a reduction (model/reduction.py: tp.sum, tp.max, rfactor) runs, derived once for the
verifier and the code generator.

A reduction tensor T runs in four steps (`ReductionLoops`; codegen/lower/reduction.py emits them,
execution/statements.py store_execution and the verifier's rules model the same):

    init        before the loop of T's first reduction axis (`start`), its accumulator holds the
                neutral element (0 for sum; -inf, or the dtype's lowest integer, for max), one
                register per point of the iteration loops right of `start` (`accumulator`)
    accumulate  at every point of T's loop nest that executes (thread extents, holes of
                indivisible splits), acc = combine(acc, input), in the dtype's compute type
    combine     where reduction axes are bound to TIDx/TIDy/TIDz, the block's threads combine
                their partials (warp shuffles, then shared memory): every thread of a group
                ends with the same total
    grid combine where reduction axes are bound to BIDx/BIDy/BIDz (a grid reduction), the blocks
                of a segment (those that differ only in the reduced block indices) combine
                theirs through a global workspace: each writes its partials, and the last block
                to arrive on the segment's semaphore combines them all
                (execution/grid_reduction.py)
    store       after the loops, T's element = acc (rounded to T's dtype); a shared or global T
                is written by index 0 of the reduced thread types only (single writer), and
                after a grid combine by the last block of its segment only

A Welford's three outputs (model/welford.py) run these steps on one state per register (avg, M2
and an integer count: `register_bytes`, in the scratch and the register count), done by the group's first computed
member (welford_leader); the siblings only store their field.

A hole never contributes: the accumulate is predicated on every hole bound, and a thread or
register that accumulates nothing holds the neutral element. The *_problems functions say what
of a reduction the code generator cannot lower (REDUCTION-PARALLEL, REDUCTION-ACCUMULATOR, and
LOWERING-SUPPORTED through conditions/lowering.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from ..model.expr import Expr, const, maximum, product, try_int
from ..model.iterdomain import IterDomain
from ..model.mma_op import is_mma, is_tcgen05_op
from ..model.online import rescaled_in_place
from ..model.reduction import is_reduction_tensor, neutral
from ..model.tensor import TensorView
from ..model.loop_map import computed_tensors
from ..model.fusion import symbol_range
from ..model.simplify import bounds
from ..model.symbol_ranges import admitted
from ..model.welford import is_welford, welford_count, welford_siblings
from ..model.types import (
    BLOCK_TYPES, DEVICE_TYPES, THREAD_TYPES, DataType, ParallelType, int32, int64,
)
from .mma import fragments, mma_axes

MAX_ACCUMULATOR_REGISTERS = 255  # a thread's registers (conditions/lowering.py MAX_REGISTERS_PER_THREAD)


class Phase(enum.Enum):
    """One of the statements a tensor's computation becomes (a reduction: four)."""

    STATEMENT = "statement"  # a tensor that is no reduction: one statement
    INIT = "init"
    RESCALE = "rescale"  # an MmaOp an online max rescales: its accumulators at the new max (execution/online.py)
    ACCUMULATE = "accumulate"
    COMBINE = "combine"
    GRID_COMBINE = "grid combine"  # after the block's: the blocks of a segment, through global memory
    STORE = "store"


@dataclass(frozen=True)
class ReductionLoops:
    """How reduction tensor `tensor` runs. `start`: the loop position of its first reduction
    axis (init, combine and store sit just outside it); `accumulator`: the iteration loop IDs
    right of `start` that are loops (one register per point of them); `threads`: the thread
    types its reduction axes are bound to (the block combines across them); `blocks`: the block
    types its reduction axes are bound to (the grid combines across them)."""

    tensor: TensorView
    start: int
    accumulator: tuple[IterDomain, ...]
    threads: tuple[ParallelType, ...]
    blocks: tuple[ParallelType, ...] = ()

    @property
    def op_name(self) -> str:
        return self.tensor.definition.name

    @property
    def dtype(self) -> DataType:
        """The type values are combined in: the compute type of the input's dtype."""
        return self.tensor.definition.inputs[0].dtype.compute

    @property
    def elements(self) -> Expr:
        """Accumulator registers per thread (on the tensor cores: per macro tile, the lane's
        elements of the C fragment, model/mma_op.py)."""
        if is_tcgen05_op(self.tensor.definition):
            return const(0)  # tcgen05.mma accumulates in tensor memory: no register
        macro = self.tensor.definition.macro if is_mma(self.tensor) else None
        operands = self.tensor.definition.inputs[0].dtype.name
        if macro is not None and mma_axes(self.tensor) is not None and operands in macro.input_dtypes:
            loops = [i.extent_expr for i in self.accumulator if i.parallel_type is not ParallelType.Mma]
            return product(loops) * fragments(self.tensor).elements("C")
        return product([i.extent_expr for i in self.accumulator])

    @property
    def neutral(self) -> int | float:
        return neutral(self.op_name, self.tensor.dtype)

    @property
    def count_dtype(self) -> DataType | None:
        """A Welford's count type in the kernel (welford_count_dtype), None for other reductions."""
        return welford_count_dtype(self.tensor) if is_welford(self.tensor) else None

    @property
    def register_bytes(self) -> int:
        """Bytes of one accumulator register: the dtype's, or a Welford state's (avg and M2 of the
        dtype, then the count, padded to the widest, as C++ lays out tp_welford_state)."""
        count = self.count_dtype
        if count is None:
            return self.dtype.bytes
        align = max(self.dtype.bytes, count.bytes)
        return -(-(2 * self.dtype.bytes + count.bytes) // align) * align

    def phases(self, path: Sequence) -> list[tuple[list, Phase]]:
        """Where each step sits: `path` is the statement's loop path (one entry per loop axis). A
        tcgen05.mma's accumulation is its one step: the tensor cores write D in tensor memory, the
        first K step without adding (enable-input-d false) in place of an init, and no store."""
        if is_tcgen05_op(self.tensor.definition):
            return [(list(path), Phase.ACCUMULATE)]
        out = [(list(path[:self.start]), Phase.INIT)]
        if rescaled_in_place(self.tensor):  # each iteration of the max's loop, before its products
            out.append((list(path[:self.start + 1]), Phase.RESCALE))
        out.append((list(path), Phase.ACCUMULATE))
        if self.threads:
            out.append((list(path[:self.start]), Phase.COMBINE))
        if self.blocks:
            out.append((list(path[:self.start]), Phase.GRID_COMBINE))
        if self.online:  # the max so far, stored each iteration of its loop for the consumers inside it
            return out + [(list(path[:self.start + 1]), Phase.STORE)]
        return out + [(list(path[:self.start]), Phase.STORE)]

    @property
    def online(self) -> bool:
        """An online max (model/online.py): its store runs inside its loop, after each accumulation."""
        return self.tensor.online is not None


def insert_init(items: list, path: Sequence, loop, init, key=lambda x: x) -> None:
    """Add a reduction's init to the statements `items` ((path, statement) pairs, in order): nested
    in `path` (the loops left of its first reduction axis), just before the producers inlined
    into that axis's loop `loop`, which precede the accumulation and open the loop."""
    inside = [key(p) for p in path] + [key(loop)]
    at = len(items)
    while at > 0 and [key(p) for p in items[at - 1][0]][:len(inside)] == inside:
        at -= 1
    items.insert(at, (list(path), init))


def reduction_loops(tv: TensorView) -> ReductionLoops:
    """The ReductionLoops of reduction tensor tv."""
    start = next(k for k, i in enumerate(tv.loop) if i.is_reduction)
    accumulator = tuple(i for i in tv.loop[start:] if not i.is_reduction and i.parallel_type not in
                        THREAD_TYPES + BLOCK_TYPES + DEVICE_TYPES)
    threads = tuple(p for p in THREAD_TYPES if any(i.is_reduction and i.parallel_type is p for i in tv.loop))
    blocks = tuple(p for p in BLOCK_TYPES if any(i.is_reduction and i.parallel_type is p for i in tv.loop))
    return ReductionLoops(tv, start, accumulator, threads, blocks)


def phases(tv: TensorView, path: Sequence) -> list[tuple[list, Phase]]:
    """The statements tv's computation becomes, each with its loop path."""
    if not is_reduction_tensor(tv):
        return [(list(path), Phase.STATEMENT)]
    return reduction_loops(tv).phases(path)


def block_reductions(fusion, order) -> list[ReductionLoops]:
    """The reductions of `order` (the computed tensors) that combine across threads (a grid
    reduction's last block combines across the same threads again, in the same scratch)."""
    return [r for tv in order if is_reduction_tensor(tv) and (r := reduction_loops(tv)).threads]


def grid_reductions(order) -> list[ReductionLoops]:
    """The reductions of `order` that combine across blocks (a reduction axis on BIDx/BIDy/BIDz)."""
    return [r for tv in order if is_reduction_tensor(tv) and (r := reduction_loops(tv)).blocks]


def combines_in_shared(r: ReductionLoops, dims: Sequence[Expr]) -> bool:
    """Whether r's block combine passes partials through shared memory: tp_block_reduce's P > 1
    (codegen/emit/reduction.py, the same arithmetic), i.e. the threads it reduces over (`dims`,
    the block's x, y, z) are more than one aligned run of lanes of a warp. Where it is not (a
    quad's TIDx{4}, attention's row max), the combine is shuffles only and needs no scratch.
    A grid combine, a symbolic extent or a reduction over a warp-specialized axis (whose
    consumers' extent is not the block's): assumed so."""
    extents = [try_int(d) for d in dims]
    specialized = {t.circular.type.on for t in r.tensor.fusion.tensors
                   if t.circular is not None and hasattr(t.circular.type, "on")}
    if r.blocks or None in extents or specialized & set(r.threads):
        return True
    bx, by, bz = extents
    rx, ry, rz = (p in r.threads for p in THREAD_TYPES)
    group = (bx if rx else 1) * (by if ry else 1) * (bz if rz else 1)
    lanes = (not ry or rx or bx == 1) and (not rz or ((ry or by == 1) and (rx or bx == 1)))
    run = min(group & -group, 32) if lanes else 1
    return group // run > 1


def scratch_bytes(fusion, order, dims: Sequence[Expr]) -> Expr | None:
    """Shared memory the block combines use (one buffer, reused: each combine ends with a barrier):
    a value per thread and accumulator register, of the widest; None without a block combine
    through shared memory (combines_in_shared)."""
    sizes = [r.elements * r.register_bytes for r in block_reductions(fusion, order) if combines_in_shared(r, dims)]
    if not sizes:
        return None
    return product(list(dims)) * maximum(*sizes)


def accumulator_registers(r: ReductionLoops) -> int | None:
    """32-bit registers of r's accumulator, or None where a symbolic extent sizes it."""
    n = try_int(r.elements)
    return None if n is None else -(-n * r.register_bytes // 4)


def welford_count_dtype(tv: TensorView) -> DataType:
    """The integer type a Welford state's count has in the kernel (nvFuser counts in its index
    type): int32 where the most elements a state counts (model/welford.py welford_count) is below
    2^31 at every admitted size, else int64. Exact either way, where a float count stops growing at
    2^24 (float32)."""
    fusion = tv.fusion
    ranges = admitted({s: symbol_range() for s in fusion.symbols}, fusion.assumptions).bounds()
    top = bounds(welford_count(tv), ranges).hi
    return int32 if top is not None and top <= 2**31 - 1 else int64


def welford_leader(tv: TensorView) -> TensorView:
    """The member of Welford output tv's group (model/welford.py) whose statements run the group's
    update and block combine on one state per register, for all three: the first the kernel
    computes. Its siblings' steps but the store are done by it."""
    computed = {t.name for t in computed_tensors(tv.fusion)}
    return next(t for t in welford_siblings(tv) if t.name in computed)


