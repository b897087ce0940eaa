"""The renderers: a Report becomes text and JSON that carry every part of a diagnostic."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tileproof as tp
from tileproof.reports import explain_text, report_to_dict, report_to_json, report_to_text, reports_to_html
from tileproof.reports.terminal import render_report
from tileproof.verifier.registry import all_rules


def copy_through_shared() -> tp.Fusion:
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_contig_concrete_tensor([2, 4]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(1, 2)
    t1.inline_at(1)
    return fusion


def rejected_report() -> tp.Report:
    """A report built by hand, so the error path is tested whatever rules exist."""
    report = tp.verify(copy_through_shared(), target="sm_90a")
    t1 = next(t for t in report.tensors if t.name == "T1")
    inner = t1.loop[-1]
    report.assumptions.append("N % 8 == 0")
    report.diagnostics.append(tp.Diagnostic(
        "TEST-CODE", tp.Severity.ERROR, "not enough widgets: needs 429, has 128",
        tensor="T1", ids=[inner], location="schedule.py:12",
        notes=["each IterDomain's row says whether it is allocated"],
        table=t1.allocation_table,
        counterexample={"N": 24, "threadIdx.x": 97},
        hint="inline T1 at position 2",
    ))
    report.diagnostics.append(tp.Diagnostic("TEST-WARN", tp.Severity.WARNING, "bank conflicts: 4-way"))
    return report


def test_accepted_report_shows_verdict_and_allocation_summary():
    report = tp.verify(copy_through_shared(), target="sm_90a")
    text = report_to_text(report)
    assert report.ok
    assert "copy on sm_90a: ACCEPTED" in text
    assert "z3 quer" in text
    assert "assumptions: none" in text
    # T1 is inlined at 1: only the two inner halves of the split (2 x 2 floats) are live
    assert "T1" in text and "Shared" in text and "16 bytes (4 elements)" in text


def test_rejected_report_text_carries_every_part_of_the_diagnostic():
    report = rejected_report()
    text = report_to_text(report, width=120)
    assert "copy on sm_90a: REJECTED" in text
    assert "assumptions: N % 8 == 0" in text
    assert "error[TEST-CODE]: not enough widgets: needs 429, has 128" in text
    assert "warning[TEST-WARN]: bank conflicts: 4-way" in text
    assert "--> schedule.py:12" in text
    assert "= note: each IterDomain's row says whether it is allocated" in text
    assert "= help: inline T1 at position 2" in text
    # the schedule tree: transforms one per line, compute-at marked in the loop domain
    t1 = next(t for t in report.tensors if t.name == "T1")
    outer, split_outer, split_inner = (t1.id_labels[name] for name in t1.loop)
    assert f"split {t1.id_labels[t1.logical[1]]} by 2 -> {split_outer}, {split_inner}" in text
    assert f"loop       [{outer} | {split_outer}, {split_inner}]   compute-at 1" in text
    # the allocation table and the counterexample
    assert "IterDomain" in text and "allocated" in text and "left of compute-at position 1" in text
    assert "threadIdx.x" in text and "97" in text and "24" in text
    assert "no allocations" not in text and "allocations:" not in text  # only for accepted reports


def test_highlighted_ids_are_styled():
    report = rejected_report()
    diagnostic = report.diagnostics[0]
    (highlighted_id,) = diagnostic.ids
    t1 = next(t for t in report.tensors if t.name == "T1")
    label = t1.id_labels[highlighted_id]
    segments = _styled_segments(render_report(report))
    assert any(label in text and "bold" in style and "red" in style for text, style in segments)
    # an IterDomain the diagnostic does not name is not highlighted
    other = t1.id_labels[t1.loop[0]]
    assert not any(text == other and "red" in style for text, style in segments)


def test_tmem_dim_sep_is_marked_and_summarized():
    report = tp.verify(copy_through_shared(), target="sm_90a")
    t1 = next(t for t in report.tensors if t.name == "T1")
    # pretend T1 lives in tensor memory: one lane dim, then the columns
    t1.memory, t1.tmem_dim_sep = "Tensor", 1
    t1.allocation_size = {"num_elements": "4", "bytes": "16", "lanes": "2", "columns": "2", "columns_allocated": "32"}
    assert "2 lanes x 2 columns (32 columns allocated)" in report_to_text(report, width=120)
    report.diagnostics.append(tp.Diagnostic("TEST-CODE", tp.Severity.ERROR, "lanes", tensor="T1"))
    lane, *columns = (t1.id_labels[name] for name in t1.allocation)
    assert f"allocation [{lane} || {', '.join(columns)}]   lanes || columns" in report_to_text(report, width=120)


def test_json_has_dataclass_fields_plus_ok_codes_rendered():
    report = rejected_report()
    data = json.loads(report_to_json(report))
    assert data == json.loads(json.dumps(report_to_dict(report)))
    assert data["ok"] is False
    assert data["codes"] == ["TEST-CODE"]
    assert data["fusion"] == "copy" and data["target"] == "sm_90a"
    first = data["diagnostics"][0]
    assert first["severity"] == "error" and data["diagnostics"][1]["severity"] == "warning"
    assert first["code"] == "TEST-CODE"
    assert first["message"] == "not enough widgets: needs 429, has 128"
    assert first["counterexample"] == {"N": 24, "threadIdx.x": 97}
    assert first["ids"] == report.diagnostics[0].ids
    assert first["table"][0]["rule"] == "compute-at"
    assert {t["name"] for t in data["tensors"]} == {"T0", "T1", "T2"}
    assert "error[TEST-CODE]" in data["rendered"]


def test_html_page_is_self_contained():
    report = rejected_report()
    page = reports_to_html([("FAIL copy", render_report(report))], title="a <title>")
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>a &lt;title&gt;</title>" in page
    assert "TEST-CODE" in page and "widgets" in page
    assert "<script" not in page and "http" not in page


def test_explain_unknown_code_lists_known_codes():
    with pytest.raises(KeyError, match="known"):
        explain_text("NO-SUCH-RULE")


@pytest.mark.skipif(not all_rules(), reason="no rules registered yet")
def test_explain_renders_every_rule():
    for rule in all_rules():
        text = explain_text(rule.code.lower())
        assert text.startswith(f"{rule.code} ({rule.family}, {rule.severity})")
        assert rule.summary in text


def _styled_segments(renderable) -> list[tuple[str, str]]:
    from rich.console import Console

    console = Console(width=120, color_system="truecolor", force_terminal=True)
    return [(segment.text, str(segment.style or "")) for segment in console.render(renderable)]


def test_square_brackets_in_notes_and_hints_are_text_not_markup():
    """rich read `[i10{2}]` in a note as a markup tag and dropped it (TMA-RANK's dimensions,
    ALLOCATION-DISTINCT's loop domain)."""
    from tileproof.verifier.diagnostics import Diagnostic, Report, Severity

    d = Diagnostic("TMA-RANK", Severity.ERROR, "six dimensions", notes=["TMA dimension 1 [i10{2}] (size one)"],
                   hint="index T0[stride.T0.0*(i5 // 6)] instead", location="x.py:1")
    text = report_to_text(Report(fusion="f", target="sm_90a", diagnostics=[d]))
    assert "[i10{2}]" in text and "T0[stride.T0.0*(i5 // 6)]" in text


def test_str_of_an_accepted_report_is_its_plain_text():
    report = tp.verify(copy_through_shared(), target="sm_90a")
    text = str(report)
    assert text == report_to_text(report)
    assert text.startswith("copy on sm_90a: ACCEPTED") and "16 bytes (4 elements)" in text
    assert "Report(" not in text  # not the dataclass repr


def test_str_needs_only_import_tileproof():
    """The renderer is registered by `import tileproof`, not only when a test imports reports/."""
    program = ("import tileproof as tp\n"
               "with tp.Fusion('copy') as fusion:\n"
               "    t0 = tp.make_contig_concrete_tensor([2, 4]); fusion.add_input(t0)\n"
               "    fusion.add_output(tp.set(t0))\n"
               "print(tp.verify(fusion, target='sm_90a'))\n")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout
    assert out.startswith("copy on sm_90a: ACCEPTED")


def test_str_of_a_rejected_report_shows_code_message_counterexample_and_help():
    from tileproof.rule_examples import copy_chain

    fusion, _, t1 = copy_chain("vec6", [6], copies=1)
    t1.split(0, 4)
    t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    text = str(tp.verify(fusion, target="sm_90a"))
    assert text.startswith("vec6 on sm_90a: REJECTED")
    assert "error[SPLIT-DIVISIBILITY]: split of i1{6} by 4 in T1 is not divisible: 6 % 4 = 2" in text
    assert "counterexample:" in text and "remainder     =  2" in text
    assert "= help: split by a factor that divides 6" in text

