"""Report and Diagnostic: what verification returns (rendered by reports/)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Severity(enum.Enum):
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

    @property
    def is_error(self) -> bool:
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


@dataclass
class Report:
    fusion: str
    target: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    tensors: list[TensorSummary] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    launch: dict[str, Any] = field(default_factory=dict)
    rules_run: list[str] = field(default_factory=list)
    rules_not_run: list[str] = field(default_factory=list)  # after an error of a gate (verify.GATES)
    queries: int = 0
    seconds: float = 0.0
    location: str | None = None

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.WARNING]

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def codes(self) -> list[str]:
        return sorted({d.code for d in self.errors})

    def __bool__(self) -> bool:
        return self.ok
