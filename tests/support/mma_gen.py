"""Random tensor-core (MmaOp) schedules, for the fuzzer's mma family (benchmarks/fuzz.py):
D[M, N] = sum_k A[M, 1, K] B[1, N, K] on mma.sync, built the way examples/valid/mma.py builds
its tuned matmul, with random parameters, and now and then one mutation that breaks it.

The valid draw: a float32 (tf32, Ampere_16_8_8) or bfloat16 / float16 operand dtype (any of
the five 16-bit mma.sync macros), warps (TIDz x TIDy, 1-8 of them) each repeating the macro
tile rm x rn times, a K tile of 1-4 macro K's, operands copied to shared memory by cp.async
(16 bytes, sometimes swizzled, sometimes circular-buffered with 2-4 stages and a random
prefetch) or by a plain vectorized copy, fragments read by ldmatrix or element by element
(tp.schedule_mma_fragment), sometimes circular-buffered in registers over the k-slice loop (a
prefetch equal to the stages now and then: rejected), the accumulators stored directly or kept in registers and copied
out in the C fragment's layout; sizes concrete (sometimes not multiples of the block tile) or
symbolic with divisibility assumptions (now and then one left out).

Mutations (one per mutated case): a permuted fragment (lanes or registers), Mma bound to the
wrong axes or to none, an operand dtype the macro does not take, blockDim.x != 32, an epilogue
that reads the register accumulators in row order, a Hopper (wgmma) macro, a K tail with no
assumption, the operands read from shared memory directly, D's axis on TIDx. API misuse
(set_macro on a non-MMA op or with a value that is not a macro, schedule_mma_fragment with a
wrong macro / operand / tile) must raise tp.ScheduleError: any other exception, or none, is
recorded in `api_bugs` (the fuzzer counts them as internal errors). Every call with one seed
builds the same schedule.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import tileproof as tp
from tileproof.recipes.gemm_blocks import tile_mnk

P = tp.ParallelType
LS = tp.LoadStoreOpType
M16 = [tp.MmaMacro.Ampere_16_8_16, tp.MmaMacro.Ampere_16_16_16, tp.MmaMacro.Turing_16_8_8,
       tp.MmaMacro.Turing_16_8_16, tp.MmaMacro.Turing_16_16_16]
MUTATIONS = ("fragment_order", "mma_axes", "mma_missing", "wrong_dtype", "blockdim_x", "epilogue_rows", "hopper",
             "k_tail", "operands_in_shared", "d_on_tidx")


@dataclass
class MmaCase:
    fusion: tp.Fusion
    target: str
    steps: list[str] = field(default_factory=list)
    mutation: str | None = None
    api_bugs: list[str] = field(default_factory=list)  # API misuse that did not raise tp.ScheduleError
    sizes: tuple = ()
    macro: tp.MmaMacro | None = None

    def __repr__(self) -> str:
        return f"MmaCase({self.mutation or 'valid'} on {self.target}: {'; '.join(self.steps)})"


def _permute(tv, order):
    tv.reorder({old: new for new, old in enumerate(order)})


def _swizzled(tv, row_bytes):
    tile = tv.get_loop_domain()
    per_chunk = 16 // tv.dtype.bytes
    chunks = row_bytes // 16
    tv.split(-1, per_chunk)
    if chunks == 8:
        tv.split(-3, 8)
        tv.swizzle(tp.SwizzleType.XOR, -3, -2)
    else:
        tv.split(-3, 8 // chunks).split(-4, chunks)
        tv.swizzle(tp.SwizzleType.XOR, -4, -2)
    tv.set_allocation_domain(tv.get_loop_domain(), True)
    tv.set_loop_domain(tile)


def _copy_tile(tv, warps, lanes, chunk_elems):
    """[.., rows, cols] -> [.., repeats (Unroll), TIDz, TIDy, TIDx, chunk (Vectorize)]."""
    threads = warps[0] * warps[1] * lanes
    tv.merge(-2)
    tv.split(-1, chunk_elems)
    tv.split(-2, threads)
    tv.split(-2, lanes)
    tv.split(-3, warps[1])
    for k, p in ((-5, P.Unroll), (-4, P.TIDz), (-3, P.TIDy), (-2, P.TIDx), (-1, P.Vectorize)):
        tv.axis(k).parallelize(p)


def _api_misuse(rng, case, fusion, a, sa, ra, d, macro) -> None:
    """One misuse that must raise tp.ScheduleError and leave the schedule as it was."""
    calls = [
        ("sa.definition.set_macro(macro)", lambda: sa.definition.set_macro(macro)),
        ("d.definition.set_macro('Ampere_16_8_8')", lambda: d.definition.set_macro("Ampere_16_8_8")),
        ("d.definition.set_macro(None)", lambda: d.definition.set_macro(None)),
        ("d.definition.set_macro(P.Mma)", lambda: d.definition.set_macro(P.Mma)),
        ("d.definition.set_macro(macro.value)", lambda: d.definition.set_macro(macro.value)),
        ("schedule_mma_fragment(ra, 'x', A)", lambda: tp.schedule_mma_fragment(ra, "x", tp.MmaOperand.A)),
        ("schedule_mma_fragment(ra, macro, 'D')", lambda: tp.schedule_mma_fragment(ra, macro, "D")),
        ("schedule_mma_fragment(ra, Hopper, A)",
         lambda: tp.schedule_mma_fragment(ra, tp.MmaMacro.Hopper_64_64_16, tp.MmaOperand.A)),
        ("schedule_mma_fragment(sa, macro, B) on the whole tile", lambda: tp.schedule_mma_fragment(
            sa, tp.MmaMacro.Turing_16_16_16 if macro.n == 8 else tp.MmaMacro.Ampere_16_8_8, tp.MmaOperand.B)),
        ("fused_multiply_sum(a, a, [0])", lambda: tp.fused_multiply_sum(a, a, [1])),
    ]
    name, call = rng.choice(calls)
    case.steps.append(f"misuse {name}")
    try:
        with fusion:
            call()
    except tp.ScheduleError:
        return
    except Exception as e:  # noqa: BLE001 - the finding
        case.api_bugs.append(f"{name} raised {type(e).__name__}: {e}"[:400])
        return
    if name.startswith("schedule_mma_fragment(sa"):
        return  # may legitimately succeed on a tile of the right shape (it only splits sa's loop)
    case.api_bugs.append(f"{name} did not raise tp.ScheduleError")


def mma_case(seed: int) -> MmaCase:
    rng = random.Random(seed)
    mutation = rng.choice(MUTATIONS) if rng.random() < 0.45 else None
    dtype = rng.choice([tp.float32, tp.bfloat16, tp.float16])
    macro = tp.MmaMacro.Ampere_16_8_8 if dtype == tp.float32 else rng.choice(M16)
    for _ in range(100):  # shapes whose copies divide into 16-byte chunks per thread
        wm, wn = rng.choice([(1, 1), (1, 1), (1, 2), (2, 1), (2, 2), (2, 2), (1, 4), (4, 1), (2, 4)])
        rm, rn = rng.choice([1, 1, 2, 4]), rng.choice([1, 2, 2, 4])
        bm, bn = wm * rm * macro.m, wn * rn * macro.n
        bk = macro.k * rng.choice([1, 2, 4])
        chunk = 16 // dtype.bytes
        threads = 32 * wm * wn
        if bm <= 256 and bn <= 256 and (bm * bk) % (chunk * threads) == 0 and (bn * bk) % (chunk * threads) == 0:
            break
    else:
        wm = wn = rm = rn = 1
        bm, bn, bk, threads = macro.m, macro.n, 4 * macro.k, 32
    cp_async = rng.random() < 0.75
    stages = rng.choice([1, 2, 2, 3, 4]) if cp_async else 1
    prefetch = rng.choice([-1, -1, stages - 1, max(stages - 2, 0), 0]) if stages > 1 else -1
    swizzle = bk * dtype.bytes in (64, 128) and rng.random() < 0.6
    ldmatrix = rng.random() < 0.5
    epilogue = rng.random() < 0.3 or mutation == "epilogue_rows"
    symbolic = rng.random() < 0.35
    target = "sm_100a" if rng.random() < 0.1 else "sm_90a"
    steps = [f"{dtype.name} {macro.name} block {bm}x{bn}x{bk} warps {wm}x{wn} reps {rm}x{rn}",
             f"{'cp.async' if cp_async else 'copy'} stages {stages} prefetch {prefetch}"
             + (" swizzled" if swizzle else "") + (" ldmatrix" if ldmatrix else "") + (" epilogue" if epilogue else "")]
    if symbolic:
        m, n, k = "M", "N", "K"
        steps.append("symbolic")
    else:
        m = bm * rng.randint(1, 3) - (8 if bm > 8 and rng.random() < 0.1 else 0)  # now and then a partial tile
        n = bn * rng.randint(1, 3) - (4 if bn > 4 and rng.random() < 0.1 else 0)
        k = bk * rng.randint(1, 4) + (rng.choice([0] * 10 + [macro.k, 4]) if mutation != "k_tail" else 4)
        steps.append(f"{m}x{n}x{k}")
    with tp.Fusion(f"mma_{seed}") as fusion:
        a = tp.make_tensor([m, 1, k], dtype=dtype)
        b = tp.make_tensor([1, n, k], dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        out = tp.set(d) if epilogue else d
        fusion.add_output(out)
    if symbolic:
        for s, q in (("M", bm), ("N", bn), ("K", bk)):
            if mutation == "k_tail" and s == "K":
                continue
            if rng.random() < 0.08:  # sometimes an assumption left out
                steps.append(f"no assumption on {s}")
                continue
            fusion.assume(f"{s} % {q} == 0")
        fusion.assume(f"N <= {65535 * bn}")  # N's tiles on blockIdx.y: a grid that launches (LAUNCH-GRID)
    case = MmaCase(fusion, target, steps, mutation, sizes=(m, n, k), macro=macro)
    set_macro = macro
    if mutation == "wrong_dtype":
        set_macro = rng.choice(M16) if dtype == tp.float32 else tp.MmaMacro.Ampere_16_8_8
    elif mutation == "hopper":
        set_macro = rng.choice([tp.MmaMacro.Hopper_64_8_16, tp.MmaMacro.Hopper_64_64_16, tp.MmaMacro.Hopper_64_128_16])
    if mutation:
        steps.append(f"mutation {mutation}" + (f" set_macro({set_macro.name})" if set_macro is not macro else ""))
    d.definition.set_macro(set_macro)
    mk = macro.k
    sa = a.cache_after(LS.CpAsync if cp_async else LS.Set)
    sb = b.cache_after(LS.CpAsync if cp_async else LS.Set)
    if mutation == "operands_in_shared":
        ra, rb = sa, sb
    else:
        op = LS.LdMatrix if ldmatrix else LS.Set
        ra, rb = sa.cache_after(op), sb.cache_after(op)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    tiled = [d, sa, sb] + ([ra, rb] if ra is not sa else [])
    for t in tiled:
        tile_mnk(t, bm, bn, bk)
    # D [Mo, No, Ko, bm, bn, bk] -> [Mo, No, Ko, wm, wn, kb, rm, rn, M, N, K]
    d.split(5, mk)
    d.split(4, macro.n).split(4, rn)
    d.split(3, macro.m).split(3, rm)
    _permute(d, [0, 1, 2, 3, 6, 9, 4, 7, 5, 8, 10])
    binding = [(0, P.BIDx), (1, P.BIDy), (3, P.TIDz), (4, P.TIDy), (5, P.Unroll), (6, P.Unroll), (7, P.Unroll),
               (8, P.Mma), (9, P.Mma), (10, P.Mma)]
    if mutation == "mma_axes":
        how = rng.choice(["swap", "outer", "two"])
        steps.append(f"mma axes {how}")
        if how == "swap":
            binding = binding[:7] + [(8, P.Mma), (9, P.Mma), (10, P.Mma)]
        elif how == "outer":
            binding = binding[:6] + [(7, P.Mma), (8, P.Mma), (9, P.Mma)]
        else:
            binding = binding[:7] + [(8, P.Mma), (9, P.Mma)]
    elif mutation == "mma_missing":
        binding = binding[:7]
    elif mutation == "d_on_tidx":
        binding = [(i, P.TIDx if i == 7 else p) for i, p in binding]
    for i, p in binding:
        d.axis(i).parallelize(p)
    if mutation == "mma_axes" and "swap" in steps[-1]:
        d.reorder({8: 9, 9: 8})  # N before M: the innermost three are N, M, K
    if ra is not sa:
        # A's fragments [Mo, 1, Ko, bm, bk] -> [Mo, 1, Ko, wm, 1, kb, rm, lane, v]
        ra.split(4, mk)
        ra.split(3, macro.m).split(3, rm)
        ra.split(1, 1)
        _permute(ra, [0, 1, 3, 4, 2, 7, 5, 6, 8])
        ra.axis(0).parallelize(P.BIDx)
        ra.axis(3).parallelize(P.TIDz)
        rb.split(4, mk)
        rb.split(3, macro.n).split(3, rn)
        rb.split(0, 1)
        _permute(rb, [0, 2, 3, 1, 4, 7, 5, 6, 8])
        rb.axis(1).parallelize(P.BIDy)
        rb.axis(4).parallelize(P.TIDy)
        broken = rng.choice([ra, rb]) if mutation == "fragment_order" else None
        for t, operand in ((ra, tp.MmaOperand.A), (rb, tp.MmaOperand.B)):
            t.axis(5).parallelize(P.Unroll)
            t.axis(6).parallelize(P.Unroll)
            tp.schedule_mma_fragment(t, macro, operand)
            if t is broken:
                how = rng.choice(["lanes", "registers"]) if t.axis(-1).static_extent >= 4 else "lanes"
                steps.append(f"fragment {operand.value} {how} permuted")
                if how == "lanes":  # lane = 4g + q -> 8q + g
                    t.axis(-2).parallelize(P.Serial)
                    t.split(-2, 4)
                    t.reorder({-3: -2, -2: -3})
                    t.merge(-3)
                    t.axis(-2).parallelize(P.TIDx)
                else:  # v = 2 hi + lo -> 2 lo + hi (extent / 2)
                    t.split(-1, 2)
                    t.reorder({-2: -1, -1: -2})
                    t.merge(-2)
            t.axis(-1).parallelize(P.Vectorize if ldmatrix else P.Unroll)
    lanes = 64 if mutation == "blockdim_x" else 32
    for t, rows, blk in ((sa, bm, P.BIDx), (sb, bn, P.BIDy)):
        if swizzle:
            _swizzled(t, bk * dtype.bytes)
        if lanes == 64 and (rows * bk) % (chunk * threads * 2):
            lanes = 16  # blockDim.x 16 then
        _copy_tile(t, (wm, wn), lanes, chunk)
        t.axis(0 if blk is P.BIDx else 1).parallelize(blk)
        t.inline_at(3)
        if stages > 1:
            t.circular_buffer(stages, prefetch)
    if lanes != 32:
        steps.append(f"copies on {lanes} lanes")
    if ra is not sa:
        ra.inline_at(6)
        rb.inline_at(6)
    if epilogue:
        # out [M, N] -> [Mo, No, wm, wn, rm, rn, lane, v] in the C fragment's layout (or rows, mutated)
        out.split(1, bn).split(0, bm)
        _permute(out, [0, 2, 1, 3])
        out.split(3, macro.n).split(3, rn)
        out.split(2, macro.m).split(2, rm)
        _permute(out, [0, 1, 2, 5, 3, 6, 4, 7])
        if mutation == "epilogue_rows":
            out.merge(-2).split(-1, (macro.m * macro.n) // 32)  # each lane some consecutive elements of a row
        else:
            tp.schedule_mma_fragment(out, macro, "C", dtype)
        for i, p in ((0, P.BIDx), (1, P.BIDy), (2, P.TIDz), (3, P.TIDy), (6, P.TIDx)):
            out.axis(i).parallelize(p)
        d.inline_at(2)
    if rng.random() < 0.12:
        _api_misuse(rng, case, fusion, a, sa, ra, d, macro)
    if ra is not sa and bk > macro.k and rng.random() < 0.3:  # fragments circular-buffered over the k-slices
        stages, ahead = rng.choice([(2, 1), (2, 1), (2, 0), (3, 2), (2, 2)])  # (2, 2): refilled before read
        for t in (ra, rb):
            t.circular_buffer(stages, ahead)
        case.steps.append(f"fragments {stages} stages prefetch {ahead}")
    return case


__all__ = ["MUTATIONS", "MmaCase", "mma_case"]
