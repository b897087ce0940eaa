"""The HTML page stays small (issue 11 item 8): one <style> block, each drawing once (later views
<use> it), large tensors drawn as a bounded window; and a layout error shows the hardware's
layout beside the schedule's, a bank conflict which lanes hit which bank.

(The page of every bundled example, under 5 MB: tests/reports/test_pictures.py, which verifies them all.)"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path
from types import SimpleNamespace

import pytest

import tileproof as tp
from tileproof.cli import run_case
from tileproof.reports.comparisons import lane_banks_picture
from tileproof.reports.hardware import LaneBanks, lane_banks, ldsm_fragment, tma_tile
from tileproof.reports.html import PageEntry, report_page
from tileproof.reports.layouts import smem_layout
from tileproof.reports.pictures import line_window, smem_map
from tileproof.schedule_files import discover
from tileproof.verifier.diagnostics import Diagnostic, Severity

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NS = "{http://www.w3.org/2000/svg}"
PICTURE = re.compile(r'<div class="picture".*?</svg></div>', re.S)


def outcome_of(file: str, name: str):
    (case,) = [c for c in discover([str(EXAMPLES / file)]) if c.name == name]
    return run_case(case)


def page_of(*outcomes) -> str:
    return report_page([PageEntry(o.case.name, o.report, o.fusion, o.error, o.case.expect.describe(), o.matched)
                        for o in outcomes])


def pictures(page: str, title: str) -> list[str]:
    """The picture views (caption and svg) whose title holds `title`, in page order."""
    return [p for p in PICTURE.findall(page) if title in unescape(re.search(r"<title>(.*?)</title>", p).group(1))]


def rects(svg: str, cls: str) -> list[ET.Element]:
    return [r for r in ET.fromstring(svg).iter(f"{NS}rect") if cls in r.get("class", "").split()]


def svg_of(view: str) -> str:
    return view[view.index("<svg"):-len("</div>")]


def swizzle(address: int, span: int) -> int:
    """The TMA swizzle, written out here independently: A ^ (((A >> 7) & (S/16 - 1)) << 4)."""
    return address ^ (((address >> 7) & (span // 16 - 1)) << 4)


@pytest.fixture(scope="module")
def swapped():
    """The 64-byte swizzle with its XOR axes swapped: TMA-SWIZZLE-LAYOUT."""
    return outcome_of("invalid/tma_smem.py", "swizzle_64b_swapped_axes")


def test_one_style_block_and_every_use_refers_to_a_drawing(swapped):
    page = page_of(swapped, outcome_of("invalid/tmem_access.py", "not_contiguous"))
    assert page.count("<style") == 1 and page.count("</style>") == 1
    ids = [m.start() for m in re.finditer(r'id="fig-\d+"', page)]
    assert ids
    for use in re.finditer(r'<use href="#(fig-\d+)"/>', page):  # a <use> refers to a drawing above it,
        drawn = page.index(f'id="{use.group(1)}"')
        assert drawn < use.start()
        assert page.rfind("<details>", 0, drawn) <= page.rfind("</details>", 0, drawn)  # not in a folded section
    for svg in re.findall(r"<svg\b.*?</svg>", page, re.S):
        ET.fromstring(svg)


def test_a_repeated_figure_is_drawn_once(swapped):
    single = page_of(swapped)
    maps = pictures(single, "T1 shared memory (float16): address map by bank")
    # the diagnostic's view (with the counterexample's marks) and the tensor section's view
    assert len(maps) == 2
    drawn, reused = maps
    number = re.search(r'<g class="tp" id="(fig-\d+)">', drawn).group(1)
    assert '<path class="run"' in drawn and "cex-mark" in drawn
    assert f'<use href="#{number}"/>' in reused and '<path class="run"' not in reused and "cex-mark" not in reused
    assert f'href="#picture-{number[4:]}"' in reused  # a link to where it is drawn
    assert len(reused) < len(drawn) / 10
    # the same schedule twice: every picture of the second is a reference
    double = page_of(swapped, swapped)
    assert double.count('<g class="tp" id="fig-') == single.count('<g class="tp" id="fig-')
    assert len(double) < 1.3 * len(single)


def test_large_tile_is_drawn_as_a_bounded_window():
    with tp.Fusion("big") as fusion:
        t0 = tp.make_contig_concrete_tensor([256, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(tp.set(t1))
    t1.set_memory_type(tp.MemoryType.Shared)
    picture = smem_map(t1)
    assert "8 of 512 lines of 128 bytes drawn" in picture.notes
    assert len(picture.svg()) < 40_000  # every element drawn: over a megabyte
    # a counterexample further down adds its 8-line block, and the page says what lies between
    assert line_window([100], 512) == list(range(8)) + list(range(96, 104))
    marked = Diagnostic("X", Severity.ERROR, "x", tensor="T1", counterexample={"offset": 100 * 32})
    picture = smem_map(t1, diagnostic=marked)
    assert "16 of 512 lines of 128 bytes drawn" in picture.notes
    assert "bytes 1024-12287 not drawn" in picture.body
    (mark,) = rects(picture.svg(), "cex-mark")[:1]
    assert mark.find(f"{NS}title").text.startswith("T1(50,0) at byte 12800")


def test_swizzle_layout_error_shows_the_hardware_swizzle_beside_the_schedule(swapped):
    (d,) = [d for d in swapped.report.errors if d.code == "TMA-SWIZZLE-LAYOUT"]
    tile = tma_tile(swapped.fusion, d)
    cex = d.counterexample
    assert tile.swizzle == 64 and math.prod(tile.tile) == len(tile.elements) == 512
    assert (tile.counterexample.schedule, tile.counterexample.hardware) == (cex["address"], cex["expected address"])
    for e in tile.elements:  # the hardware's side is the TMA swizzle of the row-major tile
        assert e.hardware == swizzle(cex["tile start"] + e.row * 64 + e.coords[0] * 2, 64), e
    # the schedule's side is where the shared tensor's own map puts the elements
    assert {e.schedule // 2 for e in tile.elements} == set(smem_layout(swapped.fusion.tensor("T1")).cells)
    assert sum(e.schedule != e.hardware for e in tile.elements) > 0
    (view,) = pictures(page_of(swapped), "beside the hardware's (64-byte swizzle)")
    svg = svg_of(view)
    assert "the schedule's allocation of T1" in svg and "where the TMA swizzles the tile (64-byte swizzle)" in svg
    left, right = sorted(rects(svg, "cex-mark"), key=lambda r: float(r.get("x")))
    hardware_left = 64 + 128 * 5 + 80
    assert float(left.get("x")) == 64 + (cex["address"] % 128) * 5
    assert float(right.get("x")) == hardware_left + (cex["expected address"] % 128) * 5
    assert '<path class="differs"' in svg


def test_tile_contiguity_error_shows_the_dense_tile_beside_the_schedule():
    o = outcome_of("invalid/tma_smem.py", "figure15d_flipped_inside_tile")
    (d,) = [d for d in o.report.errors if d.code == "TMA-TILE-CONTIGUITY"]
    tile = tma_tile(o.fusion, d)
    assert tile.swizzle == 0 and tile.tile == (32, 8)
    start = d.counterexample["tile start"]
    assert all(e.hardware == start + (e.row * 32 + e.coords[0]) * 4 for e in tile.elements)  # dense, row-major
    (view,) = pictures(page_of(o), "beside the hardware's (no swizzle)")
    assert "where the TMA writes the tile (no swizzle)" in view and "240 of 256 tile elements" in view


def test_ldmatrix_fragment_error_shows_the_m8n8_fragment_beside_the_schedule():
    o = outcome_of("invalid/ldst_matrix.py", "ldmatrix_rows_scrambled")
    (d,) = [d for d in o.report.errors if d.code == "LDSM-REGISTER-LAYOUT"]
    f = ldsm_fragment(o.fusion, d)
    held = {h: place for place, holders in f.schedule.items() for h in holders}
    assert len(held) == 32 * 2  # .x1: every lane, two elements
    for (row, column), holders in f.schedule.items():  # the scrambled lane order: lane t holds row t % 8
        assert all(lane % 8 == row for lane, _ in holders)
    for (row, column), holders in f.hardware.items():  # PTX Figure 104, from matrix v/2's origin
        for lane, element in holders:
            origin = held[(0, 2 * (element // 2))]
            assert (row - origin[0], column - origin[1]) == (lane // 4, 2 * (lane % 4) + element % 2)
    cex = d.counterexample
    assert held[f.marked] == (cex["row"], cex["column"])
    assert f.marked in f.hardware[(cex["expected row"], cex["expected column"])]
    (view,) = pictures(page_of(o), "the register fragment of the ldmatrix")
    assert "the hardware: the m8n8 fragment" in view and len(rects(svg_of(view), "cex-mark")) == 2


def test_ldmatrix_float32_fragment_error_shows_the_32_bit_fragment():
    """32-bit elements (CuTe LDSM_U32x4_N): lane t element v is (row t / 4, column t % 4) of matrix v."""
    o = outcome_of("invalid/ldst_matrix.py", "ldmatrix_float32_columns_swapped")
    (d,) = [d for d in o.report.errors if d.code == "LDSM-REGISTER-LAYOUT"]
    f = ldsm_fragment(o.fusion, d)
    held = {h: place for place, holders in f.schedule.items() for h in holders}
    assert len(held) == 32 * 4  # .x4: every lane, one float per matrix
    assert sum(len(h) for h in f.hardware.values()) == 32 * 4
    for (row, column), holders in f.hardware.items():
        for lane, element in holders:
            origin = held[(0, element)]
            assert (row - origin[0], column - origin[1]) == (lane // 4, lane % 4)
    cex = d.counterexample
    assert held[f.marked] == (cex["row"], cex["column"])
    assert f.marked in f.hardware[(cex["expected row"], cex["expected column"])]


def test_bank_map_shows_every_lane_of_a_column_read_in_one_bank():
    with tp.Fusion("column_read") as fusion:
        t0 = tp.make_contig_concrete_tensor([32, 32])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.transpose(t1, 0, 1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.axis(1).parallelize(tp.ParallelType.TIDx)
    t2.axis(1).parallelize(tp.ParallelType.TIDx)
    report = tp.verify(fusion, "sm_90a")
    (d,) = [d for d in report.diagnostics if d.code == "SMEM-BANK-CONFLICT"]
    banks = lane_banks(fusion, d)
    assert banks.phase == 32 and banks.words == {lane: [lane * 32] for lane in range(32)}  # lane l reads T1(l, 0)
    assert banks.colliding() == {lane: {0} for lane in range(32)} and banks.ways(0) == (32, 0)
    assert d.counterexample.get("conflict degree", 32) == 32  # the rule counts as the picture does
    page = report_page([PageEntry("column_read", report, fusion)])
    (view,) = pictures(page, "the banks each lane of warp 0 touches")
    svg = svg_of(view)
    assert len(rects(svg, "collide")) == 32 and "lanes 0-31: 32-way in bank 0" in svg
    pair = sorted(float(r.get("y")) for r in rects(svg, "cex-mark"))
    assert pair == [30 + 14 * d.counterexample["lane"] - 1, 30 + 14 * d.counterexample["other lane"] - 1]


def test_bank_map_highlights_only_the_lanes_that_collide():
    """Lanes 0 and 1 hit two words of bank 0; lanes 2 and 3 read one word together (a broadcast);
    the other lanes have banks of their own."""
    smem = SimpleNamespace(name="T9")  # the picture reads the tensor's name only
    words = {0: [0], 1: [32], 2: [2], 3: [2], **{lane: [lane] for lane in range(4, 32)}}
    banks = LaneBanks(smem, smem, 0, 32, words, {lane: (lane,) for lane in words}, (0, 1))
    assert banks.colliding() == {0: {0}, 1: {0}}
    assert banks.ways(0) == (2, 0)
    svg = lane_banks_picture(banks).svg()
    hot = sorted(round((float(r.get("y")) - 30) / 14) for r in rects(svg, "collide"))
    assert hot == [0, 1]
    red = [t.text for t in ET.fromstring(svg).iter(f"{NS}text") if "collide-label" in (t.get("class") or "")]
    assert red == ["lane 0 T9(0)", "lane 1 T9(1)", "lanes 0-31: 2-way in bank 0"]


def test_a_consequence_links_to_its_root_cause():
    """The 10 failing splits of the seed's copy without its assumption: one cause, 9 consequences."""
    outcome = outcome_of("invalid/tmem_performant_copy_unaligned.py", "performant_vectorized_copy_unaligned")
    (cause,) = [d for d in outcome.report.diagnostics if d.id]
    page = page_of(outcome)
    anchors = re.findall(r'<div class="diagnostic error" id="([^"]+)">', page)
    links = re.findall(r'<p class="follows">follows from: <a href="#([^"]+)">error\[SPLIT-DIVISIBILITY\]</a>', page)
    assert len(anchors) == 1 and anchors[0].endswith("diag-SPLIT-DIVISIBILITY_T1")
    assert links == anchors * 9
