"""verify(): run every registered rule on a frozen snapshot of the fusion.

Imports verifier/rules/ (the families register their rules as they load); a rule never imports
this module."""

from __future__ import annotations

import difflib
import time
import traceback
import weakref
from typing import Iterable, Mapping

from ..execution.cluster import cluster_dims, cluster_size
from ..execution.tmem_regions import check_tmem_regions
from ..model.errors import InternalError, ScheduleError
from ..model.fingerprint import fingerprint
from ..model.fusion import Fusion, symbol_range
from ..model.notation import user_str
from ..model.targets import get_target
from .causes import group_by_cause
from .analysis.decisions import decide
from .context import VerifyContext
from .diagnostics import Decisions, Diagnostic, Report, Severity
from .findings import named_as_tree, tree_names
from .registry import all_rules
from . import rules as rule_families  # noqa: F401 - importing it registers every rule, in report order
from .summary import summarize
from .user_names import show_user_names


# rules whose error leaves the others nothing to prove: a split factor the kernel cannot be
# given makes every size-quantified claim about a kernel that cannot exist (and slow to decide)
GATES = ("SYMBOLIC-FACTOR",)

# fusion -> (fingerprint, report) of its last full verify that passed: tp.compile of the same,
# unchanged fusion takes that report instead of proving everything again (a changed schedule has
# another fingerprint; a rejection is not kept, so no edit of a report can make compile accept)
_ACCEPTED: "weakref.WeakKeyDictionary[Fusion, tuple[str, Report]]" = weakref.WeakKeyDictionary()


def verify(fusion: Fusion, target="sm_90a", *, bind: Mapping[str, int] | None = None,
           rules: Iterable[str] | None = None) -> Report:
    """Prove the schedule safe for every admitted size, or report why not.

    Never raises for an unsafe schedule (that is a Report with errors); raises
    ScheduleError only for malformed input (not a Fusion, unknown target, bad bind)."""
    if not isinstance(fusion, Fusion):
        raise ScheduleError(f"verify: expected a tp.Fusion, got {type(fusion).__name__}")
    tgt = get_target(target)
    bind = _check_bind(fusion, bind)
    _check_structure(fusion)
    start = time.perf_counter()
    snap = fusion.snapshot()
    # the schedule as written (VerifyContext gives loops' types to the snapshot's members, whose broadcasts of
    # inputs may be views): the key tp.compile computes from the same fusion
    key = fingerprint(fusion, tgt.name)
    ctx = VerifyContext(snap, tgt, bind)
    ctx.source = fusion
    wanted = _check_rules(rules)
    report = Report(fusion=snap.name, target=tgt.name, location=snap.origin)
    rules = [r for r in all_rules() if wanted is None or r.code in wanted]
    ctx.running = frozenset(r.code for r in rules)
    names = tree_names(snap)
    gated = 0
    for r in sorted(rules, key=lambda r: r.code not in GATES):
        if any(d.code in GATES for d in report.errors):
            report.rules_not_run.append(r.code)
            gated += 1
            continue
        if any(d.code in r.premises for d in report.errors) or any(p in report.rules_not_run for p in r.premises):
            report.rules_not_run.append(r.code)  # its question has no answer (registry.rule), or its premise's had none
            continue
        report.rules_run.append(r.code)
        try:
            found = list(r.func(ctx))
        except Exception as e:  # our bug, never an accept
            found = [_rule_crashed(r.code, e, snap.origin)]
        for d in found:
            d.rule = d.rule or f"{r.func.__module__.rsplit('.', 1)[-1]}.{r.func.__name__}"
        report.diagnostics += [named_as_tree(d, names) for d in found]
    group_by_cause(ctx, report)
    if report.ok and not bind and wanted is None:
        report.decisions = decide(ctx)
    if gated:
        for d in report.errors:
            d.notes.append(f"{gated} other rules were not run: each proves its claim for "
                           f"every size the kernel can be given, and this schedule cannot be given one")
    lo, hi = symbol_range()
    report.assumptions = ([f"{lo} <= {s} <= {hi}" for s in snap.symbols if s not in bind]
                          + [user_str(a) for a in snap.assumptions] + [f"{k} = {v}" for k, v in bind.items()])
    report.tensors = summarize(ctx)
    show_user_names(snap, report)  # last: the rules and the grouping read T<n>
    report.launch = {str(p): str(e) for p, e in ctx.block_dims.items()}
    if cluster_size(snap) > 1:
        report.launch["cluster"] = str(cluster_dims(snap))
    report.queries = ctx.queries
    report.seconds = time.perf_counter() - start
    if report.ok and not bind and wanted is None:
        _ACCEPTED[fusion] = (key, report)
    return report


def rejected_decisions(fusion: Fusion, target, report: Report) -> Decisions:
    """The decisions of a schedule verify rejected (analysis/decisions.py), asked for by
    tileproof.testing.compile_unverified only, so a rejecting verify spends no query on them.
    None where they cannot be had: a gate's rejection left rules unrun, or its lowering is broken
    beyond the rules' findings; the lowering then keeps every predicate."""
    if report.rules_not_run and any(d.code in GATES for d in report.errors):
        return Decisions()
    try:
        return decide(VerifyContext(fusion.snapshot(), get_target(target)))
    except Exception:  # a rejected schedule: its rejection explains it
        return Decisions()


def accepted_before(fusion: Fusion, key: str) -> Report | None:
    """The passing report of the last full tp.verify of this fusion object, if its schedule's
    fingerprint is still `key` (fingerprint(fusion, target)); else None."""
    hit = _ACCEPTED.get(fusion)
    return hit[1] if hit is not None and hit[0] == key else None


def _check_rules(rules: Iterable[str] | None) -> set[str] | None:
    """The rule codes asked for; a typo or a bare string would run no rule and report ok."""
    if rules is None:
        return None
    if isinstance(rules, str):
        raise ScheduleError(f"verify: rules must be a list of rule codes, got the string {rules!r} "
                            f"(write rules=[{rules!r}])")
    known = {r.code for r in all_rules()}
    wanted = set()
    for code in rules:
        if not isinstance(code, str):
            raise ScheduleError(f"verify: rule codes are strings, got {code!r}")
        if code.upper() not in known:
            close = difflib.get_close_matches(code.upper(), sorted(known), n=1)
            raise ScheduleError(f"verify: unknown rule code {code!r}"
                                + (f"; did you mean {close[0]!r}?" if close else "; `tileproof explain --list` lists them"))
        wanted.add(code.upper())
    return wanted


def _rule_crashed(code: str, error: Exception, location: str | None) -> Diagnostic:
    """The rejection standing in for a rule that raised: a tileproof bug, never an accept,
    placed at the fusion (`location`). An InternalError keeps its own message (and query);
    anything else is wrapped in one."""
    if not isinstance(error, InternalError):
        error = InternalError(f"{type(error).__name__}: {error}", rule=code)
    elif error.rule is None:
        error.rule = code
    return Diagnostic(
        code, Severity.ERROR, str(error),
        notes=["the schedule is rejected because the rule could not be decided",
               traceback.format_exc(limit=6)],
        location=location, internal=True,
    )


def _check_bind(fusion: Fusion, bind) -> dict[str, int]:
    if bind is None:
        return {}
    if not isinstance(bind, Mapping):
        raise ScheduleError(f"verify: bind must be a dict of symbol -> int, got {type(bind).__name__}")
    out = {}
    for k, v in bind.items():
        name = getattr(k, "name", k)
        if name not in fusion.symbols:
            raise ScheduleError(f"verify: bind names unknown symbol {name!r}; symbols: {', '.join(fusion.symbols) or 'none'}")
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ScheduleError(f"verify: bind value for {name} must be a positive int, got {v!r}")
        out[name] = v
    return out


def _check_structure(fusion: Fusion) -> None:
    if not fusion.outputs:
        raise ScheduleError(f"verify: fusion {fusion.name} has no outputs (call fusion.add_output)")
    for t in fusion.tensors:
        if t.definition is None and t not in fusion.inputs:
            raise ScheduleError(f"verify: {t.name} is neither a fusion input nor computed by an op (call fusion.add_input)")
    check_tmem_regions(fusion)
