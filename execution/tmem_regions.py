"""Tensor-memory allocation regions (nvFuser's TMemAlllocationInfo, csrc/device_lower/analysis/
tensor_memory.cpp computeTMemAlllocationInfo): the tensors of one `fusion.manage("tmem_regions",
[[tv2, tv6]])` list share one region, each at its own column offset, laid out one after another in
the order listed (a tensor's offset is the sum of the columns of those before it, unrounded); a
tensor-memory tensor in no list has a region of its own. A region's columns, the sum of its
tensors', are allocated rounded up to a power of two of at least 32 (tcgen05.alloc).

    tmem_regions(fusion)     every region, the listed ones first
    check_tmem_regions       ScheduleError for a listed tensor that is not in tensor memory (verify
                             calls it with the other structural checks)

TMEM-COLUMNS (verifier/rules/alloc.py) budgets the regions, verifier/analysis/tmem_holes.py keeps
each tensor's accesses inside its own columns of its region (`window`), and the code generator
places the regions (codegen/lower/tmem.py column_plan).

May import model/ and execution/allocation.py; no z3.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.errors import ScheduleError
from ..model.expr import Expr, add, const, try_int
from ..model.types import MemoryType
from .allocation import Allocation, compute_allocation
from .derive import per_fusion


@dataclass(frozen=True)
class TmemRegion:
    """One tcgen05.alloc region: its tensors' allocations in layout order."""

    allocations: tuple[Allocation, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.tensor.name for a in self.allocations)

    @property
    def shared(self) -> bool:
        """Whether more than one tensor lives in the region."""
        return len(self.allocations) > 1

    @property
    def columns_expr(self) -> Expr:
        """32-bit columns the region's tensors use together (before rounding)."""
        return add(*[a.columns_expr for a in self.allocations]) if self.shared else self.allocations[0].columns_expr

    @property
    def columns_allocated(self) -> int | None:
        """tcgen05.alloc's column count for the region: a power of two >= 32 (None when symbolic)."""
        c = try_int(self.columns_expr)
        return None if c is None else max(32, 1 << max(c - 1, 0).bit_length())

    def offset_expr(self, name: str) -> Expr:
        """The first column of tensor `name` inside the region: the columns of the tensors before it."""
        before = []
        for a in self.allocations:
            if a.tensor.name == name:
                return add(*before) if before else const(0)
            before.append(a.columns_expr)
        raise KeyError(name)

    def window(self, name: str) -> Expr:
        """The columns tensor `name` owns, from its offset: the whole rounded region when it is alone
        (what tcgen05.alloc gives it), else exactly its own columns (the next tensor starts there)."""
        a = next(a for a in self.allocations if a.tensor.name == name)
        if not self.shared:
            return const(a.columns_allocated) if a.columns_allocated is not None else a.columns_expr
        return a.columns_expr


@per_fusion
def tmem_regions(fusion) -> tuple[TmemRegion, ...]:
    tensors = [t for t in fusion.tensors if t.memory_type is MemoryType.Tensor and not t.is_fusion_input]
    check_tmem_regions(fusion)
    listed = {t.name for region in fusion.tmem_regions for t in region}
    regions = [TmemRegion(tuple(compute_allocation(t) for t in region)) for region in fusion.tmem_regions]
    regions += [TmemRegion((compute_allocation(t),)) for t in tensors if t.name not in listed]
    return tuple(regions)


def check_tmem_regions(fusion) -> None:
    """ScheduleError unless every tensor listed in fusion.manage("tmem_regions", ...) is in tensor
    memory (manage checks the rest when it is called; the memory type may be set after it)."""
    for region in fusion.tmem_regions:
        for t in region:
            if t.memory_type is not MemoryType.Tensor:
                raise ScheduleError(f"manage(\"tmem_regions\"): {t.name} is in {t.memory_type.value} memory, not tensor "
                                    f"memory (listed at {fusion.tmem_regions_origin}); list only tensor-memory tensors")


def region_of(fusion, name: str) -> TmemRegion:
    """The region tensor `name` lives in."""
    return next(r for r in tmem_regions(fusion) if name in r.names)


__all__ = ["TmemRegion", "check_tmem_regions", "region_of", "tmem_regions"]
