"""One statement per computed tensor: `out[offset] = op(in[offset], ...)` under a predicate.

Indices come only from the index algebra: the consumer's from its loop domain
(indices_from_loop), each producer's from the consumer's logical indices through the op
(producer_logical, then indices_from_logical). Offsets: Allocation.strides() for
on-chip tensors, the global layout for inputs and outputs. Predicates: a thread/block
index beyond the tensor's own extent, the holes of indivisible splits
(valid_item_bounds), and one writer for shared/global stores that the tensor does not
parallelize across a launched dimension (the others would write the same values).
"""

from __future__ import annotations

from ..model.allocation import Allocation
from ..model.expr import Expr, add, const, mul, substitute, var
from ..model.fusion import Fusion
from ..model.iterdomain import Merge, Split
from ..model.indexing import (
    indices_from_logical, indices_from_loop, producer_logical, thread_dims, valid_item_bounds,
)
from ..model.tensor import TensorView
from ..model.types import BLOCK_TYPES, THREAD_TYPES, MemoryType, ParallelType
from .errors import UnsupportedSchedule
from .gmem import global_offset
from .kernel_ir import ELEMENT_VAR, Compute, Cond, GlobalTensor, Operand, TmaCopy
from .loop_nest import LoopClass, LoopClasses
from .simplify import less_than, simplify, with_value
from .ldsm import is_ldsm, matrix_copy
from .predicates import drop_implied
from .tma import TmaLowering, is_tma

VECTOR_BYTES = (2, 4, 8, 16)


class StatementBuilder:
    def __init__(self, fusion: Fusion, classes: LoopClasses, allocations: dict[str, Allocation],
                 globals_: dict[str, GlobalTensor], launch: dict[ParallelType, Expr], target=None):
        self.fusion = fusion
        self.target = target
        self.classes = classes
        self.allocations = allocations
        self.globals = globals_
        self.launch = launch
        self.tma = TmaLowering(allocations, globals_)

    def build(self, tv: TensorView) -> tuple[list[LoopClass], Compute | TmaCopy]:
        """The statement computing tv and the loop classes it is nested in."""
        path = [self.classes.of(tv, k) for k in range(len(tv.loop))]
        # an axis of extent 1 has index 0, whatever thread or block runs it
        env = {i.uid: const(0) if i.static_extent == 1 else var(c.index_var) for i, c in zip(tv.loop, path)}
        ranges = {c.index_var: i.extent_expr for i, c in zip(tv.loop, path)}
        if is_tma(tv):
            return self.tma.statement(tv, path, env, ranges, self._extent_conds(tv) + self._writer_conds(tv))
        stmt = self._statement(tv, env, ranges)
        vec = self._vector_axis(tv)
        if is_ldsm(tv):
            if vec is None:
                raise UnsupportedSchedule(f"{tv.name}: an ldmatrix/stmatrix is issued by a loop domain ending in a "
                                          f"Vectorize axis (its registers)")
            return path[:-1], matrix_copy(tv, stmt, path[-1].index_var, vec, thread_dims(self.fusion), ranges)
        if vec is not None:
            name, n = path[-1].index_var, vec
            if self._vectorizable(stmt, name, n):
                stmt = _as_vector(stmt, name, n)
                path = path[:-1]
            else:
                stmt.comment += f"; {tv.name}'s Vectorize axis is not a contiguous access: unrolled instead"
        return path, stmt

    # -- the statement ---------------------------------------------------------------
    def _statement(self, tv: TensorView, env: dict[int, Expr], ranges: dict[str, Expr]) -> Compute:
        op = tv.definition
        idx_c = indices_from_loop(tv, env)
        out = self._operand(tv, idx_c, ranges)
        ins = []
        for k, producer in enumerate(op.inputs):
            idx_p = indices_from_logical(producer, producer_logical(op, k, idx_c))
            ins.append(self._operand(producer, idx_p, ranges))
        holes = drop_implied(self._hole_conds(tv, idx_c, ranges), self.fusion, self.target, ranges)
        conds = self._extent_conds(tv) + holes + self._writer_conds(tv)
        return Compute(op.kind, op.name, out, ins, conds, 1, str(op))

    def _operand(self, tv: TensorView, idx: dict[int, Expr], ranges) -> Operand:
        try:
            if tv.memory_type is MemoryType.Global:
                offset = global_offset(self.globals[tv.name], tv, idx)
            else:
                strides = self.allocations[tv.name].strides()
                offset = add(*(mul(idx[u], s) for u, s in strides.items())) if strides else const(0)
        except KeyError as e:
            raise UnsupportedSchedule(
                f"tileproof bug, please report: no index for IterDomain uid {e.args[0]} of {tv.name}") from None
        return Operand(tv.name, tv.memory_type, tv.dtype, simplify(offset, ranges))

    def _extent_conds(self, tv: TensorView) -> list[Cond]:
        """A thread/block index runs over the launch dimension; this tensor's axis may be shorter."""
        out = []
        for i in tv.loop:
            p = i.parallel_type
            if i.is_broadcast:
                continue  # one value, computed alike by every thread/block along p
            if p in THREAD_TYPES or p in BLOCK_TYPES:
                dim = self.launch[p]
                if dim != i.extent_expr:
                    out.append(Cond(var(p.cuda_name), "<", i.extent_expr, "thread extent"))
        return out

    def _hole_conds(self, tv: TensorView, idx: dict[int, Expr], ranges) -> list[Cond]:
        out, seen = [], set()
        needed = needed_bounds(tv)
        for b in valid_item_bounds(tv, idx):
            if b.id.uid not in needed:
                continue
            value = simplify(b.value, ranges)
            if (value, b.extent) in seen or less_than(value, b.extent, ranges):
                continue
            seen.add((value, b.extent))
            out.append(Cond(value, "<", b.extent, f"hole of {b.id.label()}"))
        return out

    def _writer_conds(self, tv: TensorView) -> list[Cond]:
        """One thread (and, for global memory, one block) writes what all would write alike."""
        if tv.memory_type not in (MemoryType.Shared, MemoryType.Global):
            return []
        own = {i.parallel_type for i in tv.loop if not i.is_broadcast}
        kinds = THREAD_TYPES + (BLOCK_TYPES if tv.memory_type is MemoryType.Global else ())
        return [Cond(var(p.cuda_name), "==", const(0), "single writer")
                for p in kinds if p in self.launch and p not in own]

    # -- vectorization ---------------------------------------------------------------
    @staticmethod
    def _vector_axis(tv: TensorView) -> int | None:
        if not tv.loop or tv.loop[-1].parallel_type is not ParallelType.Vectorize:
            return None
        return tv.loop[-1].static_extent

    @staticmethod
    def _vectorizable(stmt: Compute, name: str, n: int) -> bool:
        """Every shared/global operand steps by one element along the vector axis, in whole
        vector words; a register operand may have any stride (it is then accessed element by
        element, see per_element), as long as some operand moves whole vectors."""
        whole = 0
        for o in [stmt.out] + stmt.ins:
            if per_element(o, name):
                continue
            size = n * o.dtype.bytes
            if size not in VECTOR_BYTES and size % 16:
                return False
            if not unit_stride(o.offset, name):
                return False
            whole += 1
        return whole > 0


def needed_bounds(tv: TensorView) -> set[int]:
    """The IDs whose bound is not implied by others: those reached backward from the loop
    domain, except the inputs of a merge (out < Eo * Ei implies out // Ei < Eo, and
    out % Ei < Ei always) and the outer output of a split (outer * Ei + inner < E implies
    outer < ceil(E / Ei)). Loop IDs are bounded by their loops; IDs computed forward from
    bounded ones (an allocation branch) are bounded by construction."""
    backward = {i.uid for i in tv.loop}
    implied = set()
    for t in reversed(tv.history):
        if all(o.uid in backward for o in t.outputs):
            backward.update(x.uid for x in t.inputs)
            if isinstance(t, Merge):
                implied.update(x.uid for x in t.inputs)
    for t in tv.history:
        if isinstance(t, Split) and t.in_.uid in backward:
            implied.add(t.outer.uid)
    return backward - implied - {i.uid for i in tv.loop}


def unit_stride(offset: Expr, name: str) -> bool:
    """offset == rest + name, with `name` nowhere in rest."""
    v = var(name)
    if offset == v:
        return True
    if offset.op != "add" or v not in offset.args:
        return False
    return all(a == v or name not in a.free_vars() for a in offset.args) and offset.args.count(v) == 1


def per_element(o: Operand, name: str) -> bool:
    """A register operand that is not contiguous along the vector axis `name`."""
    return o.memory is MemoryType.Local and not unit_stride(o.offset, name)


def _as_vector(stmt: Compute, name: str, n: int) -> Compute:
    """The statement for the whole vector: offsets of its first element, and predicates at
    its last (the verifier proved vectorized splits divisible, so it is all or nothing).
    A per-element operand keeps its offset for every element, in ELEMENT_VAR."""
    def first(o: Operand) -> Operand:
        if per_element(o, name):
            return Operand(o.tensor, o.memory, o.dtype, substitute(o.offset, {name: var(ELEMENT_VAR)}), True)
        return Operand(o.tensor, o.memory, o.dtype, with_value(o.offset, name, 0))

    conds = [Cond(with_value(c.lhs, name, n - 1), c.op, c.rhs, c.why) for c in stmt.conds]
    return Compute(stmt.kind, stmt.name, first(stmt.out), [first(o) for o in stmt.ins], conds, n, stmt.comment)
