"""One TMA instruction as functions of the TMA consumer's loop indices, shared by the
verifier (which proves them) and the code generator (which issues them).

For a loop point of the consumer: the box origin (the coordinates cp.async.bulk.tensor
takes, innermost first), the element's position inside the tile, where the hardware puts
that element in shared memory (row-major tile, rows padded to the swizzle span, then the
swizzle XOR of the CUDA driver API's CU_TENSOR_MAP_SWIZZLE modes) and where the schedule's shared-memory allocation puts
it. The tile's loop variables (the Bulk IDs) are zero at the tile's first
element, so the same expressions with those variables zeroed describe the whole issue.
"""

from __future__ import annotations

from dataclasses import dataclass

from .allocation import Allocation
from .clipped_holes import filled
from ..model.expr import Expr, add, const, mul, product, substitute
from .indexing import (
    Bound, indices_from_logical, indices_from_loop, linear_offset, producer_logical, valid_item_bounds,
)
from ..model.iterdomain import IterDomain
from ..hw.tma import InferredTma, TmaInfo
from ..hw.tma_roles import RoleKind
from ..model.types import ParallelType
from ..hw.wgmma import SWIZZLE_OF_BYTES, hardware_swizzle


def hw_swizzle(address: Expr, swizzle_bytes: int) -> Expr:
    """P(A) = A ^ (((A >> 7) & (S/16 - 1)) << 4); its own inverse. S = 0: no swizzle. The
    descriptor's swizzle of hw/wgmma.py, by its span in bytes."""
    return hardware_swizzle(address, SWIZZLE_OF_BYTES[swizzle_bytes])


@dataclass(frozen=True)
class TmaIssue:
    info: TmaInfo
    consumer_idx: dict[int, Expr]  # uid -> index, every consumer ID
    smem_idx: dict[int, Expr]  # uid -> index, every ID of the shared tensor
    tile_vars: tuple[str, ...]  # the Bulk loop variables: zero at the tile's first element
    tile_coords: tuple[Expr, ...]  # innermost first, position inside the tile
    box_origin: tuple[Expr, ...]  # innermost first, global coordinates of the box
    hw_offset: Expr  # bytes from the tile start where TMA puts the element, before the swizzle
    smem_offset: Expr  # bytes from the buffer start where the schedule's allocation puts it
    row_pitch: Expr  # bytes per tile row in shared memory (the swizzle span when swizzled)
    footprint: Expr  # bytes one tile occupies in shared memory
    issue_bounds: tuple[Bound, ...]  # holes at the tile's first element: the copy is not issued there
    missing: tuple[str, ...]  # allocated IDs without an index (the layout is not a function of the loop)

    @property
    def swizzle_bytes(self) -> int:
        return self.info.swizzle_bytes

    @property
    def unswizzled(self) -> Expr:
        """The schedule's offset mapped back through the hardware swizzle (an involution)."""
        return hw_swizzle(self.smem_offset, self.swizzle_bytes)

    @property
    def tile_start(self) -> Expr:
        """Where this issue's tile starts, as the hardware sees it (tile variables zero)."""
        return self.at_tile_start(self.unswizzled)

    @property
    def dst_offset(self) -> Expr:
        """The shared-memory operand of the instruction, from the buffer start."""
        return self.tile_start

    def at_tile_start(self, e: Expr) -> Expr:
        return substitute(e, {v: const(0) for v in self.tile_vars})

    def inner_box_bytes(self) -> Expr:
        return mul(self.info.dims[0].box_expr, self.info.gmem.dtype.bytes)


def _flatten(ids: list[IterDomain], idx: dict[int, Expr]) -> Expr:
    e: Expr = const(0)
    for i in ids:
        e = add(mul(e, i.extent_expr), idx[i.uid])
    return e


def build_issue(tma: InferredTma, smem_alloc: Allocation, loop_env: dict[int, Expr] | None = None) -> TmaIssue:
    """The issue's functions; the TMA must be inferred (tma.info.ok). `loop_env`: the consumer's
    loop indices by uid (the code generator's loop variables); default: loop_var names."""
    info = tma.info
    consumer, smem = info.consumer, info.smem
    cidx = indices_from_loop(consumer, loop_env)
    sidx = cidx if smem is consumer else indices_from_logical(smem, producer_logical(tma.op, 0, cidx))
    ids = info.id_map()
    # A stride ID's loop issues one copy per phase of the element stride: not a tile variable.
    bulk = [cidx[i.uid] for i in consumer.loop if i.parallel_type is ParallelType.Bulk]
    tile_vars = tuple(e.value for e in bulk if e.op == "var")
    zero = {v: const(0) for v in tile_vars}
    tile_coords = tuple(_flatten([ids[n] for n in d.tile_ids], cidx) for d in info.dims)
    origin = tuple(substitute(_flatten([ids[n] for n in d.ids], cidx), zero) for d in info.dims)
    es = info.gmem.dtype.bytes
    tiles = [d.tile_expr for d in info.dims]
    pitch = const(info.swizzle_bytes) if info.swizzle_bytes else mul(tiles[0], es)
    row: Expr = const(0)
    for k in range(len(tiles) - 1, 0, -1):
        row = add(mul(row, tiles[k]), tile_coords[k])
    hw = add(mul(row, pitch), mul(tile_coords[0], es))
    strides_of = smem_alloc.strides()
    missing = tuple(a.id.label() for a in smem_alloc.allocated() if a.id.uid not in sidx)
    offset = mul(linear_offset({u: s for u, s in strides_of.items() if u in sidx}, sidx), es)
    if smem_alloc.stages > 1 and not missing:  # a circular buffer: the tile of the copy's iteration
        offset = add(offset, mul(smem_alloc.stage_offset(sidx), es))
    consumed = {u for u, r in (tma.inference.roles.items() if tma.inference else ()) if r.kind is not RoleKind.NONBULK}
    # one decision per copy: a hole is tested at the tile's first element (the hardware clips the rest);
    # a filled load is issued at its holes too, where the hardware writes zeros (execution/clipped_holes.py)
    bounds = () if consumer.name in filled(consumer.fusion) else tuple(
        Bound(b.id, substitute(b.value, zero), b.extent)
        for b in valid_item_bounds(consumer, cidx) if b.id.uid not in consumed)
    return TmaIssue(info, cidx, sidx, tile_vars, tile_coords, origin, hw, offset, pitch,
                    mul(product(tiles[1:]), pitch), bounds, missing)
