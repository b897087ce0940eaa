"""The `tileproof` command: verify schedule files against their expectations, explain rules,
show schedules (a terminal tree, or a page of pictures with --html), run them on the GPU
(cli_run.py).

PATH is a file, a folder, or FILE::NAME for one schedule; -k EXPR selects by name; `verify -x`
stops at the first schedule that does not match.

Exit codes: 0 every schedule matched its expectation, 1 some did not, 2 usage or load
error (bad path, a file or schedule that fails to build, raises, exits or returns no Fusion,
unknown target or rule code) or a tileproof bug (an InternalError: "tileproof bug, please
report: ..."). User errors print one clear line, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from rich.console import Console

from . import __version__, allocation
from .cli_run import add_keyword_argument, add_parser as add_run_parser, run_command
from .model.errors import InternalError, ScheduleError, TileproofError
from .model.targets import TARGETS
from .reports.explain import explain_text, list_text
from .reports.html import PageEntry, report_page
from .reports.json_report import report_to_dict, to_json
from .reports.terminal import render_report, render_schedule
from .schedule_files import BuildError, ScheduleCase, build_fusion, select
from .verifier.diagnostics import Report
from .verifier.verify import verify

EXIT_OK, EXIT_MISMATCH, EXIT_ERROR = 0, 1, 2
ALLOCATION_FACTS = ("num_elements", "bytes", "lanes", "columns", "columns_allocated")


@dataclass
class Outcome:
    """One schedule case after building and verifying it (or failing to)."""

    case: ScheduleCase
    report: Report | None = None
    mismatches: list[str] = field(default_factory=list)
    error: str | None = None  # the case could not be built or verified
    fusion: Any = None  # what the pictures are drawn from

    @property
    def matched(self) -> bool:
        return self.error is None and not self.mismatches


class UsageError(TileproofError):
    """A mistake in the command line (exit code 2); `command` is the (sub)command whose
    --help explains it."""

    def __init__(self, message: str, command: str = "tileproof"):
        super().__init__(message)
        self.command = command


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would exit itself; main() owns the exit code
        raise UsageError(f"{self.prog}: {message}", self.prog)


def main(argv: list[str] | None = None) -> int:
    parser = _build_parser()
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help and --version end here; nothing else may exit quietly
            return e.code if isinstance(e.code, int) else EXIT_OK if e.code is None else EXIT_ERROR
        if args.command == "verify":
            return _verify_command(args)
        if args.command == "explain":
            return _explain_command(args)
        if args.command == "show":
            return _show_command(args)
        if args.command == "run":
            return run_command(args, UsageError)
        parser.print_help()
        return EXIT_ERROR
    except UsageError as e:
        print(str(e), file=sys.stderr)
        print(f"try '{e.command} --help'", file=sys.stderr)
        return EXIT_ERROR
    except TileproofError as e:  # no GPU for `tileproof run`; an InternalError reads "tileproof bug, ..."
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tileproof", description="Prove GPU tile schedules safe before any code exists.")
    parser.add_argument("--version", action="version", version=f"tileproof {__version__}")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    verify_parser = commands.add_parser("verify", help="verify schedule files against their expectations")
    verify_parser.add_argument("paths", nargs="+", metavar="PATH",
                               help="schedule files or folders; FILE::NAME picks one schedule")
    verify_parser.add_argument("--target", choices=sorted(TARGETS),
                               help="verify every schedule for this target instead of its own")
    verify_parser.add_argument("--json", action="store_true", help="print one JSON array instead of text")
    verify_parser.add_argument("--html", metavar="FILE", help="also write the reports as an HTML page")
    verify_parser.add_argument("--quiet", action="store_true",
                               help="print only the PASS/FAIL lines (with a count of warnings) and the summary")
    add_keyword_argument(verify_parser)
    verify_parser.add_argument("-x", "--exitfirst", action="store_true",
                               help="stop at the first schedule that does not match its expectation")
    verify_parser.add_argument("-j", "--jobs", type=_positive_int, default=_cpus(), metavar="N",
                               help="verify in N processes (default: the CPUs this process may use; "
                                    "1 with --exitfirst or --html)")
    show_parser = commands.add_parser("show", help="print schedules as trees (tensors, loop domains, memory "
                                                   "types, compute-at); --html draws pictures")
    show_parser.add_argument("path", metavar="PATH", help="a schedule file or folder; FILE::NAME picks one schedule")
    add_keyword_argument(show_parser)
    show_parser.add_argument("--target", choices=sorted(TARGETS),
                             help="verify every schedule for this target instead of its own")
    show_parser.add_argument("--html", metavar="FILE", nargs="?", const="",
                             help="write a page of pictures (IterDomain graphs, smem and tmem maps) instead: "
                                  "FILE, or <PATH stem>.html here")
    add_run_parser(commands)
    explain_parser = commands.add_parser("explain", help="what a rule checks and why")
    explain_parser.add_argument("code", nargs="?", metavar="CODE", help="a rule code, e.g. TMEM-LANES")
    explain_parser.add_argument("--list", action="store_true", help="list every rule code")
    return parser


def _cpus() -> int:
    """The CPUs this process may run on (its affinity, where the OS says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of processes, got {text!r}")
    return n


def _verify_command(args: argparse.Namespace) -> int:
    cases = select(args.paths, args.keyword)
    console = Console(highlight=False)
    outcomes = []
    # the pictures of --html are drawn from the fusions, which stay in the process that built them
    jobs = 1 if args.exitfirst or args.html else args.jobs
    for o in run_cases(cases, args.target, jobs):
        outcomes.append(o)
        if args.json:
            if o.error is not None:
                print(f"error: {o.case.name}: {o.error}", file=sys.stderr)
        else:
            _print_outcome(console, o, quiet=args.quiet)
        if args.exitfirst and not o.matched:
            break
    if args.json:
        print(to_json([_outcome_to_dict(o) for o in outcomes]))
    else:
        _print_summary(console, outcomes, len(cases))
    if args.html:
        _write_html(Path(args.html), outcomes)
    if any(o.error is not None for o in outcomes):
        return EXIT_ERROR
    return EXIT_OK if all(o.matched for o in outcomes) else EXIT_MISMATCH


def run_cases(cases: list[ScheduleCase], target: str | None, jobs: int) -> Iterator[Outcome]:
    """run_case of each case, in order. With jobs > 1 (on Linux) the cases are verified by that
    many worker processes forked from this one, which has loaded the schedule files: each proof
    is pure CPU and independent of the others, and a Report travels back pickled (the fusion does
    not: an outcome from a worker has none)."""
    if jobs <= 1 or len(cases) < 2 or not sys.platform.startswith("linux"):
        for case in cases:
            yield run_case(case, target)
        return
    global _WORKER_CASES
    _WORKER_CASES = cases
    with multiprocessing.get_context("fork").Pool(min(jobs, len(cases))) as pool:
        for k, (report, mismatches, error) in enumerate(pool.imap(_run_in_worker, [(k, target) for k in
                                                                                  range(len(cases))])):
            yield Outcome(cases[k], report, mismatches, error)


_WORKER_CASES: list[ScheduleCase] = []  # what run_cases' forked workers verify, by index


def _run_in_worker(job: tuple[int, str | None]) -> tuple[Report | None, list[str], str | None]:
    o = run_case(_WORKER_CASES[job[0]], job[1])
    return o.report, o.mismatches, o.error


def run_case(case: ScheduleCase, target: str | None = None) -> Outcome:
    """Build and verify one case; a failing build is the case's error, not a crash."""
    try:
        fusion = build_fusion(case)
    except BuildError as e:  # the user's function failed; the message carries their frames
        return Outcome(case, error=str(e))
    except InternalError as e:  # tileproof failed inside the user's function: ours, not theirs
        return Outcome(case, error=f"{e}{_where(case)}")
    try:
        report = verify(fusion, target or case.target)
    except ScheduleError as e:  # the fusion as built is malformed (no outputs, ...): placed at the fusion
        where = f" (fusion {fusion.name} defined at {fusion.origin})" if fusion.origin else ""
        return Outcome(case, error=f"schedule error: {e}{where}")
    except Exception as e:  # verify itself failed: our bug, never an accept
        bug = e if isinstance(e, InternalError) else InternalError(f"verify raised {type(e).__name__}: {e}")
        return Outcome(case, error=str(bug))
    return Outcome(case, report, case.expect.mismatches(report, _allocation_lookup(fusion)), fusion=fusion)


def _allocation_lookup(fusion):
    """allocation_of(tensor_name, key) for Expectation.mismatches."""

    def allocation_of(tensor_name: str, key: str) -> Any:
        try:
            tensor = fusion.tensor(tensor_name)
        except KeyError:
            return f"<no tensor named {tensor_name}>"
        if key not in ALLOCATION_FACTS:
            return f"<unknown allocation fact {key!r}; expected one of {', '.join(ALLOCATION_FACTS)}>"
        return getattr(allocation(tensor), key)

    return allocation_of


def _where(case: ScheduleCase) -> str:
    return f" (schedule defined at {case.location})" if case.location else ""


def _print_outcome(console: Console, o: Outcome, *, quiet: bool) -> None:
    if o.report is not None and not quiet:
        console.print(render_report(o.report, expectation=o.case.expect))
    console.print(_status_line(o), style=_status_style(o), markup=False, soft_wrap=True)
    unexpected = o.case.expect.unexpected_warnings(o.report) if o.report is not None else []
    if quiet and unexpected:  # the reports are hidden, the warnings the file does not expect not forgotten
        console.print(f"  {_warning_count(unexpected)}", style="yellow", markup=False, soft_wrap=True)
    if not quiet:
        console.print()


def _warning_count(warnings: list) -> str:
    by_code: dict[str, int] = {}
    for d in warnings:
        by_code[d.code] = by_code.get(d.code, 0) + 1
    codes = ", ".join(f"{code} x{n}" if n > 1 else code for code, n in sorted(by_code.items()))
    return f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''} ({codes})"


def _print_summary(console: Console, outcomes: list[Outcome], selected: int) -> None:
    accepted = sum(1 for o in outcomes if o.report is not None and o.report.ok)
    rejected = sum(1 for o in outcomes if o.report is not None and not o.report.ok)
    mismatched = sum(1 for o in outcomes if o.mismatches)
    errors = sum(1 for o in outcomes if o.error is not None)
    warnings = sum(len(o.case.expect.unexpected_warnings(o.report)) for o in outcomes if o.report is not None)
    expected = sum(len(o.report.warnings) for o in outcomes if o.report is not None) - warnings
    summary = (f"{len(outcomes)} schedules: {accepted} accepted, {rejected} rejected, "
               f"{mismatched} mismatched expectations")
    if errors:
        summary += f", {errors} failed to load"
    if warnings:
        summary += f", {warnings} warning{'s' if warnings != 1 else ''}"
    if expected:  # declared in the schedule files (tp.accepted(warnings=...))
        summary += f", {expected} expected warning{'s' if expected != 1 else ''}"
    if len(outcomes) < selected:
        summary += f"; stopped at the first failure (-x), {selected - len(outcomes)} not run"
    console.print(summary, style="bold", markup=False, soft_wrap=True)


def _status_line(o: Outcome) -> str:
    if o.error is not None:
        return f"ERROR {o.case.name}: {o.error}"
    verdict = "ACCEPTED" if o.report.ok else f"REJECTED ({', '.join(o.report.codes)})"
    if o.matched:
        return f"PASS {o.case.name}: {verdict} as expected"
    return f"FAIL {o.case.name}: {'; '.join(o.mismatches)}"


def _status_style(o: Outcome) -> str:
    return "bold green" if o.matched else "bold red"


def _outcome_to_dict(o: Outcome) -> dict[str, Any]:
    expectation = dataclasses.asdict(o.case.expect)
    expectation["describe"] = o.case.expect.describe()
    return {
        "name": o.case.name,
        "location": o.case.location,
        "expectation": expectation,
        "matched": o.matched,
        "mismatches": o.mismatches,
        "error": o.error,
        "report": report_to_dict(o.report) if o.report is not None else None,
    }


def _write_html(path: Path, outcomes: list[Outcome]) -> None:
    entries = [PageEntry(_status_line(o), o.report, o.fusion, o.error, o.case.expect.describe(), o.matched)
               for o in outcomes]
    try:
        path.write_text(report_page(entries), encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--html: cannot write {path}: {e.strerror}") from None


def _show_command(args: argparse.Namespace) -> int:
    """Verify every schedule in PATH and print its tree, or with --html write the page of
    pictures; exit 2 on usage or load errors."""
    outcomes = [run_case(case, args.target) for case in select([args.path], args.keyword)]
    if args.html is None:
        console = Console(highlight=False)
        for o in outcomes:
            if o.report is not None:
                if o.case.name != o.report.fusion:  # the tree's title names the fusion
                    console.print(o.case.name, style="bold", markup=False, soft_wrap=True)
                console.print(render_schedule(o.report))
                console.print()
    else:
        file_part = args.path.partition("::")[0]  # FILE::NAME draws into FILE's page
        path = Path(args.html) if args.html else Path.cwd() / f"{Path(file_part).stem}.html"
        _write_html(path, outcomes)
        print(path)
    for o in outcomes:
        if o.error is not None:
            print(f"error: {o.case.name}: {o.error}", file=sys.stderr)
    return EXIT_ERROR if any(o.error is not None for o in outcomes) else EXIT_OK


def _explain_command(args: argparse.Namespace) -> int:
    if args.list:
        print(list_text(), end="")
        return EXIT_OK
    if not args.code:
        raise UsageError("explain: name a rule code (e.g. tileproof explain TMEM-LANES) or use --list",
                         "tileproof explain")
    try:
        print(explain_text(args.code), end="")
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
