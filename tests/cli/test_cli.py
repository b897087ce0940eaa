"""The `tileproof` command: exit codes, PASS/FAIL lines, JSON, HTML, explain, our bugs versus yours."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tileproof as tp
from tileproof import cli
from tileproof.cli import main
from tileproof.verifier.registry import RULES, all_rules

COPY = '''
import tileproof as tp

@tp.schedule(expect={expect})
def copy():
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_contig_concrete_tensor([2, 4]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion
'''

BIG_SHARED = '''
import tileproof as tp

@tp.schedule(expect=tp.rejected("SMEM-CAPACITY"))
def big_shared():
    # 1024 x 1024 floats, not inlined: 4 MiB of shared memory, more than any target has
    with tp.Fusion("big_shared") as fusion:
        t0 = tp.make_contig_concrete_tensor([1024, 1024]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion
'''


def write(tmp_path, name: str, source: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture
def good(tmp_path):
    return write(tmp_path, "good.py", COPY.format(expect='tp.accepted(allocations={"T1": {"bytes": 32}})'))


@pytest.fixture
def wrong(tmp_path):
    return write(tmp_path, "wrong.py", COPY.format(expect='tp.accepted(allocations={"T1": {"bytes": 64}})'))


def test_matching_expectation_exits_0(good, capsys):
    assert main(["verify", str(good)]) == 0
    out = capsys.readouterr().out
    assert "PASS copy: ACCEPTED as expected" in out
    assert "copy on sm_90a: ACCEPTED" in out
    assert "1 schedules: 1 accepted, 0 rejected, 0 mismatched expectations" in out


def test_wrong_expectation_exits_1(wrong, capsys):
    assert main(["verify", str(wrong)]) == 1
    out = capsys.readouterr().out
    assert "FAIL copy: expected T1.bytes == 64, got 32" in out
    assert "1 mismatched expectations" in out


def test_folder_and_quiet(good, wrong, tmp_path, capsys):
    assert main(["verify", str(tmp_path), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "PASS copy" in out and "FAIL copy" in out
    assert "ACCEPTED  (" not in out  # --quiet prints no reports
    assert "2 schedules: 2 accepted, 0 rejected, 1 mismatched expectations" in out


def test_json_is_one_parsable_array(good, wrong, capsys):
    assert main(["verify", str(good), str(wrong), "--json"]) == 1
    entries = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in entries] == ["copy", "copy"]
    assert entries[0]["mismatches"] == [] and entries[1]["mismatches"] == ["expected T1.bytes == 64, got 32"]
    assert entries[0]["expectation"]["ok"] is True
    assert entries[0]["report"]["ok"] is True and "rendered" in entries[0]["report"]


def test_html_is_written(good, tmp_path, capsys):
    page = tmp_path / "out" / "report.html"
    page.parent.mkdir()
    assert main(["verify", str(good), "--html", str(page)]) == 0
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "PASS copy" in html


def test_target_override(good, capsys):
    assert main(["verify", str(good), "--target", "sm_100a"]) == 0
    assert "copy on sm_100a: ACCEPTED" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["verify", "/no/such/path.py"],
    ["verify", "GOOD", "--target", "sm_80"],
    ["verify"],
    ["explain"],
    ["frobnicate"],
    [],
])
def test_usage_errors_exit_2_without_traceback(argv, good, capsys):
    argv = [str(good) if a == "GOOD" else a for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err


def test_file_that_fails_to_import_exits_2(tmp_path, capsys):
    bad = write(tmp_path, "bad.py", "import tileproof as tp\nraise ValueError('broken file')\n")
    assert main(["verify", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.py" in err and "ValueError: broken file" in err and "Traceback" not in err


def test_schedule_that_raises_is_a_load_error_for_that_case(good, tmp_path, capsys):
    write(tmp_path, "raises.py", '''
        import tileproof as tp

        @tp.schedule
        def bad_split():
            with tp.Fusion() as fusion:
                t0 = tp.make_contig_concrete_tensor([8]); fusion.add_input(t0)
                t1 = tp.set(t0); fusion.add_output(t1)
            t1.split(0, -4)
            return fusion

        @tp.schedule
        def crashes():
            raise RuntimeError("my own bug")
        ''')
    assert main(["verify", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "PASS copy" in out  # the other cases still ran
    assert "ERROR bad_split: schedule error: split" in out
    assert "ERROR crashes: building the schedule raised RuntimeError: my own bug" in out
    assert "Traceback" not in out
    assert "2 failed to load" in out


def test_file_without_schedules_exits_2(tmp_path, capsys):
    empty = write(tmp_path, "empty.py", "x = 1\n")
    assert main(["verify", str(empty)]) == 2
    assert "no @tp.schedule" in capsys.readouterr().err


@pytest.mark.skipif("SMEM-CAPACITY" not in {r.code for r in all_rules()}, reason="SMEM-CAPACITY not written yet")
def test_too_much_shared_memory_is_rejected_as_expected(tmp_path, capsys):
    path = write(tmp_path, "big.py", BIG_SHARED)
    assert main(["verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "error[SMEM-CAPACITY]" in out
    assert "PASS big_shared: REJECTED (SMEM-CAPACITY) as expected" in out
    assert "1 schedules: 0 accepted, 1 rejected, 0 mismatched expectations" in out


def test_explain_unknown_code_exits_2(capsys):
    assert main(["explain", "NO-SUCH-RULE"]) == 2
    assert "unknown rule" in capsys.readouterr().err


def test_explain_suggests_the_code_meant(capsys):
    assert main(["explain", "WGMMA-SMEM"]) == 2
    assert "did you mean WGMMA-SMEM-LAYOUT?" in capsys.readouterr().err


def test_explain_a_condition_another_rule_proves(capsys):
    """WGMMA-DESCRIPTOR (the descriptor's fields) is proved with the addresses, by WGMMA-SMEM-LAYOUT."""
    assert main(["explain", "wgmma-descriptor"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("WGMMA-DESCRIPTOR has no code of its own: WGMMA-SMEM-LAYOUT proves it.")
    assert "WGMMA-SMEM-LAYOUT (wgmma, error)" in out and "base offset" in out


def test_explain_list(capsys):
    assert main(["explain", "--list"]) == 0
    out = capsys.readouterr().out
    for rule in all_rules():
        assert rule.code in out


@pytest.mark.skipif(not all_rules(), reason="no rules registered yet")
def test_explain_known_code(capsys):
    rule = all_rules()[0]
    assert main(["explain", rule.code]) == 0
    assert capsys.readouterr().out.startswith(rule.code)


def test_python_dash_m_runs_the_cli(good):
    result = subprocess.run([sys.executable, "-m", "tileproof", "verify", str(good), "--quiet"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "PASS copy" in result.stdout


# -- our bug versus your mistake: classified by exception class -------------------------------


def crashing(code: str, error: Exception):
    """The registered rule `code`, replaced by one that raises `error`."""
    rule = RULES[code]

    def broken(ctx):
        raise error

    return type(rule)(rule.code, rule.family, rule.severity, broken)


def test_a_crashing_rule_is_a_tileproof_bug_never_an_accept(good, monkeypatch, capsys):
    monkeypatch.setitem(RULES, "SMEM-CAPACITY", crashing("SMEM-CAPACITY", KeyError("T1")))
    assert main(["verify", str(good)]) == 1  # expected accepted, so the bug shows as a mismatch
    out = capsys.readouterr().out
    assert "error[SMEM-CAPACITY]: tileproof bug, please report: rule SMEM-CAPACITY:" in out
    assert "FAIL copy: rule SMEM-CAPACITY crashed" in out and "expected ACCEPTED, got REJECTED (SMEM-CAPACITY)" in out


def test_a_crashing_rule_is_never_the_expected_rejection(tmp_path, monkeypatch, capsys):
    expects_rejection = write(tmp_path, "rejected.py", COPY.format(expect='tp.rejected("SMEM-CAPACITY")'))
    monkeypatch.setitem(RULES, "SMEM-CAPACITY", crashing("SMEM-CAPACITY", KeyError("T1")))
    assert main(["verify", str(expects_rejection)]) == 1
    out = capsys.readouterr().out
    assert "rule SMEM-CAPACITY crashed (a tileproof bug, please report)" in out


def test_a_rule_raising_internal_error_keeps_its_query(good, monkeypatch, capsys):
    bug = tp.InternalError("allocation of T1 has no lanes", query="lanes(T1) <= 128")
    monkeypatch.setitem(RULES, "SMEM-CAPACITY", crashing("SMEM-CAPACITY", bug))
    assert main(["verify", str(good), "--json"]) == 1
    (case,) = json.loads(capsys.readouterr().out)
    (diagnostic,) = case["report"]["diagnostics"]
    assert diagnostic["message"].startswith("tileproof bug, please report: rule SMEM-CAPACITY: allocation")
    assert "lanes(T1) <= 128" in diagnostic["message"] and not case["matched"]


@pytest.mark.parametrize("error", [tp.InternalError("lost the snapshot"), ZeroDivisionError("division by zero")],
                         ids=["InternalError", "ZeroDivisionError"])
def test_verify_raising_is_a_tileproof_bug_exit_2(error, good, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(cli, "verify", broken)
    assert main(["verify", str(good)]) == 2
    out = capsys.readouterr().out
    assert "ERROR copy: tileproof bug, please report:" in out and "ACCEPTED" not in out
    assert "Traceback" not in out


def test_tileproof_failing_inside_a_schedule_is_ours_not_the_users(tmp_path, monkeypatch, capsys):
    path = write(tmp_path, "inner.py", COPY.format(expect="tp.accepted()"))

    def broken(*args, **kwargs):
        raise tp.InternalError("no loop domain")

    monkeypatch.setattr(tp.TensorView, "set_memory_type", broken)
    assert main(["verify", str(path)]) == 2
    out = capsys.readouterr().out
    assert "ERROR copy: tileproof bug, please report: no loop domain" in out
    assert "building the schedule raised" not in out


def test_an_internal_error_escaping_a_command_exits_2_without_traceback(monkeypatch, capsys):
    def broken(code):
        raise tp.InternalError("explain table is corrupt", rule=code)

    monkeypatch.setattr(cli, "explain_text", broken)
    assert main(["explain", "SMEM-CAPACITY"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: tileproof bug, please report: rule SMEM-CAPACITY: explain table is corrupt")
    assert "Traceback" not in err


# -- bad input: one clear error line and exit 2, from every command ------------------------------

BAD_FILES = {
    "syntax_error": ("def f(:\n", "SyntaxError"),
    "raises_on_import": ("raise ValueError('broken file')\n", "ValueError: broken file"),
    "exits_on_import": ("import sys\nsys.exit(0)\n", "called sys.exit(0)"),
    "no_schedules": ("x = 1\n", "no @tp.schedule functions found"),
    "params_not_a_list": ("import tileproof as tp\n@tp.schedule(params={'n': 5})\ndef p(n):\n    pass\n",
                          "params['n'] must be a non-empty list of values, got 5"),
    "unknown_target": ("import tileproof as tp\n@tp.schedule(target='sm_80')\ndef p():\n    pass\n",
                       "target must be one of sm_90a, sm_100a, got 'sm_80'"),
    "expect_raises": (("import tileproof as tp\n@tp.schedule(params={'n': [1]}, expect=lambda n: 1 / 0)\n"
                       "def p(n):\n    pass\n"), "expect(n=1) raised ZeroDivisionError"),
    "returns_none": ("import tileproof as tp\n@tp.schedule\ndef gives_none():\n    return None\n",
                     "gives_none returned None; a @tp.schedule function must return its tp.Fusion"),
    "exits_in_schedule": ("import sys\nimport tileproof as tp\n@tp.schedule\ndef quits():\n    sys.exit(0)\n",
                          "building the schedule called sys.exit(0)"),
    "raises_in_schedule": ("import tileproof as tp\n@tp.schedule\ndef crashes():\n    raise RuntimeError('mine')\n",
                           "building the schedule raised RuntimeError: mine"),
}


def command_line(command: str, path, tmp_path) -> list[str]:
    if command == "show":
        return ["show", str(path), "--html", str(tmp_path / "page.html")]
    return [command, str(path)]


@pytest.mark.parametrize("command", ["verify", "show", "run"])
@pytest.mark.parametrize("kind", [*BAD_FILES, "missing_path", "non_utf8"])
def test_every_command_gives_bad_input_one_clear_error_and_exit_2(command, kind, tmp_path, capsys):
    if kind == "missing_path":
        path, expected = tmp_path / "nowhere.py", "no such file or directory"
    elif kind == "non_utf8":
        path, expected = tmp_path / "latin1.py", "utf-8"
        path.write_bytes(b"name = '\xe9t\xe9'\n")
    else:
        source, expected = BAD_FILES[kind]
        path = write(tmp_path, f"{kind}.py", source)
    assert main(command_line(command, path, tmp_path)) == 2
    captured = capsys.readouterr()
    both = captured.out + captured.err
    assert expected in both and "Traceback" not in both
    assert "ACCEPTED" not in both and "COMPILED" not in both


def test_a_schedule_file_calling_sys_exit_is_never_a_green_run(tmp_path):
    """Before: `sys.exit(0)` in a schedule file ended `tileproof verify` silently with exit 0."""
    quits = write(tmp_path, "quits.py", "import sys\nsys.exit(0)\n")
    result = subprocess.run([sys.executable, "-m", "tileproof", "verify", str(quits)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "quits.py: cannot load: the file called sys.exit(0)" in result.stderr


@pytest.mark.parametrize("argv, message", [
    (["--size", "N"], "--size expects NAME=POSITIVE_INT, got 'N'"),
    (["--size", "N=0"], "got 'N=0'"),
    (["--size", "N=-3"], "got 'N=-3'"),
    (["--size", "N=abc"], "got 'N=abc'"),
    (["--size", "N=\u00b2"], "got 'N=\u00b2'"),  # str.isdigit() says yes, int() says no
    (["--size", "3=4"], "got '3=4'"),
    (["--size", "N=4", "--size", "N=8"], "--size N given twice (4 and 8)"),
    (["--iterations", "0"], "--iterations: expected a positive int, got '0'"),
    (["--seed", "-1"], "--seed: expected a non-negative int, got '-1'"),
    (["-k", "copy and"], "-k: cannot parse 'copy and'"),
    (["-k", "nothing_like_it"], "-k 'nothing_like_it' selects none of the 1 schedules"),
])
def test_run_refuses_garbage_arguments_before_any_work(argv, message, good, capsys):
    assert main(["run", str(good), *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert "COMPILED" not in captured.out


SYMBOLIC_COPY = '''
import tileproof as tp

@tp.schedule
def symbolic_copy():
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_contig_tensor(2); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    return fusion
'''


@pytest.fixture
def symbolic(tmp_path, private_cache):
    try:
        tp.compile(_built(SYMBOLIC_COPY, tmp_path), "sm_90a")
    except tp.NoDeviceError as e:
        pytest.skip(f"tileproof run compiles first: {e}")
    return write(tmp_path, "symbolic.py", SYMBOLIC_COPY)


def _built(source: str, tmp_path):
    from tileproof.schedule_files import discover

    (case,) = discover([str(write(tmp_path, "probe.py", source))])
    return case.build()


@pytest.mark.parametrize("sizes, message", [
    (["T0_0=99999999999999999999"], "extent T0_0 = 99999999999999999999 is outside 1 .. 2147483647"),
    (["T0_0=2000000000", "T0_1=2000000000"], "needs 32000000000000000000 bytes of host memory"),
    (["N=64"], "--size N: no compiled schedule has an extent named N; extents: T0_0, T0_1"),
])
def test_run_with_sizes_no_machine_can_hold_is_one_error_not_a_traceback(sizes, message, symbolic, capsys):
    argv = ["run", str(symbolic)]
    for size in sizes:
        argv += ["--size", size]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err


def test_usage_errors_point_at_the_subcommands_help(good, capsys):
    assert main(["run", str(good), "--iterations", "x"]) == 2
    assert "try 'tileproof run --help'" in capsys.readouterr().err


# -- selecting schedules: FILE::NAME, -k EXPR; -x stops at the first mismatch ------------------

TWO_SCHEDULES = '''
import tileproof as tp

def copy_fusion():
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_contig_concrete_tensor([2, 4]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion

@tp.schedule(expect=tp.accepted(allocations={"T1": {"bytes": 64}}))
def wrong_first():
    return copy_fusion()

@tp.schedule(params={"n": [1, 2]})
def right_copy(n):
    return copy_fusion()
'''


@pytest.fixture
def two(tmp_path):
    return write(tmp_path, "two.py", TWO_SCHEDULES)


def ran(out: str) -> list[str]:
    return [line.split(":")[0].split(" ", 1)[1] for line in out.splitlines() if line.startswith(("PASS", "FAIL"))]


@pytest.mark.parametrize("selection, expected", [
    (["TWO::right_copy"], ["right_copy[n=1]", "right_copy[n=2]"]),
    (["TWO::right_copy[n=2]"], ["right_copy[n=2]"]),
    (["TWO", "-k", "copy"], ["right_copy[n=1]", "right_copy[n=2]"]),
    (["TWO", "-k", "not copy"], ["wrong_first"]),
    (["TWO", "-k", "WRONG or (right and n=2)"], ["wrong_first", "right_copy[n=2]"]),
    (["TWO", "-x"], ["wrong_first"]),
    (["TWO"], ["wrong_first", "right_copy[n=1]", "right_copy[n=2]"]),
])
def test_schedules_are_selected_by_name_and_keyword(selection, expected, two, capsys):
    argv = ["verify", "--quiet", *(a.replace("TWO", str(two)) for a in selection)]
    assert main(argv) == (1 if "wrong_first" in expected else 0)
    assert ran(capsys.readouterr().out) == expected


def test_exitfirst_says_how_many_schedules_it_left(two, capsys):
    assert main(["verify", str(two), "-x", "--quiet"]) == 1
    assert "1 schedules: 1 accepted, 0 rejected, 1 mismatched expectations; stopped at the first failure (-x), " \
           "2 not run" in capsys.readouterr().out


def test_an_unknown_schedule_name_lists_the_files_schedules(two, capsys):
    assert main(["verify", f"{two}::right"]) == 2
    assert "no schedule named 'right'; the file has: wrong_first, right_copy" in capsys.readouterr().err


def test_show_selects_one_schedule(two, tmp_path, capsys):
    page = tmp_path / "page.html"
    assert main(["show", f"{two}::right_copy[n=1]", "--html", str(page)]) == 0
    html = page.read_text()
    assert "right_copy[n=1]" in html and "wrong_first" not in html


TILED = '''
import tileproof as tp

@tp.schedule
def tiled():
    with tp.Fusion("tiled") as fusion:
        t0 = tp.make_contig_concrete_tensor([64, 32]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, 4)
        t.axis(0).parallelize(tp.ParallelType.BIDx)
        t.axis(1).parallelize(tp.ParallelType.TIDx)
    t1.inline_at(1)
    return fusion
'''


def test_show_prints_the_schedule_as_a_tree(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["show", str(write(tmp_path, "tiled.py", TILED))]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiled on sm_90a: ACCEPTED\n")
    assert "launch: BIDx = 64, TIDx = 8" in out
    assert "T1 (Shared, float32)  T1 = set(T0)" in out  # the memory type
    assert "split i3{32} by 4 -> TIDx{8}, i7{4}" in out
    assert "loop       [BIDx{64} | TIDx{8}, i7{4}]   compute-at 1" in out  # parallel types, compute-at
    assert "T2 (Global, float32)" in out
    assert not list(tmp_path.glob("*.html"))  # the pictures only with --html


def test_show_names_a_case_whose_fusion_has_another_name(two, capsys):
    assert main(["show", f"{two}::right_copy[n=2]"]) == 0
    assert capsys.readouterr().out.startswith("right_copy[n=2]\ncopy on sm_90a: ACCEPTED\n")


def test_show_gives_a_rejected_schedules_codes(tmp_path, capsys):
    assert main(["show", str(write(tmp_path, "big.py", BIG_SHARED))]) == 0  # drawn, not judged
    assert capsys.readouterr().out.startswith("big_shared on sm_90a: REJECTED (SMEM-CAPACITY)\n")


def test_show_html_without_a_file_writes_the_page_here(two, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["show", str(two), "--html"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "two.html")
    assert "right_copy[n=1]" in (tmp_path / "two.html").read_text()


def test_quiet_keeps_a_one_line_count_of_warnings(tmp_path, capsys):
    """--quiet hides the reports: a declared warning is only counted, an undeclared one is named
    under its schedule (and mismatches the expectation)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "valid" / "tma_boxes.py"
    assert main(["verify", f"{path}::tma_strided_tile_fttc", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS tma_strided_tile_fttc: ACCEPTED as expected\n")
    assert out.rstrip().endswith("1 schedules: 1 accepted, 0 rejected, 0 mismatched expectations, 1 expected warning")
    assert "warning[TMA-FTTC]" not in out  # the report itself stays hidden
    undeclared = write(tmp_path, "undeclared.py", f"""
        import importlib.util
        import tileproof as tp
        spec = importlib.util.spec_from_file_location("boxes", {str(path)!r})
        boxes = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(boxes)

        @tp.schedule(expect=tp.accepted())
        def fttc_without_its_warning():
            return boxes.tma_strided_tile_fttc()
    """)
    main(["verify", str(undeclared), "--quiet"])
    out = capsys.readouterr().out
    assert "1 warning (TMA-FTTC)" in out and "warning[TMA-FTTC]" not in out


def test_verify_in_worker_processes_prints_what_one_process_prints(good, wrong, tmp_path, capsys):
    """-j 2 verifies in two forked processes: the same reports, PASS/FAIL lines, order and exit
    code as -j 1 (the timings aside); JSON too."""
    big = write(tmp_path, "big.py", BIG_SHARED)

    def run(*extra) -> tuple[int, str]:
        code = main(["verify", str(good), str(wrong), str(big), *extra])
        out = capsys.readouterr().out
        return code, re.sub(r"\(\d+\.\d+ s, \d+ z3 quer(y|ies)\)", "", out)

    one, two = run("-j", "1"), run("-j", "2")
    assert one == two and one[0] == 1 and "SMEM-CAPACITY" in one[1]
    as_json = [json.loads(run("--json", "-j", j)[1]) for j in ("1", "2")]
    for entry in as_json[0] + as_json[1]:
        entry.get("report", {}).pop("seconds", None)
    assert as_json[0] == as_json[1]


def test_a_number_of_processes_below_one_is_a_usage_error(good, capsys):
    assert main(["verify", str(good), "-j", "0"]) == 2
    assert "positive number of processes" in capsys.readouterr().err


@pytest.mark.parametrize("broken, why", [
    ("raise RuntimeError('half-written')\n", "RuntimeError: half-written"),
    ("def g(:\n    pass\n", "SyntaxError: invalid syntax (broken.py, line 5)"),
])
def test_a_folder_run_reports_a_broken_file_and_verifies_the_others(broken, why, good, tmp_path, capsys):
    write(tmp_path, "broken.py", "import tileproof as tp\n@tp.schedule\ndef f():\n    pass\n" + broken)
    write(tmp_path, "helper.py", "raise RuntimeError('never imported: it has no decorator')\n")
    assert main(["verify", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert f"ERROR {tmp_path / 'broken.py'}: cannot load: {why}" in captured.out  # the path said once
    assert "PASS copy: ACCEPTED as expected" in captured.out  # good.py, after broken.py
    assert "never imported" not in captured.out + captured.err
    assert "2 schedules: 1 accepted, 0 rejected, 0 mismatched expectations, 1 failed to load" in captured.out


def test_a_declared_warning_that_is_not_reported_is_a_mismatch(tmp_path, capsys):
    path = write(tmp_path, "declared.py", COPY.format(expect='tp.accepted(warnings=("SMEM-BANK-CONFLICT",))'))
    assert main(["verify", str(path), "--quiet"]) == 1
    assert "FAIL copy: expected warning SMEM-BANK-CONFLICT, not reported" in capsys.readouterr().out


def test_declared_warnings_are_counted_apart(capsys):
    path = Path(__file__).resolve().parents[2] / "examples" / "valid" / "casts.py"
    assert main(["verify", f"{path}::cast_bfloat16_vector_of_eight_through_registers", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "PASS cast_bfloat16_vector_of_eight_through_registers: ACCEPTED as expected\n1 schedules" in out
    assert out.rstrip().endswith("0 mismatched expectations, 1 expected warning")


def test_run_allocates_an_input_in_its_allocation_order():
    """`tileproof run`'s random inputs follow the allocation domain: attention's V [.., Dv, N] lies
    in memory as [.., N, Dv] (its Dv axis the innermost, stride 1), the others row-major."""
    from tileproof.cli_run import memory_order
    from tileproof.codegen.runtime.arrays import dense_strides
    from tileproof.recipes.attention import AttentionTile, attention

    fusion = attention(AttentionTile(rows=256, keys=256, key_tile=128, head_dim=64, value_dim=64), stages=2)
    q, k, v = (memory_order(t) for t in fusion.inputs)
    assert q == k == (0, 1, 2, 3, 4) and v == (0, 1, 2, 4, 3)
    assert dense_strides((1, 1, 1, 64, 256), v) == (16384, 16384, 16384, 1, 64)


def test_run_passes_the_sizes_no_input_shape_sets():
    """`tileproof run` passes a declared split factor (fusion.symbol("F"), which no input's shape
    sets) at its default or --size value, and the sizes given; the shapes set the others."""
    from tileproof.cli_run import launch_sizes
    from tileproof.schedule_files import build_fusion, select

    (case,) = select([str(Path(__file__).resolve().parents[2] / "examples" / "valid" / "lowering.py")],
                     "split_by_declared_symbol")
    fusion = build_fusion(case)
    assert launch_sizes(fusion, {"F": 1024}, {}) == {"F": 1024}
    with tp.Fusion("copy") as copy:
        x = tp.make_tensor(["M", "N"])
        copy.add_input(x)
        copy.add_output(tp.set(x))
    assert launch_sizes(copy, {"M": 8, "N": 16}, {}) == {}
    assert launch_sizes(copy, {"M": 8, "N": 16}, {"N": 16}) == {"N": 16}


def test_run_picks_sizes_the_assumptions_admit():
    """`tileproof run` runs each symbol at 1024 unless told (--size), and where the assumptions
    refuse 1024, at the first size they admit (K <= 32: 32; N % 4096 == 0: 4096); where none is
    admitted, the default's InputError names the assumption."""
    from tileproof.cli_run import run_sizes
    from tileproof.schedule_files import build_fusion, select

    def kernel(file, name):
        (case,) = select([str(Path(__file__).resolve().parents[2] / "examples" / "valid" / file)], name)[:1]
        return tp.compile(build_fusion(case), case.target)

    assert run_sizes(kernel("lowering.py", "tma_load_from_one_thread"), {}) == {"K": 32}
    assert run_sizes(kernel("lowering.py", "split_by_declared_symbol"), {}) == {"F": 1024}
    assert run_sizes(kernel("lowering.py", "split_by_declared_symbol"), {"F": 7}) == {"F": 7}
    with pytest.raises(tp.InputError, match=">= 1073741824"):
        run_sizes(kernel("assumptions.py", "size_within_the_admitted_range"), {})
