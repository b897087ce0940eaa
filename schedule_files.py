"""Schedule files: Python files whose `@tp.schedule` functions build and return a Fusion,
each declaring the verdict it expects. Discovered in files and folders like pytest tests;
`file.py::name` picks one schedule (every parameter set of it, or `name[n=4]` exactly) and a
`-k` expression (`matches`) selects by name."""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .model.errors import InternalError, ScheduleError, TileproofError, user_location, user_traceback
from .model.fusion import Fusion
from .model.targets import TARGETS


@dataclass(frozen=True)
class Expectation:
    """`accepted` or `rejected` with the error codes that must be reported (exactly),
    optional allocation facts {"T2": {"columns_allocated": 64}}, message fragments, and the
    warning codes the schedule is known to get (each must be reported; `unexpected_warnings`
    names the others)."""

    ok: bool
    codes: tuple[str, ...] = ()
    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def describe(self) -> str:
        """`ACCEPTED`, or `REJECTED (CODE, ...)`, as the verify command prints an expectation."""
        return "ACCEPTED" if self.ok else f"REJECTED ({', '.join(self.codes)})"

    def mismatches(self, report, allocation_of: Callable[[str, str], Any]) -> list[str]:
        """What differs between this expectation and a report ([] when it holds)."""
        out = []
        crashed = sorted({d.code for d in report.diagnostics if d.internal})
        if crashed:  # a crash is never the expected rejection
            out.append(f"rule {', '.join(crashed)} crashed (a tileproof bug, please report)")
        if report.ok != self.ok:
            got = "ACCEPTED" if report.ok else f"REJECTED ({', '.join(report.codes)})"
            out.append(f"expected {self.describe()}, got {got}")
        elif not self.ok and tuple(sorted(self.codes)) != tuple(report.codes):
            out.append(f"expected error codes {sorted(self.codes)}, got {report.codes}")
        for tensor, facts in self.allocations.items():
            for key, want in facts.items():
                got = allocation_of(tensor, key)
                if got != want:
                    out.append(f"expected {tensor}.{key} == {want}, got {got}")
        text = "\n".join(d.message for d in report.diagnostics)
        for m in self.messages:
            if m not in text:
                out.append(f"expected a diagnostic message containing {m!r}")
        missing = sorted(set(self.warnings) - {d.code for d in report.warnings})
        if missing:  # a declaration that no longer holds would hide the next warning of that code
            out.append(f"expected warning {', '.join(missing)}, not reported")
        return out

    def unexpected_warnings(self, report) -> list:
        """The report's warnings whose codes this expectation does not declare."""
        return [d for d in report.warnings if d.code not in self.warnings]


def accepted(*, allocations: dict[str, dict[str, Any]] | None = None,
             warnings: tuple[str, ...] | list[str] = ()) -> Expectation:
    """The schedule must verify; `allocations` {"T2": {"columns_allocated": 64}} are facts
    of tp.allocation(tensor) that must hold too; `warnings` ("GLOBAL-COALESCING",) the warning
    codes it is known to get, each of which must be reported (and is counted apart)."""
    return Expectation(True, (), _check_allocations("accepted", allocations),
                       warnings=_check_strings("accepted", "warnings", warnings))


def rejected(*codes: str, allocations: dict[str, dict[str, Any]] | None = None,
             messages: tuple[str, ...] | list[str] = (), warnings: tuple[str, ...] | list[str] = ()) -> Expectation:
    """The schedule must be rejected with exactly these error codes; `messages` are fragments
    that some diagnostic's message must contain; `warnings` as for accepted."""
    if not codes:
        raise ScheduleError("rejected: name at least one rule code, e.g. tp.rejected('TMEM-LANES')")
    for c in codes:
        if not isinstance(c, str):
            raise ScheduleError(f"rejected: rule codes are strings, got {c!r}")
    return Expectation(False, tuple(codes), _check_allocations("rejected", allocations),
                       _check_strings("rejected", "messages", messages),
                       _check_strings("rejected", "warnings", warnings))


def _check_strings(func: str, argument: str, values) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, (list, tuple)) \
            or not all(isinstance(v, str) for v in values):
        raise ScheduleError(f"{func}: {argument} must be a list of strings, got {values!r}")
    return tuple(values)


def _check_allocations(func: str, allocations) -> dict[str, dict[str, Any]]:
    if allocations is None:
        return {}
    if not isinstance(allocations, dict) or not all(
            isinstance(tensor, str) and isinstance(facts, dict) for tensor, facts in allocations.items()):
        raise ScheduleError(f"{func}: allocations must map tensor names to facts, "
                            f"e.g. {{'T2': {{'bytes': 64}}}}, got {allocations!r}")
    return dict(allocations)


@dataclass(frozen=True)
class ScheduleCase:
    """One schedule to verify: a function (with fixed parameters) and what it expects."""

    name: str
    build: Callable[[], Any]
    expect: Expectation
    target: str
    location: str | None


@dataclass
class ScheduleSpec:
    func: Callable[..., Any]
    expect: Expectation | Callable[..., Expectation]
    target: str
    params: dict[str, list[Any]]
    location: str | None

    def cases(self) -> list[ScheduleCase]:
        name = self.func.__name__
        if not self.params:
            return [ScheduleCase(name, self.func, self._expect({}), self.target, self.location)]
        keys = list(self.params)
        out = []
        for values in itertools.product(*(self.params[k] for k in keys)):
            kw = dict(zip(keys, values))
            out.append(ScheduleCase(f"{name}[{_label(kw)}]", _bind(self.func, kw), self._expect(kw), self.target,
                                    self.location))
        return out

    def _expect(self, kw) -> Expectation:
        if isinstance(self.expect, Expectation):
            return self.expect
        try:
            e = self.expect(**kw)
        except TileproofError:
            raise
        except Exception as error:  # the user's expect function failed: theirs, said without a traceback
            raise ScheduleError(f"{self.func.__name__}: expect({_label(kw)}) raised "
                                f"{type(error).__name__}: {error}") from error
        if not isinstance(e, Expectation):
            raise ScheduleError(f"{self.func.__name__}: expect({_label(kw)}) must return tp.accepted(...) "
                                f"or tp.rejected(...), got {e!r}")
        return e


def _label(kw: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in kw.items())


def _bind(func, kw):
    def build():
        return func(**kw)

    return build


def schedule(func=None, *, expect: Expectation | Callable[..., Expectation] | None = None,
             target: str = "sm_90a", params: dict[str, list[Any]] | None = None):
    """Mark a function that builds and returns a Fusion as a schedule to verify: `expect` the
    verdict (default tp.accepted()), `target` the architecture it is verified for, `params`
    {name: [values]} a case per combination, the function called with those keywords."""
    if expect is not None and not isinstance(expect, Expectation) and not callable(expect):
        raise ScheduleError(f"schedule: expect must be tp.accepted(...), tp.rejected(...) or a function "
                            f"of the params returning one, got {expect!r}")
    if not isinstance(target, str) or target not in TARGETS:
        raise ScheduleError(f"schedule: target must be one of {', '.join(TARGETS)}, got {target!r}")
    params = _check_params(params)

    def mark(f):
        if not callable(f):
            raise ScheduleError(f"schedule: @tp.schedule decorates a function that returns a Fusion, got {f!r}")
        unknown = [k for k in params if k not in inspect.signature(f).parameters]
        if unknown:
            raise ScheduleError(f"schedule: params names {', '.join(unknown)}, not a parameter of {f.__name__}")
        f.__tileproof_schedule__ = ScheduleSpec(
            f, expect if expect is not None else accepted(), target, params, user_location()
        )
        return f

    return mark(func) if func is not None else mark


def _check_params(params) -> dict[str, list[Any]]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise ScheduleError(f"schedule: params must be a dict of parameter name -> list of values, got {params!r}")
    for name, values in params.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ScheduleError(f"schedule: params keys must be parameter names, got {name!r}")
        if not isinstance(values, (list, tuple, range)) or len(values) == 0:
            raise ScheduleError(f"schedule: params[{name!r}] must be a non-empty list of values, got {values!r}")
    return {name: list(values) for name, values in params.items()}


class LoadError(TileproofError):
    """A schedule file could not be loaded (exit code 2 in the CLI)."""


def discover(paths: list[str]) -> list[ScheduleCase]:
    """Every schedule case in paths (files, folders searched for *.py not starting with `_` that
    mention `schedule`, or `file.py::name` for the cases of one schedule). In a folder, a file
    that fails to load is one case whose build raises why (BuildError), so the others still run;
    a file named alone raises LoadError."""
    cases = []
    for path in paths:
        file_part, _, name = path.partition("::")
        p = Path(file_part)
        if name and not p.is_file():
            raise LoadError(f"{path}: ::NAME selects a schedule in a file, and {p} is not a file")
        if p.is_dir():
            for f in sorted(f for f in p.rglob("*.py") if not f.name.startswith("_")):
                if b"schedule" not in f.read_bytes():  # no @tp.schedule: a helper, never imported here
                    continue
                try:
                    cases += load_file(f)
                except LoadError as e:
                    cases.append(_unloadable(f, e))
        elif p.is_file():
            found = load_file(p)
            cases += _named(found, name, p) if name else found
        else:
            raise LoadError(f"{p}: no such file or directory")
    return cases


def _unloadable(path: Path, error: LoadError) -> ScheduleCase:
    """The case standing for a folder's file that failed to load: building it raises why."""
    why = str(error).removeprefix(f"{path}: ")  # the case is named by the path already

    def build():
        raise BuildError(why)

    return ScheduleCase(str(path), build, accepted(), "sm_90a", str(path))


def select(paths: list[str], keyword: str | None = None) -> list[ScheduleCase]:
    """The schedules in paths (discover) whose names the -k expression `keyword` matches.
    LoadError when there are none to select from, ScheduleError when -k is malformed or
    selects none."""
    selected = matches(keyword) if keyword is not None else None
    cases = discover(paths)
    if not cases:
        raise LoadError(f"no @tp.schedule functions found in {', '.join(paths)}")
    if selected is None:
        return cases
    picked = [c for c in cases if selected(c.name)]
    if not picked:
        raise ScheduleError(f"-k {keyword!r} selects none of the {len(cases)} schedules in {', '.join(paths)}")
    return picked


def _named(cases: list[ScheduleCase], name: str, path: Path) -> list[ScheduleCase]:
    """The cases called `name`, or all parameter sets of the schedule `name`."""
    picked = [c for c in cases if c.name == name or c.name.partition("[")[0] == name]
    if not picked:
        names = ", ".join(dict.fromkeys(c.name.partition("[")[0] for c in cases)) or "none"
        raise LoadError(f"{path}::{name}: no schedule named {name!r}; the file has: {names}")
    return picked


_KEYWORD_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


def matches(expression: str) -> Callable[[str], bool]:
    """A predicate on schedule names from a pytest-style -k expression: words match as
    case-insensitive substrings, combined with `and`, `or`, `not` and parentheses.
    Raises ScheduleError when the expression does not parse."""
    tokens = _KEYWORD_TOKEN.findall(expression)
    if not tokens:
        raise ScheduleError(f"-k: cannot parse {expression!r}")
    position = 0

    def peek():
        return tokens[position] if position < len(tokens) else None

    def take():
        nonlocal position
        position += 1
        return tokens[position - 1]

    def either():  # or-expression
        left = both()
        while peek() == "or":
            take()
            right = both()
            left = _either(left, right)
        return left

    def both():  # and-expression
        left = negation()
        while peek() == "and":
            take()
            right = negation()
            left = _both(left, right)
        return left

    def negation():
        if peek() == "not":
            take()
            inner = negation()
            return lambda n: not inner(n)
        return atom()

    def atom():
        token = peek()
        if token is None or token in ("and", "or", ")"):
            raise ScheduleError(f"-k: cannot parse {expression!r}: expected a name, got {token or 'the end'}")
        take()
        if token == "(":
            inner = either()
            if peek() != ")":
                raise ScheduleError(f"-k: cannot parse {expression!r}: unclosed '('")
            take()
            return inner
        word = token.lower()
        return lambda n: word in n.lower()

    predicate = either()
    if position != len(tokens):
        raise ScheduleError(f"-k: cannot parse {expression!r}: unexpected {tokens[position]!r}")
    return predicate


def _either(a: Callable[[str], bool], b: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda name: a(name) or b(name)


def _both(a: Callable[[str], bool], b: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda name: a(name) and b(name)


def load_file(path: Path) -> list[ScheduleCase]:
    mod_name = f"_tileproof_schedule_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:  # exit code 0 would end the command green having verified nothing
        raise LoadError(f"{path}: cannot load: the file called sys.exit({e.code!r}) while being imported") from None
    except Exception as e:  # the user's file failed to import: report it with the user's frames
        frames = user_traceback(e)
        raise LoadError(f"{path}: cannot load: {type(e).__name__}: {e}" + (f"\n{frames}" if frames else "")) from e
    specs = [v.__tileproof_schedule__ for _, v in inspect.getmembers(module) if hasattr(v, "__tileproof_schedule__")]
    specs.sort(key=lambda s: s.func.__code__.co_firstlineno)
    try:
        return [c for s in specs for c in s.cases()]
    except ScheduleError as e:
        raise LoadError(f"{path}: {e}") from None


class BuildError(TileproofError):
    """A schedule function failed (raised, exited or returned no Fusion): the user's mistake."""


def build_fusion(case: ScheduleCase) -> Fusion:
    """Call the case's schedule function; what goes wrong in the user's code becomes a
    BuildError: one line saying what, then the user's own frames of the traceback (their
    schedule function and helpers down to the failing call, tileproof's frames left out),
    so that it points at their line. An InternalError (tileproof failing inside their
    function) passes through: it is ours, not theirs."""
    try:
        fusion = case.build()
    except (InternalError, BuildError):  # ours, or a file that did not load (discover)
        raise
    except ScheduleError as e:  # a tileproof call refused its arguments: the user's call is the place
        raise BuildError(f"schedule error: {e}{_trace(e, case)}") from e
    except SystemExit as e:  # would end the command with this code, having verified nothing
        raise BuildError(f"building the schedule called sys.exit({e.code!r}){_trace(e, case)}") from None
    except Exception as e:  # the user's function raised (or tp.compile inside it refused): theirs
        raise BuildError(f"building the schedule raised {type(e).__name__}: {e}{_trace(e, case)}") from e
    if not isinstance(fusion, Fusion):
        got = "None" if fusion is None else f"{type(fusion).__name__} {fusion!r:.60}"
        raise BuildError(f"{case.name} returned {got}; a @tp.schedule function must return its tp.Fusion"
                         f"{_where(case)}")
    return fusion


def _where(case: ScheduleCase) -> str:
    return f" (schedule defined at {case.location})" if case.location else ""


def _trace(error: BaseException, case: ScheduleCase) -> str:
    """The user's frames of error's traceback on the lines below, or where the schedule is
    defined when none of them is the user's."""
    frames = user_traceback(error)
    return f"\n{frames}" if frames else _where(case)
