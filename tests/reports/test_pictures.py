"""Pictures and the HTML page: every example renders to well-formed SVG, maps draw every element
of their window once, a swizzle shows, tmem cells take their warp's colour, counterexamples are
marked. (The page's size, shared drawings and the hardware-beside-schedule pictures:
tests/reports/test_html_report.py.)"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.cli import main, run_case
from tileproof.reports import html
from tileproof.reports.html import PageEntry, report_page
from tileproof.reports.layouts import marked_cells, smem_layout, tmem_layout

from support.examples import example_module
from tileproof.reports.pictures import (bank_colour, domain_graph_svg, line_window, smem_map, smem_map_svg,
                                        tmem_map, tmem_map_svg, warp_blocks, warp_colour)
from tileproof.schedule_files import discover

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SVG = re.compile(r"<svg\b.*?</svg>", re.S)
NS = "{http://www.w3.org/2000/svg}"


def cells(svg: str, cls: str = "cells") -> list[ET.Element]:
    """The rects of a picture whose class list holds `cls`."""
    return [r for r in ET.fromstring(svg).iter(f"{NS}rect") if cls in r.get("class", "").split()]


def title_of(element: ET.Element) -> str:
    return element.find(f"{NS}title").text


def path_rects(svg: str, cls: str) -> list[tuple[str | None, float, float, float, float]]:
    """(fill, x, y, width, height) of every rectangle drawn by the paths of class `cls`
    (a map draws its cells as one path per colour: M x y h w v h h-w z ...)."""
    out = []
    for path in ET.fromstring(svg).iter(f"{NS}path"):
        if cls in path.get("class", "").split():
            for x, y, w, h in re.findall(r"M([\d.]+) ([\d.]+)h([\d.]+)v([\d.]+)h-[\d.]+z", path.get("d")):
                out.append((path.get("fill"), float(x), float(y), float(w), float(h)))
    return out


def fill_at(svg: str, x: float, y: float) -> str | None:
    """The fill of the cell-path rectangle containing (x, y)."""
    return next((f for f, rx, ry, w, h in path_rects(svg, "cells") if rx <= x < rx + w and ry <= y < ry + h), None)


def labels(svg: str) -> list[str]:
    """The cell labels of a picture, in drawing order."""
    groups = [g for g in ET.fromstring(svg).iter(f"{NS}g") if g.get("class") == "labels"]
    return [t.text for g in groups for t in g.iter(f"{NS}text")]


# The kinds of picture a page draws (reports/pictures.py, reports/comparisons.py), by their titles as
# the page escapes them, and the classes of the marks drawn on them (a counterexample's cells, where the
# hardware wanted them, highlighted IterDomains, the hardware's side where it differs or collides, ...).
PICTURE_KINDS = {"IterDomain graph", "address map by bank", "lanes x columns, coloured by the warp",
                 "of a TMA tile beside the hardware", "the register fragment of the", "the banks each lane of warp"}
MARKS = {"cex-mark", "cex-expected-mark", "highlight", "differs", "collide", "mirror", "marker", "limit", "run"}


def sample(cases):
    """Of one example file's schedules, the first with each distinct expectation: its verdict,
    its error codes, its declared warnings and its target (the parametrized schedules of a file
    repeat one shape with one expectation, and drawing all of the ~380 schedules took over a
    minute of CI). Each file is drawn; each rule's rejection is drawn with its counterexample in every
    file that rejects with it, so every kind of picture and of mark is drawn (asserted in
    test_every_example_renders_well_formed_svg), and so are the largest section (the seed's
    double-buffered matmul at 256 x 256 x 64, the one schedule of its file with a GRID-SIZE
    warning beside its bank conflicts) and the largest picture, which
    test_page_of_every_example_is_small bounds. Deterministic: the files' order, no random draw."""
    seen = set()
    for case in cases:
        key = (case.expect.ok, tuple(sorted(case.expect.codes)), tuple(sorted(case.expect.warnings)), case.target)
        if key not in seen:
            seen.add(key)
            yield case


class SharedLayouts:
    """smem_layout and tmem_layout of the sampled schedules' tensors, each enumerated once: the
    per-file pages, the page of them all and the maps' test draw the same tensors (a page
    shares one tensor's layout among its views as well, html.Figures). Kept with the tensors,
    whose ids key it (they stay alive, so an id stays theirs)."""

    def __init__(self) -> None:
        self.done: dict[tuple, tuple] = {}

    def smem(self, tensor):
        return self._once("smem", tensor, None, lambda: smem_layout(tensor))

    def tmem(self, tensor, issuer=None):
        return self._once("tmem", tensor, issuer, lambda: tmem_layout(tensor, issuer))

    def _once(self, kind, tensor, issuer, enumerate_points):
        key = (kind, id(tensor), id(issuer))
        if key not in self.done:
            self.done[key] = (tensor, issuer, enumerate_points())
        return self.done[key][2]

    @contextmanager
    def rendering(self):
        """report_page with these layouts (html.Figures.layout's two calls)."""
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(html, "smem_layout", self.smem)
            mp.setattr(html, "tmem_layout", self.tmem)
            yield


@pytest.fixture(scope="module")
def layouts() -> SharedLayouts:
    return SharedLayouts()


@pytest.fixture(scope="module")
def pages(layouts) -> dict[str, tuple[str, list]]:
    """One page per example file, as `tileproof show` writes it, with its outcomes: the
    schedules of `sample`."""
    out = {}
    for path in sorted(EXAMPLES.rglob("*.py")):
        outcomes = [run_case(case) for case in sample(discover([str(path)]))]
        entries = [PageEntry(o.case.name, o.report, o.fusion, o.error, o.case.expect.describe(), o.matched)
                   for o in outcomes]
        with layouts.rendering():
            out[str(path.relative_to(EXAMPLES))] = (report_page(entries), outcomes)
    return out


def test_the_sample_keeps_each_expectation_of_each_file():
    """`sample` drops only repeats of an expectation, and keeps the schedules the tests below name."""
    for path in sorted(EXAMPLES.rglob("*.py")):
        cases = discover([str(path)])
        kept = list(sample(cases))
        assert {c.expect.describe() for c in kept} == {c.expect.describe() for c in cases}, path
    assert {"not_contiguous", "one_lane"} <= {c.name for c in sample(discover([str(EXAMPLES / "invalid" /
                                                                                 "tmem_access.py")]))}
    vectorization = discover([str(EXAMPLES / "valid" / "tmem_vectorization.py")])
    assert len(list(sample(vectorization))) < len(vectorization)


@pytest.mark.slow  # shares the pages of every example file (its sample of schedules)
def test_every_example_renders_well_formed_svg(pages):
    assert len(pages) >= 9
    every = "".join(page for page, _ in pages.values())
    assert all(kind in every for kind in PICTURE_KINDS), [k for k in PICTURE_KINDS if k not in every]
    drawn = {c for classes in re.findall(r'class="([^"]*)"', every) for c in classes.split()}
    assert MARKS <= drawn, MARKS - drawn
    for name, (page, outcomes) in pages.items():
        assert page.startswith("<!DOCTYPE html>") and page.count('<section class="schedule"') == len(outcomes), name
        assert all(o.error is None for o in outcomes), name
        svgs = SVG.findall(page)
        # one graph per on-chip tensor at least, and a map for every shared or tensor-memory tensor
        on_chip = sum(1 for o in outcomes for t in o.fusion.tensors if t.memory_type.value in ("Shared", "Tensor"))
        located = any(d.tensor for o in outcomes if o.report for d in o.report.diagnostics)
        assert svgs or not (on_chip or located), name  # a page of global-only copies without findings draws nothing
        for svg in svgs:
            ET.fromstring(svg)  # raises on malformed XML
        assert page.count("address map by bank") + page.count("lanes x columns, coloured") >= on_chip, name


@pytest.mark.slow  # shares the pages of every example file (its sample of schedules)
def test_maps_draw_every_element_of_their_window_once(pages, layouts):
    checked = 0
    for name, (_, outcomes) in pages.items():
        for o in outcomes[:6]:  # the parametrized files repeat one schedule shape
            for t in o.fusion.tensors:
                if t.memory_type is tp.MemoryType.Shared:
                    layout = layouts.smem(t)
                    picture = smem_map(t, layout=layout)
                    if layout.error:
                        continue
                    size = t.dtype.bytes
                    lines = line_window((), math.ceil((max(layout.cells, default=0) + 1) * size / 128))
                    # the outlined runs cover exactly the used bytes of the drawn lines
                    runs = path_rects(picture.svg(), "run")
                    shown = sum(1 for o in layout.cells if o * size // 128 in lines)
                    assert sum(round(w / (11 * size)) for _, _, _, w, _ in runs) == shown, (name, t.name)
                elif t.memory_type is tp.MemoryType.Tensor:
                    layout = layouts.tmem(t)
                    blocks = warp_blocks(layout)
                    area = sum((l1 - l0) * (c1 - c0) for (l0, l1), (c0, c1), _, _ in blocks)
                    assert area == len(layout.cells) and blocks, (name, t.name)
                    assert len(cells(tmem_map(t, layout=layout).svg())) == len(blocks), (name, t.name)
                    checked += 1
    assert checked >= 10


@pytest.mark.slow  # shares the pages of every example file (its sample of schedules)
def test_page_of_every_example_is_small(pages, layouts):
    """`tileproof verify examples/ --html` wrote 129 MB when every view drew its picture and its
    style: now one style block, each drawing once, large tensors as a bounded window."""
    outcomes = [o for _, found in pages.values() for o in found]
    with layouts.rendering():  # the per-file pages enumerated the tensors' layouts
        page = report_page([PageEntry(o.case.name, o.report, o.fusion, o.error, o.case.expect.describe(), o.matched)
                            for o in outcomes])
    assert len(page.encode()) < 25_000 * len(outcomes)  # about 16 KB a schedule (309: 5.0 MB); 129 MB was 400 KB
    assert page.count("<style") == 1 and all(p.count("<style") == 1 for p, _ in pages.values())
    sections = re.findall(r'<section class="schedule".*?</section>', page, re.S)
    assert len(sections) == len(outcomes)
    # per picture, so that a bigger example set stays small too: no picture draws a large tensor whole
    # (a schedule with several warnings draws a picture for each: the seed's double-buffered matmul,
    # with two bank-conflict warnings over 4096-element tiles, is the largest section, ~0.5 MB)
    assert max(len(p.encode()) for p in re.findall(r"<svg.*?</svg>", page, re.S)) < 150_000
    assert max(len(s.encode()) for s in sections) < 600_000


def _shared_tile(swizzle: bool):
    with tp.Fusion("tile") as fusion:
        t0 = tp.make_contig_concrete_tensor([32, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    if swizzle:
        t1.swizzle(tp.SwizzleType.XOR, 0, 1)
    return t1


def test_xor_swizzle_changes_the_shared_memory_map():
    plain, swizzled = smem_map_svg(_shared_tile(False)), smem_map_svg(_shared_tile(True))
    assert plain != swizzled
    # unswizzled, line k of the address map is row k in order: one run per line
    assert labels(plain)[:8] == [f"({k},0-31)" for k in range(8)]
    # swizzled (x ^ y): line 0 is row 0 in order, line 1 holds (1,1), (1,0), (1,3), (1,2), ...: runs of
    # one element, line 2 runs of two, (2,2-3), (2,0-1), ...
    drawn = labels(swizzled)
    assert drawn[0] == "(0,0-31)" and drawn[1:33] == [f"(1,{c ^ 1})" for c in range(32)]
    assert drawn[33:35] == ["(2,2-3)", "(2,0-1)"]
    # the logical view (below the 8 drawn lines): element (1,0) sits in bank 0 unswizzled, in bank 1 swizzled
    top = 16 + 8 * 22 + 30
    assert fill_at(plain, 64 + 1, top + 18 + 1) == bank_colour(0)
    assert fill_at(swizzled, 64 + 1, top + 18 + 1) == bank_colour(1)


def test_tmem_map_colours_lane_k_with_warp_k_over_32():
    case = next(c for c in discover([str(EXAMPLES / "valid" / "tmem_access.py")]) if c.name == "warp_group_xyz")
    tv = case.build().tensor("T2")
    drawn = cells(tmem_map_svg(tv))
    lanes_drawn = 0
    for rect in drawn:  # one block per warp: 32 lanes x 2 columns
        first, last = map(int, re.match(r"lanes (\d+)-(\d+), columns 0-1: ", title_of(rect)).groups())
        assert first // 32 == last // 32 and rect.get("fill") == warp_colour(first // 32), title_of(rect)
        assert title_of(rect).endswith(f"warp {first // 32}")
        lanes_drawn += last - first + 1
    assert lanes_drawn == 128


@pytest.mark.slow  # shares the pages of every example file (its sample of schedules)
def test_rejected_example_page_marks_the_counterexample(pages):
    page, outcomes = pages[str(Path("invalid") / "tmem_access.py")]
    assert 'class="cex-mark"' in page
    outcome = next(o for o in outcomes if o.case.name == "not_contiguous")
    diagnostic = outcome.report.errors[0]
    assert diagnostic.code == "TMEM-ACCESS-PATTERN"
    lane, column = diagnostic.counterexample["lane"], diagnostic.counterexample["column"]
    svg = tmem_map_svg(outcome.fusion.tensor("T2"), diagnostic=diagnostic)
    marked = [title_of(r) for r in cells(svg, "cex-mark")]
    assert len(marked) == 1 and marked[0].startswith(f"lane {lane} col {column}:")
    assert 'class="cex-expected-mark"' in svg  # the lane the pattern needed


@pytest.mark.slow  # shares the pages of every example file (its sample of schedules)
def test_load_counterexample_is_marked_on_the_tensor_memory_it_reads(pages):
    page, outcomes = pages[str(Path("invalid") / "tmem_access.py")]
    outcome = next(o for o in outcomes if o.case.name == "one_lane")
    load = next(d for d in outcome.report.errors if d.tensor == "T3")
    svg = tmem_map_svg(outcome.fusion.tensor("T2"), issuer=outcome.fusion.tensor("T3"), diagnostic=load)
    assert "loaded by T3" in svg
    assert [title_of(r).split(":")[0] for r in cells(svg, "cex-mark")] == [
        f"lane {load.counterexample['lane']} col {load.counterexample['column']}"]


def test_shared_memory_offsets_in_a_counterexample_mark_cells():
    layout = smem_layout(_shared_tile(True))
    assert marked_cells(layout, {"offset": 33}) == ({33}, set())
    assert marked_cells(layout, {"address": 4 * 40}) == ({40}, set())
    # thread and loop values select the cells of that point: x = 1, y = 2 is swizzle input (1, 2)
    tv = layout.tensor
    x_in, y_in = tv.history[0].inputs
    marked, _ = marked_cells(layout, {"x": 1, "y": 2}, [x_in.name, y_in.name])
    assert marked == {32 + (1 ^ 2)}


def test_domain_graph_highlights_and_marks_positions():
    tv = _shared_tile(False)
    tv.split(1, 8)
    svg = domain_graph_svg(tv, {tv.axis(2).name})
    root = ET.fromstring(svg)
    groups = [g for g in root.iter(f"{NS}g") if "highlight" in g.get("class", "")]
    assert [title_of(g) for g in groups] == [f"{tv.axis(2).name}: {tv.axis(2).label()}"]
    assert "split 8" in svg and "loop = alloc." in svg


def test_show_writes_the_page(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["show", str(EXAMPLES / "valid" / "gsg_copy.py"), "--html"]) == 0
    written = tmp_path / "gsg_copy.html"
    assert capsys.readouterr().out.strip() == str(written)
    page = written.read_text()
    assert page.count('<section class="schedule"') == 6 and "address map by bank" in page
    assert main(["show", str(EXAMPLES / "invalid" / "tmem_access.py"), "--html", str(tmp_path / "x.html")]) == 0
    assert "cex-mark" in (tmp_path / "x.html").read_text()


@pytest.mark.parametrize("argv", [["show", "/no/such/file.py"], ["show"], ["show", "EXAMPLE", "--target", "sm_1"]])
def test_show_usage_and_load_errors_exit_2(argv, capsys):
    argv = [str(EXAMPLES / "valid" / "gsg_copy.py") if a == "EXAMPLE" else a for a in argv]
    assert main(argv) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_verify_html_draws_pictures(tmp_path):
    page = tmp_path / "report.html"
    assert main(["verify", str(EXAMPLES / "valid" / "gsg_copy.py"), "--quiet", "--html", str(page)]) == 0
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "PASS gsg_copy_naive" in text and "<svg" in text


def test_swizzle_layout_counterexample_marks_schedule_and_hardware_cells():
    """The swapped-axes 64-byte swizzle: the map marks where the schedule put the element and,
    as expected, where TMA writes it."""
    (case,) = [c for c in discover([str(EXAMPLES / "invalid" / "tma_smem.py")]) if c.name == "swizzle_64b_swapped_axes"]
    fusion = case.build()
    report = tp.verify(fusion, case.target)
    (d,) = [d for d in report.errors if d.code == "TMA-SWIZZLE-LAYOUT"]
    t1 = next(t for t in fusion.tensors if t.name == d.tensor)
    layout = smem_layout(t1)
    marked, expected = marked_cells(layout, d.counterexample, d.ids)
    es = t1.dtype.bytes
    assert marked == {d.counterexample["address"] // es}
    assert expected == {d.counterexample["expected address"] // es}
    assert marked != expected



def test_maps_draw_the_points_the_kernel_runs():
    """A TMA box whose rows past M the hardware fills with zeros (execution/clipped_holes.py
    filled) runs at those holes unpredicated: the map of the last block's tile (M = 100, boxes of
    32 rows) draws all 32 rows, as the kernel writes them, not the 4 inside M."""
    tma_boxes = example_module("valid", "tma_boxes")
    tile = tma_boxes.tma_box_by_partitioning().snapshot().tensors[1]
    layout = smem_layout(tile, pinned={"M": 100, "N": 128, "blockIdx.y": 3, "blockIdx.x": 0})
    assert sorted(layout.cells) == list(range(32 * 64))
