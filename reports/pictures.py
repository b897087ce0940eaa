"""Pictures of a schedule: the IterDomain graph, the shared-memory map by bank and the
tensor-memory map by warp (CuTe's print_svg / print_latex_tv conventions: one colour per bank
or per warp, the element in each cell). Each is a Picture (reports/svg.py): the drawing every
view shares, and the marks one diagnostic adds (highlighted IterDomains, counterexample
cells). Large tensors are drawn as a bounded window, with a note of what is left out.
Pure functions; standard library only.
"""

from __future__ import annotations

import math
from typing import Iterable

from ..model.expr import try_int
from ..model.iterdomain import Merge, Split, Swizzle
from ..model.tensor import TensorView
from ..model.types import MemoryType
from .layouts import Layout, marked_cells, smem_layout, tmem_layout
from .svg import (ARROW, BANKS, Picture, bank_colour, label, marks, message_picture, n, rect, rectangles, text_width,
                  warp_colour)

BANK_BYTES, ROW_BYTES = 4, 128
LINES_DRAWN = 8  # 128-byte lines of a shared-memory map: one period of the 128-byte swizzle
MARKED_BLOCKS = 3  # at most this many more 8-line blocks around a counterexample's cells
LOGICAL_CELLS = 512  # elements of the logical view drawn at most (whole rows, at most 16)
LOGICAL_COLUMNS = 128


# -- the IterDomain graph ----------------------------------------------------------------

def domain_graph(tv: TensorView, highlight: Iterable[str] = ()) -> Picture:
    """Logical domain on top, transforms (split, merge, swizzle) as nodes below it, the loop
    domain at the bottom with the compute-at position, and the allocation domain when it
    differs from the loop domain; `highlight` names IterDomains (i7) or labels (TIDx{32}),
    drawn over the graph (the overlay)."""
    wanted = set(highlight)
    by_uid = {i.uid: i for i in tv.all_ids()}
    level: dict[int, int] = {i.uid: 0 for i in tv.root}  # the logical domain, but an rfactor's partial's root
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
    home: dict[int, float] = {i.uid: left + slot * k for k, i in enumerate(tv.root)}
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
        return 24 + row_height * lvl

    overlay: list[str] = []
    rects: list[str] = []  # the ID boxes, drawn as one group, and their labels as another
    texts: list[str] = []

    def box(cx: float, cy: float, i, dashed: bool = False) -> None:
        dash = ' stroke-dasharray="4 3"' if dashed else ""
        shape = (f'<rect x="{n(cx - box_w / 2)}" y="{n(cy - box_h / 2)}" width="{n(box_w)}" height="{box_h}" '
                 f'rx="4"{dash}/>')
        # a parallel ID's label (TIDx{32}) lacks its name, which diagnostics use: a tooltip gives it
        named = i.label().startswith(i.name + "{")
        rects.append(shape if named else f"{shape[:-2]}><title>{_esc(i.name)}</title></rect>")
        texts.append(label(cx, cy + 4, i.label()))
        if i.name in wanted or i.label() in wanted:
            overlay.append(f'<g class="id highlight"><title>{_esc(i.name)}: {_esc(i.label())}</title>{shape}'
                           + label(cx, cy + 4, i.label(), anchor="middle") + "</g>")

    body: list[str] = []
    edges: list[str] = []
    for t in tv.history:  # transform nodes between their inputs and outputs
        # just below the centre of its inputs: outputs that drop to the loop row get long edges instead
        ox = sum(home[i.uid] for i in t.inputs) / len(t.inputs)
        oy = y_of(max(level[i.uid] for i in t.inputs)) + row_height / 2
        text = _transform_label(t)
        edges += [f'<path d="M{n(home[i.uid])} {n(y_of(level[i.uid]) + box_h / 2)}L{n(ox)} {n(oy - 9)}"/>'
                  for i in t.inputs]
        edges += [f'<path d="M{n(ox)} {n(oy + 9)}L{n(home[o.uid])} {n(y_of(level[o.uid]) - box_h / 2)}"/>'
                  for o in t.outputs]
        width = 7 * len(text) + 14
        body.append(f'<g class="op"><title>{_esc(str(t))}</title><rect x="{n(ox - width / 2)}" y="{n(oy - 9)}" '
                    f'width="{width}" height="18" rx="9"/>' + label(ox, oy + 4, text, anchor="middle") + "</g>")
    body.insert(0, f'<g class="edge" marker-end="{ARROW}">' + "".join(edges) + "</g>")
    for u, lvl in level.items():
        box(home[u], y_of(lvl), by_uid[u])
    for i in tv.loop:  # logical IDs that are also loop IDs: a dashed mirror in the loop row
        if i.uid not in producer:
            body.append(f'<path class="mirror" d="M{n(home[i.uid])} {n(y_of(0) + box_h / 2)}'
                        f'L{n(loop_x[i.uid])} {n(y_of(bottom) - box_h / 2)}"/>')
            box(loop_x[i.uid], y_of(bottom), i, dashed=True)
    allocation = tv.get_allocation_domain()
    separate = [i.uid for i in allocation] != [i.uid for i in tv.loop]
    body.append(label(8, y_of(0) + 4, "logical" if tv.root == tv.logical else "root", "axis"))
    body.append(label(8, y_of(bottom) + 4, "loop" if separate else "loop = alloc.", "axis"))
    loop_xs = [loop_x[i.uid] for i in tv.loop]
    if tv.compute_at:
        body += _marker(loop_xs, tv.compute_at, y_of(bottom), slot, f"compute-at {tv.compute_at}")
    sep_row, sep_xs = bottom, loop_xs
    if separate:
        sep_row, sep_xs = deepest + 1, [left + slot * k for k in range(len(allocation))]
        body.append(label(8, y_of(sep_row) + 4, "allocation", "axis"))
        for k, i in enumerate(allocation):
            box(sep_xs[k], y_of(sep_row), i, dashed=True)
    if tv.memory_type is MemoryType.Tensor:
        body += _marker(sep_xs, tv.tmem_dim_sep, y_of(sep_row), slot, "dim-sep: lanes | columns")
    body.append('<g class="id">' + "".join(rects) + '</g><g text-anchor="middle">' + "".join(texts) + "</g>")
    width = max(list(home.values()) + sep_xs + loop_xs) + slot / 2 + 150
    title = f"{tv.name} ({tv.memory_type.value}, {tv.dtype.name}): IterDomain graph"
    return Picture(title, width, y_of(sep_row) + 46, "".join(body), "".join(overlay))


def domain_graph_svg(tv: TensorView, highlight: Iterable[str] = ()) -> str:
    return domain_graph(tv, highlight).svg()


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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


def _marker(xs: list[float], position: int, y: float, slot: float, text: str) -> list[str]:
    """A vertical dashed line before `position` in a row of boxes at `xs`."""
    if not xs:
        return []
    mx = (xs[position - 1] + xs[position]) / 2 if 0 < position < len(xs) else (
        xs[0] - slot / 2 if position == 0 else xs[-1] + slot / 2)
    return [f'<line class="marker" x1="{n(mx)}" y1="{n(y - 22)}" x2="{n(mx)}" y2="{n(y + 22)}"/>',
            label(mx + 4, y + 34, text, "marker-label")]


# -- memory maps -----------------------------------------------------------------------------

def element_text(logical: tuple[int, ...]) -> str:
    return "(" + ",".join(map(str, logical)) + ")"


def _marks(layout: Layout, diagnostic) -> tuple[set, set]:
    if diagnostic is None or not diagnostic.counterexample:
        return set(), set()
    return marked_cells(layout, diagnostic.counterexample, diagnostic.ids)


def line_window(wanted: Iterable[int], total: int, first: int = LINES_DRAWN) -> list[int]:
    """The lines a map draws: the first `first` of `total`, and the 8-line blocks around the
    wanted lines (a counterexample's cells) further down, the first MARKED_BLOCKS of them."""
    lines = set(range(min(first, total)))
    blocks = sorted({line - line % LINES_DRAWN for line in wanted if line >= first})
    for start in blocks[:MARKED_BLOCKS]:  # the first few: a warp's accesses may touch every line
        lines.update(range(start, min(start + LINES_DRAWN, max(total, start + 1))))
    return sorted(lines)


Gap = tuple[float, int, int]  # (y, first line, last line) of lines left out between drawn ones


def line_rows(lines: list[int], top: float, row_h: float, gap_h: float = 14) -> tuple[dict[int, float], list[Gap], float]:
    """y of each drawn line, the gaps between runs of lines and the bottom."""
    ys, gaps, y = {}, [], top
    for k, line in enumerate(lines):
        if k and line != lines[k - 1] + 1:
            gaps.append((y, lines[k - 1] + 1, line - 1))
            y += gap_h
        ys[line] = y
        y += row_h
    return ys, gaps, y


def gap_bands(gaps: list[Gap], left: float, width: float) -> list[str]:
    """A band saying which bytes are not drawn, for each gap between drawn lines."""
    return [rect(left, y, width, 14, "gap") + label(left + 4, y + 11, f"bytes {first * ROW_BYTES}-"
                                                    f"{(last + 1) * ROW_BYTES - 1} not drawn", "axis")
            for y, first, last in gaps]


def smem_map(tv: TensorView, *, diagnostic=None, max_elements: int = 4096, layout: Layout | None = None) -> Picture:
    """The shared-memory allocation as lines of 32 four-byte words (128 bytes, one word per
    bank, each bank in its colour), the unused bytes grey, each run of consecutive elements of
    one logical row outlined and labelled with its logical indices; below it the logical view,
    each element in the colour of the bank it lands in, where an XOR swizzle shows. The first
    LINES_DRAWN lines are drawn, and the lines of the counterexample's cells (marked over it)."""
    title = f"{tv.name} shared memory ({tv.dtype.name}): address map by bank"
    layout = layout or smem_layout(tv, max_elements)  # a page computes it once for all views
    if layout.error:
        return message_picture(title, [f"no map: {layout.error}"])
    size = tv.dtype.bytes
    allocated = try_int(layout.allocation.num_elements_expr)
    used = max(layout.cells, default=0) + 1
    total = max(1, math.ceil(max(allocated or 0, used) * size / ROW_BYTES))
    marked, expected = _marks(layout, diagnostic)
    lines = line_window((o * size // ROW_BYTES for o in marked | expected), total)
    px, cell_h, left, top = 11.0, 22, 64, 16  # 11 px a byte: a 4-byte word holds "(31,31)"
    ys, gaps, bottom = line_rows(lines, top, cell_h)
    notes = [f"{allocated} elements allocated, {size} bytes each" if allocated is not None else "symbolic size"]
    if len(lines) < total:
        notes.append(f"{len(lines)} of {total} lines of 128 bytes drawn")
    notes += layout.notes
    body = _bank_stripes(left, px, ys, cell_h)
    body.append('<g class="axis" text-anchor="middle">' + "".join(
        label(left + (b + 0.5) * BANK_BYTES * px, top - 4, str(b)) for b in range(BANKS)) + "</g>")
    body.append('<g class="axis" text-anchor="end">' + "".join(
        label(left - 6, y + 15, str(line * ROW_BYTES)) for line, y in ys.items()) + "</g>")
    body += gap_bands(gaps, left, ROW_BYTES * px)
    per_line = ROW_BYTES // size
    holes, outlines, labels, overlay = [], [], [], []
    for line, y in ys.items():
        runs = _element_runs(layout, line * per_line, (line + 1) * per_line)
        slot = line * per_line
        for start, stop, logical in runs:  # the unused slots before each run, and after the last
            if start > slot:
                holes.append((left + (slot - line * per_line) * size * px, y, (start - slot) * size * px))
            slot = stop
            x, w = left + (start - line * per_line) * size * px, (stop - start) * size * px
            outlines.append(f"M{n(x)} {n(y)}h{n(w)}v{cell_h}h-{n(w)}z")
            labels.append(_run_label(x + w / 2, y, w, logical, stop - start))
        if slot < (line + 1) * per_line:
            holes.append((left + (slot - line * per_line) * size * px, y, ((line + 1) * per_line - slot) * size * px))
    body += [rect(x, y, w, cell_h, "unused") for x, y, w in holes]
    if outlines:
        body.append(f'<path class="run" d="{"".join(outlines)}"/>')
    if any(labels):
        body.append('<g class="labels">' + "".join(labels) + "</g>")
    else:
        notes.append(f"{size}-byte elements are too narrow to label: the logical view shows where each lands")
    for group, cls, what in ((marked, "cex-mark", "counterexample"), (expected, "cex-expected-mark", "expected")):
        shown = []
        for offset in sorted(group):
            address = offset * size
            y = ys.get(address // ROW_BYTES)
            if y is not None and offset in layout.cells:
                first = layout.cells[offset][0]
                tip = (f"{tv.name}{element_text(first.logical)} at byte {address}, bank {(address // BANK_BYTES) % BANKS}"
                       f" ({what}; thread {first.values['thread']})")
                shown.append((left + (address % ROW_BYTES) * px, y, size * px, cell_h, tip))
        overlay.append(marks(shown, cls))
    width = max(left + ROW_BYTES * px + 20, text_width(notes))
    logical, logical_w, height, logical_marks = _logical_view(tv, layout, left, bottom + 30, marked)
    return Picture(title, max(width, left + logical_w), height, "".join(body + logical),
                   "".join(overlay + logical_marks), tuple(notes))


def smem_map_svg(tv: TensorView, *, diagnostic=None, max_elements: int = 4096) -> str:
    return smem_map(tv, diagnostic=diagnostic, max_elements=max_elements).svg()


def _bank_stripes(left: float, px: float, ys: dict[int, float], cell_h: float) -> list[str]:
    """Each bank's column in its colour, over every run of consecutive drawn lines."""
    out, lines = [], sorted(ys)
    k = 0
    while k < len(lines):
        j = k
        while j + 1 < len(lines) and lines[j + 1] == lines[j] + 1:
            j += 1
        y, h = ys[lines[k]], ys[lines[j]] + cell_h - ys[lines[k]]
        out += [rect(left + b * BANK_BYTES * px, y, BANK_BYTES * px, h, fill=bank_colour(b)) for b in range(BANKS)]
        k = j + 1
    return out


def _element_runs(layout: Layout, lo: int, hi: int) -> list[tuple[int, int, tuple[int, ...]]]:
    """(first offset, end offset, first element) of each run of used offsets in [lo, hi) that hold
    consecutive elements of one logical row (the last index counting up by one)."""
    runs: list[list] = []
    for offset in range(lo, hi):
        accesses = layout.cells.get(offset)
        if not accesses:
            continue
        logical = accesses[0].logical
        if runs and runs[-1][1] == offset and len(layout.cells[offset - 1]) == 1 == len(accesses):
            prev = layout.cells[offset - 1][0].logical
            if logical[:-1] == prev[:-1] and logical[-1:] == tuple(v + 1 for v in prev[-1:]):
                runs[-1][1] = offset + 1
                continue
        runs.append([offset, offset + 1, logical])
    return [(a, b, logical) for a, b, logical in runs]


def _run_label(cx: float, y: float, width: float, logical: tuple[int, ...], count: int) -> str:
    """A run's elements, (3,8-15): on one line, or on two (leading indices over the last) where
    the run is narrow; nothing where neither fits."""
    if not logical:
        return ""
    last = f"{logical[-1]}-{logical[-1] + count - 1}" if count > 1 else str(logical[-1])
    leading = ",".join(map(str, logical[:-1]))
    one = f"({leading},{last})" if leading else f"({last})"
    if 5.4 * len(one) <= width - 2:
        return label(cx, y + 15, one)
    if 5.4 * max(len(leading), len(last)) <= width - 2:
        return label(cx, y + 10, leading) + label(cx, y + 19, last)
    return ""


def _logical_view(tv: TensorView, layout: Layout, left: float, top: float,
                  marked: set) -> tuple[list[str], float, float, list[str]]:
    """Logical rows (all but the last axis, flattened) by the last axis, each element in the colour
    of its bank: an unswizzled row-major tile shows bank stripes, an XOR swizzle a permutation.
    The window starts at the first row and column the map holds (one CTA's tile of a larger
    tensor) and draws at most LOGICAL_CELLS elements (whole rows). Returns the body, its width,
    the picture's height and the marks of the counterexample's elements."""
    extents = [try_int(i.extent_expr) for i in tv.logical]
    if not extents or None in extents or not layout.cells:
        return [], 0, top - 24, []
    columns, rows = extents[-1], math.prod(extents[:-1])
    size = tv.dtype.bytes
    at: dict[tuple[int, int], tuple[int, bool, tuple[int, ...]]] = {}  # (row, column) -> (bank, marked, logical)
    for offset, accesses in layout.cells.items():
        for a in accesses:
            flat = 0
            for value, extent in zip(a.logical, extents):
                flat = flat * extent + value
            at[divmod(flat, columns)] = ((offset * size // BANK_BYTES) % BANKS, offset in marked, a.logical)
    r0, c0 = min(r for r, _ in at), min(c for _, c in at)
    span_rows, span_columns = max(r for r, _ in at) - r0 + 1, max(c for _, c in at) - c0 + 1
    shown_columns = min(span_columns, LOGICAL_COLUMNS)
    shown_rows = max(1, min(span_rows, LOGICAL_CELLS // shown_columns, 16))
    cell = max(4, min(18, 1400 // shown_columns))
    note = "logical view: each element in the colour of its bank"
    if (shown_rows, shown_columns) != (rows, columns):
        note += (f" (rows {r0}-{r0 + shown_rows - 1} of {rows}, columns {c0}-{c0 + shown_columns - 1} of {columns}"
                 f"{'' if (shown_rows, shown_columns) == (span_rows, span_columns) else '; the map holds more'})")
    body = [label(left, top - 8, note, "note"), rect(left, top, shown_columns * cell, shown_rows * cell, "unused")]
    window = {(r, c): at[(r0 + r, c0 + c)] for r in range(shown_rows) for c in range(shown_columns)
              if (r0 + r, c0 + c) in at}
    by_bank: dict[int, list[str]] = {}
    labels = []
    for top_row, end_row, first, end, bank in rectangles({rc: v[0] for rc, v in window.items()}):
        x, y, w, h = left + first * cell, top + top_row * cell, (end - first) * cell, (end_row - top_row) * cell
        by_bank.setdefault(bank, []).append(f"M{n(x)} {n(y)}h{n(w)}v{n(h)}h-{n(w)}z")
        if cell >= 16 and shown_rows * shown_columns <= 256:
            labels += [label(x + (k + 0.5) * cell, y + (j + 0.5) * cell + 4, str(bank))
                       for j in range(end_row - top_row) for k in range(end - first)]
    marked_cells = [(left + c * cell, top + r * cell, cell, cell, f"{tv.name}{element_text(logical)}: bank {bank}")
                    for (r, c), (bank, is_marked, logical) in sorted(window.items()) if is_marked]
    body += [f'<path class="cells" fill="{bank_colour(b)}" d="{"".join(d)}"/>' for b, d in sorted(by_bank.items())]
    if labels:
        body.append('<g class="labels">' + "".join(labels) + "</g>")
    return (body, max(shown_columns * cell + 20, text_width([note])), top + shown_rows * cell + 16,
            [marks(marked_cells, "cex-mark")])


def tmem_map(tv: TensorView, *, issuer: TensorView | None = None, diagnostic=None,
             layout: Layout | None = None) -> Picture:
    """Tensor memory as 128 lanes (rows, in four 32-lane sub-partitions) by 32-bit columns
    (at most 64 drawn), each cell coloured by the warp that stores it (or that loads it, when
    `issuer` is the tensor a tmem load defines). Cells of one warp that form a rectangle are
    drawn as one block whose tooltip gives the elements' index ranges."""
    who = "loaded by " + issuer.name if issuer is not None and issuer is not tv else "stored"
    title = f"{tv.name} tensor memory ({tv.dtype.name}): lanes x columns, coloured by the warp that accesses it ({who})"
    layout = layout or tmem_layout(tv, issuer)
    if layout.error:
        return message_picture(title, [f"no map: {layout.error}"])
    alloc = layout.allocation
    used_lanes = max((lane for lane, _ in layout.cells), default=-1) + 1
    used_columns = max((column for _, column in layout.cells), default=-1) + 1
    lanes = min(max(128, used_lanes), 256)
    columns = max(1, min(max(try_int(alloc.columns_expr) or 0, used_columns), 64))
    notes = [f"{alloc.lanes} lanes x {alloc.columns} columns used ({alloc.columns_allocated} allocated)"]
    notes += layout.notes
    cw, ch, left, top = max(12, min(48, 768 // columns)), 5, 96, 16
    body = [rect(left, top, columns * cw, lanes * ch, "unused")]
    body += [label(left + column * cw + cw / 2, top - 4, str(column), "axis", "middle")
             for column in range(0, columns, 1 if columns <= 16 else 8)]
    warps = set()
    for (l0, l1), (c0, c1), warp, accesses in warp_blocks(layout):
        warps.add(warp)
        body.append(rect(left + c0 * cw, top + l0 * ch, (c1 - c0) * cw, (l1 - l0) * ch, "cells",
                         warp_colour(warp), tip=_block_tip(tv, (l0, l1), (c0, c1), warp, accesses)))
    marked, expected = _marks(layout, diagnostic)
    overlay = []
    for group, cls in ((marked, "cex-mark"), (expected, "cex-expected-mark")):
        shown = []
        for lane, column in sorted(group):
            first = layout.cells[(lane, column)][0]
            tip = (f"lane {lane} col {column}: {tv.name}{element_text(first.logical)} thread {first.values['thread']} "
                   f"warp {first.values['warp']}")
            shown.append((left + column * cw - 1, top + lane * ch - 1, cw + 2, ch + 2, tip))
        overlay.append(marks(shown, cls))
    for lane in range(0, lanes + 1, 32):  # sub-partition borders; lane 128 is the end of tensor memory
        cls = "limit" if lane == 128 and lanes > 128 else "grid-major"
        body.append(f'<line class="{cls}" x1="{left - 4}" y1="{top + lane * ch}" x2="{left + columns * cw}" '
                    f'y2="{top + lane * ch}"/>')
        if lane < lanes:
            name = f"subpart. {lane // 32}" if lane < 128 else "past lane 128"
            body.append(label(left - 6, top + lane * ch + 12, f"lane {lane}", "axis", "end"))
            body.append(label(left - 6, top + lane * ch + 24, name, "axis", "end"))
    legend_x = left + columns * cw + 24
    body.append(label(legend_x, top + 6, "warp (sub-partition w % 4)", "note"))
    for k, warp in enumerate(sorted(warps)[:32]):
        y = top + 14 + 16 * k
        body.append(rect(legend_x, y, 12, 12, fill=warp_colour(warp)))
        body.append(label(legend_x + 18, y + 10, f"warp {warp} ({warp % 4})"))
    width = max(legend_x + 210, text_width(notes))
    height = max(top + lanes * ch + 20, top + 30 + 16 * min(len(warps), 32))
    return Picture(title, width, height, "".join(body), "".join(overlay), tuple(notes))


def tmem_map_svg(tv: TensorView, *, issuer: TensorView | None = None, diagnostic=None) -> str:
    return tmem_map(tv, issuer=issuer, diagnostic=diagnostic).svg()


def warp_blocks(layout: Layout) -> list[tuple[tuple[int, int], tuple[int, int], int, list]]:
    """The tensor-memory cells as rectangles of one warp: ((lane, lane end), (column, column
    end), warp, the accesses of its cells). Runs of columns of one lane come first, then lanes
    with the same runs are stacked: a warp's 32 lanes x 64 columns are one block."""
    rows: dict[int, list] = {}
    for (lane, column), accesses in sorted(layout.cells.items()):
        runs = rows.setdefault(lane, [])
        warp = accesses[0].values["warp"]
        if runs and runs[-1][1] == column and runs[-1][2] == warp:
            runs[-1][1] += 1
            runs[-1][3].extend(accesses)
        else:
            runs.append([column, column + 1, warp, list(accesses)])
    blocks: list = []
    open_blocks: dict[tuple[int, int, int], list] = {}  # (c0, c1, warp) -> block still growing downwards
    for lane in sorted(rows):
        still = {}
        for c0, c1, warp, accesses in rows[lane]:
            block = open_blocks.get((c0, c1, warp))
            if block is not None and block[0][1] == lane:
                block[0][1] = lane + 1
                block[3].extend(accesses)
            else:
                block = [[lane, lane + 1], (c0, c1), warp, list(accesses)]
                blocks.append(block)
            still[(c0, c1, warp)] = block
        open_blocks = still
    return [((b[0][0], b[0][1]), b[1], b[2], b[3]) for b in blocks]


def _block_tip(tv: TensorView, lanes: tuple[int, int], columns: tuple[int, int], warp: int, accesses: list) -> str:
    def span(lo: int, hi: int) -> str:
        return str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"

    coords = list(zip(*(a.logical for a in accesses)))
    elements = ",".join(span(min(c), max(c) + 1) for c in coords)
    threads = [a.values["thread"] for a in accesses]
    return (f"lanes {span(*lanes)}, columns {span(*columns)}: {tv.name}({elements}), "
            f"threads {span(min(threads), max(threads) + 1)}, warp {warp}")


__all__ = ["LINES_DRAWN", "ROW_BYTES", "bank_colour", "domain_graph", "domain_graph_svg", "element_text", "gap_bands",
           "line_rows", "line_window", "smem_map", "smem_map_svg", "tmem_map", "tmem_map_svg", "warp_blocks",
           "warp_colour"]
