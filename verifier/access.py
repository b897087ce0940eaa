"""The index model of one access to an on-chip tensor (shared or tensor memory): for
every thread, loop point and register, the indices of the tensor's IterDomains it
touches, and whether it executes at all. Rule families turn the indices into
addresses (tensor-memory lane/column, shared-memory bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from ..model.expr import Expr, const, floordiv, mul, product, substitute
from ..execution.statements import Cond, CondKind, store_execution, tensor_execution
from ..hw.threads import linear_thread, thread_env
from ..execution.indexing import vector_index
from ..model.types import THREAD_TYPES, Direction, ParallelType
from .context import Access, VerifyContext

THREAD_VARS = tuple(p.cuda_name for p in THREAD_TYPES)


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
    addresses: dict[str, Expr] = field(default_factory=dict)  # filled by the rule family

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
        predicates of the thread `env` names (executes(q, m, env))."""
        out = list(self.addresses.values()) + [self.tid, self.block_threads] + [c.lhs for c in self.valid]
        if env:
            out += [substitute(e, env) for c in self.valid for e in (c.lhs, c.rhs)]
            out += [substitute(e, env) for pair in self.active for e in pair]
        return out


def var_name(acc: Access, i) -> str:
    return f"{acc.consumer.name}.{i.name}"


def build(ctx: VerifyContext, acc: Access) -> AccessModel:
    """The access as the kernel runs it: the issuing tensor's execution model
    (model/execution.py), the accessed tensor's indices at each point, and the
    register (element of the vectorized axes) each point moves."""
    c = acc.consumer
    dims = ctx.thread_dims
    # a store: the points that store the tensor (for a reduction, after its loops)
    ex = (store_execution if acc.direction is Direction.STORE else tensor_execution)(c, ctx.block_dims)
    ranges: dict[str, Expr] = {**dict(zip(THREAD_VARS, dims)), **ex.ranges}  # unlaunched thread types: index 0
    # a single writer's index 0 is `index < 1`
    active = [(cond.lhs, cond.rhs if cond.op == "<" else const(1))
              for cond in ex.conds_of(CondKind.THREAD_EXTENT, CondKind.SINGLE_WRITER)]
    vector_ids = [i for i in c.loop if i.parallel_type is ParallelType.Vectorize]
    idx_m = ex.indices if acc.direction is Direction.STORE else ex.operand_indices(acc.input_index)
    reg = vector_index([ex.env[i.uid] for i in vector_ids], [i.extent_expr for i in vector_ids])
    num_regs = product([i.extent_expr for i in vector_ids])
    return AccessModel(acc, ranges, active, ex.conds_of(CondKind.HOLE), idx_m, reg, num_regs, dims, vector_ids)


def active(q, m: AccessModel, env: dict[str, Expr] | None = None):
    """z3: the thread (after substituting env) takes part in the access (its TID/BID are in range)."""
    env = env or {}
    return _all(q, [q.lt(substitute(i, env), substitute(e, env)) for i, e in m.active])


def executes(q, m: AccessModel, env: dict[str, Expr] | None = None):
    """z3: the thread is active and the loop point is a valid item (not a hole)."""
    env = env or {}
    bounds = [q.lt(substitute(c.lhs, env), substitute(c.rhs, env)) for c in m.valid]
    return z3.And(active(q, m, env), _all(q, bounds))


def _all(q, conds):
    return z3.And(*conds) if conds else z3.BoolVal(True, q.ctx)
