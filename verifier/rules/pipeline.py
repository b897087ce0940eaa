"""Copies over loops: every read of a cp.async-filled tensor waits for its data, every read of a
plain circular copy into shared memory follows a barrier after it (CPASYNC-WAIT),
every read of a register circular buffer follows its copy (PIPELINE-RAW), a circular buffer's
numbers make a pipeline (PIPELINE-STAGES), and no stage is refilled before its reads are done
(PIPELINE-WAR). The proofs are decided on the loop nest
with its waits and barriers placed (execution/nest.py, execution/pipeline.py) as a Timeline for a
symbolic iteration (verifier/analysis/pipeline.py)."""

from __future__ import annotations

from typing import Iterator

from ...execution.barriers import Async, statement_paths
from ...execution.pipeline import Timeline, in_prologue, specialized_timeline, timeline
from ...execution.conditions.pipeline import stage_problems
from ...execution.nest import placed_nest
from ..analysis.mbarrier_rearm import Rearm, unordered_rearms
from ..analysis.pipeline import prove_complete, prove_free, prove_phase
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome
from ..registry import rule
from ..solver import Outcome


def _timelines(ctx: VerifyContext) -> list[tuple[Timeline, object, object]]:
    """(timeline, writer, reader) for every cp.async copy or register circular buffer's copy
    (a private Timeline) and each statement reading its tensor."""
    nest_ = placed_nest(ctx.fusion)
    if nest_ is None:
        return []
    stmts = statement_paths(nest_.tree, nest_.hazards)
    out = []
    for w, wa, wp in stmts:
        if not (wa.kind is Async.CP_ASYNC or wa.circular is not None) or in_prologue(wp):
            continue  # a prologue's copies are the Timeline's prologue
        for r, ra, rp in stmts:
            if wa.writes in ra.reads:
                reader = _tensor(r)
                barrier = wa.barrier if wa.kind is Async.TMA_LOAD else None
                tl = (specialized_timeline(wa.writes, reader.name, wp, rp, nest_.hazards, barrier)
                      if wa.specialized is not None else None)
                if wa.specialized is not None and tl is None:
                    continue  # not a warp-specialized pair of one loop: WS-ROLES reports the schedule
                tl = tl or timeline(wa.writes, reader.name, wp, rp, nest_.hazards, barrier)
                out.append((tl, _tensor(w), reader))
    return out


def _tensor(leaf):
    """The tensor of a barrier-nest leaf (a reduction's steps are (tensor, phase) pairs)."""
    return leaf[0] if isinstance(leaf, tuple) else leaf


@rule("CPASYNC-WAIT", family="pipeline")
def cp_async_wait(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every read of a cp.async-filled tensor follows a wait that completes its copy and a barrier.

    What it checks:
        On the kernel's loop nest with the waits and barriers the code generator places
        (execution/nest.py), for every cp.async copy and every statement reading its tensor,
        in the innermost scope holding both and for a symbolic iteration k of that scope's
        loop (its prologue included): the copy of iteration k's data is issued before the
        read, a `cp.async.wait_group N` after it has at least N + 1 commits between the copy
        and itself (so the copy's group is complete), and a __syncthreads comes after that
        wait, before the read. A circular buffer of plain copies (tp.set) into shared memory is
        complete when written: a __syncthreads between the copy of iteration k's data and its read.
        The counterexample names the iteration. tileproof places the
        waits itself, so only a circular buffer whose copies come after their reads (a negative
        prefetch) fails on a schedule written with the API; tests/rules/test_cp_async.py
        removes placed waits and shows what the rule then reports.
    Why the hardware needs it:
        A cp.async completes asynchronously. Its thread sees the data only after a
        cp.async.wait_group that covers the copy's group (groups are committed with
        cp.async.commit_group; wait_group N leaves the newest N in flight), and other threads
        only after a barrier that follows the wait: a read before either sees stale shared
        memory, or a copy still in flight.
    Example:
        fusion, a, s, out = cp_async_k_loop("prefetch_behind")
        s.circular_buffer(2, prefetch_distance=-3)  # prefetch 2 - 3 = -1: the copy comes late
    Reported with:
        PIPELINE-STAGES
    Fix:
        fusion, a, s, out = cp_async_k_loop("prefetch_ahead")
        s.circular_buffer(2)  # prefetch 1
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
        if tl.private or tl.tma:
            continue  # a register or TMA circular buffer: PIPELINE-RAW
        out = ctx.memo(("cp-async-wait", tl), lambda tl=tl: prove_complete(tl, ctx.z3_context))
        how = "plain copies" if tl.synchronous else "cp.async"
        where = dict(tensor=reader.name, location=reader.definition.origin,
                     labels=[f"{tl.tensor} (shared memory) filled by {how} in {writer.name}'s statement"])
        yield from report_outcome("CPASYNC-WAIT", out, f"that {reader.name} reads {tl.tensor} after its copy completes",
                                  lambda out, tl=tl: _incomplete(tl, out, where), **where)


def _incomplete(tl: Timeline, out: Outcome, where: dict) -> Diagnostic:
    k = out.model.get("iteration", 0)
    v = out.values
    if not v.get("issued before the read"):
        why = f"its copy of iteration {k}'s data is not issued before the read"
    elif tl.synchronous:
        why = "no __syncthreads comes between the copy and the read, so other threads' writes may be unseen"
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
        f"{tl.reader} reads {tl.tensor} in iteration {k} before the {'copied' if tl.synchronous else 'cp.async'} data "
        f"of that iteration is complete: {why}",
        notes=[f"the steps of the loop: {tl.describe()}"] + (
            [f"{tl.tensor} is circular-buffered with prefetch {tl.prefetch}: the copy of iteration k is issued in "
             f"iteration k - ({tl.prefetch})"] if tl.prefetch < 0 else
            ["tileproof places the waits and barriers itself: this is a tileproof bug, please report it"]),
        counterexample={"iteration": k, "extent": out.model.get("extent"), **v},
        hint=(f"prefetch at least 0 copies ahead (circular_buffer({tl.stages}) prefetches {tl.stages - 1})"
              if tl.prefetch < 0 else "report the schedule; until it is fixed, use a plain tp.set instead of cp.async"),
        **where)


@rule("PIPELINE-RAW", family="pipeline")
def pipeline_raw(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every read of a register or TMA circular buffer's stage comes after the copy of its data.

    What it checks:
        On the kernel's loop nest with a register circular buffer's prologue and prefetched
        copies placed (execution/pipeline.py), for every statement reading the tensor and a symbolic
        iteration k of the circular loop (the prologue included): the copy of iteration k's data,
        issued in iteration k - prefetch, comes before the read of iteration k in the thread's
        program order. For a TMA circular buffer (shared tiles, an mbarrier per stage) the read
        of iteration k also follows the thread's own wait of iteration k (mbarrier k % stages,
        the next phase of that stage: each run of the loop loads every stage as often as it waits
        for it, so it is the phase the load of data k completes), after the issue.
        The counterexample names the iteration. tileproof places the copies and waits itself,
        so a negative prefetch is what fails on a schedule written with the API
        (PIPELINE-STAGES reports it too).
    Why the hardware needs it:
        A register circular buffer (fragments loaded from shared memory by ldmatrix or plain
        copies, one k-slice ahead of the tensor-core instructions) has no wait and no barrier:
        each thread reads the registers it wrote itself, so only program order puts its data
        there in time. A read before the copy of its data takes the registers' previous
        contents, another iteration's fragments. A TMA load lands asynchronously: only the
        mbarrier phase it completes says the tile is there, and a wait on the wrong parity
        passes at once, on the previous contents.
    Example:
        fusion, a, s, r, out = register_k_loop("register_prefetch_late")
        r.circular_buffer(2, prefetch_distance=-3)  # prefetch 2 - 3 = -1: the copy comes late
    Reported with:
        PIPELINE-STAGES
    Fix:
        fusion, a, s, r, out = register_k_loop("register_prefetch")
        r.circular_buffer(2)  # prefetch 1: the next slice's registers load while this one is used
    References:
        nvFuser's Ampere matmul scheduler (`acr->circularBuffer(2)` under
        MatmulParams::CircularBufferOptions::circular_buffer_smem_read); CUTLASS
        include/cutlass/gemm/threadblock/mma_multistage.h (warp fragments double-buffered over
        the k-groups); PTX ISA 9.7.13.15 (mbarrier phases, try_wait.parity); docs/hardware.md#circular-buffering
    """
    # Formal statement: for every register or TMA circular buffer's copy c and reader r, on the Timeline of
    #   the circular loop (verifier/analysis/pipeline.py prove_complete): for all extents E and iterations
    #   k in [0, E): issued(k - P) and I(k - P) < R(k), and for TMA some WAIT X of iteration k has I(k - P) < X < R(k)
    for tl, writer, reader in _timelines(ctx):
        if not (tl.private or tl.tma):
            continue  # cp.async: CPASYNC-WAIT
        out = ctx.memo(("pipeline-raw", tl), lambda tl=tl: prove_complete(tl, ctx.z3_context))
        where = dict(tensor=reader.name, location=reader.definition.origin,
                     labels=[f"{tl.tensor} ({'shared memory, loaded by TMA' if tl.tma else 'registers'}) copied in "
                             f"{writer.name}'s statement"])
        yield from report_outcome("PIPELINE-RAW", out, f"that {reader.name} reads {tl.tensor} after its copy",
                                  lambda out, tl=tl: _read_early(tl, out, where), **where)


def _read_early(tl: Timeline, out: Outcome, where: dict) -> Diagnostic:
    k = out.model.get("iteration", 0)
    what = ("before a wait on the mbarrier phase of that iteration's TMA load: the stage may still hold another "
            "iteration's tile" if tl.tma and out.values.get("issued before the read") else
            "before the copy of that iteration's data: the " + ("stage" if tl.tma else "registers")
            + " still hold" + ("s" if tl.tma else "") + " another iteration's values")
    return finding(
        "PIPELINE-RAW",
        f"{tl.reader} reads {tl.tensor} in iteration {k} {what}",
        notes=[f"the steps of the loop: {tl.describe()}",
               f"{tl.tensor} is circular-buffered with prefetch {tl.prefetch}: the copy of iteration k is issued in "
               f"iteration k - ({tl.prefetch})"],
        counterexample={"iteration": k, "extent": out.model.get("extent"), **out.values},
        hint=f"prefetch at least 0 copies ahead (circular_buffer({tl.stages}) prefetches {tl.stages - 1})",
        **where)


@rule("PIPELINE-STAGES", family="pipeline")
def pipeline_stages(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A circular buffer has a serial loop, at least two stages and 0 <= prefetch < stages.

    What it checks:
        For every tensor with circular_buffer(stages, prefetch_distance): it is inlined into a
        loop, and its circular loop (the loop axis just left of its compute-at position, or
        nvFuser's innermost serial axis before the first Unroll axis where only thread or
        broadcast axes, or for registers, plain copies and cp.async into shared memory serial
        and unrolled loops too, lie between: execution/circular.py) is a serial loop (serial or
        unrolled for registers), not a block or thread index or a broadcast; stages >= 2;
        0 <= prefetch < stages, the prefetch being the prefetch_distance, or stages +
        prefetch_distance for a negative one; circular buffers over one loop have the same
        numbers and one kind of copy (registers, plain copies into shared memory, cp.async, or
        TMA / bulk copies: the loop's pipeline waits one way); a register circular
        buffer's sources are computed outside its loop. A loop shorter than the stages, down to one iteration (K one tile,
        concrete or symbolic), needs no check: the prologue's copies are predicated by the
        loop's extent, as in nvFuser. Shared memory holds every stage (SMEM-CAPACITY counts
        stages x tile).
    Why the hardware needs it:
        A stage being read cannot be refilled (the copy would overwrite data other threads
        still read), so a buffer of S stages keeps at most S - 1 copies in flight while one
        stage is read: one stage leaves none (the loop waits for each tile in full, and nvFuser
        refuses it), a prefetch of S or more refills a stage before its iteration reads it
        (PIPELINE-WAR), and a negative one reads a stage before its copy is issued
        (CPASYNC-WAIT, PIPELINE-RAW). The circular loop is the loop whose iterations the stages
        rotate over. A register circular buffer copies iteration i + prefetch's data in
        iteration i, so what it copies from must be complete before the loop.
    Example:
        fusion, a, s, out = cp_async_k_loop("one_stage")
        s.circular_buffer(1)
    Fix:
        fusion, a, s, out = cp_async_k_loop("two_stages")
        s.circular_buffer(2)
    References:
        nvFuser csrc/tensor_view.cpp (circularBuffer: "Unsupported stage number", "Invalid prefetch
        distance") and csrc/device_lower/analysis/circular_buffer.cpp (the circular axis left of
        the compute-at position); docs/hardware.md#circular-buffering
    """
    # Formal statement: none, structural: for each circular-buffered tensor, compute_at > 0, its loop axis
    #   compute_at - 1 is Serial (registers: Serial or Unroll) with extent != 1, stages >= 2,
    #   0 <= prefetch < stages, the circular buffers of one loop have equal (stages, prefetch) and kind, and a
    #   register buffer's producers have compute_at <= compute_at - 1
    for p in stage_problems(ctx.fusion):
        yield finding("PIPELINE-STAGES", p.message, tensor=p.tensor, ids=list(p.ids), location=p.location,
                      notes=list(p.notes), counterexample=dict(p.values), hint=p.hint)


@rule("PIPELINE-WAR", family="pipeline")
def pipeline_war(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A circular buffer's stage is refilled only after every read of its previous data.

    What it checks:
        On the kernel's loop nest with the prologue, waits and barriers the code generator
        places for a circular buffer (execution/pipeline.py), for every statement reading the
        tensor and a symbolic refill: the copy issued in iteration k (its prologue included)
        fills the data of iteration d = k + prefetch into stage d % stages; for every older
        iteration j < d whose data shares that stage, a __syncthreads that follows j's read
        comes before the copy (for a register circular buffer, the read itself: each thread
        refills only its own registers; for a wgmma or a TMA store, which read asynchronously,
        the wgmma.wait_group or cp.async.bulk.wait_group.read that ends j's reads comes first).
        The counterexample names the refilling iteration, the data it copies, the iteration
        still to read the stage, and the stage.
    Why the hardware needs it:
        Other threads read a stage in iteration j; a cp.async issued into the same stage
        before they are all done overwrites data they have not read yet (write after read),
        and the refill lands asynchronously, at any time after its issue. Only a barrier
        between the last read and the refill orders them (nvFuser PR #3865: a circular buffer
        refilled too early gave wrong results). A TMA store reads its stage until its issuing
        thread's cp.async.bulk.wait_group.read (nvFuser's TMAMiscTest.StoreSyncInsertion waits
        so at the end of each iteration); tileproof waits before the refill's barrier.
    Example:
        fusion, a, s, out = cp_async_k_loop("prefetch_equal_to_stages")
        s.circular_buffer(2, prefetch_distance=2)
    Reported with:
        PIPELINE-STAGES
    Fix:
        fusion, a, s, out = cp_async_k_loop("prefetch_below_stages")
        s.circular_buffer(2, prefetch_distance=1)
    References:
        PTX ISA 9.7.9.25.3.1 (cp.async completes asynchronously); CUDA C++ Programming Guide,
        __syncthreads; nvFuser csrc/device_lower/pass/circular_buffer.cpp (the Pipelined form) and
        PR #3865; docs/hardware.md#circular-buffering
    """
    # Formal statement: for every circular buffer's copy c and reader r, on the Timeline of the circular
    #   loop (verifier/analysis/pipeline.py prove_free): for all extents E, refill iterations k in [-P, E)
    #   with d = k + P in [0, E), and iterations j in [0, E) with j < d and j % S == d % S:
    #   some SYNC Y has R(j) < Y < I(k) (a private Timeline, registers: R(j) < I(k)); inside an outer loop,
    #   a SYNC after the loop (after the wgmma wait ending the reads) before the next run's prologue
    for tl, writer, reader in _timelines(ctx):
        if tl.stages == 1 and tl.prefetch == 0 and not tl.prologue_iterations:
            continue  # no circular buffer: SMEM-RACE checks the refill of a plain tile
        out = ctx.memo(("pipeline-war", tl), lambda tl=tl: prove_free(tl, ctx.z3_context))
        where = dict(tensor=writer.name, location=(writer.circular.origin if writer.circular else None) or writer.origin,
                     labels=[f"{reader.name} reads {tl.tensor} in each iteration of the circular loop"])
        yield from report_outcome("PIPELINE-WAR", out, f"that {tl.tensor}'s stages are refilled after their reads",
                                  lambda out, tl=tl: _refilled_early(tl, out, where), **where)
        if not tl.outer_ordered:
            yield finding(
                "PIPELINE-WAR",
                f"{tl.tensor}'s circular loop runs again in an outer loop, and no __syncthreads after it (after "
                f"the wgmma.wait_group that ends {tl.reader}'s reads) comes before the next run's prologue refills "
                f"its stages: a thread may refill a stage another thread still reads",
                notes=[f"the steps of the loop: {tl.describe()}"],
                counterexample={"prologue iteration": 0, "stage": 0},
                hint="report the schedule: tileproof places that barrier itself", **where)


@rule("PIPELINE-PHASE", family="pipeline")
def pipeline_phase(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every mbarrier wait of a TMA pipeline is for the phase of the datum it needs, and no phase runs ahead of its waiters.

    What it checks:
        On the kernel's loop nest with the mbarrier waits and releases the code generator places
        (execution/pipeline.py, execution/warp_roles.py), for every circular buffer of TMA loads, its
        reader, a symbolic iteration k (datum k, stage k % S of S stages) and two runs of the
        loop (an outer loop runs it again; the phase bits carry over): each wait flips its own
        bit of the stage it waits on, so the t-th of the W full waits of iteration k (each on
        full[k % S_w]) waits for phase W x n(k) + t, n counting the earlier data of that stage
        in both runs; that must be the stage and phase the load of datum k completes (k % S and
        n(k)). The producer's empty waits likewise (their bits start at 1, so the first wait
        on a stage passes) must wait for the release of the datum before k in its stage, and
        each release must arrive on its datum's stage. And no phase runs ahead: the load of
        datum k + S, which completes the stage's next phase, comes after every wait for datum
        k (a __syncthreads between, or, warp-specialized, the producer's wait for the release
        of k, which the consumers make after their waits for k). The counterexample names the
        run, the iteration, the wait and the stage and phase it waits for beside the datum's.
        A TMA load that is not circular-buffered but issued again on its one mbarrier (a
        repeating loop holds it) likewise: going round the innermost such loop's body, a
        __syncthreads lies between every wait for the load and its next issue
        (verifier/analysis/mbarrier_rearm.py).
    Why the hardware needs it:
        An mbarrier wait tests the parity of a phase: it passes once the phase with that parity
        has completed. A wait on the wrong stage, or a phase count off by one (a wait that runs
        more or fewer times than the loads, a stage count that is not the buffer's), passes on
        an older phase (the stage's previous data: a silent wrong result) or never (a hang); a
        barrier two phases ahead of a waiter has the same parity as the phase it waits for.
        tilelang PR 3087: a parity computed from the wrong count overwrote a stage at 3 stages.
    Example:
        none: tileproof places every mbarrier wait, flips each stage's phase bit itself and
        indexes the stages by the buffer's count, so no schedule written with today's API fails
        this rule; it proves the placement on every TMA pipeline (tests/rules/test_pipeline_phase.py
        duplicates waits and changes their stage counts, and shows the phases it then reports)
    Fix:
        none: a report of this rule on an unmodified schedule is a tileproof bug
    Reported with:
        PIPELINE-RAW PIPELINE-WAR
    References:
        PTX ISA 9.7.13.15 (mbarrier phases; mbarrier.try_wait.parity); CUTLASS
        include/cutlass/pipeline/sm90_pipeline.hpp (PipelineState: index and phase per stage);
        docs/hardware.md#circular-buffering
    """
    # Formal statement: verifier/analysis/pipeline.py prove_phase, on the Timeline of every TMA circular
    #   buffer and reader: for all E, runs r in {0, 1}, k in [0, E): each full wait of iteration k is on
    #   full[k % S] for phase n(k) = r * #{stage k % S's data per run} + k / S, each producer empty wait
    #   for datum k on empty[k % S] for phase n(k) - 1, each release of datum k on empty[k % S]; and the
    #   load of datum k + S follows every wait for k (a SYNC between, or EMPTY_WAIT before ISSUE and the
    #   waits for k before k's release)
    for tl, writer, reader in _timelines(ctx):
        if not tl.tma or (tl.stages == 1 and tl.prefetch == 0 and not tl.prologue_iterations):
            continue  # one load per mbarrier phase outside a loop: SMEM-RACE orders it
        out = ctx.memo(("pipeline-phase", tl), lambda tl=tl: prove_phase(tl, ctx.z3_context))
        where = dict(tensor=writer.name, location=(writer.circular.origin if writer.circular else None) or writer.origin,
                     labels=[f"{reader.name} waits for {tl.tensor}'s stages in each iteration of the circular loop"])
        yield from report_outcome("PIPELINE-PHASE", out, f"that {tl.tensor}'s mbarrier waits are for their data's "
                                                         f"phases", lambda out, tl=tl: _wrong_phase(tl, out, where),
                                  **where)
    nest_ = placed_nest(ctx.fusion)
    for r in unordered_rearms(nest_.tree, nest_.hazards) if nest_ is not None else ():
        yield _rearmed_early(r, nest_.label(r.loop))


def _rearmed_early(r: Rearm, loop: str) -> Diagnostic:
    tv = _tensor(r.leaf)
    return finding(
        "PIPELINE-PHASE",
        f"{tv.name}'s TMA load is issued again in the next iteration of {loop} on the same mbarrier with no "
        f"__syncthreads after the waits for this iteration's load: a thread that has not yet tested phase k when "
        f"phase k + 1 completes sees phase k + 2 pending, of the same parity, and waits forever",
        notes=[f"the steps of {loop}'s body, in order: {', '.join(r.steps)}",
               "tileproof places these itself: this is a tileproof bug, please report it"],
        counterexample={"iteration": 0, "wait": f"a thread's wait for {tv.name}'s phase 0, late",
                        "next issue": "iteration 1 arms phase 1; phase 1 completes; the late thread sees phase 2 "
                                      "pending and waits for it"},
        hint="report the schedule: tileproof places the barrier between the waits and the next load itself",
        tensor=tv.name, location=tv.origin)


def _wrong_phase(tl: Timeline, out: Outcome, where: dict) -> Diagnostic:
    k, run, v = out.model.get("iteration", 0), out.model.get("run", 0), out.values
    when = f"iteration {k}" + (" of the loop's second run" if run else "")
    if v.get("wait") == "-":
        why = (f"the load of iteration {k + tl.stages}'s data, the next phase of stage {k % tl.stages}, may come "
               f"before every wait for iteration {k}'s: the barrier runs a phase ahead of a waiter")
    elif v["wait"] == "release":
        why = (f"the release of datum {k} arrives on stage {v.get('stage waited')}'s empty mbarrier, where datum {k} "
               f"lies in stage {v.get('stage of the datum')}")
    else:
        empty = v["wait"].startswith("empty")
        who = "the producer's wait" if empty else f"{tl.reader}'s wait" + (f" {v['wait'][5:]}" if v["wait"] != "wait 0"
                                                                            else "")
        before = v.get("phase of the datum", 0)
        needs = (f"its load completes phase {before}" if not empty else
                 f"the release of the datum before it there completes phase {before}" if before >= 0 else
                 "the stage is still free (no release to wait for: phase -1, the initial one)")
        why = (f"{who} for datum {k} is on stage {v.get('stage waited')}'s {'empty ' if empty else ''}mbarrier for "
               f"phase {v.get('phase waited')}, where datum {k} lies in stage {v.get('stage of the datum')} and {needs}")
    return finding(
        "PIPELINE-PHASE", f"{tl.tensor}'s mbarrier phases and {tl.reader}'s waits disagree in {when}: {why}",
        notes=[f"the steps of the loop: {tl.describe()}",
               f"{tl.stages} stages: datum i lies in stage i % {tl.stages}, and completes that stage's phase "
               f"i / {tl.stages} (counting the loop's earlier runs)",
               "tileproof places these itself: this is a tileproof bug, please report it"],
        counterexample={"run": run, "iteration": k, "extent": out.model.get("extent"), **v},
        hint="report the schedule: tileproof places the mbarrier waits itself", **where)


def _released_early(tl: Timeline, out: Outcome, where: dict) -> Diagnostic:
    """A warp-specialized Timeline's PIPELINE-WAR counterexample (verifier/analysis/pipeline.py)."""
    j, v = out.model.get("read iteration", 0), out.values
    if not v.get("refill waits for the release"):
        why = "the producer refills the stage without waiting for its empty mbarrier"
    elif v.get("released") != 1:
        why = (f"the consumers release it {v.get('released')} times (once is what the producer's waits count: a "
               f"missing release stalls the producer, an extra one lets it refill a stage still read)")
    elif v.get("reads done at", -1) < 0:
        why = ("no cp.async.bulk.wait_group.read after the TMA store ends its reads before the release" if tl.store_read
               else "no wgmma.wait_group after the read covers its batch before the release")
    else:
        done = ("where a bulk wait ends the TMA store's reads" if tl.store_read else
                "where a wgmma.wait_group covers its batch" if tl.async_read else "the read itself")
        why = (f"the consumers release it (step {v.get('release position')}) before their reads of it are done "
               f"(step {v.get('reads done at')}, {done})")
    return finding(
        "PIPELINE-WAR",
        f"{tl.tensor}'s stage {v.get('stage')} holding iteration {j}'s data may be refilled while {tl.reader} still "
        f"reads it: {why}",
        notes=[f"the steps of the loops: {tl.describe()}",
               f"positions count the consumers' steps: iteration i's step s is i x {tl.width} + s"],
        counterexample={"read iteration": j, "extent": out.model.get("extent"), **v},
        hint="report the schedule: tileproof places the waits and releases itself", **where)


def _refilled_early(tl: Timeline, out: Outcome, where: dict) -> Diagnostic:
    if tl.specialized:
        return _released_early(tl, out, where)
    k, j = out.model.get("refill iteration", 0), out.model.get("read iteration", 0)
    d, stage = out.values.get("data"), out.values.get("stage")
    when = "in the prologue" if k < 0 else f"in iteration {k}"
    why = ("the copy overwrites the thread's registers before it reads them" if tl.private else
           "with no __syncthreads between: the copy may overwrite data still to be read")
    reads = f"reads iteration {j}'s data from it"
    if tl.store_read:  # a TMA store: its reads last until its issuing thread's bulk wait
        reads = f"'s TMA store reading iteration {j}'s data from it is waited for (cp.async.bulk.wait_group.read)"
        why = "with no such wait and __syncthreads after it: the copy may overwrite the tile the TMA store still reads"
    elif tl.async_read:  # a wgmma: its reads last until a wgmma.wait_group covers its batch
        reads = f"'s wgmma reading iteration {j}'s data from it is waited for (wgmma.wait_group)"
        why = "with no __syncthreads after that wait: the TMA may overwrite the tile the tensor cores still read"
    return finding(
        "PIPELINE-WAR",
        f"{tl.tensor}'s stage {stage} is refilled {when} with iteration {d}'s data before {tl.reader}"
        f"{'' if tl.async_read else ' '}{reads}, {why}",
        notes=[f"the steps of the loop: {tl.describe()}",
               f"{tl.stages} stages, prefetch {tl.prefetch}: iteration i reads stage i % {tl.stages} and copies "
               f"iteration i + {tl.prefetch}'s data into stage (i + {tl.prefetch}) % {tl.stages}"],
        counterexample={"refill iteration": k, "data": d, "read iteration": j, "stage": stage,
                        "extent": out.model.get("extent")},
        hint=(f"prefetch fewer copies than the stages: circular_buffer({tl.stages}, {tl.stages - 1}), or use "
              f"{tl.prefetch + 1} stages for a prefetch of {tl.prefetch}" if tl.prefetch >= tl.stages else
              "report the schedule: tileproof places the barriers itself"),
        **where)
