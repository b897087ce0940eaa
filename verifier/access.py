"""The index model of one access to an on-chip tensor (shared or tensor memory): for
every thread, loop point and register, the indices of the tensor's IterDomains it
touches, and whether it executes at all. Rule families turn the indices into
addresses (tensor-memory lane/column, shared-memory bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field

import z3

from ..model.expr import Expr, add, const, floordiv, mul, product, substitute, var
from ..model.indexing import (
    Bound, indices_from_logical, indices_from_loop, linear_thread, producer_logical, thread_env, valid_item_bounds,
)
from ..model.types import BLOCK_TYPES, THREAD_TYPES, ParallelType
from .context import Access, VerifyContext

THREAD_VARS = tuple(p.cuda_name for p in THREAD_TYPES)


@dataclass
class AccessModel:
    acc: Access
    ranges: dict[str, Expr]  # variable -> exclusive bound
    active: list[tuple[Expr, Expr]]  # (index, extent): the issuing tensor's TID / BID bounds
    valid: list[Bound]
    indices: dict[int, Expr]  # uid of each IterDomain of the accessed tensor -> its index
    reg: Expr  # element index within one instruction (the vectorized axes, row-major)
    num_regs: Expr  # elements per instruction
    dims: tuple[Expr, Expr, Expr]
    vector_ids: list
    addresses: dict[str, Expr] = field(default_factory=dict)  # filled by the rule family

    @property
    def describe(self) -> str:
        a = self.acc
        if a.kind == "store":
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

    def hint_exprs(self) -> list[Expr]:
        return list(self.addresses.values()) + [self.tid, self.block_threads] + [b.value for b in self.valid]


def var_name(acc: Access, i) -> str:
    return f"{acc.consumer.name}.{i.name}"


def build(ctx: VerifyContext, acc: Access) -> AccessModel:
    c = acc.consumer
    dims = ctx.thread_dims
    ranges: dict[str, Expr] = dict(zip(THREAD_VARS, dims))
    active: list[tuple[Expr, Expr]] = []
    vector_ids = []
    for i in c.loop:
        p = i.parallel_type
        if p in THREAD_TYPES:
            active.append((var(p.cuda_name), i.extent_expr))
        elif p in BLOCK_TYPES:
            ranges[p.cuda_name] = ctx.block_dims[p]
            active.append((var(p.cuda_name), i.extent_expr))
        else:
            ranges[var_name(acc, i)] = i.extent_expr
            if p is ParallelType.Vectorize:
                vector_ids.append(i)
    idx_c = indices_from_loop(c)
    if acc.kind == "store":
        idx_m = idx_c
    else:
        idx_m = indices_from_logical(acc.tensor, producer_logical(acc.op, acc.input_index, idx_c))
    reg: Expr = const(0)
    for i in vector_ids:
        reg = add(mul(reg, i.extent_expr), var(var_name(acc, i)))
    num_regs = product([i.extent_expr for i in vector_ids])
    return AccessModel(acc, ranges, active, valid_item_bounds(c, idx_c), idx_m, reg, num_regs, dims, vector_ids)


def active(q, m: AccessModel, env: dict[str, Expr] | None = None):
    """z3: the thread (after substituting env) takes part in the access (its TID/BID are in range)."""
    env = env or {}
    return _all(q, [q.lt(substitute(i, env), substitute(e, env)) for i, e in m.active])


def executes(q, m: AccessModel, env: dict[str, Expr] | None = None):
    """z3: the thread is active and the loop point is a valid item (not a hole)."""
    env = env or {}
    bounds = [q.lt(substitute(b.value, env), substitute(b.extent, env)) for b in m.valid]
    return z3.And(active(q, m, env), _all(q, bounds))


def _all(q, conds):
    return z3.And(*conds) if conds else z3.BoolVal(True, q.ctx)
