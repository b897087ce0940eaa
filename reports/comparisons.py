"""Pictures of a diagnostic that set the hardware beside the schedule (the data: reports/hardware.py):

- a TMA layout error: the tile in shared memory as the schedule's allocation lays it out, and
  as the TMA writes it (its swizzle), side by side, the misplaced elements outlined;
- an ldmatrix / stmatrix fragment error: which lane and register element holds each element of
  the register tensor, by the schedule and by the m8n8 fragment, side by side;
- a bank conflict: every lane of the warp against the 32 banks, the words it touches, the lanes
  that collide (another lane of its phase touches a different word of the bank) in red.
"""

from __future__ import annotations

from .hardware import BANKS, WORD_BYTES, Fragment, LaneBanks, TileElement, TmaTile, lane_banks, ldsm_fragment, tma_tile
from .pictures import element_text, gap_bands, line_rows, line_window
from .pictures import ROW_BYTES as LINE_BYTES
from .svg import Picture, hsl, label, n, rect, text_width

FRAGMENT_SPAN = 32  # rows and columns of a fragment drawn at most


def hardware_pictures(fusion, diagnostic) -> list[Picture]:
    """The pictures that show the hardware's side of the diagnostic, if it has one."""
    if fusion is None or not diagnostic.counterexample:
        return []
    tile = tma_tile(fusion, diagnostic)
    if tile is not None:
        return [tma_tile_picture(tile)]
    frag = ldsm_fragment(fusion, diagnostic)
    if frag is not None:
        return [fragment_picture(frag)]
    banks = lane_banks(fusion, diagnostic)
    if banks is not None:
        return [lane_banks_picture(banks)]
    return []


def _row_colour(row: int) -> str:
    return hsl(row * 47, 0.6, 0.8)


# -- TMA tile: schedule | hardware ---------------------------------------------------------------

def tma_tile_picture(t: TmaTile) -> Picture:
    swizzle = f"{t.swizzle}-byte swizzle" if t.swizzle else "no swizzle"
    title = f"{t.smem.name}: the schedule's layout of a TMA tile beside the hardware's ({swizzle})"
    cex = t.counterexample
    last = max((max(e.schedule, e.hardware) for e in t.elements), default=0) // LINE_BYTES
    first = min((e.hardware for e in t.elements), default=0) // LINE_BYTES
    wanted = {first} | ({cex.schedule // LINE_BYTES, cex.hardware // LINE_BYTES} if cex else set())
    lines = line_window(wanted, last + 1, first=0)  # the tile's first 8 lines, and the counterexample's
    px, row_h, top = 5.0, 22, 34
    ys, gaps, bottom = line_rows(lines, top, row_h)
    lefts = {"schedule": 64.0, "hardware": 64 + LINE_BYTES * px + 80}
    heads = {"schedule": f"the schedule's allocation of {t.smem.name}",
             "hardware": f"where the TMA {'swizzles' if t.swizzle else 'writes'} the tile ({swizzle})"}
    body, overlay = [], []
    wrong = {e for e in t.elements if e.schedule != e.hardware}
    for side, left in lefts.items():
        body.append(label(left, 12, heads[side], "note"))
        body.append(rect(left, top, LINE_BYTES * px, bottom - top, "unused"))
        body += [label(left + (chunk + 0.5) * 16 * px, top - 4, str(chunk * 16), "axis", "middle")
                 for chunk in range(LINE_BYTES // 16)]
        body += [label(left - 6, y + 15, str(line * LINE_BYTES), "axis", "end") for line, y in ys.items()]
        body += gap_bands(gaps, left, LINE_BYTES * px)
        by_row: dict[int, list[str]] = {}
        labels, differs = [], []
        for run in _runs(t.elements, side, t.element_bytes):
            start = getattr(run[0], side)
            y = ys.get(start // LINE_BYTES)
            if y is None:
                continue
            x, w = left + (start % LINE_BYTES) * px, len(run) * t.element_bytes * px
            outline = f"M{n(x)} {n(y)}h{n(w)}v{row_h}h-{n(w)}z"
            by_row.setdefault(run[0].row % 8, []).append(outline)
            cols = f"{run[0].coords[0]}-{run[-1].coords[0]}" if len(run) > 1 else str(run[0].coords[0])
            text = f"r{run[0].row} {cols}"
            if 5.4 * len(text) <= w - 2:
                labels.append(label(x + w / 2, y + 15, text))
            elif 5.4 * max(len(f"r{run[0].row}"), len(cols)) <= w - 2:  # row over columns
                labels.append(label(x + w / 2, y + 10, f"r{run[0].row}") + label(x + w / 2, y + 19, cols))
            if any(e in wrong for e in run):
                differs.append(outline)
        body += [f'<path class="cells" fill="{_row_colour(row)}" d="{"".join(d)}"/>'
                 for row, d in sorted(by_row.items())]
        if differs:
            body.append(f'<path class="differs" d="{"".join(differs)}"/>')
        body.append('<g class="labels">' + "".join(labels) + "</g>")
        if cex is not None:
            address = getattr(cex, side)
            y = ys.get(address // LINE_BYTES)
            if y is not None:
                overlay.append(rect(left + (address % LINE_BYTES) * px, y, t.element_bytes * px, row_h, "cex-mark",
                                    tip=f"tile element {element_text(cex.coords)} (innermost first): byte {address}"))
    width = lefts["hardware"] + LINE_BYTES * px + 20
    outside = sum(1 for e in t.elements if e.schedule // LINE_BYTES not in ys or e.hardware // LINE_BYTES not in ys)
    notes = [f"tile {' x '.join(map(str, reversed(t.tile)))} ({t.element_bytes}-byte elements); each cell a run of "
             f"one tile row (r) and its innermost columns, coloured by row (8 colours); red outline: the schedule "
             f"puts it where the TMA does not",
             f"{len(wrong)} of {len(t.elements)} tile elements are not where the TMA puts them"]
    if cex is not None:
        notes.append(f"marked: tile element {element_text(cex.coords)} (innermost first), at byte {cex.schedule} by "
                     f"the schedule and {cex.hardware} by the TMA")
    if outside:
        notes.append(f"{outside} elements lie in lines not drawn")
    notes += t.notes
    return Picture(title, width, bottom + 10, "".join(body), "".join(overlay), tuple(notes))


def _runs(elements: list[TileElement], side: str, size: int) -> list[list[TileElement]]:
    """Elements by address on one side, consecutive ones of one tile row and line merged."""
    ordered = sorted(elements, key=lambda e: getattr(e, side))
    runs: list[list[TileElement]] = []
    for e in ordered:
        if runs:
            prev = runs[-1][-1]
            a, b = getattr(prev, side), getattr(e, side)
            if (b == a + size and e.row == prev.row and e.coords[0] == prev.coords[0] + 1
                    and b // LINE_BYTES == a // LINE_BYTES):
                runs[-1].append(e)
                continue
        runs.append([e])
    return runs


# -- ldmatrix fragment: schedule | hardware -------------------------------------------------------

def _matrix_colour(matrix: int) -> str:
    return ("#cfe2f3", "#fce5cd", "#d9ead3", "#ead1dc")[matrix % 4]


def fragment_picture(f: Fragment) -> Picture:
    title = f"{f.regs.name}: the register fragment of the {f.instruction}, the schedule's beside the hardware's (m8n8)"
    places = set(f.schedule) | set(f.hardware)
    r0, c0 = min(r for r, _ in places), min(c for _, c in places)
    rows = min(max(r for r, _ in places) - r0 + 1, FRAGMENT_SPAN)
    cols = min(max(c for _, c in places) - c0 + 1, FRAGMENT_SPAN)
    cw, ch, top = 30, 18, 40
    heads = {"schedule": f"the schedule: lane.element at {f.regs.name}[row, column]",
             "hardware": "the hardware: the m8n8 fragment"}
    lefts = {"schedule": 56.0, "hardware": 56 + max(cols * cw + 80, text_width([heads["schedule"]]) + 40)}
    differs = {p for p in places if f.schedule.get(p, []) != f.hardware.get(p, [])}
    body, overlay = [], []
    for side, left in lefts.items():
        held = getattr(f, side)
        body.append(label(left, 12, heads[side], "note"))
        body.append(rect(left, top, cols * cw, rows * ch, "unused"))
        body += [label(left + k * cw + cw / 2, top - 4, str(c0 + k), "axis", "middle") for k in range(cols)]
        body += [label(left - 6, top + k * ch + 13, str(r0 + k), "axis", "end") for k in range(rows)]
        labels = []
        for (r, c), holders in sorted(held.items()):
            if not (0 <= r - r0 < rows and 0 <= c - c0 < cols):
                continue
            x, y = left + (c - c0) * cw, top + (r - r0) * ch
            lane, element = holders[0]
            many = len(holders) > 1
            tip = f"{f.regs.name}[{r}, {c}]: " + ", ".join(f"lane {t} element {v}" for t, v in holders) if many else ""
            body.append(rect(x, y, cw, ch, "cells", _matrix_colour(element // 2), tip))
            labels.append(label(x + cw / 2, y + 13, f"{len(holders)}x" if many else f"{lane}.{element}",
                                "collide-label" if many else ""))
            if (r, c) in differs:
                body.append(rect(x, y, cw, ch, "differs"))
            if f.marked in holders:
                overlay.append(rect(x, y, cw, ch, "cex-mark", tip=f"lane {f.marked[0]} element {f.marked[1]}"))
        body.append('<g class="labels">' + "".join(labels) + "</g>")
    notes = ["the fragment: lane t element v holds row t/4, column 2(t%4) + v%2 of matrix v/2, matrix m starting "
             "where the schedule puts lane 0's element 2m",
             f"warp {f.warp}; colour: the matrix (element / 2); red outline: the schedule and the fragment differ "
             f"({len(differs)} of {len(places)} elements)"]
    if f.marked:
        notes.append(f"marked: lane {f.marked[0]} element {f.marked[1]}")
    if f.matrices:
        notes.append(f"matrices {' and '.join(map(str, f.matrices))} overlap (cells held twice: 2x)")
    if rows == FRAGMENT_SPAN or cols == FRAGMENT_SPAN:
        notes.append(f"rows and columns from {r0}, {c0}: at most {FRAGMENT_SPAN} of each drawn")
    width = lefts["hardware"] + cols * cw + 20
    return Picture(title, max(width, text_width([heads["hardware"]]) + lefts["hardware"]),
                   top + rows * ch + 10, "".join(body), "".join(overlay), tuple(notes + f.notes))


# -- bank conflicts: lanes x banks ----------------------------------------------------------------

def lane_banks_picture(b: LaneBanks) -> Picture:
    title = f"{b.smem.name}: the banks each lane of warp {b.warp} touches"
    colliding = b.colliding()
    cw, ch, left, top = 26, 14, 150, 30
    body = [label(left, 10, "bank", "note")]
    body += [label(left + k * cw + cw / 2, top - 4, str(k), "axis", "middle") for k in range(BANKS)]
    body.append(rect(left, top, BANKS * cw, 32 * ch, "unused"))
    overlay, labels = [], []
    for lane in range(32):
        y = top + lane * ch
        hot = lane in colliding
        element = b.elements.get(lane)
        name = f"lane {lane} {b.smem.name}{element_text(element)}" if element is not None else f"lane {lane}: idle"
        body.append(label(left - 6, y + 11, name, "collide-label axis" if hot else "axis", "end"))
        for word in b.words.get(lane, []):
            bank, line = word % BANKS, word * WORD_BYTES // LINE_BYTES
            x = left + bank * cw
            tip = f"lane {lane}: byte {word * WORD_BYTES} (line {line}), bank {bank}"
            body.append(rect(x, y, cw, ch, "cells", _row_colour(line), tip))
            labels.append(label(x + cw / 2, y + 11, str(line)))
            if bank in colliding.get(lane, ()):
                body.append(rect(x, y, cw, ch, "collide"))
            if b.pair and lane in b.pair:
                overlay.append(rect(x - 1, y - 1, cw + 2, ch + 2, "cex-mark", tip=f"lane {lane}: the counterexample"))
    body.append('<g class="labels">' + "".join(labels) + "</g>")
    right = left + BANKS * cw + 12
    summary = []
    for start in range(0, 32, b.phase):
        y = top + start * ch
        body.append(f'<line class="grid-major" x1="{left - 140}" y1="{y}" x2="{right - 12}" y2="{y}"/>')
        ways, bank = b.ways(start)
        lanes = f"lanes {start}-{start + b.phase - 1}"
        text = f"{lanes}: {ways}-way in bank {bank}" if ways > 1 else f"{lanes}: no conflict"
        summary.append(text)
        body.append(label(right, y + 12, text, "collide-label" if ways > 1 else "note"))
    notes = ["a cell: a 4-byte word the lane touches, in its bank's column, labelled with its 128-byte line",
             f"{b.phase} lanes are served together; red: two words of one bank in one phase (a conflict)",
             *b.notes]
    width = right + text_width(summary)
    return Picture(title, width, top + 32 * ch + 10, "".join(body), "".join(overlay), tuple(notes))


__all__ = ["fragment_picture", "hardware_pictures", "lane_banks_picture", "tma_tile_picture"]
