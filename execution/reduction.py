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
    store       after the loops, T's element = acc (rounded to T's dtype); a shared or global T
                is written by index 0 of the reduced thread types only (single writer)

A hole never contributes: the accumulate is predicated on every hole bound, and a thread or
register that accumulates nothing holds the neutral element. The *_problems functions say what
of a reduction the code generator cannot lower (REDUCTION-PARALLEL, REDUCTION-ACCUMULATOR, and
LOWERING-SUPPORTED through conditions.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from ..model.expr import Expr, evaluate, maximum, product, to_sympy, try_int
from ..model.iterdomain import IterDomain
from ..model.mma_op import is_mma
from ..model.reduction import is_reduction_tensor, neutral
from ..model.notation import user_str
from ..model.tensor import TensorView
from ..model.types import (
    INSTRUCTION_AXES,
    BLOCK_TYPES, DEVICE_TYPES, THREAD_TYPES, DataType, MemoryType, ParallelType,
)
from .problems import Problem
from .mma import fragments, mma_axes

MAX_ACCUMULATOR_REGISTERS = 255  # a thread's registers (execution/conditions.py MAX_REGISTERS_PER_THREAD)


class Phase(enum.Enum):
    """One of the statements a tensor's computation becomes (a reduction: four)."""

    STATEMENT = "statement"  # a tensor that is no reduction: one statement
    INIT = "init"
    ACCUMULATE = "accumulate"
    COMBINE = "combine"
    STORE = "store"


@dataclass(frozen=True)
class ReductionLoops:
    """How reduction tensor `tensor` runs. `start`: the loop position of its first reduction
    axis (init, combine and store sit just outside it); `accumulator`: the iteration loop IDs
    right of `start` that are loops (one register per point of them); `threads`: the thread
    types its reduction axes are bound to (the block combines across them)."""

    tensor: TensorView
    start: int
    accumulator: tuple[IterDomain, ...]
    threads: tuple[ParallelType, ...]

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
        macro = self.tensor.definition.macro if is_mma(self.tensor) else None
        operands = self.tensor.definition.inputs[0].dtype.name
        if macro is not None and mma_axes(self.tensor) is not None and operands in macro.input_dtypes:
            loops = [i.extent_expr for i in self.accumulator if i.parallel_type is not ParallelType.Mma]
            return product(loops) * fragments(self.tensor).elements("C")
        return product([i.extent_expr for i in self.accumulator])

    @property
    def neutral(self) -> int | float:
        return neutral(self.op_name, self.tensor.dtype)

    def phases(self, path: Sequence) -> list[tuple[list, Phase]]:
        """Where each step sits: `path` is the statement's loop path (one entry per loop axis)."""
        out = [(list(path[:self.start]), Phase.INIT), (list(path), Phase.ACCUMULATE)]
        if self.threads:
            out.append((list(path[:self.start]), Phase.COMBINE))
        return out + [(list(path[:self.start]), Phase.STORE)]


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
    return ReductionLoops(tv, start, accumulator, threads)


def phases(tv: TensorView, path: Sequence) -> list[tuple[list, Phase]]:
    """The statements tv's computation becomes, each with its loop path."""
    if not is_reduction_tensor(tv):
        return [(list(path), Phase.STATEMENT)]
    return reduction_loops(tv).phases(path)


def block_reductions(fusion, order) -> list[ReductionLoops]:
    """The reductions of `order` (the computed tensors) that combine across threads."""
    return [r for tv in order if is_reduction_tensor(tv) and (r := reduction_loops(tv)).threads]


def scratch_bytes(fusion, order, dims: Sequence[Expr]) -> Expr | None:
    """Shared memory the block combines use (one buffer, reused: each combine ends with a barrier):
    a value per thread and accumulator register, of the widest; None without a block combine."""
    sizes = [r.elements * r.dtype.bytes for r in block_reductions(fusion, order)]
    if not sizes:
        return None
    return product(list(dims)) * maximum(*sizes)


def accumulator_registers(r: ReductionLoops) -> int | None:
    """32-bit registers of r's accumulator, or None where a symbolic extent sizes it."""
    n = try_int(r.elements)
    return None if n is None else -(-n * r.dtype.bytes // 4)


def parallel_problems(fusion, order) -> list:
    """REDUCTION-PARALLEL: a reduction axis bound to a block index (a grid reduction), Vectorize or
    Bulk, or a Vectorize / Bulk iteration axis of a reduction (it stores one element at a time)."""
    out = []
    for tv in order:
        if not is_reduction_tensor(tv):
            continue
        for k, i in enumerate(tv.loop):
            p = i.parallel_type
            where = dict(tensor=tv.name, ids=(i.name,), location=i.parallel_origin or i.origin or tv.origin)
            if i.is_reduction and p in BLOCK_TYPES:
                out.append(Problem(
                    f"{tv.name}'s reduction axis {k} ({i.label()}) is bound to {p}: its terms would be summed in "
                    f"different blocks, a grid reduction, which tileproof does not lower",
                    hint=f"bind {tv.name}'s iteration axes to blocks (one output element per block or thread) and "
                         f"its reduction axis to TIDx/TIDy/TIDz (a block reduction) or leave it Serial; to spread "
                         f"one reduction over more threads, split it and rfactor the serial part",
                    values={"axis": k},
                    notes=("the threads of one block combine partials through shared memory and __syncthreads; "
                           "blocks would need a global workspace and a grid-wide barrier",), **where))
            elif i.is_reduction and p in INSTRUCTION_AXES:
                out.append(Problem(
                    f"{tv.name}'s reduction axis {k} ({i.label()}) is bound to {p}; a reduction adds its terms one "
                    f"at a time into a register, not as one {'vector access' if p is ParallelType.Vectorize else 'TMA tile'}",
                    hint=f"make axis {k} of {tv.name} Unroll (or Serial), and vectorize the load instead: "
                         f"t = {tv.definition.inputs[0].name}.cache_after(), schedule t like {tv.name} with its "
                         f"innermost axis Vectorize, inline t into {tv.name}",
                    values={"axis": k}, **where))
            elif p in INSTRUCTION_AXES:
                out.append(Problem(
                    f"{tv.name}'s axis {k} ({i.label()}) is bound to {p}, but {tv.name} is a reduction: it stores "
                    f"each element once after its loops, one element at a time",
                    hint=f"make axis {k} of {tv.name} Unroll (or Serial); vectorize a copy instead (a tp.set of "
                         f"{tv.name}, or the cached load of its input)",
                    values={"axis": k}, **where))
    return out


def accumulator_problems(fusion, order) -> list:
    """REDUCTION-ACCUMULATOR: a reduction's accumulator has a compile-time size that fits a thread's
    registers."""
    out = []
    for tv in order:
        if not is_reduction_tensor(tv):
            continue
        r = reduction_loops(tv)
        regs = accumulator_registers(r)
        if regs is not None and regs <= MAX_ACCUMULATOR_REGISTERS:
            continue
        axes = ", ".join(f"{i.label()} (axis {tv.loop.index(i)})" for i in r.accumulator)
        symbols = sorted(r.elements.free_vars())
        values = _too_many(r, symbols)
        size = (f"{user_str(to_sympy(r.elements))} running totals per thread, a number that depends on {', '.join(symbols)}"
                if regs is None else f"{try_int(r.elements)} running totals per thread ({regs} 32-bit registers)")
        out.append(Problem(
            f"{tv.name} keeps {size}: one {r.dtype} register for each point of its loop axes {axes}, which lie "
            f"inside its first reduction loop (axis {r.start}, {tv.loop[r.start].label()})",
            hint=f"move {tv.name}'s iteration axes out of its reduction loops (reorder them left of axis "
                 f"{r.start}), or bind them to threads or blocks",
            tensor=tv.name, ids=tuple(i.name for i in r.accumulator),
            values={**values, "limit": MAX_ACCUMULATOR_REGISTERS},
            notes=("a reduction keeps a running total for every element its reduction loops update at once; "
                   "registers are sized when the kernel is compiled",),
            location=r.accumulator[0].origin or tv.origin))
    return out


def _too_many(r: ReductionLoops, symbols: list[str]) -> dict[str, int]:
    """The registers at the smallest power of two, given to every symbol, that exceeds the limit."""
    v = 1
    while True:
        n = evaluate(r.elements, {s: v for s in symbols})
        regs = -(-n * r.dtype.bytes // 4)
        if regs > MAX_ACCUMULATOR_REGISTERS or v >= 1 << 20 or not symbols:
            return {**{s: v for s in symbols}, "registers": regs}
        v *= 2


def unsupported_reductions(fusion, order) -> list:
    """LOWERING-SUPPORTED: reductions the code generator does not lower (tensor memory)."""
    out = []
    for tv in order:
        if not is_reduction_tensor(tv):
            continue
        touched = [t.name for t in [tv] + list(tv.definition.inputs) if t.memory_type is MemoryType.Tensor]
        if touched:
            out.append(Problem(
                f"`{tv.definition}` reads or writes tensor memory ({', '.join(touched)}); tileproof lowers "
                f"reductions over registers, shared and global memory",
                hint="copy through a register (Local) tensor: tensor memory -> registers -> the reduction",
                tensor=tv.name, values={"tensor_memory_operands": len(touched)}, location=tv.definition.origin))
    return out
