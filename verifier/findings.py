"""Building Diagnostics inside rules: severity comes from the rule's registration."""

from __future__ import annotations

from .diagnostics import Diagnostic
from .registry import RULES
from .solver import Outcome


def finding(code: str, message: str, **fields) -> Diagnostic:
    return Diagnostic(code, RULES[code].severity, message, **fields)


def undecided(code: str, what: str, outcome: Outcome, **fields) -> Diagnostic:
    """Unknown or timeout is a rejection that says what could not be decided."""
    return finding(
        code,
        f"could not prove {what} (solver: {outcome.reason or 'unknown'})",
        notes=["an undecided proof is a rejection, never an accept"],
        hint="bind the symbolic sizes (verify(..., bind={...})) or state assumptions with fusion.assume(...)",
        **fields,
    )


def format_values(values: dict[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in values.items())
