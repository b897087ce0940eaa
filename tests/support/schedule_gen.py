"""Hypothesis strategies that build random small schedules with concrete extents.

Four families, each a gmem -> ... -> gmem copy:
  swizzle_cases: gmem -> smem (XOR swizzle of two loop axes, optional splits first) -> gmem
  split_cases:   gmem -> regs -> gmem with random splits, reorders, a vectorized axis and
                 random thread parallelization (SPLIT-DIVISIBILITY, LAUNCH-THREADS)
  tmem_cases:    gmem -> T1 regs -> T2 tensor memory -> T3 regs -> gmem, modelled on the
                 tensor-memory tutorial seed (every tcgen05 access rule, allocation budgets)
  visibility_cases: gmem -> smem (on blocks) -> gmem or regs -> gmem, the consumer's blocks
                 matching or not (SMEM-BLOCK-VISIBILITY)

A strategy returns a `Case` (the fusion plus the list of scheduling steps taken).
Scheduling calls that raise tp.ScheduleError reject the draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import assume
from hypothesis import strategies as st

import tileproof as tp
from tileproof.execution.indexing import thread_dims
from tileproof.model.expr import evaluate

P = tp.ParallelType
TIDS = (P.TIDx, P.TIDy, P.TIDz)


@dataclass
class Case:
    family: str
    fusion: tp.Fusion
    steps: list[str] = field(default_factory=list)
    target: str | None = None  # where the family does not say (lowering: sm_100a with tensor memory)

    def __repr__(self) -> str:  # hypothesis prints this for a falsifying example
        return f"Case({self.family}: " + "; ".join(self.steps) + ")"


class Recorder:
    """Runs scheduling calls, logging each; a ScheduleError rejects the example."""

    def __init__(self, steps: list[str]):
        self.steps = steps

    def __call__(self, text: str, fn, *args, **kwargs):
        try:
            out = fn(*args, **kwargs)
        except tp.ScheduleError as e:
            self.steps.append(f"{text} -> ScheduleError({e})")
            assume(False)
        self.steps.append(text)
        return out


def _ext(i) -> int:
    return evaluate(i.extent_expr, {})


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


# -- (a) swizzle ---------------------------------------------------------------------------

@st.composite
def swizzle_cases(draw) -> Case:
    pow2 = st.sampled_from([1, 2, 4, 8, 16])
    any_ext = st.integers(1, 16)
    X = draw(st.one_of(pow2, any_ext))
    Y = draw(st.one_of(pow2, any_ext))
    steps = [f"shape [{X}, {Y}]"]
    run = Recorder(steps)
    with tp.Fusion("swizzle") as fusion:
        t0 = tp.make_contig_concrete_tensor([X, Y])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Shared)
        for _ in range(draw(st.integers(0, 2))):
            axis = draw(st.integers(0, t1.ndim - 1))
            factor = draw(st.integers(1, 8))
            inner = draw(st.booleans())
            run(f"T1.split({axis}, {factor}, inner_split={inner})", t1.split, axis, factor, inner)
        a = draw(st.integers(0, t1.ndim - 1))
        b = draw(st.integers(0, t1.ndim - 1).filter(lambda k: k != a))
        run(f"T1.swizzle(XOR, {a}, {b})", t1.swizzle, tp.SwizzleType.XOR, a, b)
        if draw(st.booleans()):
            run("propagate_transforms(T1)", tp.propagate_transforms, t1)
    return Case("swizzle", fusion, steps)


# -- (b) split divisibility and launch size -------------------------------------------------

@st.composite
def split_cases(draw) -> Case:
    ndims = draw(st.integers(1, 3))
    shape = [draw(st.one_of(st.integers(1, 24), st.sampled_from([32, 48, 64, 96, 128, 256]))) for _ in range(ndims)]
    steps = [f"shape {shape}"]
    run = Recorder(steps)
    with tp.Fusion("split") as fusion:
        t0 = tp.make_contig_concrete_tensor(shape)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
        for _ in range(draw(st.integers(0, 3))):
            axis = draw(st.integers(0, t2.ndim - 1))
            n = _ext(t2.axis(axis))
            factor = draw(st.one_of(st.integers(1, 9), st.sampled_from(_divisors(n)[-3:])))
            inner = draw(st.booleans())
            run(f"T2.split({axis}, {factor}, inner_split={inner})", t2.split, axis, factor, inner)
        if t2.ndim > 1 and draw(st.booleans()):
            perm = draw(st.permutations(range(t2.ndim)))
            run(f"T2.reorder({list(perm)})", t2.reorder, list(perm))
        run("propagate_transforms(T2)", tp.propagate_transforms, t2)
        # thread parallelization (LAUNCH-THREADS)
        free = list(range(t2.ndim))
        for p in TIDS:
            if len(free) > 1 and draw(st.integers(0, 2)):
                k = draw(st.sampled_from(free))
                free.remove(k)
                run(f"T2.axis({k}).parallelize({p})", t2.axis(k).parallelize, p)
        run("parallelize_all_like(T2)", tp.parallelize_all_like, t2)
        # vectorize one serial axis of T1 or T2 (its ancestor splits must divide)
        if draw(st.integers(0, 3)):
            tv = draw(st.sampled_from([t1, t2]))
            serial = [k for k, i in enumerate(tv.loop) if i.parallel_type is P.Serial]
            split_out = [k for k in serial if tv.loop[k].definition is not None]
            if serial:
                k = draw(st.sampled_from(split_out if split_out and draw(st.booleans()) else serial))
                run(f"{tv.name}.axis({k}).parallelize(Vectorize)", tv.axis(k).parallelize, P.Vectorize)
        # an extra split on T1 only (never required unless it feeds a vectorized ID)
        if draw(st.integers(0, 3)) == 0:
            axis = draw(st.integers(0, t1.ndim - 1))
            if t1.axis(axis).parallel_type is P.Serial:
                factor = draw(st.integers(2, 9))
                run(f"T1.split({axis}, {factor})", t1.split, axis, factor)
                if draw(st.booleans()):
                    run(f"T1.axis({axis + 1}).parallelize(Vectorize)", t1.axis(axis + 1).parallelize, P.Vectorize)
    return Case("split", fusion, steps)


# -- (c) tensor memory ----------------------------------------------------------------------

TMEM_SIZES = [2, 4, 8, 16, 32, 64, 128, 1, 3, 5, 6, 12]
# 32-bit elements mostly; 16- and 8-bit ones packed into 32-bit columns, 64-bit ones over two
TMEM_DTYPES = ["float32"] * 6 + ["bfloat16", "float16", "int8", "float64", "int64"]
MAX_ELEMENTS = 4096
MAX_POINTS = 20000


def _tid_assignment(draw, tv, run, label: str, max_threads: int = 512) -> None:
    """Put TIDx (usually) and maybe TIDy/TIDz on distinct serial loop axes of tv."""
    free = [k for k, i in enumerate(tv.loop) if i.parallel_type is P.Serial]
    total = 1
    for p, prob in ((P.TIDx, 9), (P.TIDy, 7), (P.TIDz, 4)):
        if not free or draw(st.integers(0, 9)) >= prob:
            continue
        # prefer large axes for TIDx: that is what makes warps
        if p is P.TIDx and draw(st.integers(0, 6)):
            big = [k for k in free if _ext(tv.loop[k]) >= 32]
            k = draw(st.sampled_from(big or free))
        else:
            k = draw(st.sampled_from(free))
        e = _ext(tv.loop[k])
        if total * e > max_threads:
            continue
        total *= e
        free.remove(k)
        run(f"{label}.axis({k}).parallelize({p})", tv.axis(k).parallelize, p)
    if total % 32 and draw(st.booleans()):
        assume(False)  # keep partial warps to about half of what they would be


def _points(fusion, tv) -> int:
    """Threads x non-thread loop points the oracle enumerates for accesses issued by tv."""
    b = 1
    for e in thread_dims(fusion):
        b *= evaluate(e, {})
    n = b
    for i in tv.loop:
        if i.parallel_type not in TIDS:
            n *= _ext(i)
    return n


@st.composite
def tmem_cases(draw) -> Case:
    ndims = draw(st.integers(1, 3))
    shape = [draw(st.sampled_from(TMEM_SIZES)) for _ in range(ndims)]
    if draw(st.integers(0, 9)) < 7:  # a warp-sized axis somewhere: what makes warps collective
        shape[draw(st.integers(0, ndims - 1))] = draw(st.sampled_from([32, 64, 128]))
    n = 1
    for s in shape:
        n *= s
    assume(n <= MAX_ELEMENTS)
    transpose = ndims >= 2 and draw(st.integers(0, 4)) == 0
    dtype = draw(st.sampled_from(TMEM_DTYPES))
    steps = [f"shape {shape} {dtype}"]
    run = Recorder(steps)
    with tp.Fusion("tmem") as fusion:
        t0 = tp.make_contig_concrete_tensor(shape, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        if transpose:
            a, b = draw(st.sampled_from([(i, j) for i in range(ndims) for j in range(i + 1, ndims)]))
            t3 = tp.transpose(t2, a, b)
            steps.append(f"T3 = transpose(T2, {a}, {b})")
        else:
            t3 = tp.set(t2)
        t4 = tp.set(t3)
        fusion.add_output(t4)
        t2.set_memory_type(tp.MemoryType.Tensor)
        tensors = [t1, t2, t3, t4]
        mode = "position" if transpose and draw(st.booleans()) else "propagate"
        if mode == "position":
            # the seed's Transpose: every tensor parallelized by axis position
            types = draw(st.permutations([P.TIDx, P.TIDy, P.TIDz, P.Serial, P.Serial][: max(ndims, 3)]))
            for tv in tensors:
                for k in range(ndims):
                    if types[k] is not P.Serial:
                        run(f"{tv.name}.axis({k}).parallelize({types[k]})", tv.axis(k).parallelize, types[k])
            threads = 1
            for k in range(ndims):
                if types[k] is not P.Serial:
                    threads *= shape[k]
            assume(threads <= 512)
        else:
            out = t4
            for _ in range(draw(st.integers(0, 3))):
                axis = draw(st.integers(0, out.ndim - 1))
                e = _ext(out.axis(axis))
                if draw(st.integers(0, 6)):
                    factor = draw(st.sampled_from(_divisors(e)))
                else:
                    factor = draw(st.integers(2, 9))
                inner = draw(st.integers(0, 3)) > 0
                run(f"T4.split({axis}, {factor}, inner_split={inner})", out.split, axis, factor, inner)
            if out.ndim > 1 and draw(st.integers(0, 2)) == 0:
                perm = list(draw(st.permutations(range(out.ndim))))
                run(f"T4.reorder({perm})", out.reorder, perm)
            run("propagate_transforms(T4)", tp.propagate_transforms, out)
            _tid_assignment(draw, out, run, "T4")
            if draw(st.integers(0, 4)) == 0:
                serial = [k for k, i in enumerate(out.loop) if i.parallel_type is P.Serial]
                if serial:
                    k = draw(st.sampled_from(serial))
                    run(f"T4.axis({k}).parallelize(BIDx)", out.axis(k).parallelize, P.BIDx)
            run("parallelize_all_like(T4)", tp.parallelize_all_like, out)
            if draw(st.integers(0, 4)) == 0:
                # a different parallelization for the load side
                for i in t3.loop:
                    if i.parallel_type in TIDS:
                        i.parallelize(P.Serial)
                steps.append("T3: thread axes reset to Serial")
                _tid_assignment(draw, t3, run, "T3")
        # vectorize the innermost axis of T2 (store) and/or T3 (load); 8- and 16-bit elements
        # mostly by whole registers (a multiple of the elements per register), and a schedule that
        # cannot vectorize them is kept half as often: the partial-register cases stay a minority
        per_word = max(1, 4 // t0.dtype.bytes)
        for tv in (t2, t3):
            if tv.loop[-1].parallel_type is not P.Serial:
                if per_word > 1 and draw(st.booleans()):
                    assume(False)
                continue
            vec = draw(st.integers(0, 5))
            if per_word > 1 and vec <= 4:
                f = per_word * draw(st.sampled_from([1, 2])) if vec <= 3 else draw(st.sampled_from([2, 3]))
                run(f"{tv.name}.split(-1, {f})", tv.split, -1, f)
                run(f"{tv.name}.axis(-1).parallelize(Vectorize)", tv.axis(-1).parallelize, P.Vectorize)
                continue
            if vec <= 1 and _ext(tv.loop[-1]) > 1:
                f = draw(st.sampled_from([2, 3, 4, 6, 8, 12]))
                run(f"{tv.name}.split(-1, {f})", tv.split, -1, f)
            if vec <= 2:
                run(f"{tv.name}.axis(-1).parallelize(Vectorize)", tv.axis(-1).parallelize, P.Vectorize)
        which = draw(st.integers(0, 7))
        if which < 2:
            run("T2.set_allocation_domain(T2.get_loop_domain(), True)",
                t2.set_allocation_domain, t2.get_loop_domain(), True)
        elif which == 2 and t2.ndim > 1:
            perm = list(draw(st.permutations(range(t2.ndim))))
            run(f"T2.set_allocation_domain(loop permuted {perm}, True)",
                t2.set_allocation_domain, [t2.loop[k] for k in perm], True)
        alloc = t2.get_allocation_domain()
        tidx = [k for k, i in enumerate(alloc) if i.parallel_type is P.TIDx]
        how = draw(st.integers(0, 9))
        if tidx and how < 4:  # TIDx innermost on the lane side, as the seed's valid cases
            sep = tidx[0] + 1
        elif how < 7:  # everything on the lane side (the seed's WrongSubpartition)
            sep = len(alloc)
        elif how < 8:  # everything on the column side
            sep = 0
        else:
            sep = draw(st.integers(0, len(alloc)))
        run(f"T2.set_tmem_dim_sep_pos({sep})", t2.set_tmem_dim_sep_pos, sep)
        how = draw(st.integers(0, 2))
        if how == 1:
            k = draw(st.integers(0, t4.ndim))
            run(f"inline_all_at(T4, {k})", tp.inline_all_at, t4, k)
        elif how == 2:
            run("inline_most()", tp.inline_most, fusion)
    assume(max(_points(fusion, t2), _points(fusion, t3)) <= MAX_POINTS)
    return Case("tmem", fusion, steps)


# -- (d) block visibility of shared memory ---------------------------------------------------

BLOCKS = (P.BIDx, P.BIDy)


def _random_transforms(draw, tv, run, label: str) -> None:
    """0-2 splits (divisible or not, inner or outer), maybe a merge, maybe a reorder."""
    for _ in range(draw(st.integers(0, 2))):
        axis = draw(st.integers(0, tv.ndim - 1))
        factor = draw(st.integers(1, 6))
        inner = draw(st.integers(0, 3)) > 0
        run(f"{label}.split({axis}, {factor}, inner_split={inner})", tv.split, axis, factor, inner)
    if tv.ndim > 1 and draw(st.integers(0, 3)) == 0:
        axis = draw(st.integers(0, tv.ndim - 2))
        run(f"{label}.merge({axis})", tv.merge, axis)
    if tv.ndim > 1 and draw(st.integers(0, 3)) == 0:
        perm = list(draw(st.permutations(range(tv.ndim))))
        run(f"{label}.reorder({perm})", tv.reorder, perm)


def _random_parallel(draw, tv, run, label: str, types) -> None:
    free = list(range(tv.ndim))
    for p in types:
        if free and draw(st.integers(0, 3)):
            k = draw(st.sampled_from(free))
            free.remove(k)
            run(f"{label}.axis({k}).parallelize({p})", tv.axis(k).parallelize, p)


@st.composite
def visibility_cases(draw) -> Case:
    """gmem T0 -> smem T1 -> T2 (the global output, or registers copied to a global T3),
    T1 parallelized on blocks (sometimes with a split broadcast merged in, so that several
    blocks write one element); T2 unscheduled, scheduled like T1 (all or some block types),
    or scheduled independently."""
    ndims = draw(st.integers(1, 2))
    shape = [draw(st.one_of(st.integers(1, 12), st.sampled_from([8, 16]))) for _ in range(ndims)]
    repeat = ndims == 2 and draw(st.integers(0, 3)) == 0  # a split broadcast merged into a block axis
    if repeat:
        shape[0] = 1
    steps = [f"shape {shape}"]
    run = Recorder(steps)
    local = draw(st.integers(0, 3)) == 0
    with tp.Fusion("visibility") as fusion:
        t0 = tp.make_contig_concrete_tensor(shape)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        out = t2
        if local:
            out = tp.set(t2)
            steps.append("T2 in registers, T3 = set(T2) the output")
        fusion.add_output(out)
        t1.set_memory_type(tp.MemoryType.Shared)
        if repeat:  # [b{1}, I] -> [b{1}, b{f}, I] -> [b{1}, b{f} * I]: f blocks write each element
            f = draw(st.integers(2, 4))
            run(f"T1.split(0, {f})", t1.split, 0, f)
            run("T1.merge(1)", t1.merge, 1)
        _random_transforms(draw, t1, run, "T1")
        _random_parallel(draw, t1, run, "T1", BLOCKS + (P.TIDx,))
        how = draw(st.sampled_from(["unscheduled", "like", "some", "independent"]))
        if how in ("like", "some"):
            run("propagate_transforms(T1)", tp.propagate_transforms, t1)
            types = list(BLOCKS) if how == "like" else draw(st.lists(st.sampled_from(BLOCKS), max_size=1))
            run(f"parallelize_all_like(T1, {types}, [T2])", tp.parallelize_all_like, t1, types, [t2])
        elif how == "independent":
            _random_transforms(draw, t2, run, "T2")
            _random_parallel(draw, t2, run, "T2", BLOCKS + (P.TIDx,))
        else:
            steps.append("T2 unscheduled")
        if local and not any(i.parallel_type is P.TIDx for i in t2.loop):  # registers per thread
            _random_parallel(draw, t2, run, "T2", (P.TIDx,))
        if local and draw(st.integers(0, 1)):  # T3 reads T2's registers: on T2's threads or others
            if draw(st.integers(0, 1)):
                run("propagate_transforms(T2)", tp.propagate_transforms, t2)
                run("parallelize_all_like(T2, [T3])", tp.parallelize_all_like, t2, None, [out])
            else:
                _random_transforms(draw, out, run, "T3")
                _random_parallel(draw, out, run, "T3", BLOCKS + (P.TIDx, P.TIDy))
    points = 1
    for s in shape:
        points *= s
    blocks = 1
    for i in t1.loop + t2.loop:
        if i.parallel_type in BLOCKS:
            blocks *= _ext(i)
    assume(points * blocks <= 4096)
    return Case("visibility", fusion, steps)


# -- (e) what the code generator lowers -------------------------------------------------------

LOWERING_SIZES = [1, 2, 3, 4, 5, 7, 8, 12, 16, 32, 64, 96, 128, 256, 1024, 4096]
LOWERING_DTYPES = ["float32"] * 6 + ["float16", "bfloat16", "int32", "float64", "int8"]
LOWERING_TYPES = [P.TIDx, P.TIDy, P.BIDx, P.BIDy, P.Unroll, P.Vectorize, P.Serial, P.TIDz, P.DIDx, P.Bulk]
LOWERING_OP_TYPES = [tp.LoadStoreOpType.CpAsync, tp.LoadStoreOpType.TMA, tp.LoadStoreOpType.TMA,
                     tp.LoadStoreOpType.LdMatrix, tp.LoadStoreOpType.StMatrix, tp.LoadStoreOpType.TMemStore]
LOWERING_UNARY = ["neg", "abs", "exp", "relu", "sqrt"]
LOWERING_INTEGER_UNARY = ["neg", "abs", "relu"]
LOWERING_BINARY = ["add", "sub", "mul", "maximum"]


class _Attempt:
    """Runs scheduling calls, logging each; a ScheduleError skips the call (the draw goes on)."""

    def __init__(self, steps: list[str]):
        self.steps = steps

    def __call__(self, text: str, fn, *args, **kwargs):
        try:
            out = fn(*args, **kwargs)
        except tp.ScheduleError as e:
            self.steps.append(f"{text} -> ScheduleError({str(e)[:80]})")
            return None
        self.steps.append(text)
        return out


def _factor(draw, tv, axis: int, symbols: list[str]):
    """A split factor: usually a divisor or a small int, sometimes an extent symbol, rarely a
    name that is no extent symbol or an expression of one."""
    import sympy

    how = draw(st.integers(0, 39))
    if how == 0:
        return "F"  # not an extent symbol (SYMBOLIC-FACTOR)
    if how == 1:
        return sympy.Symbol("x", integer=True, positive=True) + 1
    if how < 4 and symbols:
        return draw(st.sampled_from(symbols))
    e = tv.axis(axis).static_extent
    if e is not None and e > 1 and draw(st.booleans()):
        return draw(st.sampled_from(_divisors(e)[1:]))
    return draw(st.sampled_from([2, 3, 4, 8, 16, 32, 128]))


def _assume(draw, fusion, symbol: str, steps: list[str]) -> None:
    """Now and then an upper bound (and a multiple) for an extent symbol."""
    if draw(st.booleans()):
        bound = draw(st.sampled_from([8, 32, 64, 128, 1024]))
        fusion.assume(f"{symbol} <= {bound}")
        steps.append(f"assume {symbol} <= {bound}")
    if draw(st.integers(0, 2)) == 0:
        m = draw(st.sampled_from([2, 4, 8, 16]))
        fusion.assume(f"{symbol} % {m} == 0")
        steps.append(f"assume {symbol} % {m} == 0")


def _transform(draw, tv, run, symbols: list[str]) -> None:
    kind = draw(st.sampled_from(["split", "split", "split", "merge", "reorder"]))
    if kind == "split":
        axis = draw(st.integers(0, tv.ndim - 1))
        f = _factor(draw, tv, axis, symbols)
        inner = draw(st.integers(0, 4)) > 0
        run(f"{tv.name}.split({axis}, {f!r}, inner_split={inner})", tv.split, axis, f, inner)
    elif kind == "merge" and tv.ndim > 1:
        axis = draw(st.integers(0, tv.ndim - 2))
        run(f"{tv.name}.merge({axis})", tv.merge, axis)
    elif kind == "reorder" and tv.ndim > 1:
        perm = list(draw(st.permutations(range(tv.ndim))))
        run(f"{tv.name}.reorder({perm})", tv.reorder, perm)


def _parallelize(draw, tv, run) -> None:
    """Some loop axes on random parallel types; sometimes two axes on one type."""
    used = []
    for k in draw(st.permutations(range(tv.ndim))):
        if draw(st.integers(0, 2)) == 0:
            continue
        p = draw(st.sampled_from(LOWERING_TYPES))
        if p in (P.DIDx, P.Bulk) and draw(st.integers(0, 9)):
            continue
        if p is P.Vectorize and k != tv.ndim - 1 and draw(st.integers(0, 3)):
            continue
        if p in used and p not in (P.Serial, P.Unroll) and draw(st.integers(0, 5)):
            continue  # two axes on one thread/block type: now and then
        used.append(p)
        run(f"{tv.name}.axis({k}).parallelize({p})", tv.axis(k).parallelize, p)


@st.composite
def lowering_cases(draw) -> Case:
    """Random small fusions of sets, unary/binary ops and transposes through register, shared
    and (rarely) global intermediates, with splits (int, extent-symbol and unknown factors),
    merges, reorders, propagation, every parallel type (two axes on one now and then), inlining
    before and after the transforms, vectorize / unroll of large extents and cache ops:
    what codegen must lower whenever the verifier accepts."""
    ndims = draw(st.integers(1, 3))
    symbolic = draw(st.integers(0, 4)) == 0
    names = ["M", "N", "K"]
    shape = [names[d] if symbolic and draw(st.booleans()) else draw(st.sampled_from(LOWERING_SIZES))
             for d in range(ndims)]
    dtype = draw(st.sampled_from(LOWERING_DTYPES))
    steps = [f"shape {shape} {dtype}"]
    run = _Attempt(steps)
    contiguous = draw(st.integers(0, 5)) > 0
    with tp.Fusion("lowering") as fusion:
        t0 = tp.make_tensor(shape, contiguity=True if contiguous else [False] + [True] * (ndims - 1), dtype=dtype)
        fusion.add_input(t0)
        tensors = [t0]
        cur = t0
        second = None
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["set", "set", "set", "unary", "binary", "transpose", "special",
                                         "broadcast"]))
            if kind == "unary":
                # exp and sqrt take floating-point operands only (a ScheduleError at the call)
                name = draw(st.sampled_from(LOWERING_UNARY if cur.dtype.is_float else LOWERING_INTEGER_UNARY))
                cur = tp._ops.unary(name, cur)
                steps.append(f"{cur.name} = {name}(...)")
            elif kind == "binary":
                if second is None:
                    second = tp.make_tensor(shape, contiguity=True, dtype=dtype)
                    fusion.add_input(second)
                other = draw(st.sampled_from([second] + tensors[1:])) if draw(st.booleans()) else second
                extents = [i.extent_expr for i in cur.logical]
                if [i.extent_expr for i in other.logical] != extents:
                    other = second if [i.extent_expr for i in second.logical] == extents else cur
                name = draw(st.sampled_from(LOWERING_BINARY))
                cur = tp._ops.binary(name, cur, other)
                steps.append(f"{cur.name} = {name}(.., {other.name})")
            elif kind == "broadcast" and cur.ndim < 4:
                k = draw(st.integers(0, len(cur.logical)))
                flags = [False] * len(cur.logical)
                flags.insert(k, True)
                cur = tp.broadcast(cur, flags)
                steps.append(f"{cur.name} = broadcast(.., {flags})")
            elif kind == "transpose" and ndims > 1:
                cur = tp.transpose(cur, 0, ndims - 1)
                steps.append(f"{cur.name} = transpose(..)")
            else:
                op = draw(st.sampled_from(LOWERING_OP_TYPES)) if kind == "special" else tp.LoadStoreOpType.Set
                cur = tp.set(cur, op=op)
                steps.append(f"{cur.name} = set(.., {op.value})")
            tensors.append(cur)
        if cur is t0 or len(tensors) < 2:
            cur = tp.set(cur)
            tensors.append(cur)
        fusion.add_output(cur)
        if len(tensors) > 3 and draw(st.integers(0, 5)) == 0:
            extra = draw(st.sampled_from(tensors[1:-1]))
            fusion.add_output(extra)
            steps.append(f"{extra.name} is a second output")
    if draw(st.integers(0, 5)) == 0:
        new = run("T0.cache_after()", t0.cache_after)
        if new is not None:
            tensors.insert(1, new)
    if draw(st.integers(0, 7)) == 0:
        new = run(f"{cur.name}.cache_before()", cur.cache_before)
        if new is not None:
            tensors.insert(-1, new)
    computed = [t for t in tensors if t.definition is not None]
    for t in computed:
        if t.is_fusion_output:
            continue
        op = t.definition.op_type if t.definition.kind == "load_store" else None
        if op in (tp.LoadStoreOpType.TMA, tp.LoadStoreOpType.LdMatrix) and draw(st.integers(0, 3)):
            m = tp.MemoryType.Shared if op is tp.LoadStoreOpType.TMA else tp.MemoryType.Local
        elif op is tp.LoadStoreOpType.TMemStore and draw(st.integers(0, 3)):
            m = tp.MemoryType.Tensor
        else:
            m = draw(st.sampled_from([tp.MemoryType.Local] * 5 + [tp.MemoryType.Shared] * 3 + [tp.MemoryType.Global]
                                     + [tp.MemoryType.Tensor]))
        if m is not tp.MemoryType.Local:
            run(f"{t.name}.set_memory_type({m})", t.set_memory_type, m)
    symbols = [s for s in names if s in fusion.symbols]
    for s in symbols:  # bounded symbols may be thread axes (LAUNCH-THREADS) and tile sizes
        _assume(draw, fusion, s, steps)
    ref = draw(st.sampled_from(computed)) if draw(st.integers(0, 3)) == 0 else cur
    if draw(st.integers(0, 4)) == 0:  # inline before transforming (refused inside inlined positions)
        run("inline_most()", tp.inline_most, fusion)
    for _ in range(draw(st.integers(0, 3))):
        _transform(draw, ref, run, symbols)
    if draw(st.integers(0, 9)) < 7:
        run(f"propagate_transforms({ref.name})", tp.propagate_transforms, ref)
    else:
        for t in computed:
            if t is not ref and draw(st.booleans()):
                _transform(draw, t, run, symbols)
    _parallelize(draw, ref, run)
    if draw(st.integers(0, 9)) < 7:
        run(f"parallelize_all_like({ref.name})", tp.parallelize_all_like, ref)
    for t in computed:
        if t is not ref and draw(st.integers(0, 4)) == 0:
            _parallelize(draw, t, run)
    how = draw(st.sampled_from(["none", "most", "most", "all_at", "some"]))
    if how == "most":
        run("inline_most()", tp.inline_most, fusion)
    elif how == "all_at":
        k = draw(st.integers(0, ref.ndim))
        run(f"inline_all_at({ref.name}, {k})", tp.inline_all_at, ref, k)
    elif how == "some":
        for t in computed:
            if not t.is_fusion_output and draw(st.booleans()):
                k = draw(st.integers(0, t.ndim))
                run(f"{t.name}.inline_at({k})", t.inline_at, k)
    if draw(st.integers(0, 7)) == 0:  # schedule after inlining (refused inside inlined positions; INLINE-PARALLEL-MATCH)
        t = draw(st.sampled_from(computed))
        if draw(st.booleans()):
            _transform(draw, t, run, symbols)
        else:
            _parallelize(draw, t, run)
    if draw(st.integers(0, 9)) == 0:  # a consumer made after the inlining (INLINE-LOOP-MAP)
        t = draw(st.sampled_from(computed))
        run(f"read {t.name} again into a new output", _read_again, fusion, t)
    if draw(st.integers(0, 7)) == 0 and cur.ndim > 1:  # the output stored along permuted logical axes
        perm = list(draw(st.permutations(cur.logical)))
        run(f"{cur.name}.set_allocation_domain(logical permuted)", cur.set_allocation_domain, perm, True)
    shared = [t for t in computed if t.memory_type is tp.MemoryType.Shared]
    if shared and draw(st.integers(0, 5)) == 0:
        t = draw(st.sampled_from(shared))
        run(f"{t.name}.set_allocation_domain(loop)", t.set_allocation_domain, t.get_loop_domain(), True)
    tmem = any(t.memory_type is tp.MemoryType.Tensor for t in fusion.tensors)
    return Case("lowering", fusion, steps, target="sm_100a" if tmem else "sm_90a")


def _read_again(fusion, t) -> None:
    """A new output copying t: a consumer made after t's scheduling (and inlining)."""
    with fusion:
        again = tp.set(t)
        fusion.add_output(again)


# -- (f) the bundled valid examples, mutated ----------------------------------------------------

_EXAMPLES: list = []


def _valid_examples() -> list:
    """The bundled valid schedules (examples/valid), loaded once."""
    if not _EXAMPLES:
        from pathlib import Path

        from tileproof.schedule_files import discover

        root = Path(__file__).resolve().parents[2] / "examples" / "valid"
        _EXAMPLES.extend(discover([str(root)]))
    return _EXAMPLES


def _mutate(draw, fusion, run) -> None:
    computed = [t for t in fusion.tensors if t.definition is not None]
    t = draw(st.sampled_from(computed))
    what = draw(st.sampled_from(["parallelize", "parallelize", "inline", "inline_most", "split", "reorder",
                                 "memory", "propagate", "assume"]))
    if what == "parallelize":
        k = draw(st.integers(0, t.ndim - 1))
        p = draw(st.sampled_from([P.Serial, P.TIDx, P.TIDy, P.BIDx, P.Unroll, P.Vectorize, P.Bulk]))
        run(f"{t.name}.axis({k}).parallelize({p})", t.axis(k).parallelize, p)
    elif what == "inline":
        k = draw(st.integers(0, t.ndim))
        run(f"{t.name}.inline_at({k})", t.inline_at, k)
    elif what == "inline_most":
        run("inline_most()", tp.inline_most, fusion)
    elif what == "split":
        k = draw(st.integers(0, t.ndim - 1))
        f = draw(st.sampled_from([2, 4, 8, 16, 32]))
        run(f"{t.name}.split({k}, {f})", t.split, k, f)
    elif what == "reorder" and t.ndim > 1:
        perm = list(draw(st.permutations(range(t.ndim))))
        run(f"{t.name}.reorder({perm})", t.reorder, perm)
    elif what == "memory" and not (t.is_fusion_output or t.is_fusion_input):
        m = draw(st.sampled_from([tp.MemoryType.Local, tp.MemoryType.Shared, tp.MemoryType.Global]))
        run(f"{t.name}.set_memory_type({m})", t.set_memory_type, m)
    elif what == "propagate":
        run(f"propagate_transforms({t.name})", tp.propagate_transforms, t)
    elif what == "assume" and fusion.symbols:
        _assume(draw, fusion, draw(st.sampled_from(sorted(fusion.symbols))), run.steps)


@st.composite
def mutated_examples(draw) -> Case:
    """A bundled valid example (TMA, ldmatrix/stmatrix, tensor memory, visibility, lowering, ...)
    with 1 to 3 random changes: a parallel type, an inlining, a split, a reorder, a memory type
    or a propagation. Near valid schedules, where the lowering's special paths are taken."""
    groups: dict[str, list] = {}
    for c in _valid_examples():  # each example function equally likely, whatever its parameters
        groups.setdefault(c.name.split("[")[0], []).append(c)
    case = draw(st.sampled_from(draw(st.sampled_from(sorted(groups.items())))[1]))
    fusion = case.build()
    steps = [f"example {case.name}"]
    run = _Attempt(steps)
    for _ in range(draw(st.integers(1, 3))):
        _mutate(draw, fusion, run)
    return Case("mutated", fusion, steps, target=case.target)
