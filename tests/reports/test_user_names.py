"""Reports name tensors as the user did (issue 35 item 4, verifier/user_names.py): after
make_tensor(name=) or set_name, every place a report prints the tensor (message, tensor tree,
definition, help, table, counterexample, JSON) says the name; an unnamed tensor stays T<n>, and
the pictures of the HTML report still find the tensor."""

from __future__ import annotations

import re

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
