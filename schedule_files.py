"""Schedule files: Python files whose `@tp.schedule` functions build and return a Fusion,
each declaring the verdict it expects. Discovered in files and folders like pytest tests."""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .model.errors import ScheduleError, TileproofError, user_location


@dataclass(frozen=True)
class Expectation:
    """`accepted` or `rejected` with the error codes that must be reported (exactly),
    optional allocation facts {"T2": {"columns_allocated": 64}} and message fragments."""

    ok: bool
    codes: tuple[str, ...] = ()
    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: tuple[str, ...] = ()

    def describe(self) -> str:
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
        return out


def accepted(*, allocations: dict[str, dict[str, Any]] | None = None) -> Expectation:
    return Expectation(True, (), dict(allocations or {}))


def rejected(*codes: str, allocations: dict[str, dict[str, Any]] | None = None,
             messages: tuple[str, ...] | list[str] = ()) -> Expectation:
    if not codes:
        raise ScheduleError("rejected: name at least one rule code, e.g. tp.rejected('TMEM-LANES')")
    for c in codes:
        if not isinstance(c, str):
            raise ScheduleError(f"rejected: rule codes are strings, got {c!r}")
    return Expectation(False, tuple(codes), dict(allocations or {}), tuple(messages))


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
            label = ",".join(f"{k}={v}" for k, v in kw.items())
            out.append(ScheduleCase(f"{name}[{label}]", _bind(self.func, kw), self._expect(kw), self.target, self.location))
        return out

    def _expect(self, kw) -> Expectation:
        e = self.expect(**kw) if callable(self.expect) and not isinstance(self.expect, Expectation) else self.expect
        if not isinstance(e, Expectation):
            raise ScheduleError(f"{self.func.__name__}: expect must be tp.accepted(...) or tp.rejected(...)")
        return e


def _bind(func, kw):
    def build():
        return func(**kw)

    return build


def schedule(func=None, *, expect: Expectation | Callable[..., Expectation] | None = None,
             target: str = "sm_90a", params: dict[str, list[Any]] | None = None):
    """Mark a function that builds and returns a Fusion as a schedule to verify."""

    def mark(f):
        if not callable(f):
            raise ScheduleError("@tp.schedule decorates a function that returns a Fusion")
        f.__tileproof_schedule__ = ScheduleSpec(
            f, expect if expect is not None else accepted(), target, dict(params or {}), user_location()
        )
        return f

    return mark(func) if func is not None else mark


class LoadError(TileproofError):
    """A schedule file could not be loaded (exit code 2 in the CLI)."""


def discover(paths: list[str]) -> list[ScheduleCase]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob("*.py") if not f.name.startswith("_"))
        elif p.is_file():
            files.append(p)
        else:
            raise LoadError(f"{p}: no such file or directory")
    cases = []
    for f in files:
        cases += load_file(f)
    return cases


def load_file(path: Path) -> list[ScheduleCase]:
    mod_name = f"_tileproof_schedule_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's file failed to import: report it, do not crash
        raise LoadError(f"{path}: cannot load: {type(e).__name__}: {e}") from e
    specs = [v.__tileproof_schedule__ for _, v in inspect.getmembers(module) if hasattr(v, "__tileproof_schedule__")]
    specs.sort(key=lambda s: s.func.__code__.co_firstlineno)
    return [c for s in specs for c in s.cases()]
