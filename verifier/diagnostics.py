"""Report and Diagnostic: what verification returns (rendered by reports/)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping

from ..execution.predicates import Claim
from ..hw.tcgen05 import TmemPattern

AccessKey = tuple[str, str, str, int]  # execution/accesses.py Access.key


class Severity(enum.Enum):
    """How bad a Diagnostic is: ERROR rejects the schedule; WARNING (performance rules such as
    SMEM-BANK-CONFLICT, REGISTER-BUDGET) is reported on an accepted schedule."""

    ERROR = "error"
    WARNING = "warning"

    def __str__(self) -> str:
        return self.value


@dataclass
class Diagnostic:
    """One finding. `message` is lowercase with the numbers in it and no trailing period;
    `hint` says how to fix it; `counterexample` holds concrete values from the z3 model."""

    code: str
    severity: Severity
    message: str
    tensor: str | None = None
    ids: list[str] = field(default_factory=list)  # IterDomain names to highlight (i12, ...)
    location: str | None = None  # user file:line of the offending transform or tensor
    labels: list[str] = field(default_factory=list)  # secondary locations
    notes: list[str] = field(default_factory=list)  # the reasoning
    table: list[dict[str, Any]] = field(default_factory=list)  # e.g. the allocation table
    counterexample: dict[str, int] = field(default_factory=dict)
    hint: str | None = None
    rule: str | None = None  # the function that emitted it
    internal: bool = False  # the rule crashed: a tileproof bug standing in for a verdict
    # a root cause and its consequences: a diagnostic whose fix the rule verified on a copy of the
    # fusion has an `id`; each other diagnostic that goes away with that fix has `follows_from` = it,
    # and comes right after it in the report (verify.group_by_cause)
    id: str | None = None
    follows_from: str | None = None

    @property
    def is_error(self) -> bool:
        """Whether the severity is ERROR (the schedule is rejected)."""
        return self.severity is Severity.ERROR


@dataclass
class TensorSummary:
    """What a renderer needs of a tensor: its schedule tree and allocation."""

    name: str
    memory: str
    dtype: str
    definition: str | None
    logical: list[str]
    loop: list[str]
    allocation: list[str]
    compute_at: int
    transforms: list[str]  # one line per transform, in order
    tmem_dim_sep: int | None
    allocation_table: list[dict[str, Any]]
    allocation_size: dict[str, Any]
    id_labels: dict[str, str]  # IterDomain name -> label (TIDx{32}, i7{64})


@dataclass(frozen=True)
class Decisions:
    """What verify decided for the code generator, so that tp.compile proves nothing again:

        claims    each claim the lowering asks (execution/predicates.py: a hole or padding
                  predicate the assumptions make redundant, registers a lane gives a
                  warp-collective instruction that are consecutive) -> whether it is proved
        tcgen05   each tensor-memory access (its Access.key) -> the tcgen05 pattern it is lowered
                  to (whole warps execute it, its elements fill whole registers), None where none
                  is proved

    Both are held as (key, value) pairs and read as mappings (`verdicts`, `patterns`). A
    question neither holds was not decided (a verify with `bind` or a subset of rules, or a
    rejected schedule whose rules did not all run): the code generator keeps such a predicate,
    and refuses a warp-collective instruction that would need it."""

    claims: tuple[tuple[Claim, bool], ...] = ()
    tcgen05: tuple[tuple[AccessKey, TmemPattern | None], ...] = ()

    @cached_property
    def verdicts(self) -> Mapping[Claim, bool]:
        return dict(self.claims)

    @cached_property
    def patterns(self) -> Mapping[AccessKey, TmemPattern | None]:
        return dict(self.tcgen05)


@dataclass
class Report:
    """What tp.verify returns: every Diagnostic of every rule that ran (`diagnostics`; `ok` when
    none is an error), the fusion and target, a summary of each tensor (`tensors`), the
    `assumptions` the proofs used, the `launch` dimensions, `rules_run` / `rules_not_run`, and
    the z3 `queries` and `seconds` spent, and the `decisions` the code generator reads (which
    predicates are redundant, which tcgen05 pattern each tensor-memory access is). Truthy when
    ok. tileproof.reports renders it (terminal, JSON, HTML).

        report = tp.verify(fusion, target="sm_90a"); print(report.ok, report.codes)"""

    fusion: str
    target: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    tensors: list[TensorSummary] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    launch: dict[str, Any] = field(default_factory=dict)
    rules_run: list[str] = field(default_factory=list)
    rules_not_run: list[str] = field(default_factory=list)  # after an error of a gate (verify.GATES) or a premise
    queries: int = 0
    seconds: float = 0.0
    location: str | None = None
    decisions: Decisions = field(default_factory=Decisions)

    @property
    def errors(self) -> list[Diagnostic]:
        """The diagnostics of severity ERROR."""
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        """The diagnostics of severity WARNING."""
        return [d for d in self.diagnostics if d.severity is Severity.WARNING]

    @property
    def ok(self) -> bool:
        """Whether the schedule is accepted: no error (warnings allowed)."""
        return not self.errors

    @property
    def codes(self) -> list[str]:
        """The sorted, distinct rule codes of the errors (`["SMEM-CAPACITY"]`)."""
        return sorted({d.code for d in self.errors})

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        """The plain text `tileproof verify` prints for this schedule (reports/terminal.py's
        report_to_text, registered with `register_text_renderer`)."""
        if _text_renderer is None:  # only while tileproof.reports is being imported
            return repr(self)
        return _text_renderer(self)


# verifier/ may not import reports/, so reports/terminal.py hands its plain-text renderer to
# Report.__str__ when it is imported (tileproof's __init__ imports it): one renderer, used by both
_text_renderer: Callable[[Report], str] | None = None


def register_text_renderer(render: Callable[[Report], str]) -> None:
    """Make `render` what str(report) returns (reports/terminal.py calls it with report_to_text)."""
    global _text_renderer
    _text_renderer = render
