"""Each access to an on-chip tensor (shared or tensor memory) as the kernel runs it: for every
thread, loop point and register, the indices of the accessed tensor's IterDomains, and which
threads and points execute it (the issuing tensor's execution model, statements.py). A
tensor-memory access also gets the lane and column each element sits at (its allocation's
offsets), and how its elements pack into 32-bit registers.

The verifier proves facts about exactly these models (verifier/access.py renders their
conditions in z3; the TMEM, LDSM, bank and TMA rules), and the code generator lowers each
tcgen05 instruction from the same model (codegen/lower/tmem.py).

May import model/, hw/ and execution/; no z3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hw.tcgen05 import Packing
from ..hw.threads import linear_thread, thread_env
from ..model.expr import Expr, add, const, floordiv, mul, product, substitute
from ..model.fusion import Fusion, Op
from ..model.mma_op import is_tcgen05_op
from ..model.tensor import TensorView
from ..model.types import THREAD_TYPES, Direction, MemoryType, ParallelType
from .allocation import Allocation
from .indexing import linear_offset, vector_index
from .statements import Cond, CondKind, store_execution, tensor_execution

THREAD_VARS = tuple(p.cuda_name for p in THREAD_TYPES)


@dataclass(frozen=True)
class Access:
    """An access to an on-chip tensor: `op` writes `consumer` (whose loop domain issues
    it) and touches `tensor` (its output for a store, its input for a load)."""

    op: Op
    direction: Direction
    tensor: TensorView
    consumer: TensorView
    input_index: int  # which op input is the accessed tensor (loads); -1 for stores

    def __post_init__(self):
        if not isinstance(self.direction, Direction):
            raise TypeError(f"Access: direction must be a Direction, got {self.direction!r}")

    @property
    def key(self) -> tuple[str, str, str, int]:
        """The access by names (issuing tensor, direction, accessed tensor, input index): the same
        in every snapshot of the fusion, so a Report's decision about it reaches the code generator."""
        return self.consumer.name, self.direction.value, self.tensor.name, self.input_index


def accesses_to(fusion: Fusion, memory: MemoryType) -> list[Access]:
    """Every load from and store into a tensor in `memory`, in the fusion's op order."""
    out = []
    for op in fusion.exprs:
        if op.output.memory_type is memory:
            out.append(Access(op, Direction.STORE, op.output, op.output, -1))
        for k, t in enumerate(op.inputs):
            if t.memory_type is memory:
                out.append(Access(op, Direction.LOAD, t, op.output, k))
    return out


@dataclass
class AccessModel:
    acc: Access
    ranges: dict[str, Expr]  # variable -> exclusive bound
    active: list[tuple[Expr, Expr]]  # (index, extent): the issuing tensor's TID / BID bounds
    valid: list[Cond]  # the hole predicates: the point is an item, not a hole
    indices: dict[int, Expr]  # uid of each IterDomain of the accessed tensor -> its index
    reg: Expr  # element index within one instruction (the vectorized axes, row-major)
    num_regs: Expr  # elements per instruction
    dims: tuple[Expr, Expr, Expr]
    vector_ids: list
    addresses: dict[str, Expr] = field(default_factory=dict)  # filled per memory (tensor memory: lane, column)

    @property
    def describe(self) -> str:
        a = self.acc
        if a.direction is Direction.STORE:
            return f"store into {a.tensor.name}"
        return f"load from {a.tensor.name} into {a.consumer.name}"

    @property
    def tid(self) -> Expr:
        return linear_thread(self.dims)

    @property
    def block_threads(self) -> Expr:
        return product(list(self.dims))

    def thread_env(self, linear: Expr) -> dict[str, Expr]:
        """threadIdx.{x,y,z} of the thread with linear id `linear`."""
        return thread_env(linear, self.dims)

    def warp_base_env(self) -> dict[str, Expr]:
        env = self.thread_env(mul(floordiv(self.tid, 32), 32))
        for i in self.vector_ids:
            env[var_name(self.acc, i)] = const(0)
        return env

    def hint_exprs(self, env: dict[str, Expr] | None = None) -> list[Expr]:
        """The terms a query about this access sizes its bit-vectors by; with `env`, also the
        predicates of the thread `env` names."""
        out = list(self.addresses.values()) + [self.tid, self.block_threads] + [c.lhs for c in self.valid]
        if env:
            out += [substitute(e, env) for c in self.valid for e in (c.lhs, c.rhs)]
            out += [substitute(e, env) for pair in self.active for e in pair]
        return out


def var_name(acc: Access, i) -> str:
    """The index variable of the issuing tensor's loop ID `i` in an access model."""
    return f"{acc.consumer.name}.{i.name}"


def access_model(acc: Access, launch: dict[ParallelType, Expr], dims: tuple[Expr, Expr, Expr]) -> AccessModel:
    """The access as the kernel launched with `launch` (block `dims`) runs it: the issuing
    tensor's execution model, the accessed tensor's indices at each point, and the register
    (element of the vectorized axes) each point moves."""
    c = acc.consumer
    # a store: the points that store the tensor (for a reduction, after its loops)
    ex = (store_execution if acc.direction is Direction.STORE else tensor_execution)(c, launch)
    ranges: dict[str, Expr] = {**dict(zip(THREAD_VARS, dims)), **ex.ranges}  # unlaunched thread types: index 0
    active = [pair for cond in ex.conds_of(CondKind.THREAD_EXTENT, CondKind.SINGLE_WRITER) for pair in _bounds(cond)]
    vector_ids = [i for i in c.loop if i.parallel_type is ParallelType.Vectorize]
    idx_m = ex.indices if acc.direction is Direction.STORE else ex.operand_indices(acc.input_index)
    reg = vector_index([ex.env[i.uid] for i in vector_ids], [i.extent_expr for i in vector_ids])
    num_regs = product([i.extent_expr for i in vector_ids])
    return AccessModel(acc, ranges, active, ex.conds_of(CondKind.HOLE), idx_m, reg, num_regs, dims, vector_ids)


def _bounds(cond: Cond) -> list[tuple[Expr, Expr]]:
    """A thread-extent or single-writer predicate as AccessModel.active's (index, bound) pairs,
    each `index < bound`: `i < e` itself; a single writer's `i == 0` as i < 1; `i == v` (a
    warp-specialized producer's first index, a grid reduction's last block) as i < v + 1 and
    v < i + 1 (no difference: the solver's unsigned bit-vectors hold no negative value)."""
    if cond.op == "<":
        return [(cond.lhs, cond.rhs)]
    if cond.rhs == const(0):
        return [(cond.lhs, const(1))]
    return [(cond.lhs, add(cond.rhs, const(1))), (cond.rhs, add(cond.lhs, const(1)))]


# -- tensor memory ------------------------------------------------------------------------------


def with_lanes_and_columns(m: AccessModel, allocations: dict[str, Allocation]) -> AccessModel:
    """m with addresses "lane" and "column": the accessed tensor's allocation offsets on its lane
    and column sides."""
    alloc = allocations[m.acc.tensor.name]
    m.addresses["lane"] = linear_offset(alloc.strides("lane"), m.indices)
    m.addresses["column"] = linear_offset(alloc.strides("column"), m.indices)
    return m


def tcgen05_accesses(fusion: Fusion) -> list[Access]:
    """Every tcgen05.ld / tcgen05.st a statement issues: the accesses to a tensor-memory tensor
    but a tcgen05.mma's accumulation (an MmaOp on a Blackwell macro writes its output by the
    tensor cores, where TCGEN05-ACCUMULATOR proves the cells, not by the threads' registers)."""
    return [a for a in accesses_to(fusion, MemoryType.Tensor)
            if not (a.direction is Direction.STORE and is_tcgen05_op(a.op))]


def tmem_access_models(fusion: Fusion, launch: dict[ParallelType, Expr], dims: tuple[Expr, Expr, Expr],
                       allocations: dict[str, Allocation]) -> list[AccessModel]:
    """Every tcgen05.ld / tcgen05.st access to a tensor-memory tensor, with its lane and column."""
    return [with_lanes_and_columns(access_model(a, launch, dims), allocations) for a in tcgen05_accesses(fusion)]


def packing(m: AccessModel) -> Packing:
    """How the accessed tensor's elements sit in 32-bit columns and registers."""
    return Packing(m.acc.tensor.dtype.bytes)


def registers(m: AccessModel) -> int | None:
    """The 32-bit registers each thread moves per instruction (its elements packed), None when
    the element count is symbolic or fills no whole number of registers."""
    return packing(m).registers(m.num_regs.value) if m.num_regs.is_const else None
