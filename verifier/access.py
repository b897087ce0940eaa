"""The index model of one access to an on-chip tensor (shared or tensor memory), in z3: the
model itself is execution/accesses.py (the same one the code generator lowers tcgen05 from);
here `build` makes it for a verify's launch, and `active` / `executes` state in a query which
threads and points take part. Rule families turn the indices into addresses (tensor-memory
lane/column, shared-memory bytes)."""

from __future__ import annotations

import z3

from ..model.expr import Expr, substitute
from ..execution.accesses import THREAD_VARS, Access, AccessModel, access_model, var_name
from .context import VerifyContext

__all__ = ["THREAD_VARS", "AccessModel", "active", "build", "executes", "var_name"]


def build(ctx: VerifyContext, acc: Access) -> AccessModel:
    """The access as the kernel runs it (execution/accesses.py access_model) in ctx's launch."""
    return access_model(acc, ctx.block_dims, ctx.thread_dims)


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
