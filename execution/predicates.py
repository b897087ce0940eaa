"""Which predicates each statement's kernel code checks: every decision on it, in one place.

A statement runs where its execution model says (statements.py TensorExecution): under its
thread extents, off the holes of indivisible splits (the needed bounds; none where it is
clipped, only those of reduction IDs where it is filled: clipped_holes.py), by one writer,
and for a cp.async, off the padding past K (zero_padding.py). Of the holes and the padding the
kernel checks what two steps leave:

    syntax   each simplified over the loop ranges; repeats, and those the ranges imply
             (model/simplify.py less_than), dropped: `candidates`
    proof    under the fusion's assumptions, `lhs < rhs` may hold at every point of the ranges
             for every admitted size (M % 128 == 0: a 128-row tile has no hole). Only z3 decides
             that. The verifier proves each `Implied` claim `claims` lists
             (verifier/analysis/decisions.py) and records the verdict on its Report; the code
             generator drops a candidate only where the Report says proved (`checked`)

Warp-collective instructions cannot be predicated per lane, and their registers must be
consecutive: those questions are `Equal` claims (an ldmatrix's registers, the mma
accumulators stored two at a time), decided the same way. A claim is a question by value (its
expressions and ranges), so a recorded verdict answers exactly the question it was proved for,
and a claim the Report does not hold is never taken as proved.

`claims(fusion)` lists every claim the code generator asks while lowering the fusion: the holes
(and a cp.async's padding) of every statement but a TMA copy, a reduction's and an MmaOp's
store from its accumulators, an ldmatrix's registers, an mma store's pairs. The loop indices are
named as the kernel names them (execution/loops.py LoopGroup.index_var; a store's own counters
below), so that the code generator's candidates are these very expressions.

May import model/, hw/ and execution/; no z3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Union

from ..hw.cp_async import is_cp_async
from ..hw.bulk_copy import is_async_bulk_op
from ..model.expr import Expr, add, const, mod, substitute, var
from ..model.fusion import Fusion, symbol_range
from ..model.mma_op import ELEMENT_VARS, is_mma, is_tcgen05_op
from ..model.reduction import is_reduction_tensor
from ..model.simplify import Simplifier, simplify
from ..model.tensor import TensorView
from ..model.types import LoadStoreOpType, MemoryType, OpKind, ParallelType
from .allocation import Allocation, compute_allocation
from .indexing import block_dims
from .loops import LoopGroups, execution_order, loop_groups
from .mma import fragments
from .mma_execution import mma_execution
from .reduction import reduction_loops
from .statements import Cond, CondKind, TensorExecution, element_offset, store_execution, tensor_execution, vector_axis

Ranges = tuple[tuple[str, Expr], ...]  # (variable, exclusive bound), sorted: a claim's loop points


def frozen_ranges(ranges: Mapping[str, Expr]) -> Ranges:
    return tuple(sorted(ranges.items()))


@dataclass(frozen=True)
class Implied:
    """`lhs < rhs` at every point of `ranges`, for every size the fusion admits: the candidate
    predicate `lhs < rhs` never fails there."""

    lhs: Expr
    rhs: Expr
    ranges: Ranges

    def __str__(self) -> str:
        return f"{self.lhs} < {self.rhs}"


@dataclass(frozen=True)
class Equal:
    """`a == b` at every point of `ranges`, for every size the fusion admits."""

    a: Expr
    b: Expr
    ranges: Ranges

    def __str__(self) -> str:
        return f"{self.a} == {self.b}"


Claim = Union[Implied, Equal]


# -- the predicates of one statement ------------------------------------------------------------


def candidates(conds: list[Cond], ranges) -> list[Cond]:
    """Hole (or padding) predicates as the kernel would check them: simplified over `ranges`,
    without repeats or ones the ranges imply."""
    out, seen = [], set()
    over = Simplifier(ranges)  # one range analysis for them all (simplify / less_than make one a call)
    for c in conds:
        value = over.simplify(c.lhs)
        if (value, c.rhs) in seen or over.less_than(value, c.rhs):
            continue
        seen.add((value, c.rhs))
        out.append(Cond(value, c.op, c.rhs, c.why, c.kind))
    return out


def hole_candidates(ex: TensorExecution, ranges) -> list[Cond]:
    return candidates(ex.conds_of(CondKind.HOLE), ranges)


def padding_candidates(ex: TensorExecution, ranges) -> list[Cond]:
    return candidates(list(ex.padding), ranges)


def implied_claims(fusion: Fusion, conds: list[Cond], ranges) -> list[Implied]:
    """The claims that would make candidates redundant. Only asked under assumptions: without
    one, `candidates` has dropped what the ranges imply and no solver is asked."""
    if not fusion.assumptions:
        return []
    at = frozen_ranges(ranges)
    return [Implied(c.lhs, c.rhs, at) for c in conds if c.op == "<"]


def checked(fusion: Fusion, conds: list[Cond], ranges, proved: Callable[[Claim], bool]) -> list[Cond]:
    """The candidates the kernel checks: all but those whose Implied claim is `proved`."""
    drop = {(claim.lhs, claim.rhs) for claim in implied_claims(fusion, conds, ranges) if proved(claim)}
    return [c for c in conds if not (c.op == "<" and (c.lhs, c.rhs) in drop)]


# -- the names the kernel gives loop indices ---------------------------------------------------


def statement_names(tv: TensorView, groups: LoopGroups) -> dict[int, str]:
    """Each loop ID of tv's statement -> its index variable, its loop group's."""
    return {i.uid: groups.of[(tv.name, k)].index_var for k, i in enumerate(tv.loop)}


def store_names(tv: TensorView, names: dict[int, str], axes) -> tuple[dict[int, str], dict[int, str]]:
    """The index names of tv's store from its accumulator: its statement's `names` and, for the
    accumulator `axes`, counters of its own (the store is outside the reduction loops, so it
    cannot reuse theirs). Returns (all names, those counters)."""
    private = {i.uid: f"tp_r{j}_{tv.name}" for j, i in enumerate(axes)}
    return {**names, **private}, private


def mma_store_axes(tv: TensorView) -> list:
    """The accumulator axes an MmaOp's store loops over (the Mma axes are the C fragment's)."""
    return [i for i in reduction_loops(tv).accumulator if i.parallel_type is not ParallelType.Mma]


def mma_element_var(tv: TensorView) -> str:
    """The counter of the C fragment element an MmaOp's store writes."""
    return f"tp_c_{tv.name}"


def mma_pair_var(tv: TensorView) -> str:
    """The counter of the pair of C fragment elements a paired store writes."""
    return f"tp_c2_{tv.name}"


def mma_store_pairs(plain: TensorExecution, pair: str, elements: int) -> tuple[list[TensorExecution], dict]:
    """D's store at C elements 2p and 2p + 1 (p the counter `pair`), and the ranges of both."""
    at = [plain.renamed({ELEMENT_VARS["C"]: const(2) * var(pair) + const(e)}) for e in (0, 1)]
    return at, {**at[0].guarded_ranges, pair: const(elements // 2)}


def pair_claims(first: Expr, second: Expr, ranges) -> list[Equal]:
    """A paired store's offsets: the second element right after the first, the first even."""
    at = frozen_ranges(ranges)
    return [Equal(second, first + const(1), at), Equal(mod(first, const(2)), const(0), at)]


def consecutive(offset: Expr, vector_var: str, ranges) -> Equal:
    """A lane's register offset at element `vector_var` is its offset at element 0 plus the element."""
    return Equal(offset, add(substitute(offset, {vector_var: const(0)}), var(vector_var)), frozen_ranges(ranges))


def operand_offset(tv: TensorView, idx: dict[int, Expr], allocation: Allocation | None, ranges) -> Expr:
    """The element offset an operand is rendered with: element_offset simplified over the ranges,
    every extent symbol at least 1 (so (i * ceil(N / 8) + threadIdx.x) // ceil(N / 8), a register
    index read back through the logical axis, is i where threadIdx.x < ceil(N / 8))."""
    symbols = {name: symbol_range() for name in tv.fusion.symbols}
    return simplify(element_offset(tv, idx, allocation), {**symbols, **ranges})


def is_matrix_copy(tv: TensorView) -> bool:
    """An ldmatrix / stmatrix (codegen/lower/ldsm.py lowers it)."""
    op = tv.definition
    return (op is not None and op.kind is OpKind.LOAD_STORE
            and op.op_type in (LoadStoreOpType.LdMatrix, LoadStoreOpType.StMatrix))


# -- every claim the lowering of a fusion asks -------------------------------------------------


def claims(fusion: Fusion) -> list[Claim]:
    """Every claim the code generator asks while lowering `fusion` (each once), in statement order."""
    order = execution_order(fusion)
    groups = loop_groups(fusion, order)
    launch = block_dims(fusion)
    allocations = {t.name: compute_allocation(t) for t in fusion.tensors if not t.is_fusion_input}
    out: list[Claim] = []
    for tv in order:
        names = statement_names(tv, groups)
        ex = tensor_execution(tv, launch, names)
        if is_async_bulk_op(tv.definition):
            continue  # a TMA copy: the hardware clips its box; a bulk copy: tested at its run's start
        ranges = ex.guarded_ranges
        out += implied_claims(fusion, hole_candidates(ex, ranges), ranges)
        if is_tcgen05_op(tv.definition):
            continue  # the tensor cores write D in tensor memory: no store to predicate
        if is_mma(tv):
            out += _mma_store_claims(fusion, tv, launch, names, allocations)
        elif is_reduction_tensor(tv):
            store = store_execution(tv, launch, store_names(tv, names, reduction_loops(tv).accumulator)[0])
            out += implied_claims(fusion, hole_candidates(store, store.guarded_ranges), store.guarded_ranges)
        else:
            if is_cp_async(tv.definition):
                out += implied_claims(fusion, padding_candidates(ex, ranges), ranges)
            if is_matrix_copy(tv):
                out += _register_claims(tv, ex, names, allocations, ranges)
    return list(dict.fromkeys(out))


def _mma_store_claims(fusion, tv: TensorView, launch, names, allocations) -> list[Claim]:
    """codegen/lower/mma.py's store: at every C element, or two elements at a time."""
    names = store_names(tv, names, mma_store_axes(tv))[0]
    plain = mma_execution(tv, launch, "C", names)
    elements = fragments(tv).elements("C")
    ex = plain.renamed({ELEMENT_VARS["C"]: var(mma_element_var(tv))})
    ranges = {**ex.guarded_ranges, mma_element_var(tv): const(elements)}
    out: list[Claim] = list(implied_claims(fusion, hole_candidates(ex, ranges), ranges))
    if tv.memory_type is MemoryType.Global and elements % 2 == 0:
        at, ranges = mma_store_pairs(plain, mma_pair_var(tv), elements)
        for x in at:
            out += implied_claims(fusion, hole_candidates(x, ranges), ranges)
        first, second = (operand_offset(tv, x.indices, allocations.get(tv.name), ranges) for x in at)
        out += pair_claims(first, second, ranges)
    return out


def _register_claims(tv: TensorView, ex: TensorExecution, names, allocations, ranges) -> list[Claim]:
    """An ldmatrix's (stmatrix's) registers: consecutive over its Vectorize axis."""
    axis = vector_axis(tv)
    if axis is None or axis.static_extent is None or axis.static_extent < 2:
        return []
    if tv.definition.op_type is LoadStoreOpType.LdMatrix:
        regs, idx = tv, ex.indices
    else:
        regs, idx = tv.definition.inputs[0], ex.operand_indices(0)
    offset = operand_offset(regs, idx, allocations.get(regs.name), ranges)
    return [consecutive(offset, names[axis.uid], ranges)]
