"""Assumptions: the sizes a proof covers must exist, or every proof is vacuous."""

from __future__ import annotations

from typing import Iterator

import sympy

from ..analysis.assumptions import satisfiable, witness
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding
from ..registry import rule
from ..solver import MAX_EXTENT


def _conflict(ctx: VerifyContext, assumptions: list[sympy.Basic]) -> list[sympy.Basic]:
    """A minimal unsatisfiable subset (deletion: drop each assumption the conflict does not need)."""
    core = list(assumptions)
    for a in list(core):
        rest = [b for b in core if b is not a]
        if not satisfiable(ctx, rest):
            core = rest
    return core


@rule("ASSUMPTIONS-SATISFIABLE", family="assumptions")
def assumptions_satisfiable(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Some size satisfies every assumption and binding together.

    What it checks:
        That the fusion's assumptions, its `bind` values and the range every extent symbol
        gets (1 <= N <= 2^31 - 1) admit at least one size. When none does, it names a
        smallest set of them that conflict.
    Why the hardware needs it:
        Every other rule proves its claim for all sizes that satisfy the assumptions. With
        no such size, each claim holds vacuously: `N > 10` and `N < 5` would make any
        schedule "proved", including ones that fault on every real size.
    Example:
        fusion, t0, t1 = copy_chain("no_size_fits", [-1], copies=1)  # extent T0_0: any size
        fusion.assume("T0_0 > 10")
        fusion.assume("T0_0 < 5")
    Fix:
        fusion, t0, t1 = copy_chain("a_size_fits", [-1], copies=1)
        fusion.assume("T0_0 > 10")
    References:
        z3 satisfiability of the assumption set (the premise of every proof); symbolic
        extents range over 1 .. 2^31 - 1 (32-bit indexing, verifier/solver.py MAX_EXTENT)
    """
    # Formal statement: exists sizes s in [1, 2^31 - 1]^n (bound ones fixed) with A_1(s) and ... and A_k(s)
    assumptions = list(ctx.fusion.assumptions)
    if (not assumptions and not ctx.bind) or satisfiable(ctx, assumptions):
        return
    core = _conflict(ctx, assumptions)
    binds = [f"{k} = {v}" for k, v in ctx.bind.items()]
    names = [str(a) for a in core] or ["the range of the extent symbols"]
    conflict = " and ".join(names + (binds if binds else []))
    # a size meeting all but the last of the conflict, which it then violates (or the range's end)
    sizes = witness(ctx, core[:-1]) or {}
    notes = ["every proof holds only for sizes satisfying all assumptions; with none, each would hold vacuously",
             f"extent symbols range over 1 .. {MAX_EXTENT} (2^31 - 1)"]
    if sizes:
        notes.append(f"{', '.join(f'{k} = {v}' for k, v in sizes.items())} satisfies "
                     + (" and ".join(names[:-1]) or "the ranges") + f" but not {names[-1]}")
    # placed at the assumption the witness violates; the others of the conflict are labels
    placed = [_stated_at(ctx, a) for a in core]
    yield finding(
        "ASSUMPTIONS-SATISFIABLE",
        f"no size satisfies {conflict}",
        location=placed[-1] if placed else ctx.fusion.origin,
        labels=[f"{name} assumed at {where}" for name, where in zip(names[:-1], placed[:-1])],
        notes=notes,
        hint=("drop or correct one of these assumptions" if len(core) > 1 else
              f"correct the assumption {names[0]}" if core else "check the bound sizes") +
             (f"; the bindings {', '.join(binds)} take part" if binds else ""),
        counterexample={**sizes, "violates": names[-1]},
    )


def _stated_at(ctx: VerifyContext, assumption: sympy.Basic) -> str | None:
    """The user's file:line of the fusion.assume call that stated `assumption`."""
    k = next(k for k, a in enumerate(ctx.fusion.assumptions) if a is assumption)
    return ctx.fusion.assumption_origins[k]
