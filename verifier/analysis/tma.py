"""The TMA each TMA op of the fusion implies (model/tma.py infer_tma), inferred once per
fusion and shared by the TMA rule families (verifier/rules/tma.py, tma_consumer.py, tma_smem.py),
and whether any size can give it a descriptor."""

from __future__ import annotations

from dataclasses import dataclass

from ...model.expr import mul, try_int
from ...model.tma import MAX_BOX, InferredTma, TmaInfo, infer_tma, is_tma_op
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
