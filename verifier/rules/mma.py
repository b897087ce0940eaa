"""Tensor cores: what an MmaOp's schedule (model/mma_op.py) must be for mma.sync to compute it.

The structural conditions live in execution/conditions/mma.py, shared with the code generator. The layout
rules are register-ownership proofs over the MmaOp's execution model seen from each fragment
(mma_execution): MMA-OPERAND-LAYOUT and MMA-ACCUM-LAYOUT are claims of verifier/analysis/visibility.py,
proved there with THREAD-VISIBILITY's query. REDUCTION-K proves the products past K are 0 x 0.
"""

from __future__ import annotations

import copy
import itertools
from typing import Iterator

import z3

from ...execution.statements import CondKind, predicated_bounds, tensor_execution
from ...execution.indexing import indices_from_logical
from ...execution.loops import execution_order
from ...execution.mma_execution import mma_execution, tile_conds
from ...execution.mma import well_formed
from ...model.mma_op import INSTRUCTION_AXES, is_mma
from ...execution.promotion import promotion
from ...execution.zero_padding import zero_padded, zero_path
from ...execution.conditions.mma import (accumulator_allocation, live_accumulators, problems, register_pressure,
                                         wgmma_instruction_registers)
from ...hw.mma_schedule import mma_output_allocation
from ...model.errors import ScheduleError
from ...model.types import ParallelType
from ..analysis.visibility import check_claims
from ..causes import fix_holds, propose_change, propose_fix, propose_memory_types, propose_retype
from ..context import VerifyContext
from ..diagnostics import Diagnostic, Severity
from ..findings import report_problems, report_values
from ..registry import rule


def _structural(ctx: VerifyContext, code: str) -> Iterator[Diagnostic]:
    order = ctx.memo(("execution-order",), lambda: execution_order(ctx.fusion))
    found = ctx.memo(("mma-problems",), lambda: problems(ctx.fusion, order, ctx.target))
    for p, d in zip(found[code], report_problems(code, found[code])):
        # an accumulator put in shared or global memory is also an intermediate there: the one call
        # that puts it back in registers is the cause, where it is the fix
        if p.memory is not None and propose_memory_types(ctx, d, dict([p.memory]), [code]):
            d.hint = (f"leave {p.memory[0]} in registers: {p.memory[0]}.set_memory_type(tp.MemoryType."
                      f"{p.memory[1].name}) (verified: with it, {code} holds); copy it (tp.set) where it must go")
        yield d


@rule("MMA-TARGET", family="mma")
def mma_target(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The MmaOp's macro is an instruction the target has and tileproof lowers.

    What it checks:
        For every MmaOp with a macro: the macro is an mma.sync one (Turing_16_8_8,
        Turing_16_8_16, Turing_16_16_16, Ampere_16_8_16, Ampere_16_16_16, and tileproof's tf32
        Ampere_16_8_8), which sm_90a and sm_100a both run; a Hopper_64_N_16 macro (a wgmma) on
        sm_90a, which alone has wgmma (sm_100a's tensor-core MMA is tcgen05.mma); a
        Blackwell1CTA_128_N_16 macro (a tcgen05.mma, its accumulators in tensor memory) on
        sm_100a, which alone has tensor memory.
    Why the hardware needs it:
        mma.sync exists from sm_80 on for tf32 and bf16 (sm_75 for f16). wgmma.mma_async needs
        sm_90a: PTX for sm_100a rejects it at compile time. tcgen05.mma needs sm_100a (tcgen05
        instructions and tensor memory do not exist before Blackwell): PTX for sm_90a rejects it.
    Example:
        fusion, a, b, a3, b3, d = tf32_operands("tf32_tile")
        d.definition.set_macro(tp.MmaMacro.Hopper_64_8_16)
        target = "sm_100a"
    Fix:
        fusion, a, b, a3, b3, d = mma_sync_tile("tf32_tile")  # Ampere_16_8_8: mma.sync, sm_80 and later
    References:
        PTX ISA 9.7.14.5 (mma.sync: target requirements), 9.7.15 (wgmma: sm_90a), 9.7.16.10
        (tcgen05.mma: sm_100a); docs/hardware.md#tensor-core-fragment-layouts
    """
    # Formal statement: none, structural: for each MmaOp with macro m: arch(m) in {Turing, Ampere}, or
    #   arch(m) = Hopper and the target is sm_90a, or arch(m) = Blackwell1CTA and the target has tensor memory
    yield from _structural(ctx, "MMA-TARGET")


@rule("MMA-DTYPE", family="mma")
def mma_dtype(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The MmaOp's operands have a dtype its macro takes.

    What it checks:
        For every MmaOp with a macro: its operands' dtype is one the macro's instruction takes:
        float32 (rounded to tf32 by cvt.rna.tf32.f32, or truncated where set_macro's
        tf32_rounding declares tp.Tf32Rounding.Truncate) for Ampere_16_8_8, bfloat16 or
        float16 for the others.
    Why the hardware needs it:
        Each mma.sync shape exists for certain types only: m16n8k8 with .tf32 operands,
        m16n8k16 with .bf16 / .f16; the fragment maps differ with the element width (two 16-bit
        elements share a 32-bit register), so a float32 tensor fed to m16n8k16 would be read
        as pairs of half-precision numbers.
    Example:
        fusion, a, b, a3, b3, d = tf32_operands("tf32_tile")
        d.definition.set_macro(tp.MmaMacro.Ampere_16_8_16)  # an f16 / bf16 instruction
    Fix:
        fusion, a, b, a3, b3, d = mma_sync_tile("tf32_tile")  # Ampere_16_8_8: tf32 operands
    References:
        PTX ISA 9.7.14.5.14 (mma.sync shapes and types); docs/hardware.md#tensor-core-fragment-layouts
    """
    # Formal statement: none, structural: dtype(A) == dtype(B) in input_dtypes(macro)
    yield from _structural(ctx, "MMA-DTYPE")


@rule("MMA-SHAPE", family="mma")
def mma_shape(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The MmaOp's three innermost loop IDs are its macro's M, N and K tile, bound to Mma.

    What it checks:
        A macro and Mma axes come together. The output's three innermost loop IDs are bound to
        Mma, one derived from each of its M, N and K axes, with the macro's extents (16, 8 and 8
        for Ampere_16_8_8); each is the inner output of splits of its axis, so its index adds
        to the axis's with stride 1 (the instruction's tile is contiguous rows and columns).
        No tensor other than an MmaOp's output binds Mma.
    Why the hardware needs it:
        One mma.sync computes a fixed m x n x k tile, and its fragment maps name rows and
        columns of that tile: the loop IDs the instruction replaces must be exactly that tile.
    Example:
        fusion, a, b, a3, b3, d = mma_sync_tile("tf32_tile")
        d.axis(2).parallelize(tp.ParallelType.Serial)  # K is not bound to Mma
    Fix:
        fusion, a, b, a3, b3, d = mma_sync_tile("tf32_tile")  # M, N and K bound to Mma
    References:
        PTX ISA 9.7.14.5 (mma.sync shapes); nvFuser csrc/scheduler/mma_utils.cpp (the
        instruction tile as the innermost loop IDs, ParallelType::Mma);
        docs/hardware.md#tensor-core-fragment-layouts
    """
    # Formal statement: none, structural: loop(D)[-3:] = Mma IDs of roles M, N, K with extents (m, n, k) of
    #   the macro, each an inner split chain of its root
    for d in _structural(ctx, "MMA-SHAPE"):
        t = ctx.fusion.tensor(d.tensor) if d.tensor else None
        tile = range(len(t.loop) - INSTRUCTION_AXES, len(t.loop)) if t is not None else range(0)
        others = [k for k in tile if t.loop[k].parallel_type is not ParallelType.Mma]
        # the instruction tile's three axes moved away from the innermost (a reorder): moved back, verified
        moved = _mma_axes_innermost(ctx, d, t.name) if d.id is None and t is not None else None
        if moved is not None:
            d.hint += f"; verified: {moved} moves the instruction's tile back to the innermost axes"
        # one axis of the instruction tile given another type (a parallelize over Mma): Mma back, verified
        elif d.id is None and len(others) == 1 and len(t.loop) >= INSTRUCTION_AXES:
            call = propose_retype(ctx, d, [(t.name, others[0], ParallelType.Mma)], ["MMA-SHAPE"], ["MMA-SHAPE"],
                                  mates_first=False)
            if call is not None:
                d.hint += f"; verified: {call} makes the three innermost axes the instruction's tile again"
        yield d


SHAPE_CODES = ("MMA-SHAPE", "MMA-ACCUM-LAYOUT", "TCGEN05-ACCUMULATOR")  # what a reordered tile must pass


def _mma_axes_innermost(ctx: VerifyContext, d: Diagnostic, name: str) -> str | None:
    """A reorder of the schedule as written that moves the tensor's three Mma axes behind the others
    (a reorder that moved them in front), in the first order of the three (their own order first)
    whose copy passes SHAPE_CODES, proposed on d; the call, or None."""
    if ctx.source is None:  # a fix's copy (verify's snapshot only: its loop-mates' types given to the axes)
        return None
    loop = ctx.source.tensor(name).get_loop_domain()
    tile = [k for k, i in enumerate(loop) if i.parallel_type is ParallelType.Mma]
    if len(tile) != INSTRUCTION_AXES or tile == list(range(len(loop) - INSTRUCTION_AXES, len(loop))):
        return None
    rest = [k for k in range(len(loop)) if k not in tile]
    for ordered in itertools.permutations(tile):
        moves = {old: new for new, old in enumerate(rest + list(ordered)) if old != new}
        if propose_change(ctx, d, lambda fusion, moves=moves: fusion.tensor(name).reorder(moves), SHAPE_CODES):
            return f"{name}.reorder({moves})"
    return None


@rule("MMA-WARP-COLLECTIVE", family="mma")
def mma_warp_collective(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A whole warp issues each mma.sync, a whole warpgroup each wgmma: the kernel's TIDx is its 32 or 128 threads.

    What it checks:
        For every MmaOp with a macro: the kernel launches exactly 32 threads along TIDx (the
        lanes of each warp; warps go along TIDy and TIDz), the MmaOp's output binds no axis to
        TIDx, Vectorize or Bulk, and it lives in registers or global memory. For a wgmma
        (Hopper_64_N_16): 128 threads along TIDx (a warpgroup: 4 warps, the first a multiple
        of 4), and the accumulators in registers; its operands are shared tiles a TMA loads or
        the threads store (MMA-OPERAND-LAYOUT). Or the warp(group)'s threads split over TIDx and
        TIDy (a fragment laid out with quads=True: TIDy{32} x TIDx{4}): blockDim.x a constant that
        divides them, blockDim.y a multiple of the rest, the instruction's thread the linear index
        threadIdx.x + blockDim.x threadIdx.y, and the output binds no axis to TIDy. For a
        tcgen05.mma (Blackwell1CTA_128_N_16), which the block's thread 0 issues alone: no thread
        count, the output binds no axis to a thread index, Vectorize or Bulk, and lives in
        tensor memory.
    Why the hardware needs it:
        mma.sync.aligned is executed by all 32 threads of a warp together, each supplying its
        fragment registers; a partial or divergent warp makes the instruction undefined. With
        TIDx = 32 a warp is one (threadIdx.y, threadIdx.z), so every predicate on those is the
        same for the whole warp. wgmma.mma_async.sync.aligned is the same for the 128 threads
        of a warpgroup, which must be 4 consecutive warps starting at a multiple of 4.
    Example:
        fusion, a, b, a3, b3, d = mma_sync_tile("tf32_tile")
        with fusion:
            c = tp.set(a); fusion.add_output(c)  # a copy of A on 128 threads: blockDim.x = 128
        c.merge(0); c.axis(0).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, a, b, a3, b3, d = mma_sync_tile("tf32_tile")  # the tile alone: one warp
    References:
        PTX ISA 9.7.14.5.14 (mma.sync: ".aligned: all threads in the warp must execute the
        same mma instruction"); docs/hardware.md#tensor-core-fragment-layouts
    """
    # Formal statement: none, structural: blockDim.x == 32; no loop ID of D is TIDx, Vectorize or Bulk;
    #   memory(D) in {Local, Global} (wgmma: 128, Local; tcgen05.mma: no thread type on D, memory(D) == Tensor)
    for d in _structural(ctx, "MMA-WARP-COLLECTIVE"):
        call = _lanes_on_tidx(ctx, d) if d.id is None else None
        if call is not None:
            d.hint += f"; verified: {call} launches the {d.counterexample['warp']} threads along TIDx again"
        yield d


# what a thread axis given back to TIDx must pass: the launch, the loops it shares, the fragment it reads
LANE_CODES = ("MMA-WARP-COLLECTIVE", "PARALLEL-TYPE-UNIQUE", "LAUNCH-THREADS", "INLINE-PARALLEL-MATCH", "MMA-ACCUM-LAYOUT")
LANE_TRIES = 3  # axes of the warp's extent tried (a copy checked for each)


def _lanes_on_tidx(ctx: VerifyContext, d: Diagnostic) -> str | None:
    """Where an instruction needs its warp's (or warpgroup's) threads along TIDx and the kernel
    binds nothing to TIDx: the parallelize call giving TIDx to an axis of exactly that extent that
    no thread or block index binds (a loop, an Unroll, a Vectorize) in a computed tensor other than
    an MMA output (whose lanes are its Mma axes), verified (causes.propose_retype): the one
    TIDx axis given another type leaves the kernel one thread wide, and whatever the warpgroup
    shared (the accumulators' fragment, a warp-specialized loop's roles) breaks with it."""
    warp, lanes = d.counterexample.get("warp"), d.counterexample.get("blockDim_x")
    if warp is None or lanes != 1:
        return None
    loops = (ParallelType.Serial, ParallelType.Unroll, ParallelType.Vectorize)
    axes = [(t.name, k, ParallelType.TIDx) for t in ctx.executed() if not is_mma(t)
            for k, i in enumerate(t.loop)
            if i.parallel_type in loops and not i.is_broadcast and not i.is_reduction and i.static_extent == warp]
    if not axes:
        return None
    return propose_retype(ctx, d, axes[:LANE_TRIES], LANE_CODES, LANE_CODES, mates_first=False)


@rule("MMA-OPERAND-LAYOUT", family="mma", premises=("INLINE-LOOP-MAP",))
def mma_operand_layout(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Each lane's operand registers hold exactly the elements the instruction's fragment map says.

    What it checks:
        For every MmaOp with a macro, its operands are register (Local) tensors, and for each
        operand P (A, then B), over the MmaOp's execution model seen from P's fragment
        (model/mma_op.py mma_execution: the Mma axes' indices are the tile position of lane
        threadIdx.x's element v): for every instruction instance, lane and element v that
        executes, the thread that wrote the element of P read there is that lane (every thread
        index P binds, and every block index, agree) and wrote it at the register the
        instruction takes as its element v. Where an ldmatrix fills P, LDSM-REGISTER-LAYOUT
        proves the ldmatrix's own fragment, so the two compose. A wgmma's operands are shared
        tiles (WGMMA-SMEM-LAYOUT proves their descriptors) that a TMA loads or the threads
        store with plain stores, not cp.async; its A may be a register tensor instead (the RS
        form), proved as above over the warpgroup's 128 threads against wgmma m64nNk16's A
        fragment (thread 32 w + 4 g + q, element v: row 16 w + g + 8 ((v / 2) % 2), column
        2q + v % 2 + 8 (v / 4)); its B never. A tcgen05.mma's operands are both shared tiles
        (the SS form; TCGEN05-SMEM-LAYOUT proves their descriptors) under the same terms.
    Why the hardware needs it (wgmma):
        wgmma reads shared memory through the async proxy. The threads' stores are ordered
        before it by fence.proxy.async and a barrier, which tileproof places after plain stores
        (SMEM-RACE proves them there); it places none after a cp.async wait, so cp.async tiles
        could be read stale. Run on an H200: nvFuser's HopperSS tiles stored by the threads
        agree with torch (tests/nvfuser/test_nvfuser_mma.py).
    Why the hardware needs it:
        mma.sync reads A and B from fixed registers of fixed lanes (for tf32 m16n8k8, lane
        4g + q's a0..a3 are rows g, g + 8 and columns q, q + 4 of A); a register holding
        another element computes a wrong product silently. Measured on an H100: A of a tf32
        tile in the bfloat16 register order (columns 2q, 2q + 1) gave 112 of 128 elements wrong.
    Example:
        fusion, a, b, a3, b3, d = tf32_operands("tf32_tile")
        d.definition.set_macro(tp.MmaMacro.Ampere_16_8_8)
        for i in range(3):
            d.axis(i).parallelize(tp.ParallelType.Mma)
        a3.split(0, 8).split(3, 2).reorder({0: 3, 2: 0, 3: 2}).merge(1).merge(2)  # columns 2q, 2q + 1
        b3.split(2, 4).reorder({2: 3, 3: 2}).merge(1)
        a3.axis(1).parallelize(tp.ParallelType.TIDx); b3.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, a, b, a3, b3, d = mma_sync_tile("tf32_tile")  # A's columns q, q + 4
    References:
        PTX ISA 9.7.14.5.8 (mma.m16n8k8 fragments: tf32 A, B, C); CUTLASS
        include/cute/atom/mma_traits_sm80.hpp (SM80_16x8x8_F32TF32TF32F32_TN);
        docs/hardware.md#tensor-core-fragment-layouts
    """
    # Formal statement: structural: memory(A) == memory(B) == Local; and for each operand P (input k):
    #   for all admitted sizes, instruction points r of D's P view (lane = threadIdx.x, element v) and
    #   writer points w of P: executes_D(r) and executes_P(w) and logical_P(w) == read_k(r) and
    #   blockIdx(w) == blockIdx(r) => threadIdx_t(w) == threadIdx_t(r) (t bound by P) and
    #   address_P(w) == address_read(r)   (visibility.py _prove over mma_execution)
    yield from _structural(ctx, "MMA-OPERAND-LAYOUT")
    yield from check_claims(ctx, "MMA-OPERAND-LAYOUT")


@rule("MMA-ACCUM-LAYOUT", family="mma", premises=("INLINE-LOOP-MAP",))
def mma_accum_layout(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A consumer of an MmaOp's register output reads each accumulator in the lane that holds it.

    What it checks:
        A wgmma's output D kept in registers (Local) is allocated as the C fragment: no Mma
        axis in its allocation domain (tp.mma_output_allocation), else every thread keeps the
        whole 64 x N tile (up to 16384 registers). For every op that reads an MmaOp's output D
        kept in registers, over the
        consumer's execution model and D's stores seen from the C fragment (lane threadIdx.x's
        element v is row g + 8 (v / 2), column 2q + v % 2 of each m16n8 tile): the thread that
        reads an element of D is the lane that holds it, and reads the register it was stored in
        (with the lanes split over TIDx and TIDy, both indices).
    Why the hardware needs it:
        The accumulators of mma.sync are spread over the warp's lanes by a fixed map; an
        epilogue that reads D as if each thread held whole rows reads other lanes' registers,
        which it cannot see, and stores wrong values without any fault.
    Example:
        fusion, d, out, m = wgmma_row_max("row_max")  # d's fragment: row 16 w + g + 8 v2 in TIDy = 8 w + g
        m.split(0, 8).split(0, 2).split(3, 2).split(3, 4)  # [w, v2, g, rv4, rq, rv1]
        m.reorder({2: 0, 0: 1, 4: 2, 1: 3, 3: 4, 5: 5}).merge(0)  # TIDy = 4 g + w: other threads' rows
        m.axis(0).parallelize(tp.ParallelType.TIDy); m.axis(1).parallelize(tp.ParallelType.TIDx)
    Fix:
        fusion, d, out, m = wgmma_row_max("row_max")
        tp.schedule_mma_fragment(m, tp.MmaMacro.Hopper_64_64_16, "C", quads=True)  # the fragment's rows
    References:
        PTX ISA 9.7.14.5.8 (mma.m16n8k8 accumulator fragment); CUTLASS
        include/cute/atom/mma_traits_sm80.hpp (SM80_16x8_Row); docs/hardware.md#tensor-core-fragment-layouts
    """
    # Formal statement: for each op reading a Local MmaOp output D (input k) into C: for all admitted sizes,
    #   reader points r of C and writer points w of D's C view (lane = threadIdx.x, element v):
    #   executes_C(r) and executes_D(w) and logical_D(w) == read_k(r) and blockIdx(w) == blockIdx(r)
    #   => threadIdx_t(w) == threadIdx_t(r) (t: x and those D binds) and address_D(w) == address_read(r)
    # Structural part: no allocated ID of a Local MmaOp output D is bound to Mma
    order = ctx.memo(("execution-order",), lambda: execution_order(ctx.fusion))
    for d in report_problems("MMA-ACCUM-LAYOUT", accumulator_allocation(ctx.fusion, order)):
        _propose_fragment(ctx, d)
        yield d
    yield from check_claims(ctx, "MMA-ACCUM-LAYOUT")


def _propose_fragment(ctx: VerifyContext, d: Diagnostic) -> None:
    """Make `d` (an accumulator allocated whole) a root cause when a copy of the fusion with
    d's tensor allocated as tp.mma_output_allocation gives it (its Mma axes unbound while it is
    computed, as the user calls it before binding them) has no MMA-ACCUM-LAYOUT error."""
    fixed_fusion = copy.deepcopy(ctx.fusion)
    tv = next(t for t in fixed_fusion.tensors if t.name == d.tensor)
    bound = [i for i in tv.loop if i.parallel_type is ParallelType.Mma]
    try:
        for i in bound:
            i.parallelize(ParallelType.Serial)
        allocation = mma_output_allocation(tv)
        for i in bound:
            i.parallelize(ParallelType.Mma)
        tv.set_allocation_domain(allocation, True)
    except ScheduleError:
        return  # the tile is not one mma_output_allocation takes: the hint stays a direction
    fixed = VerifyContext(fixed_fusion, ctx.target, ctx.bind, shrink_seconds=0)
    holds = fix_holds(fixed, ["MMA-ACCUM-LAYOUT"])
    ctx.queries += fixed.queries
    if holds:
        d.hint += " (verified: with it, each thread holds its C fragment)"
        d.id = propose_fix(ctx, f"MMA-ACCUM-LAYOUT:{d.tensor}", fixed)


@rule("REDUCTION-K", family="mma")
def reduction_k(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every product an MMA tile adds past the end of K is 0 x 0.

    What it checks:
        For every MmaOp with a macro and well-formed Mma axes, for every admitted size: where its
        K tiles may reach past K, both operands come by a zero path (global -> cp.async or a
        TMA load whose tensor map has K as a dimension of its own -> shared -> plain copies or
        ldmatrix -> the fragment, or wgmma's shared operand) and every read past K on that path
        finds a point its producer wrote: the cp.async's zeros (src-size 0) or the TMA's
        (coordinates past K are out of bounds, filled with zeros), carried by copies that run
        past K too. A hole inside the K tile (a split of K by a factor the tile is
        not a multiple of) holds at every point.
    Why the hardware needs it:
        An instruction adds the products of its whole K tile, and it is warp-collective: it
        cannot skip the lanes whose elements lie past K. Those products must be 0 in both
        operands. Registers and shared memory that no copy wrote past K hold whatever was there
        (stale shared memory may hold NaN, and NaN times 0 is NaN); a copy that skips the
        elements past K leaves them so. cp.async with src-size 0 reads nothing and writes zeros;
        a TMA box fills its out-of-bounds elements with zeros (OOB fill NONE).
    Example:
        fusion, a, b, a3, b3, d = mma_sync_tile("k_tail", 100)  # a K loop of 13 x 8: 4 past the end
    Fix:
        fusion, a, b, a3, b3, d = mma_sync_tile("k_tail", 104)  # 13 x 8
    References:
        PTX ISA 9.7.14.5 (mma.sync is warp-collective: every lane supplies its whole
        fragment); PTX ISA 9.7.9.25 (cp.async src-size: bytes past it are zero-filled);
        docs/hardware.md#tensor-core-fragment-layouts
    """
    # Formal statement: for each MmaOp D with well-formed Mma axes, each hole cond c of D's loop nest
    #   whose terms use the K Mma index: for all admitted sizes and loop points: c holds; where D runs
    #   past K (execution/zero_padding.py), for each read of an on-chip P on its operands' zero paths by C
    #   (D's fragments or a copy): for all admitted sizes and points r of C that execute: every loop ID
    #   and needed bound of P but K holds at the forward image of the logical index r reads
    padded = zero_padded(ctx.fusion)
    for tv in execution_order(ctx.fusion):
        if not well_formed(tv):
            continue
        ex = tensor_execution(tv, ctx.block_dims)
        _, k_holes = tile_conds(tv, ex, ex.conds_of(CondKind.HOLE))
        paths = [zero_path(tv, k) for k in (0, 1)]
        unpadded = [f"{role}: {why}" for role, (_, why) in zip("AB", paths) if why]
        for c in k_holes:
            q = ctx.query([c.lhs, c.rhs], ex.guarded_ranges)
            out = q.prove(q.lt(c.lhs, c.rhs), values={"index": c.lhs, "extent": c.rhs})
            inside = tv.name in padded  # past K runs on zeros: this hole is one inside the K tile
            yield from report_values(
                ctx, "REDUCTION-K", out, f"that {tv.name}'s K tiles end at K",
                lambda v, when: (f"{tv.name}'s K tile reaches index {v.get('index')} of an axis of extent "
                                 f"{v.get('extent')}{when}: the instruction would add the products of elements "
                                 f"past {'its split of K' if inside else 'K'}, which hold whatever the registers "
                                 f"held"),
                ("index", "extent"), point=tuple(ex.guarded_ranges),
                hint=(f"split K by multiples of the macro's K ({tv.definition.macro.k}) only" if inside else
                      f"stage both operands through cp.async (tp.LoadStoreOpType.CpAsync) or TMA, which write "
                      f"zeros past K, then plain copies or ldmatrix to the fragments; or make the K tile divide K: "
                      f"fusion.assume(\"K % {tv.definition.macro.k} == 0\") for a symbolic K"),
                notes=(f"hole predicate {c.why}: {c.lhs} < {c.rhs}", *(f"no zero path for {u}" for u in unpadded)),
                tensor=tv.name, location=tv.definition.origin)
        if tv.name in padded and ex.padding:
            for (path, _), role in zip(paths, "AB"):
                reads = [(mma_execution(tv, ctx.block_dims, role), "AB".index(role))]
                reads += [(tensor_execution(t, ctx.block_dims), 0) for t, _ in path[:-1]]  # the head reads global
                for r, k in reads:
                    yield from _zeros_reach(ctx, r, k, padded)


def _zeros_reach(ctx: VerifyContext, r, k: int, padded: dict[str, int]) -> Iterator[Diagnostic]:
    """Every point r (of a copy or an MmaOp's fragment) that executes reads, in input k, an
    element of a point of the producer's loop nest: the forward image of the logical index it
    reads lies within every loop ID and needed bound of the producer, except K, which a zero
    path runs past. (Past K that point wrote zeros: see execution/zero_padding.py.)"""
    consumer, p = r.tensor, r.tensor.definition.inputs[k]
    read = r.read_logical(k)
    fwd = indices_from_logical(p, read)
    needed = predicated_bounds(p, padded[p.name])
    promo = promotion(p)  # loops shared with a consumer whose space they iterate: the reader's own
    own = p.loop[promo.positions:] if promo is not None and promo.consumer is consumer else p.loop
    ids = [i for i in own if not i.is_broadcast] + [i for i in p.all_ids() if i.uid in needed]
    bounds = [(fwd[i.uid], i.extent_expr) for i in ids if i.uid in fwd]
    kpos = next(j for j, i in enumerate(p.logical) if i.uid == padded[p.name])
    ranges = r.guarded_ranges
    left = ctx.unproved_over_integers(r.conds, [([e, n], lambda q, e=e, n=n: q.lt(e, n)) for e, n in bounds], ranges)
    if not left:
        return
    q = ctx.query([e for c in r.conds for e in (c.lhs, c.rhs)] + [e for terms, _ in left for e in terms], ranges)
    premise = z3.And(*[q.holds(c) for c in r.conds], q.ctx)
    goal = z3.And(*[g(q) for _, g in left], q.ctx)
    out = q.prove(z3.Implies(premise, goal), values={"index": read[kpos], "extent": p.logical[kpos].extent_expr})
    yield from report_values(
        ctx, "REDUCTION-K", out, f"that {consumer.name}'s reads of {p.name} past K find zeros",
        lambda v, when: (f"{consumer.name} reads {p.name} at K index {v.get('index')} (K = {v.get('extent')}){when}, "
                         f"which no point of {p.name}'s loop nest writes: the zeros its copy writes past K "
                         f"do not reach it, and it reads whatever was there"),
        ("index", "extent"), point=tuple(ranges),
        hint=f"tile K alike along the operand's path: {p.name}'s K tiles must cover every K index {consumer.name} reads",
        tensor=consumer.name, location=consumer.origin)



@rule("WGMMA-INSTRUCTION-REGISTERS", family="mma")
def wgmma_instruction_fits(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The wgmma accumulators a thread holds at once fit in the registers ptxas compiles the kernel for.

    What it checks:
        For each wgmma MmaOp: the accumulator registers of one instruction per thread (64 x N
        float32 values over a warpgroup's 128 threads: N / 2), plus 26, are at most 65536
        registers over the block's threads, in steps of 8, at most 255. And for each wgmma
        MmaOp A reducing over a serial loop L (its accumulators held across L's iterations:
        attention's O rescaled in place over the key tiles) and each other wgmma MmaOp B issued
        inside L (S = Q K^T): A's accumulator registers a thread plus B's are at most that
        budget, or the consumers' setmaxnreg count in a warp-specialized kernel (ptxas allocates
        the code after setmaxnreg.inc to it).
    Why the hardware needs it:
        The code generator declares __launch_bounds__ with the block's threads, and ptxas
        compiles the whole kernel for that share of the SM's 65536 registers. One wgmma reads
        and writes all of its accumulators at once, so ptxas cannot spill any of them: it
        refuses the kernel instead (error C7602, "Insufficient registers"). Measured with NVRTC
        13.0 for sm_90a: ptxas asks for the accumulators + 26 (154 for m64n256, 130 for
        m64n208, 98 for m64n144), with or without warp specialization, persistence and
        clusters; a consumer's setmaxnreg.inc does not raise the limit for the instruction.
        Four warpgroups (512 threads) get 128 registers a thread, five get 96. Accumulators
        held across other wgmmas stay in registers too: attention with O of 96 registers a thread
        held across an S of 128 (224, three warpgroups: 168 a thread) fails to compile (ptxas
        error C7600, "Register allocation failed") or, in other shapes, spills kilobytes; 160 of
        168 (O 128 and S 32, or O 32 and S 128) compiles without spills
        (tests/rules/test_wgmma_live_accumulators.py).
    Example:
        fusion, sa, sb, d, out = hopper_gemm_tile("three_consumer_warpgroups", 192, 256)  # 128 accumulators a thread
        out.split(-1, 2).axis(-1).parallelize(tp.ParallelType.Vectorize)  # adjacent pairs: 8-byte stores
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy))  # 4 warpgroups: 128 registers a thread
    Fix:
        fusion, sa, sb, d, out = hopper_gemm_tile("two_consumer_warpgroups", 128, 256)
        out.split(-1, 2).axis(-1).parallelize(tp.ParallelType.Vectorize)
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy))  # 3 warpgroups: 168 registers a thread
    References:
        PTX ISA 9.7.15.5 (wgmma.mma_async: the D fragment, N / 2 registers a thread for
        64 x N float32); CUDA C++ Programming Guide (__launch_bounds__, 65536 registers per SM);
        docs/hardware.md#warp-specialization
    """
    # Formal statement: none, structural: for each wgmma MmaOp output tv in registers,
    #   ceil(64 * n / 128 * bytes(tv) / 4) + 26 <= min(255, floor(65536 / threads / 8) * 8), and for wgmma
    #   outputs A, B in registers with a serial loop L among A's reduction loops and on B's statement path:
    #   regs(A) + regs(B) <= the consumers' num_registers if warp-specialized with it, else that budget
    order = ctx.memo(("execution-order",), lambda: execution_order(ctx.fusion))
    yield from report_problems("WGMMA-INSTRUCTION-REGISTERS", wgmma_instruction_registers(ctx.fusion, order)
                               + live_accumulators(ctx.fusion, order))


@rule("MMA-REGISTER-PRESSURE", family="mma", severity=Severity.WARNING)
def mma_register_pressure(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """An MmaOp's register tiles leave a thread room for its other registers (a warning).

    What it checks:
        For each MmaOp whose output is a register tile: its accumulator registers per thread,
        plus those of any operand fragment held in registers (mma.sync), plus about 30 for
        addresses, descriptors and counters, are at most what a thread of the kernel gets: the
        consumers' setmaxnreg count where the kernel is warp-specialized with num_registers,
        else 65536 registers over the block's threads, in steps of 8, at most 255.
    Why the hardware needs it:
        An SM has 65536 32-bit registers; the code generator's __launch_bounds__ tells ptxas
        the block's thread count, so ptxas fits every thread in that share, and the consumers'
        code after setmaxnreg.inc in their count. Tiles that do not fit are spilled to local
        memory between the tensor-core instructions: the kernel stays correct, and slow.
        Measured with NVRTC 13.0: two warpgroups of two 64 x 192 wgmmas each (192 accumulators a
        thread) beside a producer get 168 registers and spill 1600 bytes a thread; with
        num_registers=(40, 232) nothing spills. Where one wgmma alone does not fit, ptxas
        refuses the kernel: that is the error WGMMA-INSTRUCTION-REGISTERS, not this warning.
    Example:
        fusion, sa, sb, d, out = hopper_gemm_tile("two_wgmmas_a_warpgroup", 256, 192, wgmmas=2)  # 2 x 96 accumulators
        out.split(-1, 2).axis(-1).parallelize(tp.ParallelType.Vectorize)  # adjacent pairs: 8-byte stores
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy))  # 3 warpgroups: 168 registers a thread
    Fix:
        fusion, sa, sb, d, out = hopper_gemm_tile("two_wgmmas_a_warpgroup", 256, 192, wgmmas=2)
        out.split(-1, 2).axis(-1).parallelize(tp.ParallelType.Vectorize)
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232)))
    References:
        CUDA C++ Programming Guide (65536 registers per SM, 255 per thread, __launch_bounds__);
        PTX ISA 9.7.19.5 (setmaxnreg); CUTLASS sm90 warp-specialized kernels (two math warpgroups
        of 128 x 256 / 2 with 232 registers); docs/hardware.md#warp-specialization
    """
    # Formal statement: none, structural: for each MmaOp output tv in registers, sum over tv and its
    #   register operands of ceil(elements * bytes / 4) + 30 <= the consumers' num_registers, or
    #   min(255, floor(65536 / threads / 8) * 8)
    yield from report_problems("MMA-REGISTER-PRESSURE",
                               register_pressure(ctx.fusion, ctx.memo(("execution-order",),
                                                                      lambda: execution_order(ctx.fusion))))
