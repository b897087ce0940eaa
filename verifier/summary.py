"""TensorSummary: the schedule tree and allocation of each tensor, for the renderers."""

from __future__ import annotations

from ..model.types import MemoryType
from .context import VerifyContext
from .diagnostics import TensorSummary


def summarize(ctx: VerifyContext) -> list[TensorSummary]:
    out = []
    for t in ctx.fusion.tensors:
        alloc = ctx.allocations.get(t.name)
        table, size = [], {}
        if alloc is not None:
            table = [
                {"id": a.id.name, "label": a.id.label(), "allocated": a.allocated, "rule": a.rule,
                 "reason": a.reason, "side": a.side}
                for a in alloc.ids
            ]
            size = {"num_elements": str(alloc.num_elements), "bytes": str(alloc.bytes)}
            if t.memory_type is MemoryType.Tensor:
                size.update(lanes=str(alloc.lanes), columns=str(alloc.columns),
                            columns_allocated=str(alloc.columns_allocated))
        out.append(TensorSummary(
            name=t.name,
            memory=t.memory_type.value,
            dtype=t.dtype.name,
            definition=str(t.definition) if t.definition is not None else None,
            logical=[i.name for i in t.logical],
            loop=[i.name for i in t.loop],
            allocation=[i.name for i in t.get_allocation_domain()],
            compute_at=t.compute_at,
            transforms=[str(x) for x in t.history],
            tmem_dim_sep=t.tmem_dim_sep if t.memory_type is MemoryType.Tensor else None,
            allocation_table=table,
            allocation_size=size,
            id_labels={i.name: i.label() for i in t.all_ids()},
        ))
    return out
