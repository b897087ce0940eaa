"""Building Diagnostics inside rules: severity comes from the rule's registration, and a
proof's verdict becomes diagnostics in one place, report_outcome (the discipline of
verifier/solver.py: unknown is a rejection, never an accept)."""

from __future__ import annotations

from typing import Callable, Container, Iterator, Sequence

from .context import VerifyContext
from .diagnostics import Diagnostic
from .registry import RULES
from .solver import Outcome, Verdict


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


def report_outcome(code: str, outcome: Outcome, what: str, refuted: Callable[[Outcome], Diagnostic],
                   **where) -> Iterator[Diagnostic]:
    """The diagnostics of one proof, by its verdict: none when proved; a rejection saying that
    `what` could not be proved when z3 did not decide (unknown, a timeout); for a
    counterexample, the finding `refuted(outcome)` builds from it. `where` (tensor, ids,
    location, labels) places the rejection."""
    if outcome.status is Verdict.UNKNOWN:
        yield undecided(code, what, outcome, **where)
    elif outcome.status is Verdict.COUNTEREXAMPLE:
        yield refuted(outcome)


def report_values(ctx: VerifyContext, code: str, outcome: Outcome, what: str,
                  message: Callable[[dict[str, int], str], str], keys: Sequence[str], *, hint: str,
                  notes: Sequence[str] = (), point: Container[str] = (), **where) -> Iterator[Diagnostic]:
    """report_outcome with the usual finding: its message is `message(values, when)` (the
    derived values, and when_clause of the counterexample's sizes), and its counterexample
    shows those sizes, the model's values of the variables in `point` (loop indices, threads)
    and the derived values named in `keys`."""

    def refuted(out: Outcome) -> Diagnostic:
        sizes = ctx.symbols_of(out.model)
        shown = {**sizes, **{k: v for k, v in out.model.items() if k in point},
                 **{k: out.values[k] for k in keys if k in out.values}}
        return finding(code, message(out.values, when_clause(sizes)), hint=hint, notes=list(notes),
                       counterexample=shown, **where)

    return report_outcome(code, outcome, what, refuted, **where)


def when_clause(sizes: dict[str, int]) -> str:
    """' when N = 7, M = 3' for the sizes a counterexample needs, '' when it needs none."""
    return " when " + ", ".join(f"{k} = {v}" for k, v in sizes.items()) if sizes else ""
