"""Asynchronous copies over loops: every read of a cp.async-filled tensor waits for its data
(CPASYNC-WAIT), decided on the loop nest with its waits and barriers placed (model/barriers.py)
as a Timeline (model/pipeline.py) for a symbolic iteration (verifier/analysis/pipeline.py)."""

from __future__ import annotations

from typing import Iterator

from ...model.barriers import Async, statement_paths
from ...model.pipeline import Timeline, timeline
from ..analysis.barrier_nest import barrier_nest
from ..analysis.pipeline import prove_complete
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome
from ..registry import rule
from ..solver import Outcome


def _timelines(ctx: VerifyContext) -> list[tuple[Timeline, object, object]]:
    """(timeline, writer, reader) for every cp.async copy and each statement reading its tensor."""
    nest_ = barrier_nest(ctx)
    if nest_ is None:
        return []
    stmts = statement_paths(nest_.tree, nest_.hazards)
    out = []
    for w, wa, wp in stmts:
        if wa.kind is not Async.CP_ASYNC:
            continue
        for r, ra, rp in stmts:
            if wa.writes in ra.reads:
                reader = _tensor(r)
                out.append((timeline(wa.writes, reader.name, wp, rp, nest_.hazards), _tensor(w), reader))
    return out


def _tensor(leaf):
    """The tensor of a barrier-nest leaf (a reduction's steps are (tensor, phase) pairs)."""
    return leaf[0] if isinstance(leaf, tuple) else leaf


@rule("CPASYNC-WAIT", family="pipeline")
def cp_async_wait(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every read of a cp.async-filled tensor follows a wait that completes its copy and a barrier.

    What it checks:
        On the kernel's loop nest with the waits and barriers the code generator places
        (model/barriers.py), for every cp.async copy and every statement reading its tensor,
        in the innermost scope holding both and for a symbolic iteration k of that scope's
        loop (its prologue included): the copy of iteration k's data is issued before the
        read, a `cp.async.wait_group N` after it has at least N + 1 commits between the copy
        and itself (so the copy's group is complete), and a __syncthreads comes after that
        wait, before the read. The counterexample names the iteration.
    Why the hardware needs it:
        A cp.async completes asynchronously. Its thread sees the data only after a
        cp.async.wait_group that covers the copy's group (groups are committed with
        cp.async.commit_group; wait_group N leaves the newest N in flight), and other threads
        only after a barrier that follows the wait: a read before either sees stale shared
        memory, or a copy still in flight.
    Example:
        none: tileproof places every wait and barrier itself, so no schedule written with
        today's API fails this rule; it proves the placement on every schedule
        (tests/rules/test_cp_async.py removes a wait and shows the failure it then reports)
    Fix:
        none: a report of this rule on an unmodified schedule is a tileproof bug
    References:
        PTX ISA 9.7.9.25.3.1 (cp.async), 9.7.9.25.3.2 (cp.async.commit_group), 9.7.9.25.3.3
        (cp.async.wait_group: "waits until ... N or fewer of the most recent groups are pending");
        CUDA C++ Programming Guide, __syncthreads; docs/hardware.md#cpasync-groups-and-waits
    """
    # Formal statement: for every cp.async copy c and reader r of its tensor, on the Timeline of their
    #   innermost common scope (verifier/analysis/pipeline.py prove_complete): for all extents E and
    #   iterations k in [0, E): I(k - P) < R(k), and some WAIT X with N pending, I(k - P) < X < R(k), has
    #   commits(I(k - P), X] >= N + 1, and some SYNC Y has X < Y < R(k)
    for tl, writer, reader in _timelines(ctx):
        out = ctx.memo(("cp-async-wait", tl), lambda tl=tl: prove_complete(tl))
        where = dict(tensor=reader.name, location=reader.definition.origin,
                     labels=[f"{tl.tensor} (shared memory) filled by cp.async in {writer.name}'s statement"])
        yield from report_outcome("CPASYNC-WAIT", out, f"that {reader.name} reads {tl.tensor} after its copy completes",
                                  lambda out, tl=tl: _incomplete(tl, out, where), **where)


def _incomplete(tl: Timeline, out: Outcome, where: dict) -> Diagnostic:
    k = out.model.get("iteration", 0)
    v = out.values
    if not v.get("issued before the read"):
        why = f"its copy of iteration {k}'s data is not issued before the read"
    elif v.get("commits after its copy", -1) < 0:
        why = "no cp.async.wait_group comes between its copy and the read"
    elif v["commits after its copy"] < v["pending allowed"] + 1:
        why = (f"the last cp.async.wait_group {v['pending allowed']} before the read follows only "
               f"{v['commits after its copy']} commit(s) of the copy's group and later ones, so it may leave the "
               f"copy in flight")
    else:
        why = "no __syncthreads follows the wait before the read, so other threads' copies may be unseen"
    return finding(
        "CPASYNC-WAIT",
        f"{tl.reader} reads {tl.tensor} in iteration {k} before the cp.async data of that iteration is complete: {why}",
        notes=[f"the steps of the loop: {tl.describe()}",
               "tileproof places the waits and barriers itself: this is a tileproof bug, please report it"],
        counterexample={"iteration": k, "extent": out.model.get("extent"), **v},
        hint="report the schedule; until it is fixed, use a plain tp.set instead of cp.async", **where)
