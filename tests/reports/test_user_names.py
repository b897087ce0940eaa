"""Reports name tensors as the user did (issue 35 item 4, verifier/user_names.py): after
make_tensor(name=) or set_name, every place a report prints the tensor (message, tensor tree,
definition, help, table, counterexample, JSON) says the name; an unnamed tensor stays T<n>, and
the pictures of the HTML report still find the tensor."""

from __future__ import annotations

import json
import re

import pytest

import tileproof as tp
from tileproof.reports import PageEntry, report_page, report_to_dict, report_to_text


def _too_big(named: bool):
    with tp.Fusion("big_smem") as fusion:
        x = tp.make_tensor([1024, 1024], name="x" if named else None); fusion.add_input(x)
        tile = tp.set(x); y = tp.set(tile); fusion.add_output(y)
    if named:
        tile.set_name("tile"); y.set_name("y")
    tile.set_memory_type(tp.MemoryType.Shared)
    return fusion


def test_every_place_a_report_prints_a_tensor_says_its_name():
    report = tp.verify(_too_big(named=True))
    (error,) = report.errors
    assert error.code == "SMEM-CAPACITY" and error.tensor == "tile"
    assert "(tile 4194304)" in error.message and "tile T1" not in error.hint and "tile tile" in error.hint
    assert {row["tensor"] for row in error.table} == {"tile"}
    assert [(t.name, t.definition) for t in report.tensors] == [("x", None), ("tile", "tile = set(x)"),
                                                                     ("y", "y = set(tile)")]
    text = report_to_text(report, width=200)
    assert "  tile (Shared, float32)  tile = set(x)" in text
    assert not re.search(r"\bT\d+\b", text)  # no T<n> left anywhere
    assert not re.search(r"\bT\d+\b", str(report_to_dict(report)["diagnostics"]))


def test_an_unnamed_schedule_reports_t_n_as_before():
    report = tp.verify(_too_big(named=False))
    assert report.errors[0].tensor == "T1" and "(T1 4194304)" in report.errors[0].message


def test_the_html_report_draws_the_named_tensor():
    pages = {}
    for named in (True, False):
        fusion = _too_big(named)
        pages[named] = report_page([PageEntry("big_smem", tp.verify(fusion), fusion)])
    named, unnamed = pages[True], pages[False]
    assert named.count("<svg") == unnamed.count("<svg") > 0


_T_N = re.compile(r"\bT\d+\b")


def _interleaved_named():
    """x [-1, -1] -> tile (shared) -> y (vectorized by an indivisible split), z = exp(y), w = tile + z,
    with tile inlined into a loop z leaves: errors of the divisibility, allocation, launch,
    register and loop-nest families, and a performance warning."""
    with tp.Fusion("named") as fusion:
        x = tp.make_tensor([-1, -1], contiguity=[False, True], name="x"); fusion.add_input(x)
        tile = tp.set(x).set_name("tile")
        y = tp.set(tile).set_name("y"); fusion.add_output(y)
        z = tp.exp(y).set_name("z")
        w = tp.add(tile, z).set_name("w"); fusion.add_output(w)
    tile.set_memory_type(tp.MemoryType.Shared)
    for t in (tile, y, z, w):
        t.split(1, 4)
        t.axis(1).parallelize(tp.ParallelType.TIDx)
    y.axis(2).parallelize(tp.ParallelType.Vectorize)
    tile.inline_at(1)
    return fusion, {"SPLIT-DIVISIBILITY", "SMEM-CAPACITY", "LAUNCH-THREADS", "REGISTER-SIZE-CONSTANT",
                    "LOOP-NEST-ORDER", "GRID-SIZE"}


def _tma_named():
    """A TMA tile of a strided x whose box is 512 elements wide (TMA-BOX-SIZE) on 4096 threads."""
    with tp.Fusion("named_tma") as fusion:
        x = tp.make_tensor([-1, -1], contiguity=[False, True], name="x"); fusion.add_input(x)
        y = tp.set(x).set_name("y"); fusion.add_output(y)
    tile = x.cache_after(tp.LoadStoreOpType.TMA).set_name("tile")
    tile.set_memory_type(tp.MemoryType.Shared)
    for t in (tile, y):
        t.split(0, 8).split(2, 512)
        t.axis(0).parallelize(tp.ParallelType.BIDx); t.axis(2).parallelize(tp.ParallelType.BIDy)
    tile.axis(1).parallelize(tp.ParallelType.Bulk); tile.axis(3).parallelize(tp.ParallelType.Bulk)
    y.axis(1).parallelize(tp.ParallelType.TIDy); y.axis(3).parallelize(tp.ParallelType.TIDx)
    tile.inline_at(1)
    return fusion, {"TMA-BOX-SIZE", "LAUNCH-THREADS"}


@pytest.mark.parametrize("build", [_interleaved_named, _tma_named])
def test_a_fully_named_fusions_report_has_no_t_n_left(build):
    """Every tensor named, its -1 extents x_0 and x_1: no T<n> in the text, the terminal report or
    the JSON (ids and follows_from included), and the follows-from links still resolve."""
    fusion, codes = build()
    report = tp.verify(fusion)
    assert codes <= {d.code for d in report.diagnostics}
    assert "x_0" in str(report) and "x_1" in str(report)
    for text in (str(report), report_to_text(report, width=200), json.dumps(report_to_dict(report))):
        assert not _T_N.search(text), _T_N.search(text)
    ids = {d.id for d in report.diagnostics if d.id}
    assert all(d.follows_from in ids for d in report.diagnostics if d.follows_from)
