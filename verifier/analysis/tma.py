"""The TMA each TMA op of the fusion implies (model/tma.py infer_tma), inferred once per
fusion and shared by the TMA rule families (verifier/rules/tma.py, tma_consumer.py, tma_smem.py),
and whether any size can give it a descriptor; the split that made a TMA dimension's box, which
the hints of TMA-INNER-BYTES and TMA-COORD-ALIGN name."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ...model.expr import mul, to_sympy, try_int
from ...hw.tma import MAX_BOX, InferredTma, TmaDim, TmaInfo, infer_tma, is_tma_op
from ...model.iterdomain import Split
from ..context import VerifyContext

MAX_RANK, STRIDE_ALIGN = 5, 16  # cuTensorMapEncodeTiled: tensorRank 1..5, boxDim[0] bytes % 16 == 0
# the rules of tma_smem.py about where a TMA's tile lies in shared memory (its box's placement)
PLACEMENT_RULES = ("TMA-TILE-CONTIGUITY", "TMA-WHOLE-TILES", "TMA-SWIZZLE-WIDTH", "TMA-SWIZZLE-LAYOUT")


def inferred_tmas(ctx: VerifyContext) -> list[InferredTma]:
    return ctx.memo(("tma-infos",), lambda: [infer_tma(op) for op in ctx.fusion.exprs if is_tma_op(op)])


@dataclass(frozen=True)
class Unencodable:
    """Why no admitted size gives a TMA a descriptor: the rule that reports it, and the TMA
    dimension (innermost first) it reports it on."""

    code: str
    dim: int | None = None

    def note(self) -> str:
        """What the report says about the rules this leaves out (their root cause)."""
        return (f"no size gives this TMA a descriptor, so where its tile would lie in shared memory is not "
                f"checked ({', '.join(PLACEMENT_RULES)}) until this is fixed")


def unencodable(ctx: VerifyContext, info: TmaInfo) -> Unencodable | None:
    """The descriptor check that fails whatever the sizes (cuTensorMapEncodeTiled refuses the TMA
    at every admitted size: a rank over 5, a box over 256 or an inner box that is no multiple of
    16 bytes, each a constant once the bindings are in), when this verify runs its rule (which
    reports it); None when some size may be encodable, or nothing would report that none is."""
    never = _never_encodable(ctx, info)
    return never if never is not None and ctx.running is not None and never.code in ctx.running else None


def _never_encodable(ctx: VerifyContext, info: TmaInfo) -> Unencodable | None:
    if info.rank > MAX_RANK:
        return Unencodable("TMA-RANK")
    for k, d in enumerate(info.dims):
        box = ctx.concrete(d.box_expr)
        if box is not None and box > MAX_BOX:
            return Unencodable("TMA-BOX-SIZE", k)
    inner = ctx.concrete(mul(info.dims[0].box_expr, info.gmem.dtype.bytes)) if info.dims else None
    if inner is not None and inner % STRIDE_ALIGN:
        return Unencodable("TMA-INNER-BYTES", 0)
    return None


def extents_of(ids) -> dict[str, int]:
    """The concrete extents of IDs, each named as the schedule tree shows it (`Bulk{64} extent`):
    the numbers behind a structural finding."""
    return {f"{i.label()} extent": v for i in ids if (v := try_int(i.extent_expr)) is not None} or {"ids": len(ids)}


def split_making(info: TmaInfo, d: TmaDim, fits: Callable[[Split], bool]) -> Split | None:
    """The split among the consumer's transforms that made this dimension's box (for hints):
    the first of them `fits` accepts."""
    ids = info.id_map()
    for n in d.box_ids + d.tile_ids + d.ids:
        t = ids[n].definition if n in ids else None
        if isinstance(t, Split) and fits(t):
            return t
        for i in ids.values():
            t = i.definition
            if isinstance(t, Split) and t.in_.name == n and fits(t):
                return t
    return None


def inner_bytes_hint(info: TmaInfo) -> str:
    """How to make the innermost box a multiple of 16 bytes, naming the split that makes it."""
    d, elem = info.dims[0], info.gmem.dtype.bytes
    need = STRIDE_ALIGN // math.gcd(STRIDE_ALIGN, elem)
    t = split_making(info, d, lambda t: t.inner_split and t.inner.name in d.box_ids + d.tile_ids)
    factor = to_sympy(t.factor) if t is not None else None
    if factor is None or not factor.is_Integer:
        return f"make the innermost box a multiple of {need} elements of {info.gmem.dtype} (16 bytes)"
    return (f"split {t.in_.label()} by {math.lcm(int(factor), need)} in place of {int(factor)}: its inner output "
            f"{t.inner.label()} is the innermost box, which must be a multiple of {need} elements of "
            f"{info.gmem.dtype} (16 bytes)")
