"""Pictures and the HTML page: every example renders to well-formed SVG, maps have one cell per
element, a swizzle shows, tmem cells take their warp's colour, counterexamples are marked."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.cli import main, run_case
from tileproof.reports.html import PageEntry, report_page
from tileproof.reports.layouts import marked_cells, smem_layout, tmem_layout
from tileproof.reports.pictures import bank_colour, domain_graph_svg, smem_map_svg, tmem_map_svg, warp_colour
from tileproof.schedule_files import discover

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SVG = re.compile(r"<svg\b.*?</svg>", re.S)
NS = "{http://www.w3.org/2000/svg}"


def cells(svg: str, cls: str = "cell") -> list[ET.Element]:
    """The map cells of a picture (rects whose class list holds `cls`)."""
    return [r for r in ET.fromstring(svg).iter(f"{NS}rect") if cls in r.get("class", "").split()]


def title_of(element: ET.Element) -> str:
    return element.find(f"{NS}title").text


@pytest.fixture(scope="module")
def pages() -> dict[str, tuple[str, list]]:
    """One page per example file, as `tileproof show` writes it, with its outcomes."""
    out = {}
    for path in sorted(EXAMPLES.rglob("*.py")):
        outcomes = [run_case(case) for case in discover([str(path)])]
        entries = [PageEntry(o.case.name, o.report, o.fusion, o.error, o.case.expect.describe(), o.matched)
                   for o in outcomes]
        out[str(path.relative_to(EXAMPLES))] = (report_page(entries), outcomes)
    return out


@pytest.mark.slow  # shares the pages of every example (about a minute)
def test_every_example_renders_well_formed_svg(pages):
    assert len(pages) >= 9
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


@pytest.mark.slow  # shares the pages of every example (about a minute)
def test_maps_have_one_cell_per_shown_element(pages):
    checked = 0
    for name, (_, outcomes) in pages.items():
        for o in outcomes[:6]:  # the parametrized files repeat one schedule shape
            for t in o.fusion.tensors:
                if t.memory_type is tp.MemoryType.Shared:
                    assert len(cells(smem_map_svg(t))) == len(smem_layout(t).cells), (name, t.name)
                elif t.memory_type is tp.MemoryType.Tensor:
                    layout = tmem_layout(t)
                    drawn = cells(tmem_map_svg(t))
                    assert len(drawn) == len(layout.cells) and drawn, (name, t.name)
                    checked += 1
    assert checked >= 10


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
    assert len(cells(plain)) == len(cells(swizzled)) == 32 * 32
    assert plain != swizzled
    # address row 1, word 0 holds (1,0) unswizzled and (1,1) swizzled (x ^ y = 1 ^ 0)
    assert title_of(cells(plain)[32]).startswith("T1(1,0) at byte 128, bank 0")
    assert title_of(cells(swizzled)[32]).startswith("T1(1,1) at byte 128, bank 0")
    # the logical view: element (1,0) sits in bank 0 unswizzled, in bank 1 swizzled
    logical = {title_of(r): r.get("fill") for r in cells(swizzled, "logical-cell")}
    assert logical["T1(1,0): bank 1"] == bank_colour(1)
    assert {title_of(r) for r in cells(plain, "logical-cell")} >= {"T1(1,0): bank 0"}


def test_tmem_map_colours_lane_k_with_warp_k_over_32():
    case = next(c for c in discover([str(EXAMPLES / "valid" / "tmem_access.py")]) if c.name == "warp_group_xyz")
    tv = case.build().tensor("T2")
    drawn = cells(tmem_map_svg(tv))
    assert len(drawn) == 128 * 2
    for rect in drawn:
        lane = int(re.match(r"lane (\d+) col (\d+)", title_of(rect)).group(1))
        assert rect.get("fill") == warp_colour(lane // 32), title_of(rect)
        assert title_of(rect).endswith(f"warp {lane // 32}")


@pytest.mark.slow  # shares the pages of every example (about a minute)
def test_rejected_example_page_marks_the_counterexample(pages):
    page, outcomes = pages[str(Path("invalid") / "tmem_access.py")]
    assert 'class="cell cex"' in page and "cex-mark" in page
    outcome = next(o for o in outcomes if o.case.name == "not_contiguous")
    diagnostic = outcome.report.errors[0]
    assert diagnostic.code == "TMEM-ACCESS-PATTERN"
    lane, column = diagnostic.counterexample["lane"], diagnostic.counterexample["column"]
    svg = tmem_map_svg(outcome.fusion.tensor("T2"), diagnostic=diagnostic)
    marked = [title_of(r) for r in cells(svg, "cex")]
    assert marked == [next(t for t in marked if t.startswith(f"lane {lane} col {column}:"))]
    assert '<rect class="cex-expected-mark"' in svg  # the lane the pattern needed


@pytest.mark.slow  # shares the pages of every example (about a minute)
def test_load_counterexample_is_marked_on_the_tensor_memory_it_reads(pages):
    page, outcomes = pages[str(Path("invalid") / "tmem_access.py")]
    outcome = next(o for o in outcomes if o.case.name == "one_lane")
    load = next(d for d in outcome.report.errors if d.tensor == "T3")
    svg = tmem_map_svg(outcome.fusion.tensor("T2"), issuer=outcome.fusion.tensor("T3"), diagnostic=load)
    assert "loaded by T3" in svg
    assert [title_of(r).split(":")[0] for r in cells(svg, "cex")] == [
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
    assert main(["show", str(EXAMPLES / "valid" / "gsg_copy.py")]) == 0
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
