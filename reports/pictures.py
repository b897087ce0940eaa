"""Pictures of a schedule as SVG strings: the IterDomain graph, the shared-memory map by bank
and the tensor-memory map by warp (CuTe's print_svg / print_latex_tv conventions: one colour
per bank or per warp, the element in each cell). Pure functions; standard library only.
"""

from __future__ import annotations

import math
import zlib
from typing import Iterable
from xml.sax.saxutils import escape

from ..model.expr import try_int
from ..model.iterdomain import Merge, Split, Swizzle
from ..model.tensor import TensorView
from ..model.types import MemoryType
from .layouts import Layout, marked_cells, smem_layout, tmem_layout

BANKS, BANK_BYTES, ROW_BYTES = 32, 4, 128
ARROW = "url(#arrow)"  # placeholder in a picture's body for its own arrow marker
# Distinct warp colours (Tableau 10); a warp w takes WARP_COLOURS[w % 10].
WARP_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
# Scoped to svg.tileproof: an inline SVG's <style> applies to the whole HTML page around it.
STYLE = """
svg.tileproof text { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: 11px; fill: #222; }
svg.tileproof .axis { font-size: 10px; fill: #666; }
svg.tileproof .note { font-size: 11px; fill: #555; }
svg.tileproof .id rect { fill: #f4f6fb; stroke: #5b6b8c; }
svg.tileproof .id.highlight rect { fill: #fde2e1; stroke: #d62728; stroke-width: 2.5; }
svg.tileproof .id.highlight text { fill: #b0151a; font-weight: bold; }
svg.tileproof .op rect { fill: #fff8e6; stroke: #c99a2e; }
svg.tileproof .edge { stroke: #7a869a; fill: none; }
svg.tileproof .mirror { stroke: #aab; stroke-dasharray: 3 3; fill: none; }
svg.tileproof .marker { stroke: #b2008f; stroke-width: 2; stroke-dasharray: 5 3; }
svg.tileproof .marker-label { fill: #b2008f; font-size: 10px; }
svg.tileproof .cell, svg.tileproof .logical-cell { stroke: #ffffff; stroke-width: 0.5; }
svg.tileproof .cell-label { font-size: 9px; pointer-events: none; }
svg.tileproof .cex-mark { fill: none; stroke: #d00000; stroke-width: 2.5; pointer-events: none; }
svg.tileproof .cex-expected-mark { fill: none; stroke: #d00000; stroke-width: 1.5; stroke-dasharray: 3 2; pointer-events: none; }
svg.tileproof .unused { fill: #eeeeee; }
svg.tileproof .limit { stroke: #d00000; stroke-width: 2; }
svg.tileproof .grid-major { stroke: #333; stroke-width: 1.2; }
"""


def _svg(width: float, height: float, body: list[str], title: str) -> str:
    text = "".join(body)
    # ids are page-wide once inlined in HTML: the arrow marker's id is unique to this picture
    arrow = f"arrow-{zlib.crc32((title + text).encode()):08x}"
    defs = ""
    if ARROW in text:
        defs = (f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
                'markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#7a869a"/>'
                "</marker></defs>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="tileproof" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" role="img">'
            f"<title>{escape(title)}</title><style>{STYLE}</style>{defs}"
            + text.replace(ARROW, f"url(#{arrow})") + "</svg>")


def _text(x: float, y: float, text: str, cls: str = "", anchor: str = "start") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{attr}>{escape(text)}</text>'


def _text_width(lines: list[str]) -> float:
    """Pixels for the longest line at the pictures' 11 px monospace font."""
    return 6.7 * max(len(line) for line in lines) + 24


def _message_svg(title: str, lines: list[str]) -> str:
    """A picture that says why there is no picture (symbolic sizes, nothing to draw)."""
    body = [_text(8, 18 + 16 * k, line, "note") for k, line in enumerate([title] + lines)]
    return _svg(8 * max(len(line) for line in [title] + lines) + 24, 26 + 16 * len(lines) + 8, body, title)


# -- the IterDomain graph ----------------------------------------------------------------

def domain_graph_svg(tv: TensorView, highlight: Iterable[str] = ()) -> str:
    """Logical domain on top, transforms (split, merge, swizzle) as nodes below it, the loop
    domain at the bottom with the compute-at position, and the allocation domain when it
    differs from the loop domain; `highlight` names IterDomains (i7) or labels (TIDx{32})."""
    wanted = set(highlight)
    by_uid = {i.uid: i for i in tv.all_ids()}
    level: dict[int, int] = {i.uid: 0 for i in tv.logical}
    producer: dict[int, object] = {}
    for t in tv.history:
        depth = max(level[i.uid] for i in t.inputs) + 1
        for o in t.outputs:
            level[o.uid], producer[o.uid] = depth, t
    bottom = max(level.values(), default=0) + 1
    for i in tv.loop:  # loop IDs born of a transform sit in the loop row itself
        if i.uid in producer:
            level[i.uid] = bottom
    for t in tv.history:  # an allocation branch scheduled from loop IDs hangs below the loop row
        if any(level[i.uid] >= bottom for i in t.inputs):
            for o in t.outputs:
                level[o.uid] = max(level[i.uid] for i in t.inputs) + 1
    deepest = max(level.values(), default=0)
    slot = 7.2 * max((len(i.label()) for i in by_uid.values()), default=6) + 28
    row_height, box_h = 74, 24
    box_w, left = slot - 16, 100 + slot / 2  # room for the row names
    home: dict[int, float] = {i.uid: left + slot * k for k, i in enumerate(tv.logical)}
    loop_x = {i.uid: left + slot * k for k, i in enumerate(tv.loop)}
    for lvl in range(1, deepest + 1):
        if lvl == bottom:
            home.update({u: loop_x[u] for u in loop_x if u in producer})
            continue
        ids = [by_uid[u] for u, v in level.items() if v == lvl]
        desired = {i.uid: _desired_x(i, producer, home, slot) for i in ids}
        cursor = left - slot
        for i in sorted(ids, key=lambda i: desired[i.uid]):  # keep order, push right on overlap
            cursor = home[i.uid] = max(desired[i.uid], cursor + slot)
    home.update({u: loop_x[u] for u in loop_x if u in producer})

    def y_of(lvl: int) -> float:
        return 46 + row_height * lvl

    def box(cx: float, cy: float, i, dashed: bool = False) -> str:
        cls = "id highlight" if (i.name in wanted or i.label() in wanted) else "id"
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        return (f'<g class="{cls}"><title>{escape(i.name)}: {escape(i.label())}</title>'
                f'<rect x="{cx - box_w / 2:.1f}" y="{cy - box_h / 2:.1f}" width="{box_w:.1f}" height="{box_h}" '
                f'rx="4"{dash}/>' + _text(cx, cy + 4, i.label(), anchor="middle") + "</g>")

    body: list[str] = []
    for t in tv.history:  # transform nodes between their inputs and outputs
        # just below the centre of its inputs: outputs that drop to the loop row get long edges instead
        ox = sum(home[i.uid] for i in t.inputs) / len(t.inputs)
        oy = y_of(max(level[i.uid] for i in t.inputs)) + row_height / 2
        label = _transform_label(t)
        for i in t.inputs:
            body.append(f'<path class="edge" marker-end="{ARROW}" d="M {home[i.uid]:.1f} {y_of(level[i.uid]) + box_h / 2:.1f} '
                        f'L {ox:.1f} {oy - 9:.1f}"/>')
        for o in t.outputs:
            body.append(f'<path class="edge" marker-end="{ARROW}" d="M {ox:.1f} {oy + 9:.1f} L {home[o.uid]:.1f} '
                        f'{y_of(level[o.uid]) - box_h / 2:.1f}"/>')
        width = 7 * len(label) + 14
        body.append(f'<g class="op"><title>{escape(str(t))}</title><rect x="{ox - width / 2:.1f}" y="{oy - 9:.1f}" '
                    f'width="{width}" height="18" rx="9"/>' + _text(ox, oy + 4, label, anchor="middle") + "</g>")
    body += [box(home[u], y_of(lvl), by_uid[u]) for u, lvl in level.items()]
    for i in tv.loop:  # logical IDs that are also loop IDs: a dashed mirror in the loop row
        if i.uid not in producer:
            body.append(f'<path class="mirror" d="M {home[i.uid]:.1f} {y_of(0) + box_h / 2:.1f} '
                        f'L {loop_x[i.uid]:.1f} {y_of(bottom) - box_h / 2:.1f}"/>')
            body.append(box(loop_x[i.uid], y_of(bottom), i, dashed=True))
    allocation = tv.get_allocation_domain()
    separate = [i.uid for i in allocation] != [i.uid for i in tv.loop]
    body.append(_text(8, y_of(0) + 4, "logical", "axis"))
    body.append(_text(8, y_of(bottom) + 4, "loop" if separate else "loop = alloc.", "axis"))
    loop_xs = [loop_x[i.uid] for i in tv.loop]
    if tv.compute_at:
        body += _marker(loop_xs, tv.compute_at, y_of(bottom), slot, f"compute-at {tv.compute_at}")
    sep_row, sep_xs = bottom, loop_xs
    if separate:
        sep_row, sep_xs = deepest + 1, [left + slot * k for k in range(len(allocation))]
        body.append(_text(8, y_of(sep_row) + 4, "allocation", "axis"))
        body += [box(sep_xs[k], y_of(sep_row), i, dashed=True) for k, i in enumerate(allocation)]
    if tv.memory_type is MemoryType.Tensor:
        body += _marker(sep_xs, tv.tmem_dim_sep, y_of(sep_row), slot, "dim-sep: lanes | columns")
    width = max(list(home.values()) + sep_xs + loop_xs) + slot / 2 + 150
    title = f"{tv.name} ({tv.memory_type.value}, {tv.dtype.name}): IterDomain graph"
    return _svg(width, y_of(sep_row) + 46, [_text(8, 16, title)] + body, title)


def _desired_x(i, producer: dict, home: dict, slot: float) -> float:
    """Under the centre of the transform's inputs, outputs side by side in order."""
    t = producer[i.uid]
    centre = sum(home[p.uid] for p in t.inputs) / len(t.inputs)
    k = [o.uid for o in t.outputs].index(i.uid)
    return centre + (k - (len(t.outputs) - 1) / 2) * slot


def _transform_label(t) -> str:
    if isinstance(t, Split):
        return f"{'split' if t.inner_split else 'outer split'} {t.factor}"
    if isinstance(t, Merge):
        return "merge"
    if isinstance(t, Swizzle):
        return "xor swizzle"
    return type(t).__name__.lower()


def _marker(xs: list[float], position: int, y: float, slot: float, label: str) -> list[str]:
    """A vertical dashed line before `position` in a row of boxes at `xs`."""
    if not xs:
        return []
    mx = (xs[position - 1] + xs[position]) / 2 if 0 < position < len(xs) else (
        xs[0] - slot / 2 if position == 0 else xs[-1] + slot / 2)
    return [f'<line class="marker" x1="{mx:.1f}" y1="{y - 22:.1f}" x2="{mx:.1f}" y2="{y + 22:.1f}"/>',
            _text(mx + 4, y + 34, label, "marker-label")]


# -- memory maps -----------------------------------------------------------------------------

def bank_colour(bank: int) -> str:
    return f"hsl({bank * 330 // (BANKS - 1)}, 70%, 80%)"  # 330 degrees: banks 0 and 31 must differ


def warp_colour(warp: int) -> str:
    return WARP_COLOURS[warp % len(WARP_COLOURS)]


def _element(tv: TensorView, logical: tuple[int, ...]) -> str:
    return "(" + ",".join(map(str, logical)) + ")"


def _who(access) -> str:
    loops = ", ".join(f"{k} = {v}" for k, v in access.values.items() if "." in k and not k.startswith("threadIdx"))
    return f"thread {access.values['thread']} (warp {access.values['warp']})" + (f", {loops}" if loops else "")


def _marks(layout: Layout, diagnostic) -> tuple[set, set]:
    if diagnostic is None or not diagnostic.counterexample:
        return set(), set()
    return marked_cells(layout, diagnostic.counterexample, diagnostic.ids)


def smem_map_svg(tv: TensorView, *, diagnostic=None, max_elements: int = 4096) -> str:
    """The shared-memory allocation as rows of 32 four-byte words (128 bytes, one word per
    bank), each element drawn at its address in its bank's colour; beside it the logical
    view, each element coloured by the bank it lands in, where an XOR swizzle shows."""
    title = f"{tv.name} shared memory ({tv.dtype.name}): address map by bank"
    layout = smem_layout(tv, max_elements)
    if layout.error:
        return _message_svg(title, [f"no map: {layout.error}"])
    size = tv.dtype.bytes
    allocated = try_int(layout.allocation.num_elements_expr)
    shown = min(allocated if allocated is not None else max(layout.cells, default=0) + 1, max_elements)
    px = 11.0  # pixels per byte: a 4-byte word is 44 px wide, wide enough for "(31,31)"
    cell_h, left = 22, 64
    rows = max(1, math.ceil(max(shown, max(layout.cells, default=0) + 1) * size / ROW_BYTES))
    body = [_text(8, 16, title)]
    notes = [f"{allocated} elements allocated, {size} bytes each" if allocated is not None else "symbolic size"]
    notes += layout.notes
    body += [_text(8, 32 + 14 * k, note, "note") for k, note in enumerate(notes)]
    top = 52 + 14 * len(notes)
    body.append(f'<rect class="unused" x="{left}" y="{top}" width="{ROW_BYTES * px}" height="{rows * cell_h}"/>')
    for bank in range(BANKS):
        body.append(_text(left + (bank + 0.5) * BANK_BYTES * px, top - 4, str(bank), "axis", "middle"))
    for row in range(rows):
        body.append(_text(left - 6, top + row * cell_h + 15, str(row * ROW_BYTES), "axis", "end"))
    marked, expected = _marks(layout, diagnostic)
    overlays = []
    for offset, accesses in sorted(layout.cells.items()):
        address = offset * size
        bank = (address // BANK_BYTES) % BANKS
        cx = left + (address % ROW_BYTES) * px
        cy = top + (address // ROW_BYTES) * cell_h
        first = accesses[0]
        tip = (f"{tv.name}{_element(tv, first.logical)} at byte {address}, bank {bank}; {_who(first)}"
               + "".join(f"\nalso {tv.name}{_element(tv, a.logical)}: {_who(a)}" for a in accesses[1:4])
               + (f"\n... {len(accesses) - 4} more" if len(accesses) > 4 else ""))
        cls = "cell cex" if offset in marked else "cell"
        body.append(f'<rect class="{cls}" x="{cx:.1f}" y="{cy}" width="{size * px:.1f}" height="{cell_h}" '
                    f'fill="{bank_colour(bank)}"><title>{escape(tip)}</title></rect>')
        label = _element(tv, first.logical)
        if 6 * len(label) <= size * px:
            body.append(_text(cx + size * px / 2, cy + 15, label, "cell-label", "middle"))
        for group, cls in ((marked, "cex-mark"), (expected, "cex-expected-mark")):
            if offset in group:
                overlays.append(f'<rect class="{cls}" x="{cx:.1f}" y="{cy}" width="{size * px:.1f}" height="{cell_h}"/>')
    width = max(left + ROW_BYTES * px + 20, _text_width([title] + notes))
    # the logical view goes below the address map: side by side the page would need 2000 px
    logical_body, logical_w, height = _logical_view(tv, layout, left, top + rows * cell_h + 40)
    return _svg(max(width, left + logical_w), height, body + overlays + logical_body, title)


def _logical_view(tv: TensorView, layout: Layout, left: float, top: float) -> tuple[list[str], float, float]:
    """Logical rows (all but the last axis, flattened) by the last axis, each element in the colour
    of its bank: an unswizzled row-major tile shows bank stripes, an XOR swizzle a permutation.
    Returns the body, its width and the picture's height."""
    extents = [try_int(i.extent_expr) for i in tv.logical]
    if not extents or None in extents or math.prod(extents) > 4096:
        return [], 0, top - 24
    columns, rows = extents[-1], math.prod(extents[:-1])
    cell = max(4, min(18, 1400 // columns))
    size = tv.dtype.bytes
    body = [_text(left, top - 8, "logical view: each element in the colour of its bank", "note"),
            f'<rect class="unused" x="{left}" y="{top}" width="{columns * cell}" height="{rows * cell}"/>']
    for offset, accesses in layout.cells.items():
        bank = (offset * size // BANK_BYTES) % BANKS
        for a in accesses:
            flat = 0
            for value, extent in zip(a.logical, extents):
                flat = flat * extent + value
            r, c = divmod(flat, columns)
            x, y = left + c * cell, top + r * cell
            body.append(f'<rect class="logical-cell" x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{bank_colour(bank)}">'
                        f"<title>{escape(tv.name + _element(tv, a.logical))}: bank {bank}</title></rect>")
            if cell >= 16:
                body.append(_text(x + cell / 2, y + 12, str(bank), "cell-label", "middle"))
    return body, columns * cell + 20, top + rows * cell + 16


def tmem_map_svg(tv: TensorView, *, issuer: TensorView | None = None, diagnostic=None) -> str:
    """Tensor memory as 128 lanes (rows, in four 32-lane sub-partitions) by 32-bit columns
    (at most 64 drawn), each cell coloured by the warp that stores it (or that loads it,
    when `issuer` is the tensor a tmem load defines); the element is in each cell's tooltip."""
    who = "loaded by " + issuer.name if issuer is not None and issuer is not tv else "stored"
    title = f"{tv.name} tensor memory ({tv.dtype.name}): lanes x columns, coloured by the warp that accesses it ({who})"
    layout = tmem_layout(tv, issuer)
    if layout.error:
        return _message_svg(title, [f"no map: {layout.error}"])
    alloc = layout.allocation
    used_lanes = max((lane for lane, _ in layout.cells), default=-1) + 1
    used_columns = max((column for _, column in layout.cells), default=-1) + 1
    lanes = min(max(128, used_lanes), 256)
    columns = max(1, min(max(try_int(alloc.columns_expr) or 0, used_columns), 64))
    notes = [f"{alloc.lanes} lanes x {alloc.columns} columns used ({alloc.columns_allocated} allocated)"]
    notes += layout.notes
    cw, ch, left, top = max(12, min(48, 768 // columns)), 5, 96, 52 + 14 * len(notes)
    body = [_text(8, 16, title)] + [_text(8, 32 + 14 * k, note, "note") for k, note in enumerate(notes)]
    body.append(f'<rect class="unused" x="{left}" y="{top}" width="{columns * cw}" height="{lanes * ch}"/>')
    for column in range(0, columns, 1 if columns <= 16 else 8):
        body.append(_text(left + column * cw + cw / 2, top - 4, str(column), "axis", "middle"))
    marked, expected = _marks(layout, diagnostic)
    overlays, warps = [], set()
    for (lane, column), accesses in sorted(layout.cells.items()):
        first = accesses[0]
        warps.add(first.values["warp"])
        # short tooltips: a map has up to 128 x 64 of them
        tip = (f"lane {lane} col {column}: {tv.name}{_element(tv, first.logical)} thread {first.values['thread']} "
               f"warp {first.values['warp']}" + "".join(f"; {tv.name}{_element(tv, a.logical)}" for a in accesses[1:4]))
        cls = "cell cex" if (lane, column) in marked else "cell"
        x, y = left + column * cw, top + lane * ch
        body.append(f'<rect class="{cls}" x="{x}" y="{y}" width="{cw}" height="{ch}" '
                    f'fill="{warp_colour(first.values["warp"])}"><title>{escape(tip)}</title></rect>')
        for group, mark in ((marked, "cex-mark"), (expected, "cex-expected-mark")):
            if (lane, column) in group:
                overlays.append(f'<rect class="{mark}" x="{x - 1}" y="{y - 1}" width="{cw + 2}" height="{ch + 2}"/>')
    for lane in range(0, lanes + 1, 32):  # sub-partition borders; lane 128 is the end of tensor memory
        cls = "limit" if lane == 128 and lanes > 128 else "grid-major"
        body.append(f'<line class="{cls}" x1="{left - 4}" y1="{top + lane * ch}" x2="{left + columns * cw}" y2="{top + lane * ch}"/>')
        if lane < lanes:
            name = f"subpart. {lane // 32}" if lane < 128 else "past lane 128"
            body.append(_text(left - 6, top + lane * ch + 12, f"lane {lane}", "axis", "end"))
            body.append(_text(left - 6, top + lane * ch + 24, name, "axis", "end"))
    legend_x = left + columns * cw + 24
    body.append(_text(legend_x, top + 6, "warp (sub-partition w % 4)", "note"))
    for k, warp in enumerate(sorted(warps)[:32]):
        y = top + 14 + 16 * k
        body.append(f'<rect x="{legend_x}" y="{y}" width="12" height="12" fill="{warp_colour(warp)}"/>')
        body.append(_text(legend_x + 18, y + 10, f"warp {warp} ({warp % 4})"))
    width = max(legend_x + 210, _text_width([title] + notes))
    height = max(top + lanes * ch + 20, top + 30 + 16 * min(len(warps), 32))
    return _svg(width, height, body + overlays, title)


__all__ = ["bank_colour", "domain_graph_svg", "smem_map_svg", "tmem_map_svg", "warp_colour"]
