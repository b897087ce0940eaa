"""Extent unification: the axes an op maps onto one another have one extent, as in nvFuser.

nvFuser's ops map the axes they combine without comparing extents: `add(T0[i0], T1[i2])` of two
makeContigTensor(1) maps i0 and i2 (the exact map of the IterDomain graph, csrc/id_model), and the
lowering replaces every extent of an exact-mapped group by one representative
(csrc/device_lower/pass/replace_size.cpp, replaceSymbolicSizes): a constant where the group has
one, else the extent of the fusion input's IterDomain with the smallest name; the launch then
refuses inputs whose sizes disagree. tileproof unifies at the op: the symbol that goes is replaced
by the extent that stays in every IterDomain, split factor and assumption of the fusion, and the
fusion remembers it (Fusion.extent_aliases) so that a later assumption or shape naming it means
the extent that stays. The proofs hold for the unified size, and the launch checks that the
inputs agree (codegen/runtime/binding.py: both axes read one extent). Two different constants
cannot be one extent: a ScheduleError at the op.

May import: model/ only.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import sympy

from .errors import ScheduleError
from .expr import Expr, substitute, to_sympy
from .iterdomain import IterDomain, Split
from .scalar_value import ScalarValue

if TYPE_CHECKING:
    from .fusion import Fusion  # type hints only: fusion.py imports this module (ops unify extents)


def unify_extents(fusion: "Fusion", func: str, x: IterDomain, y: IterDomain, x_at: str, y_at: str) -> None:
    """Make the extents of `x` and `y`, two non-broadcast axes of `fusion` that the op `func` maps
    onto one another, one extent. `x_at` / `y_at` say where they are ("T0 axis 0") for the error:
    two different constants, or extents that are neither a constant nor an extent symbol."""
    a, b = x.extent_expr, y.extent_expr
    if a == b:
        return
    choice = _representative(fusion, a, b)
    if choice is None:
        raise ScheduleError(f"{func}: extents {x.extent} and {y.extent} differ ({x_at} has {x.extent}, {y_at} has "
                            f"{y.extent}); the axes it maps must have one size, or one of them be a broadcast axis "
                            f"(extent 1, tp.broadcast)")
    gone, stays = choice
    replace_symbol(fusion, func, gone, stays)


def _representative(fusion: "Fusion", a: Expr, b: Expr) -> tuple[str, Expr] | None:
    """(the symbol that goes, the extent that stays), nvFuser's choice: a constant over a symbol,
    else the symbol made first (an input's, with the smallest name); None when neither is an
    extent symbol (two constants, or derived extents)."""
    order = list(fusion.symbols)

    def symbol(e: Expr) -> str | None:
        return e.value if e.op == "var" and e.value in fusion.symbols else None  # type: ignore[return-value]

    sa, sb = symbol(a), symbol(b)
    if sa is not None and sb is not None:
        return (sb, a) if order.index(sa) < order.index(sb) else (sa, b)
    if sa is not None and b.op == "const":
        return sa, b
    if sb is not None and a.op == "const":
        return sb, a
    return None


def replace_symbol(fusion: "Fusion", func: str, name: str, value: Expr) -> None:
    """Replace the extent symbol `name` by `value` everywhere in `fusion`: IterDomain extents,
    split factors, assumptions; `name` leaves the fusion's symbols and becomes an alias."""
    env = {name: value}
    ids: dict[int, IterDomain] = {}
    for tv in fusion.tensors:
        for i in tv.all_ids() + list(tv.loop) + list(tv.allocation or []):
            ids[i.uid] = i
        for t in tv.history:
            if isinstance(t, Split) and name in t.factor.free_vars():
                # renaming a symbol across the fusion: the one change made to a recorded transform
                object.__setattr__(t, "factor", substitute(t.factor, env))
    for i in ids.values():
        if name in i.extent_expr.free_vars():
            i.extent_expr = substitute(i.extent_expr, env)
    for op in fusion.exprs:  # an extent an op takes as a value (tp.div(t, "N"))
        scalar = op.scalar
        if scalar is not None and isinstance(scalar.value, Expr) and name in scalar.value.free_vars():
            op.scalar = dataclasses.replace(scalar, value=substitute(scalar.value, env))
        elif scalar is not None and isinstance(scalar.value, ScalarValue) and name in scalar.value.free_vars():
            renamed = scalar.value.substitute(env)
            op.scalar = dataclasses.replace(scalar, value=renamed, given=str(renamed))
    _replace_in_assumptions(fusion, func, name, value)
    del fusion.symbols[name]
    for alias, target in list(fusion.extent_aliases.items()):
        fusion.extent_aliases[alias] = substitute(target, env)
    fusion.extent_aliases[name] = value


def _replace_in_assumptions(fusion: "Fusion", func: str, name: str, value: Expr) -> None:
    old, new = fusion.symbols[name], to_sympy(value)
    kept, origins = [], []
    for a, origin in zip(fusion.assumptions, fusion.assumption_origins):
        b = a.subs(old, new)
        if b is sympy.false:
            raise ScheduleError(f"{func}: the op makes {name} and {value} one extent (the axes it maps), which makes "
                                f"the assumption {a} false")
        if b is not sympy.true:
            kept.append(b)
            origins.append(origin)
    fusion.assumptions[:] = kept
    fusion.assumption_origins[:] = origins
