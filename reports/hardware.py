"""What the hardware does beside what the schedule does, for the diagnostics that compare the
two: where TMA puts each tile element (TMA-TILE-CONTIGUITY, TMA-SWIZZLE-WIDTH,
TMA-SWIZZLE-LAYOUT), which lane and register the ldmatrix fragment gives each element
(LDSM-REGISTER-LAYOUT) and which banks a warp's lanes hit (SMEM-BANK-CONFLICT).

Computed from the scheduled fusion at the counterexample's point (its serial, block and
thread indices and sizes), with the functions the rules prove things about
(execution/tma_issue.py, hw/ldmatrix.py, the bank rule's phases), evaluated on concrete
values. Pure Python, no drawing (reports/comparisons.py draws these).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from ..execution.allocation import compute_allocation
from ..model.expr import add, try_int
from ..execution.indexing import loop_var, thread_dims
from ..hw.ldmatrix import WARP, WIDTHS, layout as ldsm_layout
from ..model.tensor import TensorView
from ..hw.tma import infer_tma, is_tma_op
from ..execution.tma_issue import build_issue, hw_swizzle
from ..model.types import LoadStoreOpType, OpKind, ParallelType
from ..verifier.analysis.bank_lanes import phase_lanes
from .layouts import POINT_BUDGET, THREAD_VARS, _Program, point_accesses, smem_layout

TMA_LAYOUT_CODES = ("TMA-TILE-CONTIGUITY", "TMA-SWIZZLE-WIDTH", "TMA-SWIZZLE-LAYOUT")
BANKS, WORD_BYTES = 32, 4
# counterexample keys of one word that are derived values, not indices or sizes (keys with a
# space, "other lane", "tile coordinate 0", "conflict degree", are derived values too)
DERIVED = ("lane", "element", "row", "column", "bank", "address", "thread", "warp")


def _pinned(counterexample: dict[str, Any]) -> dict[str, int]:
    """The counterexample's loop, thread and block indices and sizes: the point a picture draws."""
    return {k: v for k, v in counterexample.items() if isinstance(v, int) and k not in DERIVED and " " not in k}


# -- TMA: the tile as the schedule lays it out and as the hardware writes it ----------------------

@dataclass(frozen=True)
class TileElement:
    coords: tuple[int, ...]  # innermost first, as TMA counts them
    row: int  # the tile row (every coordinate but the innermost, row-major)
    schedule: int  # byte offset in the shared tensor where the schedule's allocation puts it
    hardware: int  # byte offset where the TMA writes (or reads) it


@dataclass
class TmaTile:
    smem: TensorView
    swizzle: int  # bytes, 0 when not swizzled
    element_bytes: int
    tile: tuple[int, ...]  # innermost first
    elements: list[TileElement]
    counterexample: TileElement | None
    notes: list[str] = field(default_factory=list)


def tma_tile(fusion, diagnostic) -> TmaTile | None:
    """The tile of the TMA into (or out of) the diagnostic's tensor at the counterexample's
    issue, every element with its schedule and hardware byte; None when not computable."""
    cex = diagnostic.counterexample
    if diagnostic.code not in TMA_LAYOUT_CODES or "expected address" not in cex:
        return None
    tmas = [infer_tma(op) for op in fusion.exprs if is_tma_op(op)]
    tiles = [tile for tma in tmas if tma.info.ok and tma.info.smem.display_name == diagnostic.tensor and tma.info.dims
             and (tile := _evaluate_tile(tma, cex)) is not None]
    # a load and a store of one tensor: the copy whose tile puts the counterexample's element where it says
    return next((t for t in tiles if _reproduces(t, cex)), tiles[0] if tiles else None)


def _reproduces(tile: TmaTile, cex: dict[str, Any]) -> bool:
    e = tile.counterexample
    return e is not None and e.schedule == cex.get("address") and e.hardware == cex.get("expected address")


def _evaluate_tile(tma, cex: dict[str, Any]) -> TmaTile | None:
    info = tma.info
    issue = build_issue(tma, compute_allocation(info.smem))
    if issue.missing:
        return None
    hardware = hw_swizzle(add(issue.tile_start, issue.hw_offset), info.swizzle_bytes)
    extents_of = {loop_var(info.consumer, i).value: i.extent_expr for i in info.consumer.loop}
    tiles = [d.tile_expr for d in info.dims]
    sizes = _Program([extents_of[v] for v in issue.tile_vars] + tiles)
    exprs = list(issue.tile_coords) + [issue.smem_offset, hardware]
    program = _Program(exprs)
    free = set().union(*(e.free_vars() for e in exprs + tiles + [extents_of[v] for v in issue.tile_vars]))
    env = {name: 0 for name in free}
    env.update(_pinned(cex))
    try:
        counts = sizes.run(env)
    except (ZeroDivisionError, KeyError):
        return None
    ranges, tile = counts[:len(issue.tile_vars)], tuple(counts[len(issue.tile_vars):])
    rank = len(tile)
    want = tuple(cex.get(f"tile coordinate {k}") for k in range(rank))
    elements, found, notes = [], None, []
    for count, point in enumerate(itertools.product(*(range(r) for r in ranges))):
        if count >= POINT_BUDGET:
            notes.append(f"only the first {POINT_BUDGET} tile points are drawn")
            break
        env.update(zip(issue.tile_vars, point))
        out = program.run(env)
        coords = tuple(out[:rank])
        if any(c >= t for c, t in zip(coords, tile)):
            continue  # past the tile: not moved by this copy
        row = 0
        for c, t in zip(reversed(coords[1:]), reversed(tile[1:])):
            row = row * t + c
        element = TileElement(coords, row, out[rank], out[rank + 1])
        elements.append(element)
        if coords == want:
            found = element
    if not elements:
        return None
    return TmaTile(info.smem, info.swizzle_bytes, info.gmem.dtype.bytes, tile, elements, found, notes)


# -- ldmatrix / stmatrix: the register fragment the schedule gives and the one the hardware has ----

@dataclass
class Fragment:
    regs: TensorView
    instruction: str  # ldmatrix / stmatrix
    warp: int
    schedule: dict[tuple[int, int], list[tuple[int, int]]]  # (row, column) -> [(lane, element)] the schedule puts there
    hardware: dict[tuple[int, int], list[tuple[int, int]]]  # (row, column) -> [(lane, element)] the hardware puts there
    marked: tuple[int, int] | None  # the counterexample's (lane, element)
    matrices: tuple[int, ...] = ()  # the counterexample's overlapping matrices
    notes: list[str] = field(default_factory=list)


def ldsm_fragment(fusion, diagnostic) -> Fragment | None:
    """The warp's register fragment at the counterexample's point: which (lane, element) holds
    each (row, column) of the register tensor, by the schedule and by the m8n8 fragment whose
    matrices start where the schedule's do (lane 0, element 2m; element m with 32-bit elements)."""
    if diagnostic.code != "LDSM-REGISTER-LAYOUT":
        return None
    op = next((o for o in fusion.exprs if o.kind is OpKind.LOAD_STORE and o.output.display_name == diagnostic.tensor
               and o.op_type in (LoadStoreOpType.LdMatrix, LoadStoreOpType.StMatrix)), None)
    if op is None:
        return None
    issuer = op.output
    regs = issuer if op.op_type is LoadStoreOpType.LdMatrix else op.inputs[0]
    if len(regs.logical) < 2 or regs.dtype.bytes not in WIDTHS:
        return None
    L = ldsm_layout(regs.dtype.bytes)  # 16-bit, or 32-bit elements (8 x 4 matrices)
    cex = diagnostic.counterexample
    dims = [try_int(d) for d in thread_dims(fusion)]
    if None in dims:
        return None
    threads = [cex.get(v, 0) for v in THREAD_VARS]
    warp = (threads[0] + threads[1] * dims[0] + threads[2] * dims[0] * dims[1]) // WARP
    vector = [i for i in issuer.loop if i.parallel_type is ParallelType.Vectorize]
    extents = [try_int(i.extent_expr) for i in vector]
    if None in extents:
        return None
    pinned = {k: v for k, v in _pinned(cex).items() if k not in THREAD_VARS
              and k not in {loop_var(issuer, i).value for i in vector}}
    layout = point_accesses(regs, issuer, pinned)
    if layout.error:
        return None
    held: dict[tuple[int, int], tuple[int, int]] = {}  # (lane, element) -> (row, column) by the schedule
    for thread, accesses in layout.cells.items():
        if thread // WARP != warp:
            continue
        for a in accesses:
            element = 0
            for i, extent in zip(vector, extents):
                element = element * extent + a.values[loop_var(issuer, i).value]
            held[(thread % WARP, element)] = a.logical[-2:]
    schedule: dict = {}
    for key, place in sorted(held.items()):
        schedule.setdefault(place, []).append(key)
    hardware: dict = {}
    for lane, element in sorted(held):
        matrix, row, column = L.fragment(lane, element)
        origin = held.get((0, L.first_element(matrix)))
        if origin is not None:
            hardware.setdefault((origin[0] + row, origin[1] + column), []).append((lane, element))
    marked = (cex["lane"], cex["element"]) if "lane" in cex and "element" in cex else None
    matrices = tuple(cex[k] for k in ("matrix a", "matrix b") if k in cex)
    name = "ldmatrix" if op.op_type is LoadStoreOpType.LdMatrix else "stmatrix"
    return Fragment(regs, name, warp, schedule, hardware, marked, matrices)


# -- SMEM-BANK-CONFLICT: the banks each lane of the warp hits ---------------------------------------

@dataclass
class LaneBanks:
    smem: TensorView
    issuer: TensorView
    warp: int
    phase: int  # lanes served together
    words: dict[int, list[int]]  # lane -> the 4-byte words it touches (word = byte address / 4)
    elements: dict[int, tuple[int, ...]]  # lane -> the first element it touches
    pair: tuple[int, int] | None  # the counterexample's two lanes
    notes: list[str] = field(default_factory=list)

    def colliding(self) -> dict[int, set[int]]:
        """lane -> the banks in which it collides: another lane of its phase touches a different
        word of the bank (the same word is a broadcast, no conflict)."""
        out: dict[int, set[int]] = {}
        for start in range(0, WARP, self.phase):
            lanes = [lane for lane in range(start, start + self.phase) if lane in self.words]
            for bank in range(BANKS):
                words = {w for lane in lanes for w in self.words[lane] if w % BANKS == bank}
                if len(words) > 1:
                    for lane in lanes:
                        if any(w % BANKS == bank for w in self.words[lane]):
                            out.setdefault(lane, set()).add(bank)
        return out

    def ways(self, start: int) -> tuple[int, int]:
        """(the most distinct words one bank serves in the phase of lanes from `start`, that bank)."""
        lanes = [lane for lane in range(start, start + self.phase) if lane in self.words]
        counts = [(len({w for lane in lanes for w in self.words[lane] if w % BANKS == bank}), bank)
                  for bank in range(BANKS)]
        return max(counts, key=lambda c: (c[0], -c[1]))


def lane_banks(fusion, diagnostic) -> LaneBanks | None:
    """Every lane of the counterexample's warp, at its loop point, with the words it touches."""
    cex = diagnostic.counterexample
    if diagnostic.code != "SMEM-BANK-CONFLICT" or "lane" not in cex:
        return None
    smem = next((t for t in fusion.tensors if t.display_name == diagnostic.tensor), None)
    issuer = next((t for t in fusion.tensors if [i.name for i in t.loop] == list(diagnostic.ids)), None)
    if smem is None or issuer is None:
        return None
    if issuer is not smem and smem not in (issuer.definition.inputs if issuer.definition else []):
        return None
    vector = {loop_var(issuer, i).value for i in issuer.loop if i.parallel_type is ParallelType.Vectorize}
    pinned = {k: v for k, v in _pinned(cex).items() if k not in THREAD_VARS and k not in vector}
    layout = smem_layout(smem, 1 << 30, issuer=issuer, pinned=pinned)
    if layout.error:
        return None
    size = smem.dtype.bytes
    by_thread: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    for offset, accesses in layout.cells.items():
        for a in accesses:
            by_thread.setdefault(a.values["thread"], []).append((offset * size, a.logical))
    lane, other = cex["lane"], cex.get("other lane")
    warps = sorted({t // WARP for t in by_thread})
    warp = next((w for w in warps if _touches(by_thread, w, lane, cex.get("byte address"))
                 and _touches(by_thread, w, other, cex.get("other byte address"))), warps[0] if warps else 0)
    words, elements = {}, {}
    width = 0
    for thread, touched in by_thread.items():
        if thread // WARP == warp:
            touched.sort()
            words[thread % WARP] = sorted({address // WORD_BYTES for address, _ in touched})
            elements[thread % WARP] = touched[0][1]
            width = max(width, len(touched) * size)
    notes = [f"{issuer.name if issuer is not smem else 'the store into ' + smem.name}, warp {warp}"
             + (f", at {', '.join(f'{k} = {v}' for k, v in pinned.items())}" if pinned else "")]
    return LaneBanks(smem, issuer, warp, phase_lanes(width), words, elements,
                     (lane, other) if other is not None else None, notes)


def _touches(by_thread, warp: int, lane, address) -> bool:
    if lane is None or address is None:
        return True
    return any(a == address for a, _ in by_thread.get(warp * WARP + lane, []))


__all__ = ["Fragment", "LaneBanks", "TMA_LAYOUT_CODES", "TileElement", "TmaTile", "ldsm_fragment", "lane_banks",
           "tma_tile"]
