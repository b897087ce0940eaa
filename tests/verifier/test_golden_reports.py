"""Golden rendered reports (rustc UI tests, Exo's tests/golden): every rule's docstring Example,
verified and rendered by the terminal renderer (plain text, 100 columns) and the JSON renderer,
must match tests/golden/<CODE>.txt and tests/golden/<CODE>.json.

A change to a rule's message, notes, table, counterexample or hint, or to a renderer, shows up
here as a diff. When it is intended, rewrite the files and review their diff before committing:

    python -m pytest tests/verifier/test_golden_reports.py --update-golden

The files hold nothing that depends on the machine or the run: the header's timing and query
count ("(0.092 s, 3 z3 queries)") are left out, the JSON drops `seconds` and `queries` (and
`rules_run`, the registry's list, so that a new rule does not rewrite every file), the
repository root is written <repo> (before rendering, so lines wrap alike everywhere); IterDomains
are numbered per fusion, so the names do not depend on which tests ran first. The .txt file starts with the Example itself,
numbered, so that its `--> <rule doc>:LINE` locations can be read against it. Self-check rules
(Example "none: ...") have no golden file, except the three no schedule fails because tileproof
places the barriers itself (SMEM-RACE, PIPELINE-PHASE, WGMMA-ASYNC-ORDER): theirs is the report
of a schedule verified with its placed barriers changed as their tests change them
(tests/support/placed_barriers.py), the case numbered at the top as an Example is.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import re
from pathlib import Path
from typing import Any

import pytest

import tileproof
from tileproof.reports import report_to_dict, report_to_text, to_json
from tileproof.verifier.diagnostics import Diagnostic, Report, Severity
from tileproof.verifier.registry import all_rules, get_rule

from support.placed_barriers import CASE_FILE, CASES as PLACED_CASES, build_case, run_case
from support.rule_docs import SNIPPET_FILE, run_snippet

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = "python -m pytest tests/verifier/test_golden_reports.py --update-golden"
WIDTH = 100
ROOT_PLACEHOLDER = "<repo>"
# the header's "  (0.092 s, 3 z3 queries)": run time, and a count that follows solver plumbing
TIMING = re.compile(r" *\(\d+(?:\.\d+)? s, \d+ z3 quer(?:y|ies)\)")
# run time and query count vary; rules_run lists the whole registry, so every new rule would
# rewrite every golden file
LEFT_OUT_FIELDS = ("seconds", "queries", "rules_run")

CODES = [r.code for r in all_rules() if not r.section("Example").startswith("none:") or r.code in PLACED_CASES]


def _roots() -> list[str]:
    """The repository root as this machine spells it (as imported and resolved), longest first."""
    package = Path(tileproof.__file__).parent
    spellings = {str(package.absolute()), str(package.resolve()), os.path.realpath(package)}
    return sorted(spellings, key=len, reverse=True)


def _scrubbed(value: Any) -> Any:
    """The value with every absolute spelling of the repository root written <repo>."""
    if isinstance(value, str):
        for root in _roots():
            value = value.replace(root, ROOT_PLACEHOLDER)
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _scrubbed(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    if isinstance(value, dict):
        return {_scrubbed(k): _scrubbed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrubbed(v) for v in value)
    return value


def stable(report: Report) -> Report:
    """A copy of the report with nothing of this run or machine: no timing, no absolute paths."""
    return dataclasses.replace(_scrubbed(report), seconds=0.0, queries=0)


@functools.cache
def example_report(code: str) -> Report:
    """The Example's report (for a code no schedule fails, its failing case's)."""
    if code in PLACED_CASES:
        return run_case(code)
    return run_snippet(get_rule(code).section("Example"))


def rendered(report: Report) -> str:
    """The terminal rendering of a stable report, without the header's timing."""
    return TIMING.sub("", report_to_text(stable(report), width=WIDTH))


def golden_text(code: str) -> str:
    if code in PLACED_CASES:
        example = PLACED_CASES[code].splitlines()
        heading = (f"Failing case of {code} (no schedule fails it: tileproof places the barriers), its placed "
                   f"nest changed by mutate, run as {CASE_FILE}:\n")
    else:
        example = get_rule(code).section("Example").splitlines()
        heading = f"Example of {code} (tileproof explain {code}), run as {SNIPPET_FILE}:\n"
    numbered = "".join(f"{n:4} | {line}".rstrip() + "\n" for n, line in enumerate(example, 1))
    return heading + numbered + "\n" + rendered(example_report(code))


def json_text(report: Report) -> str:
    """The JSON rendering of a stable report, without the fields left out."""
    data = report_to_dict(stable(report))
    for name in LEFT_OUT_FIELDS:
        del data[name]
    data["rendered"] = rendered(report)
    return to_json(data) + "\n"


def check_golden(path: Path, now: str, update: bool) -> None:
    if update:
        if not path.exists() or path.read_text() != now:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(now)
        return
    relative = path.relative_to(GOLDEN.parent.parent)
    if not path.exists():
        pytest.fail(f"{relative} is missing; create it with `{UPDATE}` and review it before committing",
                    pytrace=False)
    golden = path.read_text()
    if golden != now:
        diff = "".join(difflib.unified_diff(golden.splitlines(keepends=True), now.splitlines(keepends=True),
                                            f"{relative} (golden)", f"{relative} (now)"))
        pytest.fail(f"the rendered report differs from {relative}:\n{diff}\nif the change is intended, "
                    f"rewrite the golden files with `{UPDATE}` and review their diff", pytrace=False)


@pytest.mark.parametrize("code", CODES)
def test_terminal_report_matches_golden(code, update_golden):
    check_golden(GOLDEN / f"{code}.txt", golden_text(code), update_golden)


@pytest.mark.parametrize("code", CODES)
def test_json_report_matches_golden(code, update_golden):
    check_golden(GOLDEN / f"{code}.json", json_text(example_report(code)), update_golden)


def test_no_golden_file_without_a_rule(update_golden):
    """A golden file whose code has no runnable Example any more is stale (removed on update)."""
    stale = sorted(p for p in GOLDEN.glob("*") if p.is_file() and p.stem not in CODES)
    if update_golden:
        for path in stale:
            path.unlink()
        return
    assert not stale, (f"golden files of no runnable rule Example: {[p.name for p in stale]}; "
                       f"remove them with `{UPDATE}`")


def test_rendering_drops_what_differs_between_runs_and_machines():
    root = _roots()[0]
    report = Report("f", "sm_90a", queries=7, seconds=1.234, location=f"{root}/examples/valid/f.py:3")
    report.diagnostics.append(Diagnostic("X", Severity.ERROR, "m", notes=[f"see {root}/model/expr.py:12"]))
    text, data = rendered(report), json_text(report)
    assert "1.234" not in text and "z3 quer" not in text
    assert f"--> {ROOT_PLACEHOLDER}/examples/valid/f.py:3" in text
    assert f"see {ROOT_PLACEHOLDER}/model/expr.py:12" in text
    assert root not in data and f"{ROOT_PLACEHOLDER}/examples/valid/f.py:3" in data
    assert report.seconds == 1.234 and report.location.startswith(root)  # the report itself is kept
    assert '"seconds"' not in data and '"queries"' not in data and '"rules_run"' not in data


@pytest.mark.parametrize("code", sorted(PLACED_CASES))
def test_a_failing_case_fails_only_with_its_barriers_changed(code):
    """A failing case stands for its code: the code's rule has no Example of its own, reports the
    case with its nest changed, and accepts the same schedule with the barriers as placed."""
    assert get_rule(code).section("Example").startswith("none:")  # else its Example is the golden case
    assert code in example_report(code).codes
    fusion, _ = build_case(code)
    assert tileproof.verify(fusion, "sm_90a").ok
