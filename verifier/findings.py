"""Building Diagnostics inside rules: severity comes from the rule's registration, and a
proof's verdict becomes diagnostics in one place, report_outcome (the discipline of
verifier/solver.py: unknown is a rejection, never an accept); a structural check's Problems
(model/) become diagnostics in report_problems.

May import model/ and the verifier's registry, context, diagnostics and solver; never a rule."""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Container, Iterable, Iterator, Sequence

from ..model.fusion import Fusion
from ..execution.problems import Problem
from ..model.types import BLOCK_TYPES, THREAD_TYPES, ParallelType
from .context import VerifyContext
from .diagnostics import Diagnostic
from .registry import RULES
from .solver import Outcome, Verdict


def finding(code: str, message: str, *, location: str | None, **fields) -> Diagnostic:
    """A Diagnostic of rule `code`. Every finding says where: `location` is the user's file:line
    of the offending transform, op or tensor (None only where the user's code has no file)."""
    return Diagnostic(code, RULES[code].severity, message, location=location, **fields)


def report_problems(code: str, problems: Iterable[Problem]) -> Iterator[Diagnostic]:
    """The findings of a structural check (no solver): one per Problem that model/ found, with
    its message, place, notes, values and hint as they are."""
    for p in problems:
        yield finding(code, p.message, tensor=p.tensor, ids=list(p.ids), location=p.location, notes=list(p.notes),
                      counterexample=dict(p.values), hint=p.hint)


# a loop index as the index algebra names it: `T1.i7` (execution/indexing.py loop_var)
_LOOP_INDEX = re.compile(r"(?<![\w.])T\d+\.[ibr]\d+\b")


# a launch-time stride as the index algebra names it: `stride.T0.1` (model/global_layout.py stride_var)
_STRIDE = re.compile(r"\bstride\.(T\d+)\.(\d+)\b")


def stride_names(text: str) -> str:
    """`text` with each launch-time stride written as a user reads it: `T0.stride(1)`."""
    return _STRIDE.sub(r"\1.stride(\2)", text)


def tree_names(fusion: Fusion) -> dict[str, str]:
    """How diagnostics name loop indices whose IterDomain the schedule tree shows by its parallel
    type only: `T1.i7` of a Vectorize{4} axis reads `T1.Vectorize{4}` (`T1.axis(2):Bulk{2}` where
    two loop axes of T1 print alike). Serial loops keep `T1.i7`, as the tree prints i7{64};
    thread and block loops are threadIdx.x / blockIdx.x already."""
    names = {}
    for tv in fusion.tensors:
        labels = [i.label() for i in tv.loop]
        for k, i in enumerate(tv.loop):
            p = i.parallel_type
            if p is ParallelType.Serial or p in THREAD_TYPES or p in BLOCK_TYPES:
                continue
            shown = labels[k] if labels.count(labels[k]) == 1 else f"axis({k}):{labels[k]}"
            names[f"{tv.name}.{i.name}"] = f"{tv.name}.{shown}"
    return names


def named_as_tree(d: Diagnostic, names: dict[str, str]) -> Diagnostic:
    """The diagnostic with every loop index in its text and counterexample named by `names`."""
    if not names:
        return d

    def text(t: str | None) -> str | None:
        return None if t is None else _LOOP_INDEX.sub(lambda m: names.get(m.group(0), m.group(0)), t)

    return dataclasses.replace(
        d, message=text(d.message), notes=[text(n) for n in d.notes], labels=[text(x) for x in d.labels],
        hint=text(d.hint), counterexample={text(k): v for k, v in d.counterexample.items()})


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
