"""Warp specialization: a producer warpgroup loads a circular buffer's stages with TMA, the
consumer warpgroups read them with wgmma or threads (execution/warp_roles.py rewrites the loop nest). WS-ROLES
checks what that rewrite needs of the schedule, WS-REGISTERS the setmaxnreg counts that move
registers from the producer to the consumers. The mbarrier protocol between the roles is proved
by PIPELINE-RAW and PIPELINE-WAR on the rewritten nest."""

from __future__ import annotations

from collections.abc import Iterator

from ...execution.conditions.warp_specialization import register_problems, role_problems
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import report_problems
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
        checkWarpSpecializedAxis allows), all of them circular over one loop with one
        WarpSpecialized.
    Why the hardware needs it:
        setmaxnreg and wgmma are executed by whole warpgroups: a producer that shares a
        warpgroup with consumers cannot give its registers away, and a wgmma issued by a
        partial warpgroup is undefined; the consumers' named barriers (bar.sync, .aligned)
        count whole warps. A consumer warpgroup tells the producer a stage is free
        by one mbarrier arrival after its wgmma.wait_group, which covers its wgmma reads only;
        threads reading a stage each arrive after their own reads: a stage read both ways
        would be released by the first kind while the second still reads it. One producer thread issues the
        loads of one circular loop: a second loop, or a load split over `on`, would need a
        second producer.
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
    #   by threads only, has no loop axis parallelized on on, and all t share one circular loop group and one WarpSpecialized
    yield from report_problems("WS-ROLES", role_problems(ctx.fusion))


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
