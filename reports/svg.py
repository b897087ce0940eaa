"""SVG building blocks shared by the pictures: the Picture (a drawing in two layers, so that a
page can draw what many diagnostics share once and refer to it), the stylesheet, colours and
text. Pure functions; standard library only.

A page (reports/html.py) puts STYLE in its one <style> block and draws each distinct
Picture body once, inside `<g class="tp" id=...>`, later views reusing it with `<use>`. The
selectors are therefore rooted at `.tp`, not at the <svg>: a <use> clone matches the page's
rules inside its own tree only (SVG 2, 5.6), and `.tp` is the root of that tree.
"""

from __future__ import annotations

import colorsys
import zlib
from dataclasses import dataclass
from xml.sax.saxutils import escape

ARROW = "url(#arrow)"  # placeholder in a picture for the shared arrow marker
PAGE_ARROW = "tp-arrow"  # the marker's id on a page (drawn once, in page_defs)
ARROW_MARKER = ('<marker id="{id}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
                'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#7a869a"/></marker>')
# Distinct warp colours (Tableau 10); a warp w takes WARP_COLOURS[w % 10].
WARP_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
BANKS = 32
HEADER_LINE = 15  # pixels per title or note line above a standalone picture
STYLE = """
svg.tileproof { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: 11px; }
.tp text { fill: #222; }
.tp .axis { font-size: 10px; fill: #666; }
.tp .note, svg.tileproof .note { font-size: 11px; fill: #555; }
.tp .id rect { fill: #f4f6fb; stroke: #5b6b8c; }
.tp .id.highlight rect { fill: #fde2e1; stroke: #d62728; stroke-width: 2.5; }
.tp .id.highlight text { fill: #b0151a; font-weight: bold; }
.tp .op rect { fill: #fff8e6; stroke: #c99a2e; }
.tp .edge { stroke: #7a869a; fill: none; }
.tp .mirror { stroke: #aab; stroke-dasharray: 3 3; fill: none; }
.tp .marker { stroke: #b2008f; stroke-width: 2; stroke-dasharray: 5 3; }
.tp .marker-label { fill: #b2008f; font-size: 10px; }
.tp .cells { stroke: #ffffff; stroke-width: 0.5; }
.tp .labels { font-size: 9px; text-anchor: middle; pointer-events: none; }
.tp .cex-mark { fill: none; stroke: #d00000; stroke-width: 2.5; }
.tp .cex-expected-mark { fill: none; stroke: #d00000; stroke-width: 1.5; stroke-dasharray: 3 2; }
.tp .differs { fill: none; stroke: #d00000; stroke-width: 1.2; }
.tp .collide { fill: none; stroke: #d00000; stroke-width: 2; }
.tp .collide-label { fill: #b0151a; font-weight: bold; }
.tp .run { fill: none; stroke: #ffffff; stroke-width: 1.5; }
.tp .unused { fill: #eeeeee; }
.tp .gap { fill: #f6f6f6; }
.tp .limit { stroke: #d00000; stroke-width: 2; }
.tp .grid-major { stroke: #333; stroke-width: 1.2; }
"""


@dataclass(frozen=True)
class Picture:
    """One drawing: `body` is what every view of it shares (a page draws it once), `overlay`
    what one diagnostic adds on top (marks); `title` and `notes` caption it (HTML text on a
    page, text lines above the drawing when standalone). Coordinates are the body's own."""

    title: str
    width: float
    height: float
    body: str
    overlay: str = ""
    notes: tuple[str, ...] = ()

    def with_overlay(self, overlay: str) -> Picture:
        return Picture(self.title, self.width, self.height, self.body, overlay, self.notes)

    def svg(self) -> str:
        """A standalone SVG: the title and notes above the drawing, with its own style and marker."""
        header = [self.title, *self.notes]
        top = HEADER_LINE * len(header) + 8
        text = self.body + self.overlay
        arrow = f"arrow-{zlib.crc32((self.title + text).encode()):08x}"  # unique if several are inlined
        defs = f"<defs>{ARROW_MARKER.format(id=arrow)}</defs>" if ARROW in text else ""
        width = max(self.width, text_width(header))
        height = self.height + top
        lines = "".join(label(8, HEADER_LINE * (k + 1), line, "" if k == 0 else "note")
                        for k, line in enumerate(header))
        return (f'<svg xmlns="http://www.w3.org/2000/svg" class="tileproof" width="{width:.0f}" '
                f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img">'
                f"<title>{escape(self.title)}</title><style>{STYLE}</style>{defs}{lines}"
                f'<g class="tp" transform="translate(0,{top})">{text.replace(ARROW, f"url(#{arrow})")}</g></svg>')


def page_defs() -> str:
    """What a page draws once for all its pictures: the arrow marker."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0" style="position:absolute">'
            f"<defs>{ARROW_MARKER.format(id=PAGE_ARROW)}</defs></svg>")


def n(x: float) -> str:
    """A coordinate, short: 12 for 12.0, 12.5 for 12.5."""
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


def label(x: float, y: float, text: str, cls: str = "", anchor: str = "start") -> str:
    attr = f' class="{cls}"' if cls else ""
    anchor_attr = "" if anchor == "start" else f' text-anchor="{anchor}"'
    return f'<text x="{n(x)}" y="{n(y)}"{anchor_attr}{attr}>{escape(text)}</text>'


def rect(x: float, y: float, w: float, h: float, cls: str = "", fill: str = "", tip: str = "") -> str:
    attrs = (f' class="{cls}"' if cls else "") + (f' fill="{fill}"' if fill else "")
    core = f'<rect x="{n(x)}" y="{n(y)}" width="{n(w)}" height="{n(h)}"{attrs}'
    return f"{core}><title>{escape(tip)}</title></rect>" if tip else core + "/>"


def rectangles(grid: dict[tuple[int, int], object]) -> list[tuple[int, int, int, int, object]]:
    """A grid of cells (row, column) -> key as rectangles of one key, (row, row end, column,
    column end, key): runs along each row, then equal runs of consecutive rows stacked. A map
    whose columns are bank stripes becomes one rectangle per column."""
    out: list[list] = []
    growing: dict[tuple[int, int, object], list] = {}  # (column, column end, key) -> a rectangle ending at this row
    by_row: dict[int, list[int]] = {}
    for r, c in grid:
        by_row.setdefault(r, []).append(c)
    for row in sorted(by_row):
        runs: list[list] = []
        for c in sorted(by_row[row]):
            key = grid[(row, c)]
            if runs and runs[-1][1] == c and runs[-1][2] == key:
                runs[-1][1] = c + 1
            else:
                runs.append([c, c + 1, key])
        still = {}
        for c0, c1, key in runs:
            block = growing.get((c0, c1, key))
            if block is not None and block[1] == row:
                block[1] = row + 1
            else:
                block = [row, row + 1, c0, c1, key]
                out.append(block)
            still[(c0, c1, key)] = block
        growing = still
    return [tuple(b) for b in out]


MARKS_ONE_BY_ONE = 16  # marked cells drawn each with its own tooltip; more are one path


def marks(cells: list[tuple[float, float, float, float, str]], cls: str) -> str:
    """The cells a counterexample marks, (x, y, width, height, tooltip): each with its tooltip, or,
    when it names many (every cell one issue point touches), one path with one tooltip."""
    if len(cells) <= MARKS_ONE_BY_ONE:
        return "".join(rect(x, y, w, h, cls, tip=tip) for x, y, w, h, tip in cells)
    d = "".join(f"M{n(x)} {n(y)}h{n(w)}v{n(h)}h-{n(w)}z" for x, y, w, h, _ in cells)
    return f'<path class="{cls}" d="{d}"><title>{len(cells)} cells, the first: {escape(cells[0][4])}</title></path>'


def text_width(lines: list[str]) -> float:
    """Pixels for the longest line at the pictures' 11 px monospace font."""
    return 6.7 * max((len(line) for line in lines), default=0) + 24


def hsl(hue: float, saturation: float, lightness: float) -> str:
    """#rrggbb of an HSL colour (hex: every SVG renderer reads it)."""
    r, g, b = colorsys.hls_to_rgb((hue % 360) / 360, lightness, saturation)
    return "#" + "".join(f"{round(c * 255):02x}" for c in (r, g, b))


def bank_colour(bank: int) -> str:
    return hsl(bank * 330 // (BANKS - 1), 0.7, 0.8)  # 330 degrees: banks 0 and 31 must differ


def warp_colour(warp: int) -> str:
    return WARP_COLOURS[warp % len(WARP_COLOURS)]


def message_picture(title: str, lines: list[str]) -> Picture:
    """A picture that says why there is no picture (symbolic sizes, nothing to draw)."""
    body = "".join(label(8, 14 + 16 * k, line, "note") for k, line in enumerate(lines))
    return Picture(title, text_width(lines), 16 * len(lines) + 8, body)


__all__ = ["ARROW", "BANKS", "PAGE_ARROW", "Picture", "STYLE", "bank_colour", "hsl", "label",
           "marks", "message_picture", "n", "page_defs", "rect", "rectangles", "text_width", "warp_colour"]
