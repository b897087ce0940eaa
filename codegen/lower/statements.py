"""One statement per computed tensor: `out[offset] = op(in[offset], ...)` under a predicate.

Indices come only from the index algebra: the consumer's from its loop domain
(indices_from_loop), each producer's from the consumer's logical indices through the op
(producer_logical, then indices_from_logical). Offsets: Allocation.strides() for
on-chip tensors, the global layout for inputs and outputs. Predicates: a thread/block
index beyond the tensor's own extent, the holes of indivisible splits
(valid_item_bounds), and one writer for shared/global stores that the tensor does not
parallelize across a launched dimension (the others would write the same values). Which
holes (and cp.async padding) the kernel checks is execution/predicates.py's decision, with
the verifier's answers (`answers`, lower/decisions.py) on the claims it asks.
"""

from __future__ import annotations

from ...execution.allocation import Allocation
from ...model.errors import InternalError
from ...hw.cp_async import is_cp_async
from ...hw.global_load import is_cached_load, load_cache
from ...execution.statements import Cond, CondKind, TensorExecution, tensor_execution, vector_axis, vector_position
from ...model.expr import Expr, substitute, var
from ...model.fusion import Fusion, symbol_range
from ...execution.indexing import thread_dims
from ...model.tensor import TensorView
from ...model.types import MemoryType, ParallelType
from ...model.vectorize import VectorOperand, per_element, vector_findings
from ..errors import UnsupportedSchedule
from ..ir import ELEMENT_VAR, CachedLoad, Compute, GlobalTensor, IotaValue, Operand, TmaCopy
from .loop_nest import LoopClass, LoopClasses
from ...model.simplify import simplify, with_value
from ...execution.predicates import checked, hole_candidates, is_matrix_copy, operand_offset, padding_candidates
from ...execution.zero_padding import is_zero_filled
from .cp_async import cp_async_statement
from .decisions import Answers
from .ldsm import matrix_copy
from .tma import TmaLowering, is_tma



class StatementBuilder:
    def __init__(self, fusion: Fusion, classes: LoopClasses, allocations: dict[str, Allocation],
                 globals_: dict[str, GlobalTensor], launch: dict[ParallelType, Expr], answers: Answers, target=None):
        self.fusion = fusion
        self.target = target
        self.answers = answers
        self.classes = classes
        self.allocations = allocations
        self.globals = globals_
        self.launch = launch
        self.tma = TmaLowering(allocations, globals_)

    def build(self, tv: TensorView) -> tuple[list[LoopClass], Compute | TmaCopy]:
        """The statement computing tv and the loop classes it is nested in."""
        path = [self.classes.of(tv, k) for k in range(len(tv.loop))]
        ex = self.execution(tv)
        env, ranges = ex.env, ex.guarded_ranges
        if is_tma(tv):
            return self.tma.statement(tv, path, env, ranges, ex.conds_of(CondKind.THREAD_EXTENT, CondKind.SINGLE_WRITER))
        stmt = self.statement(tv)
        axis = vector_axis(tv)
        vec = axis.static_extent if axis is not None else None
        if is_matrix_copy(tv):
            if vec is None:
                raise UnsupportedSchedule(f"{tv.name}: an ldmatrix/stmatrix is issued by a loop domain ending in a "
                                          f"Vectorize axis (its registers)")
            return path[:-1], matrix_copy(tv, stmt, path[-1].index_var, vec, thread_dims(self.fusion), ranges,
                                          self.answers)
        if vec is not None and not _touches_tensor_memory(stmt):  # tcgen05: lower/tmem.py lowers it
            k = vector_position(tv)  # the loop IDs after it are bound to threads or blocks: no loops
            name, n = path[k].index_var, vec
            found = vector_findings(_vector_operands(stmt), n)  # contiguity: proved (VECTORIZE-CONTIGUOUS)
            if found:
                f = found[0]
                raise InternalError(f"{tv.name}'s Vectorize axis moves {f.bytes} bytes of {f.operand.tensor}, "
                                    f"yet the schedule verified", rule=f.problem.value)
            stmt = _as_vector(stmt, name, n)
            path = path[:k] + path[k + 1:]
        if is_cp_async(tv.definition):
            stmt = cp_async_statement(tv, stmt)
        elif is_cached_load(tv.definition):
            stmt = _cached_load(tv, stmt)
        return path, stmt

    def execution(self, tv: TensorView) -> TensorExecution:
        """tv's execution model, its loop indices named after the loop classes they share."""
        names = {i.uid: self.classes.of(tv, k).index_var for k, i in enumerate(tv.loop)}
        return tensor_execution(tv, self.launch, names)

    # -- the statement ---------------------------------------------------------------
    def statement(self, tv: TensorView, env: dict[int, Expr] | None = None) -> Compute:
        """tv's statement: its operands' offsets and predicates from the execution model
        (`env` overrides loop indices, e.g. one register of a warp-collective access)."""
        ex = self.execution(tv)
        ranges = ex.guarded_ranges
        if env is not None:
            ex = ex.renamed({v.value: env[u] for u, v in ex.env.items() if v.op == "var" and u in env})
        out = self._operand(tv, ex.indices, ranges)
        ins = [self._operand(producer, ex.operand_indices(k), ranges) for k, producer in enumerate(tv.definition.inputs)]
        conds = ex.conds_of(CondKind.THREAD_EXTENT) + self.holes(ex, ranges) + ex.conds_of(CondKind.SINGLE_WRITER)
        op = tv.definition
        if is_cp_async(op):  # past K: no global byte is read, zeros are written (src-size 0)
            conds += self.checked(padding_candidates(ex, ranges), ranges)
        zeros = self.checked(padding_candidates(ex, ranges), ranges) if is_zero_filled(tv) else []
        iota = None
        if op.iota is not None:  # start + step times the element's logical index
            symbols = {name: symbol_range() for name in self.fusion.symbols}
            index = simplify(ex.indices[tv.logical[0].uid], {**symbols, **ranges})
            iota = IotaValue(op.iota.start, op.iota.step, index)
        return Compute(op.kind, op.name, out, ins, conds, 1, str(op), op.scalar, zero_unless=zeros, iota=iota)

    def holes(self, ex: TensorExecution, ranges) -> list[Cond]:
        """The hole predicates the kernel checks at the points of `ex` (execution/predicates.py)."""
        return self.checked(hole_candidates(ex, ranges), ranges)

    def checked(self, conds: list[Cond], ranges) -> list[Cond]:
        """`conds` but those verify proved redundant."""
        return checked(self.fusion, conds, ranges, self.answers.proved)

    def _operand(self, tv: TensorView, idx: dict[int, Expr], ranges) -> Operand:
        try:
            offset = operand_offset(tv, idx, self.allocations.get(tv.name), ranges)
        except KeyError as e:
            raise InternalError(f"no index for IterDomain uid {e.args[0]} of {tv.name}") from None
        return Operand(tv.name, tv.memory_type, tv.dtype, offset)

def _cached_load(tv: TensorView, stmt: Compute) -> CachedLoad:
    """A plain copy of a fusion input whose loads carry its tp.CacheOp (hw/global_load.py)."""
    if not tv.definition.inputs[0].is_fusion_input or stmt.ins[0].memory is not MemoryType.Global:
        raise InternalError(f"{tv.name}'s copy names a cache op but reads {tv.definition.inputs[0].name}, "
                            f"not a fusion input, yet the schedule verified", rule="LOWERING-SUPPORTED")
    return CachedLoad(stmt.kind, stmt.name, stmt.out, stmt.ins, stmt.conds, stmt.vector, stmt.comment, stmt.scalar,
                      cache=load_cache(tv.definition))


def _vector_operands(stmt: Compute) -> list[VectorOperand]:
    return [VectorOperand(o.tensor, o.memory, o.dtype, o.offset) for o in [stmt.out] + stmt.ins]


def _touches_tensor_memory(stmt: Compute) -> bool:
    return any(o.memory is MemoryType.Tensor for o in [stmt.out] + stmt.ins)


def _as_vector(stmt: Compute, name: str, n: int) -> Compute:
    """The statement for the whole vector: offsets of its first element, and predicates at
    its last (the verifier proved vectorized splits divisible, and a cp.async vector wholly
    before or past K: SPLIT-DIVISIBILITY; so it is all or nothing).
    A per-element operand keeps its offset for every element, in ELEMENT_VAR."""
    def first(o: Operand) -> Operand:
        if per_element(VectorOperand(o.tensor, o.memory, o.dtype, o.offset), name, n):
            return Operand(o.tensor, o.memory, o.dtype, substitute(o.offset, {name: var(ELEMENT_VAR)}), True)
        return Operand(o.tensor, o.memory, o.dtype, with_value(o.offset, name, 0))

    conds = [Cond(with_value(c.lhs, name, n - 1), c.op, c.rhs, c.why, c.kind) for c in stmt.conds]
    zeros = [Cond(with_value(c.lhs, name, n - 1), c.op, c.rhs, c.why, c.kind) for c in stmt.zero_unless]
    iota = stmt.iota  # an iota's index per element, as a per-element operand's offset
    if iota is not None:
        iota = IotaValue(iota.start, iota.step, substitute(iota.index, {name: var(ELEMENT_VAR)}))
    return Compute(stmt.kind, stmt.name, first(stmt.out), [first(o) for o in stmt.ins], conds, n, stmt.comment,
                   stmt.scalar, zero_unless=zeros, iota=iota)
