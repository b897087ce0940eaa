"""Every diagnostic says where (issue 11 item 3): each error of every bundled invalid example
carries the user's file:line and renders a `-->` line; LAUNCH-THREADS points at the axis that
makes the block too big; ASSUMPTIONS-SATISFIABLE at the fusion.assume call; an error raised
while a schedule function builds its fusion shows the user's own frames (their call, their
helper), not tileproof's."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.cli import main
from tileproof.reports import report_to_text
from tileproof.schedule_files import BuildError, build_fusion, discover
from tileproof.verifier.registry import all_rules, get_rule

from support.rule_docs import SNIPPET_FILE, run_snippet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
INVALID = [c for c in discover([str(EXAMPLES)]) if not c.expect.ok]
LOCATION = re.compile(r"^\s*--> (.+):(\d+)$", re.MULTILINE)


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_every_error_of_a_bundled_invalid_example_has_a_location(case):
    report = tp.verify(build_fusion(case), case.target)  # its verdict: tests/verifier/test_seed_examples.py
    for d in report.errors:
        assert d.location, f"{d.code} of {case.name} has no location: {d.message}"
        path, line = d.location.rsplit(":", 1)
        assert Path(path).is_file() and int(line) > 0, d.location
    text = report_to_text(report, width=200)
    # the report header has one `-->`, each diagnostic its own
    assert len(LOCATION.findall(text)) >= 1 + len(report.diagnostics)


EXAMPLE_CODES = [r.code for r in all_rules() if not r.section("Example").startswith("none:")]


@pytest.mark.parametrize("code", EXAMPLE_CODES)
def test_every_diagnostic_of_a_rule_docs_example_has_a_location(code):
    """The Examples are the golden reports (tests/golden/<CODE>.txt): each diagnostic has `-->`."""
    report = run_snippet(get_rule(code).section("Example"))
    for d in report.diagnostics:
        assert d.location and d.location.startswith(f"{SNIPPET_FILE}:"), f"{d.code}: {d.message}"


def test_launch_threads_points_at_the_axis_that_makes_the_block_too_big():
    with tp.Fusion("threads") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 32]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    t1.axis(0).parallelize(tp.ParallelType.TIDy); tidy_line = _line()
    t1.axis(1).parallelize(tp.ParallelType.TIDx); tidx_line = _line()
    (d,) = tp.verify(fusion).errors
    assert d.code == "LAUNCH-THREADS" and d.tensor == "T1"
    assert d.location == f"{__file__}:{tidy_line}"  # TIDy{64}, the wider axis
    assert d.labels == [f"TIDx{{32}} of T1 parallelized at {__file__}:{tidx_line}"]
    assert f"  --> {__file__}:{tidy_line}" in report_to_text(tp.verify(fusion), width=300)


def test_launch_threads_of_a_propagated_axis_points_at_the_reference_parallelization():
    with tp.Fusion("threads") as fusion:
        t0 = tp.make_contig_concrete_tensor([2048]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.axis(0).parallelize(tp.ParallelType.TIDx); line = _line()
    tp.parallelize_all_like(t1)
    (d,) = tp.verify(fusion).errors
    assert d.code == "LAUNCH-THREADS" and d.location == f"{__file__}:{line}"


def test_launch_threads_per_dimension_limit_has_a_location():
    with tp.Fusion("deep") as fusion:
        t0 = tp.make_contig_concrete_tensor([96, 4]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    t1.axis(0).parallelize(tp.ParallelType.TIDz); line = _line()
    (d,) = tp.verify(fusion).errors
    assert d.message.startswith("blockDim.z is 96") and d.location == f"{__file__}:{line}"


def test_unsatisfiable_assumptions_point_at_the_assume_calls():
    with tp.Fusion("no_size_fits") as fusion:
        t0 = tp.make_contig_tensor(1); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    fusion.assume("T0_0 > 10"); first = _line()
    fusion.assume("T0_0 < 5"); second = _line()
    d = next(d for d in tp.verify(fusion).errors if d.code == "ASSUMPTIONS-SATISFIABLE")
    assert d.location == f"{__file__}:{second}"
    assert d.labels == [f"T0_0 > 10 assumed at {__file__}:{first}"]


def _line() -> int:
    """The line of the caller (the statement on the same line)."""
    return sys._getframe(1).f_lineno


# -- errors while a schedule function builds its fusion --------------------------------------

HELPERS = '''
import tileproof as tp


def tile(t, factor):
    t.split(0, factor)  # line 6
    return t


def ratio(a, b):
    return a // b  # line 11


def copy():
    with tp.Fusion() as fusion:
        t0 = tp.make_contig_concrete_tensor([8]); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    return fusion, t1


@tp.schedule
def bad_split():
    fusion, t1 = copy()
    t1.split(0, -4)  # line 24
    return fusion


@tp.schedule
def bad_split_in_a_helper():
    fusion, t1 = copy()
    tile(t1, -4)  # line 31
    return fusion


@tp.schedule
def helper_raises():
    fusion, t1 = copy()
    tile(t1, ratio(8, 0))  # line 38
    return fusion
'''


@pytest.fixture
def helpers(tmp_path):
    path = tmp_path / "helpers.py"
    path.write_text(textwrap.dedent(HELPERS))  # the line numbers in its comments count its first, empty line
    return path


def _error(path, name) -> str:
    (case,) = discover([f"{path}::{name}"])
    with pytest.raises(BuildError) as e:
        build_fusion(case)
    return str(e.value)


def test_a_schedule_error_shows_the_users_call(helpers):
    text = _error(helpers, "bad_split")
    assert text.startswith("schedule error: split: factor must be a positive int or symbol, got -4\n")
    assert f'File "{helpers}", line 24, in bad_split' in text and "t1.split(0, -4)" in text
    assert "model/tensor.py" not in text and "schedule_files.py" not in text


def test_a_schedule_error_inside_a_helper_shows_the_helper_and_its_caller(helpers):
    text = _error(helpers, "bad_split_in_a_helper")
    frames = re.findall(r'File "(.+)", line (\d+), in (\w+)', text)
    assert frames == [(str(helpers), "31", "bad_split_in_a_helper"), (str(helpers), "6", "tile")]


def test_an_exception_in_a_users_helper_keeps_the_users_traceback(helpers):
    """Before: one line, `(schedule defined at helpers.py:35)`, the decorator's line."""
    text = _error(helpers, "helper_raises")
    assert text.startswith("building the schedule raised ZeroDivisionError: integer division or modulo by zero")
    frames = re.findall(r'File "(.+)", line (\d+), in (\w+)', text)
    assert frames == [(str(helpers), "38", "helper_raises"), (str(helpers), "11", "ratio")]
    assert "return a // b" in text and "schedule defined at" not in text


def test_the_command_prints_the_users_frames_without_a_python_traceback(helpers, capsys):
    assert main(["verify", str(helpers)]) == 2
    out = capsys.readouterr().out
    assert 'ERROR helper_raises: building the schedule raised ZeroDivisionError' in out
    assert f'  File "{helpers}", line 11, in ratio' in out
    assert "Traceback" not in out and "schedule_files.py" not in out


def test_a_file_failing_on_import_shows_the_users_frames(tmp_path, capsys):
    path = tmp_path / "broken.py"
    path.write_text("def helper():\n    raise ValueError('broken file')\n\n\nhelper()\n")
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert "ValueError: broken file" in err and f'File "{path}", line 2, in helper' in err
    assert "Traceback" not in err and "importlib" not in err


def test_a_malformed_fusion_is_placed_at_the_fusion(tmp_path, capsys):
    path = tmp_path / "no_outputs.py"
    path.write_text("import tileproof as tp\n\n@tp.schedule\ndef lonely():\n"
                    "    with tp.Fusion('lonely') as fusion:\n"
                    "        t0 = tp.make_contig_concrete_tensor([8]); fusion.add_input(t0)\n"
                    "    return fusion\n")
    assert main(["verify", str(path)]) == 2
    out = capsys.readouterr().out
    assert "schedule error: verify: fusion lonely has no outputs" in out
    assert f"(fusion lonely defined at {path}:5)" in out
