"""Problem: one reason a fusion cannot be lowered as scheduled, what the structural checks of
execution/ return (the functions of conditions/). The verifier reports
each as a diagnostic (verifier/findings.py report_problems); the code generator calls the same
checks and treats a problem as a tileproof bug, since the verifier should have rejected the
schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..model.types import MemoryType


@dataclass(frozen=True)
class Problem:
    """One reason a fusion cannot be lowered: `message` lowercase with the numbers, `values`
    those numbers by name (a diagnostic's counterexample), `hint` the fix."""

    message: str
    hint: str
    tensor: str | None = None
    ids: tuple[str, ...] = ()
    values: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    location: str | None = None
    memory: tuple[str, MemoryType] | None = None  # the fix where a tensor is in the wrong memory: (its name, the memory)
    knobs: tuple[str, ...] = ()  # the tensors whose inlining made the problem (a fix may move one)

    def __str__(self) -> str:
        return self.message
