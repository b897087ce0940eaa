"""Swizzles: every XOR swizzle must permute its domain."""

from __future__ import annotations

from typing import Iterator

from ...model.expr import add, var, xor
from ...model.iterdomain import Swizzle
from ...model.tensor import TensorView
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome, when_clause
from ..registry import rule
from ..solver import Outcome


def _prove_bijective(ctx: VerifyContext, big_x, big_y):
    # Formal statement: forall x < X, y < Y: (x ^ y) < Y   (y -> x ^ y is injective for each x)
    x, y = var("x"), var("y")
    image = xor(x, y)
    q = ctx.query([image, big_x, big_y, add(x, y)], {"x": big_x, "y": big_y})
    return q.prove(q.lt(image, big_y), values={"x ^ y": image, "X": big_x, "Y": big_y}, smallest=add(x, y))


@rule("SWIZZLE-BIJECTIVITY", family="swizzle")
def swizzle_bijectivity(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every XOR swizzle (x, y) -> (x, x ^ y) is a bijection on its domain.

    What it checks:
        For a swizzle of IterDomains with extents X and Y: for every x < X, the map
        y -> x ^ y permutes [0, Y). Since y -> x ^ y is injective, that holds exactly
        when x ^ y < Y for all x < X, y < Y (Y a multiple of 2^bitlen(X-1)); the
        proof is over all sizes the assumptions admit, not a powers-of-two shortcut.
    Why the hardware needs it:
        A swizzle reorders where elements live. If two elements map to one place,
        one overwrites the other; if an element maps past the extent, it is written
        outside the buffer. Either way the kernel silently computes wrong results.
    Example:
        fusion, t0, t1, t2 = copy_chain("swizzle6", [6, 6])
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.swizzle(tp.SwizzleType.XOR, 0, 1)
    Fix:
        fusion, t0, t1, t2 = copy_chain("swizzle8", [8, 8])
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.swizzle(tp.SwizzleType.XOR, 0, 1)
    References:
        nvFuser csrc/swizzle.cpp (XOR swizzle); PTX ISA 5.5.7 (swizzling modes);
        docs/hardware.md#xor-swizzle-bijectivity
    """
    # Formal statement: for every XOR swizzle with X = extent(x_in), Y = extent(y_in):
    #   for all admitted sizes, x < X, y < Y: (x ^ y) < Y   (_prove_bijective)
    for tv in ctx.fusion.tensors:
        for t in tv.history:
            if not isinstance(t, Swizzle):
                continue
            big_x, big_y = t.x_in.extent_expr, t.y_in.extent_expr
            out = ctx.memo(("xor-bijective", big_x, big_y), lambda: _prove_bijective(ctx, big_x, big_y))
            where = dict(tensor=tv.name, ids=[t.x_in.name, t.y_in.name], location=t.x_out.origin)
            yield from report_outcome("SWIZZLE-BIJECTIVITY", out, f"that {t} is a bijection",
                                      lambda out: _not_bijective(ctx, tv, t, out, where), **where)


def _not_bijective(ctx: VerifyContext, tv: TensorView, t: Swizzle, out: Outcome, where: dict) -> Diagnostic:
    vx, vy, img = out.model["x"], out.model["y"], out.values["x ^ y"]
    ext_y = out.values["Y"]
    sizes = ctx.symbols_of(out.model)
    need = 1 << max(out.values["X"] - 1, 0).bit_length()
    return finding(
        "SWIZZLE-BIJECTIVITY",
        f"{t} in {tv.name} is not a bijection{when_clause(sizes)}: x = {vx}, y = {vy} maps to y' = {vx} ^ {vy} = "
        f"{img}, outside [0, {ext_y})",
        notes=[f"y -> x ^ y permutes [0, Y) for every x < X only when Y is a multiple of 2^bitlen(X-1) = {need}"],
        counterexample={**sizes, "x": vx, "y": vy, "x ^ y": img, "Y": ext_y},
        hint=f"make the y extent a multiple of {need} (for example split both swizzled axes to powers of two)",
        **where,
    )
