"""Warp specialization: a producer warpgroup loads a circular buffer's stages with TMA, the
consumer warpgroups read them with wgmma or threads (execution/warp_roles.py rewrites the loop nest). WS-ROLES
checks what that rewrite needs of the schedule, WS-REGISTERS the setmaxnreg counts that move
registers from the producer to the consumers, WS-PING-PONG the named barriers by which the
consumer warpgroups take turns. The mbarrier protocol between the roles is proved by PIPELINE-RAW
and PIPELINE-WAR on the rewritten nest."""

from __future__ import annotations

from collections.abc import Iterator

import z3

from ...execution.conditions.ping_pong import ping_pong_spec, turn_problems
from ...execution.conditions.warp_specialization import register_problems, role_problems
from ...model.expr import const, var
from ..causes import propose_inline, written_axis
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import report_problems, report_values
from ..registry import rule


@rule("WS-ROLES", family="warpspec")
def ws_roles(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A warp-specialized circular buffer's producer is whole warpgroups that only issue its loads.

    What it checks:
        For the tensors circular-buffered with tp.WarpSpecialized(on): the block's threads
        per index of `on` (the product of the thread axes below it) are constant and a
        multiple or a divisor of 128, the consumers' (the indices the fusion binds to `on`)
        are whole warpgroups, and no thread axis above `on` has more than one index, so the
        producer is one warpgroup after the consumers: `on` gets one more index where an index
        holds whole warpgroups (TIDy over TIDx 128), else 128 / (threads per index) more, as
        nvFuser pads it (TIDx alone: 128 more threads, threadIdx.x >= bdimx); every such
        tensor is a TMA load (LOWERING-SUPPORTED), read by wgmma or by threads (not both), with
        no iteration axis bound to `on` itself (a broadcast axis may be: it holds no index of
        the load, and parallelize_all_like gives it the axis it meets, as nvFuser's
        checkWarpSpecializedAxis allows), all of them with one WarpSpecialized, circular over
        one loop or over loops nested in one another (Q's over the row tiles around K's and V's
        over the key tiles: the producer runs the same nest). A load inlined into the consumers'
        loop over `on` takes that loop's type: the report proposes the inline_at that puts it just
        outside that loop, where a copy of the schedule with it verifies.
    Why the hardware needs it:
        setmaxnreg and wgmma are executed by whole warpgroups: a producer that shares a
        warpgroup with consumers cannot give its registers away, and a wgmma issued by a
        partial warpgroup is undefined; the consumers' named barriers (bar.sync, .aligned)
        count whole warps. A consumer warpgroup tells the producer a stage is free
        by one mbarrier arrival after its wgmma.wait_group, which covers its wgmma reads only;
        threads reading a stage each arrive after their own reads: a stage read both ways
        would be released by the first kind while the second still reads it. One producer thread issues the
        loads in the consumers' order: a second loop beside the first (neither inside the
        other), or a load split over `on`, would need a second producer.
    Example:
        # TIDx (128) under two TIDy warpgroups: the producer, 64 more TIDx threads in each row
        fusion, sa, sb, d, out = hopper_gemm_tile("producer_on_tidx", 128, 64)
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDx))
    Reported with:
        MMA-WARP-COLLECTIVE
    Fix:
        fusion, sa, sb, d, out = hopper_gemm_tile("producer_warpgroup", 128, 64)
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy))
    References:
        nvFuser csrc/parallel_dimension_map.cpp (adjustMappingsForWarpSpecialization: the
        axis padded by 128 / the other axes' threads) and csrc/device_lower/pass/circular_buffer.cpp
        (getAsyncWarpPredicate: threadIdx.<on> >= the padded extent - the padding);
        CUTLASS include/cutlass/gemm/kernel/sm90_gemm_tma_warpspecialized_cooperative.hpp;
        PTX ISA 9.7.15.5 (wgmma, warpgroup-wide), 9.7.19.5 (setmaxnreg); docs/hardware.md#warp-specialization
    """
    # Formal statement: none, structural: for the WarpSpecialized(on) tensors T, with I = prod(thread extents
    #   below on), constant: I % 128 == 0 or 128 % I == 0, I * (extent bound to on) % 128 == 0, every thread
    #   extent above on == 1, each t in T is read by wgmma only or
    #   by threads only, has no loop axis parallelized on on, and all t share one WarpSpecialized and one
    #   circular loop group, or groups each enclosing the next (a chain)
    problems = role_problems(ctx.fusion)
    for p, d in zip(problems, report_problems("WS-ROLES", problems)):
        if p.knobs:
            call = _inline_outside(ctx, d, p.tensor, p.ids[0])
            if call is not None:
                d.hint = f"{call} (verified: with it, WS-ROLES holds): {d.hint}"
        yield d


# what moving a load's inlining decides: its roles and the loops it shares (inline_at's premises)
OUTSIDE_CODES = ["WS-ROLES", "INLINE-LOOP-MAP", "INLINE-PARALLEL-MATCH"]


def _inline_outside(ctx: VerifyContext, d: Diagnostic, name: str, axis: str) -> str | None:
    """`name`.inline_at(k), k the position as written of its loop axis `axis` (the consumers' loop
    over the warp-specialized axis, which its inlining put the load in), proposed on d where the
    copy has no error of OUTSIDE_CODES; d then points at the inlining. The call, or None (a fix's
    copy, or an axis bound by a parallelize of its own: that call is the knob)."""
    if ctx.source is None:
        return None
    k = next(k for k, i in enumerate(ctx.fusion.tensor(name).loop) if i.name == axis)
    at, written = written_axis(ctx, name, k), ctx.source.tensor(name)
    if at is None or written.loop[at].parallel_type is ctx.fusion.tensor(name).loop[k].parallel_type:
        return None
    d.location = written.compute_at_origin or d.location
    return propose_inline(ctx, d, name, at, OUTSIDE_CODES)


@rule("WS-REGISTERS", family="warpspec")
def ws_registers(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """setmaxnreg's counts fit the registers the warp-specialized block is launched with.

    What it checks:
        For WarpSpecialized(on, num_registers=(producer, consumer)): each count is a multiple
        of 8 from 24 to 256; producer <= consumer; the kernel's entry count E (ptxas gives each
        of the block's T threads 65536 / T registers, in steps of 8, at most 248, under
        __launch_bounds__(T, 1), which the code generator emits) lies between them
        (setmaxnreg.dec lowers a warpgroup's count, .inc raises it); and producer x (producer
        threads) + consumer x (consumer threads) <= E x T, the pool the block holds.
    Why the hardware needs it:
        setmaxnreg.inc blocks until the block's pool has the registers it asks for: they come
        only from the warpgroups that gave theirs back with setmaxnreg.dec. Counts that sum to
        more than the block was launched with leave the consumers waiting forever (CUTLASS
        #2007: 232 x 2 + 24 > 168 x 3 hangs). A count outside [24, 256] or not a multiple of 8
        does not assemble.
    Example:
        fusion, sa, sb, d, out = hopper_gemm_tile("registers_past_the_pool", 128, 64)
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 240)))
    Fix:
        fusion, sa, sb, d, out = hopper_gemm_tile("registers_shared_out", 128, 64)
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232)))
    References:
        PTX ISA 9.7.19.5 (setmaxnreg: the range, multiples of 8, the per-CTA pool); CUTLASS
        sm90_gemm_tma_warpspecialized_cooperative.hpp (40 / 232 with two math warpgroups) and
        issue #2007; nvFuser WarpSpecialized::validateRegisterSharing; docs/hardware.md#warp-specialization
    """
    # Formal statement: none, structural: with the producer's Q = inner * pad threads (pad: 1, or 128 / inner),
    #   T = inner * consumers + Q and E = min(248, floor(65536 / T / 8) * 8): producer, consumer in [24, 256]
    #   and % 8 == 0, producer <= E <= consumer, producer * Q + consumer * inner * consumers <= E * T
    yield from report_problems("WS-REGISTERS", register_problems(ctx.fusion))


TRIPS = 1 << 30  # the loop trip counts the proof covers (any the kernel's unsigned counters reach)


@rule("WS-PING-PONG", family="warpspec", premises=("WS-ROLES",))
def ws_ping_pong(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Ping-pong's named barriers leave no warpgroup waiting forever.

    What it checks:
        For WarpSpecialized(on, ping_pong=True): the consumers are two or more indices of `on`
        (TIDy or TIDz), each whole warpgroups, at most 14 (named barriers 2 to 15); each
        warp-specialized circular loop has one turn (execution/ping_pong.py): warpgroup w's
        bar.sync on barrier 2 + w before the loop's first wgmma batch, its bar.arrive on barrier
        2 + (w + 1) % W after the batches issued before the first wgmma wait (one, or with a
        rotated loop's overlap the next tile's and this tile's), nothing between them that waits
        for another thread (a barrier, a stage or wgmma wait, a reduction's combine). z3 proves, for every trip count
        T >= 1 and every warpgroup w, that w syncs on its barrier as often as its predecessor
        arrives there (each barrier counting 2 x its threads is left as it was found, for the
        next run of the loop), and that the k-th sync meets the k-th arrival of an iteration
        such that the waits around the ring of warpgroups go back at least one iteration
        (no warpgroup waits on itself).
    Why the hardware needs it:
        bar.sync completes when the barrier's count of threads has arrived; an arrival that
        never comes hangs the block, and one left over completes a later sync early (or hangs
        the next kernel run of the loop half arrived). A barrier inside the turn would wait for
        a warpgroup that is itself waiting for its turn.
    Example:
        fusion, sa, sb, d, out = hopper_gemm_tile("ping_pong_alone", 64, 64)  # one consumer warpgroup
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy, ping_pong=True))
    Fix:
        fusion, sa, sb, d, out = hopper_gemm_tile("ping_pong_in_turn", 128, 64)  # two, 64 rows each
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy, ping_pong=True))
    References:
        FlashAttention-3 (Shah et al. 2024), section 3.1 (ping-pong scheduling of two warpgroups by
        named barriers); PTX ISA 9.7.13.1 (bar.sync, bar.arrive: thread counts, ids 0 to 15);
        docs/attention.md#ping-pong
    """
    # Formal statement: with S(w) = T - [w == first] syncs of warpgroup w (the k-th in iteration
    #   k + [w == first]) and A(w) = T - [w - 1 mod W == last] arrivals of its predecessor (the k-th in
    #   iteration k): for all T >= 1 and 0 <= w < W: S(w) == A(w); and for 0 <= k, the ring's sum over w
    #   of (arrival iteration - sync iteration) <= -1
    problems, turns = turn_problems(ctx.fusion)
    yield from report_problems("WS-PING-PONG", problems)
    spec = ping_pong_spec(ctx.fusion)

    def skip(g, x):  # 1 where warpgroup g is the one that skips
        return z3.If(g == x, 1, 0)

    for turn in turns:
        groups, first, last = turn.groups, turn.wait.first, turn.passed.last
        q = ctx.query([var("T"), var("warpgroup")], {"T": const(TRIPS), "warpgroup": const(groups)}, integers=True)
        trips, w = q.term(var("T")), q.term(var("warpgroup"))
        syncs = trips - (skip(w, first) if first is not None else 0)
        before = (w + groups - 1) % groups
        arrivals = trips - (skip(before, last) if last is not None else 0)
        out = q.prove(z3.Implies(trips >= 1, syncs == arrivals), values={"T": var("T"), "warpgroup": var("warpgroup")})

        def unbalanced(v, when, first=first, last=last, groups=groups):
            t, g = v["T"], v["warpgroup"]
            s, a = t - (g == first), t - ((g + groups - 1) % groups == last)
            return (f"with {t} iteration{'s' if t != 1 else ''} of {turn.loop}{when}, warpgroup {g} syncs on its turn "
                    f"barrier {s} times but warpgroup {(g + groups - 1) % groups} arrives there {a} times: "
                    + ("a sync waits forever" if s > a else "an arrival is left over for the next run of the loop"))

        yield from report_values(ctx, "WS-PING-PONG", out, f"that every turn barrier of {turn.loop} is balanced",
                                 unbalanced, ["T", "warpgroup"], hint="the first warpgroup skips its first sync and the "
                                 "last skips its last arrival", location=spec.origin)
        if not out.proved:
            continue
        q = ctx.query([var("k")], {"k": const(TRIPS)}, integers=True)
        k = q.term(var("k"))
        # warpgroup w's k-th sync waits for its predecessor's k-th arrival: the iterations they run in
        back = z3.Sum([k - (k + (skip(z3.IntVal(g, q.ctx), first) if first is not None else 0))
                       for g in range(groups)])
        out = q.prove(back <= -1, values={"k": var("k")})
        yield from report_values(
            ctx, "WS-PING-PONG", out, f"that no warpgroup waits on itself around the turns of {turn.loop}",
            lambda v, when: (f"warpgroup 0's sync number {v['k']} in {turn.loop} waits, around the ring of {groups} "
                             f"warpgroups, for its own arrival of the same iteration{when}: a deadlock"),
            ["k"], hint="let warpgroup 0 skip its sync in iteration 0 (it goes first)", location=spec.origin)
