"""benchmarks/report_causes.py: it counts a rejected report's stand-alone errors over single-change
mutations of the bundled examples, and writes what it counted."""

from __future__ import annotations

import json

import pytest

import report_causes  # benchmarks/report_causes.py


def test_single_change_counts_the_changes_the_api_applied():
    assert report_causes.single_change(["example x", "T1.axis(0).parallelize(TIDx)"])
    assert report_causes.single_change(["example x", "T1.split(0, 4)", "T2.split(9, 2) -> ScheduleError(split: ...)"])
    assert not report_causes.single_change(["example x", "T1.split(0, 4)", "inline_most()"])
    assert not report_causes.single_change(["example x"])


def test_a_short_run_writes_its_counts(tmp_path, capsys):
    out = tmp_path / "causes.json"
    assert report_causes.main(["--cases", "40", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    n = data["rejected_single_change"]
    assert n > 0 and sum(data["blocks_histogram"].values()) == n
    assert data["one_block"] == data["blocks_histogram"].get("1", 0)
    assert all(len(r["blocks"]) > 1 for r in data["several_blocks"])
    assert "open with one block" in capsys.readouterr().out


def test_bad_case_counts_are_refused():
    with pytest.raises(SystemExit, match="--cases must be at least 1"):
        report_causes.main(["--cases", "0", "--out", "/dev/null"])
