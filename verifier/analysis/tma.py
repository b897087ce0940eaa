"""The TMA each TMA op of the fusion implies (model/tma.py infer_tma), inferred once per
fusion and shared by the TMA rule families (verifier/rules/tma.py, tma_consumer.py, tma_smem.py)."""

from __future__ import annotations

from ...model.expr import try_int
from ...model.tma import InferredTma, infer_tma, is_tma_op
from ..context import VerifyContext


def inferred_tmas(ctx: VerifyContext) -> list[InferredTma]:
    return ctx.memo(("tma-infos",), lambda: [infer_tma(op) for op in ctx.fusion.exprs if is_tma_op(op)])


def extents_of(ids) -> dict[str, int]:
    """The concrete extents of IDs, each named as the schedule tree shows it (`Bulk{64} extent`):
    the numbers behind a structural finding."""
    return {f"{i.label()} extent": v for i in ids if (v := try_int(i.extent_expr)) is not None} or {"ids": len(ids)}
