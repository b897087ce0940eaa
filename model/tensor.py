"""TensorView, the tensor a user holds and schedules, and the functions that make a tensor from no
other tensor: a fusion's input tensors (tp.make_tensor, tp.make_contig_tensor,
tp.make_contig_concrete_tensor) and tp.iota (an op with no tensor input, nvFuser's factory op).

TensorBase (tensor_base.py) holds the domains and the transforms; TensorView adds the nvFuser
methods that make new tensors or read the fusion's other tensors, through the ops (ops.py,
reduction.py) and inlining (inlining.py), which build on TensorBase.
"""

from __future__ import annotations

import math
import numbers
from typing import Sequence

import sympy

from .errors import ScheduleError
from .expr import Expr, const
from .fusion import Iota, Op, current_fusion, symbol_range
from .inlining import set_compute_at
from .iterdomain import IterDomain, wrong_enum
from .logical_commit import commit_leaf_to_logical
from .ops import _INT_RANGE, _check_dtype, _scalar_value, check_cache_op, redirect_definition, set as set_op
from .grouped_reduction import rfactor_group
from .online import loop_index, set_online, skip_masked
from .reduction import rfactor
from .tensor_base import TensorBase
from .scalar_value import as_extent
from .simplify import bounds
from .symbol_ranges import admitted
from .types import CacheOp, IterType, LoadStoreOpType, OpKind, float32, int64
from .welford import is_welford, welford_siblings


class TensorView(TensorBase):
    """A tensor in a Fusion: logical, loop and allocation domains of IterDomains, a dtype and a
    memory type (nvFuser's TensorView). Made by tp.make_tensor and the ops (tp.set, ...), never
    directly. The scheduling methods record transforms on the loop domain, check their arguments
    at the door (ScheduleError) and return self, so calls chain: `tv.split(0, 128).merge(1)`."""

    def set_online(self, rescale):
        """Make this max (tp.max) online: its loop over the reduced axis it keeps (after rfactor,
        the loop over tiles) runs once for everything, its consumers inlined into that loop read
        the max so far, and each sum in `rescale` (summing over the same loop, its terms read this
        max) keeps its accumulator at the running max: before each iteration's term,
        acc *= exp2(a (m_new - m_old)), a the coefficient of the max in its terms' exponent, which
        verifier rule ONLINE-RESCALE proves and derives. After the loop every sum is the one the
        fusion means. The online softmax of attention (model/online.py; nvFuser has no such knob):

            m = tp.max(s, 1)                  # split the key axis into tiles, rfactor the tile's part
            l = tp.sum(p, 1)                  # p = exp2((s - m) c), read per tile
            m.set_online(rescale=[l, o])      # o = the sum of P V over the tiles (an MmaOp's rfactor)

        Call it after rfactor and before inlining. Returns self."""
        set_online(self, rescale)
        return self

    def loop_index(self, axis: int):
        """The index of the loop over this tensor's loop axis `axis`, an index expression for a
        skip_masked count (a block computing several tiles in a serial loop counts each tile's key
        tiles from that loop's index). Returns an Expr."""
        return loop_index(self, axis)

    def skip_masked(self, mask, trip_count, unmasked=None):
        """Skip the iterations of this online max's loop (the loop over tiles) that `mask` drops
        whole: a block runs iterations 0 .. min(extent, trip_count(bx, by, bz)) - 1 only, in every
        role (the loads, their circular buffer's prologue, prefetches and mbarrier phases, a
        warp-specialized producer's loop). `mask` is the bool condition of the where that gives the
        max's input and the rescaled sums' terms -inf where it is false (scores = where(keep, S,
        -inf)); `trip_count` maps the block indices (index expressions) to the iterations a block
        needs, e.g. causal attention's min(KT, (last row + N - M) // key_tile + 1) without the min
        (the loop's extent clamps it). A block that computes several tiles in a serial loop around
        the loop over tiles counts each tile's from that loop's index too: `self.loop_index(k)` for
        the loop axis k (a serial loop outside the loop over tiles; the count is then computed at
        each of its iterations). Verifier rule ONLINE-SKIP proves it exact: every block runs
        at least one iteration, the mask is false at every point of every skipped iteration, and
        a skipped iteration leaves the max and the sums as they were (its max input is -inf, its
        terms exp2(-inf) = 0); anything else is refused with a counterexample.

        The count is given rather than derived: it is one expression a reader can check against the
        mask, the kernel computes it once per block (per tile), and the proof (a linear claim per schedule)
        covers any mask z3 can decide, not only the causal one. A count too large only runs masked
        iterations (exact, slower); one too small drops kept scores, and the proof says where.
        nvFuser has no such knob (its causal kernels come from SDPA's own scheduler).

        `unmasked` (optional), a function of the block indices as trip_count: the iterations
        0 .. unmasked(bx, by, bz) - 1 keep every point (causal attention's key tiles below the
        diagonal: (first row + N - M + 1) // key_tile). There the kernel computes the where's x
        without the mask (codegen/lower/peel.py: the where and the mask's own statements in a second
        version of their nests, picked once per iteration, as FlashAttention peels the diagonal).
        ONLINE-SKIP proves the mask true at every point of those iterations. Returns self."""
        skip_masked(self, mask, trip_count, unmasked)
        return self

    def rfactor(self, axes, tensors=None):
        """Split this reduction (the output of tp.sum / tp.max) in two: a new tensor that reduces
        the loop axes `axes` (positions in the loop domain, an int or a list; reduction axes)
        and keeps the other reduction axes as iteration axes, and this tensor, which now
        reduces those remaining axes of the new one. Returns the new (partial) tensor. So a
        thread can sum serially into a register, then the threads combine their partials: split
        the reduction axis, rfactor the serial part, parallelize the rest on TIDx. The loop axes
        keep their parallel types in both tensors. Call it before inlining.
        nvFuser: TensorView::rFactor(axes).

            t1 = tp.sum(t0, 1)                  # [M, rN]
            t1.split(1, 128)                    # [M, r{N/128}, r{128}]
            t2 = t1.rfactor([1])                # t2: [M, r{N/128}, i{128}], t1: [M, r{128}]

        An MmaOp's output (tp.fused_multiply_sum) rfactors too: the partial keeps the products (and
        the MmaOp, its macro included) and this tensor becomes a tp.sum of the partial's terms, as
        nvFuser's split-K matmul rfactors its MmaOp.

        A grouped reduction (tp.group_reductions) is rfactored with its group: `tensors` is the
        group in its order; this tensor's transforms are replayed on the others first, and the
        partial tensors (returned as a list in that order) form a group of their own.
        nvFuser: TensorView::rFactor(axes, tvs).

            t1_rf, t2_rf = t1.rfactor([1], [t1, t2])

        An output of tp.welford rfactors its siblings with it (`tensors` left out: the three, in
        their order): the partials are a Welford of their own, returned as [avg, var_sum, n], and
        each output then combines the three partial states (Chan's formula).

            avg_rf, var_sum_rf, n_rf = avg.rfactor([1])"""
        if tensors is None and is_welford(self):
            tensors = welford_siblings(self)
        if tensors is not None:
            return rfactor_group(self, axes, tensors)
        return rfactor(self, axes)

    def commit_leaf_to_logical(self) -> "TensorView":
        """Make the loop domain the logical domain: the shape the tensor's consumers read and a
        fusion output's array has, laid out in that order; the root domain (what the defining
        op maps to its inputs) and the allocation domain stay, the contiguity becomes all True
        (of the allocation domain, or the new logical one). An implicit transpose: the loop must
        be a permutation of the logical axes (reorder), and the tensor must have no consumers
        yet. Returns self. nvFuser: TensorView::commitLeafToLogical().

            d = tp.fused_multiply_sum(a, b, [1])   # [N, rK, M]
            d.reorder({-1: -3})                    # loop [M, N, rK]
            d.commit_leaf_to_logical()             # logical [M, N, rK]: the output is [M, N]"""
        commit_leaf_to_logical(self)
        return self

    # -- inlining -------------------------------------------------------------------
    def inline_at(self, pos: int) -> "TensorView":
        """Compute this tensor inside its first `pos` loops, shared with its consumers (its
        compute-at position; negative counts from the end); returns self. Raises ScheduleError
        past the deepest position the consumers' loops allow. Axes inside the position can no
        longer be transformed. nvFuser: TensorView::inlineAt(pos)."""
        set_compute_at(self, pos, best_effort=False)
        return self

    # -- caching ----------------------------------------------------------------------
    def cache_after(self, op: LoadStoreOpType = LoadStoreOpType.Set,
                    cache_op: CacheOp = CacheOp.Unspecified) -> "TensorView":
        """A new tensor that copies this one with `op` (tp.LoadStoreOpType; `cache_op`, a
        tp.CacheOp, for cp.async as in tp.set); every former consumer of this tensor now reads
        the new one, which is returned. Caches come before inlining: an inlined tensor (or a
        fusion input read by an inlined one) is refused. nvFuser: TensorView::cacheAfter(op,
        cache_op).

            t1 = t0.cache_after(tp.LoadStoreOpType.TMA)   # t0 -> t1 -> t0's consumers"""
        if not isinstance(op, LoadStoreOpType):
            raise wrong_enum("cache_after", "op", LoadStoreOpType, op)
        check_cache_op("cache_after", op, cache_op)
        uses = self.fusion.uses_of(self)
        _check_not_inlined("cache_after", self, [u.output for u in uses] if self.is_fusion_input else [])
        with self.fusion:
            new = set_op(self, op=op, cache_op=cache_op)
        for u in uses:
            u.inputs = [new if t is self else t for t in u.inputs]
        return new

    def cache_before(self, op: LoadStoreOpType = LoadStoreOpType.Set) -> "TensorView":
        """A new tensor that this tensor's definition now writes; this tensor becomes a copy of it
        with `op` (tp.LoadStoreOpType). Returns the new tensor. Caches come before inlining: an
        inlined tensor (or one whose producer is inlined) is refused. nvFuser:
        TensorView::cacheBefore(op).

            t1 = t2.cache_before()   # producer -> t1 -> t2 (t2 = set(t1))"""
        if not isinstance(op, LoadStoreOpType):
            raise wrong_enum("cache_before", "op", LoadStoreOpType, op)
        if self.definition is None:
            raise ScheduleError(f"cache_before: {self.name} has no definition (is it a fusion input?)")
        _check_not_inlined("cache_before", self, self.fusion.producers(self))
        return redirect_definition(self, op)


def _check_not_inlined(op: str, tv: TensorView, neighbours: list) -> None:
    """nvFuser's cacheAfter / cacheBefore: "Caching computed-at tensors is not allowed. Apply caching
    before computeAt" (also where a neighbour the cache would be placed beside is inlined)."""
    for t in [tv, *neighbours]:
        if t.compute_at > 0:
            which = f"{tv.name} is" if t is tv else f"{t.name}, beside the cache of {tv.name}, is"
            raise ScheduleError(f"{op}: {which} inlined at position {t.compute_at}; cache {tv.name} before "
                                f"inlining (tp.inline_most, inline_at)")


def _extent(fusion, prefix: str, dim: int, s) -> tuple[Expr, IterType]:
    """The extent of shape entry `s` at axis `dim`; a -1 is the symbol <prefix>_<dim> (prefix: the
    tensor's name, T<n> or the user's)."""
    if isinstance(s, bool):
        raise ScheduleError(f"tensor shape entries must be ints or names, got {s!r}")
    if isinstance(s, int):
        if s == -1:
            return _named(fusion, f"{prefix}_{dim}")
        if s <= 0:
            raise ScheduleError(f"tensor extents must be positive (or -1 for symbolic), got {s}")
        return const(s), IterType.Broadcast if s == 1 else IterType.Iteration
    if isinstance(s, str):
        return _named(fusion, s)
    if isinstance(s, sympy.Symbol):
        return _named(fusion, s.name)
    raise ScheduleError(f"tensor shape entries must be ints or names, got {type(s).__name__} {s!r}")


def _named(fusion, name: str) -> tuple[Expr, IterType]:
    """A symbolic extent named `name`: its symbol, or the extent an op unified it with."""
    e = fusion.extent(name)
    return e, IterType.Broadcast if e == const(1) else IterType.Iteration


def _check_shape(func: str, shape) -> list:
    if not isinstance(shape, (list, tuple)):
        raise ScheduleError(f"{func}: shape must be a list, got {type(shape).__name__} {shape!r}")
    return list(shape)


def make_tensor(shape: Sequence, contiguity=None, dtype=float32, *, name: str | None = None) -> TensorView:
    """A tensor with the given shape: ints are concrete, -1 or a name is symbolic.
    Extent-1 axes are broadcast axes (as nvFuser's make_concrete_tensor). `name` (optional: a
    letter, then letters, digits or underscores; unique in the fusion) is what reports, the
    kernel's parameter and launch errors call it instead of T<n>; its -1 entries are the
    symbols x_0, x_1, ... (by axis) instead of T<n>_0, ...

        x = tp.make_tensor(["M", "N"], name="x"); fusion.add_input(x)"""
    return _make_tensor("make_tensor", shape, contiguity, dtype, name)


def _make_tensor(op: str, shape, contiguity, dtype, name) -> TensorView:
    fusion = current_fusion()
    shape = _check_shape(op, shape)
    dtype = _check_dtype(op, dtype)
    if name is not None:  # checked before the tensor exists, so a refused name leaves no tensor behind
        fusion.name_tensor(None, name, op, check_only=True)
    idx = fusion._tensor_count
    ids = []
    for d, s in enumerate(shape):
        e, it = _extent(fusion, name or f"T{idx}", d, s)  # a named tensor's -1 axes: x_0, x_1, ...
        ids.append(IterDomain(e, number=fusion.next_iterdomain_number(), iter_type=it))
    tv = TensorView(fusion, ids, dtype, contiguity=contiguity)
    if name is not None:
        fusion.name_tensor(tv, name, op)
    return tv


def make_contig_concrete_tensor(shape: Sequence[int], dtype=float32, *, name: str | None = None) -> TensorView:
    """A contiguous tensor of constant extents (positive ints; extent 1 is a broadcast axis) in
    the active fusion; `name` as in make_tensor. nvFuser: makeContigConcreteTensor(shape, dtype).

        t0 = tp.make_contig_concrete_tensor([1024, 64], dtype=tp.bfloat16); fusion.add_input(t0)"""
    shape = _check_shape("make_contig_concrete_tensor", shape)
    _check_dtype("make_contig_concrete_tensor", dtype)
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, int) or s <= 0:
            raise ScheduleError(f"make_contig_concrete_tensor: extents must be positive ints, got {s!r}")
    return _make_tensor("make_contig_concrete_tensor", shape, True, dtype, name)


def make_contig_tensor(ndims: int, dtype=float32, *, name: str | None = None) -> TensorView:
    """A contiguous tensor of `ndims` symbolic extents, named T<n>_0, T<n>_1, ... (sizes the
    proofs quantify over; <name>_0, ... for a tensor given a `name` as in make_tensor) in the
    active fusion.
    nvFuser: makeContigTensor(ndims, dtype).

        t0 = tp.make_contig_tensor(2)   # extents T0_0, T0_1"""
    if isinstance(ndims, bool) or not isinstance(ndims, int) or ndims < 0:
        raise ScheduleError(f"make_contig_tensor: ndims must be a non-negative int, got {ndims!r}")
    _check_dtype("make_contig_tensor", dtype)
    return _make_tensor("make_contig_tensor", [-1] * ndims, True, dtype, name)


def iota(length, start=0, step=1, dtype=int64, *, name: str | None = None) -> TensorView:
    """A 1-D tensor of `length` elements, element i = start + i step, computed in dtype's compute
    type from the index the kernel already has for every element (no tensor is read). `length`: a
    positive int or an extent of the fusion (a symbol name its inputs define, or tp.extent);
    `start`, `step` (not 0): numbers in dtype (an int for an integer dtype); `dtype`: an integer
    or float tp.DataType (not bool), tp.int64 by default. Every value, and i step, must fit an
    integer dtype's compute type for every admitted length. Broadcast and compare it to make
    masks (`tp.le(keys, rows)`); schedule and inline it like any pointwise tensor. nvFuser:
    iota(length, start, step, dtype) (IotaOp).

        cols = tp.iota("N", dtype=tp.int32)   # [0, 1, ..., N - 1]"""
    fusion = current_fusion()
    dtype = _check_dtype("iota", dtype)
    if dtype.is_bool:
        raise ScheduleError("iota: dtype must be an integer or float type, got bool (compare an iota to make a mask: "
                            "tp.lt(tp.iota(n), k))")
    extent = _iota_length(fusion, length)
    first = _scalar_value("iota", "start", start, dtype)
    stride = _scalar_value("iota", "step", step, dtype)
    if stride == 0:
        raise ScheduleError("iota: step must not be 0")
    if dtype.is_float and not all(math.isfinite(v) for v in (first, stride)):
        raise ScheduleError(f"iota: start and step must be finite, got {start!r} and {step!r}")
    if not dtype.is_float:
        lo, hi = _INT_RANGE[dtype.compute.name]
        ranges = admitted({x: symbol_range() for x in fusion.symbols}, fusion.assumptions).bounds()
        span = bounds(extent, ranges)  # the lengths admitted by the assumptions stated so far
        last = span.hi - 1 if span.hi is not None else None
        ends = [first, stride * last, first + stride * last] if last is not None else []
        if not ends or not all(lo <= v <= hi for v in ends):
            raise ScheduleError(f"iota: start {first} + i * step {stride} for i up to "
                                f"{last if last is not None else 'an unbounded length'} leaves {dtype.compute} "
                                f"({lo} .. {hi}); use tp.int64, or bound the length first (fusion.assume)")
    if name is not None:
        fusion.name_tensor(None, name, "iota", check_only=True)
    kind = IterType.Broadcast if extent == const(1) else IterType.Iteration
    out = TensorView(fusion, [IterDomain(extent, number=fusion.next_iterdomain_number(), iter_type=kind)], dtype)
    if name is not None:
        fusion.name_tensor(out, name, "iota")
    fusion._register_op(Op(OpKind.IOTA, [], out, [], name="iota", iota=Iota(first, stride)))
    return out


def _iota_length(fusion, length) -> Expr:
    """iota's length as an extent: a positive int, or a symbol (or Expr of symbols) of the fusion."""
    if isinstance(length, str):
        if length not in fusion.symbols and length not in fusion.extent_aliases:
            known = ", ".join(fusion.symbols) or "none"
            raise ScheduleError(f"iota: length {length!r} is no extent symbol of this fusion (its symbols: {known}); "
                                f"name one its inputs define, or pass an int")
        return fusion.extent(length)
    if isinstance(length, bool) or (isinstance(length, numbers.Integral) and int(length) <= 0):
        raise ScheduleError(f"iota: length must be a positive int or an extent, got {length!r}")
    try:
        extent = as_extent(length)
    except ScheduleError as e:
        raise ScheduleError(f"iota: length {e}") from None
    if extent is None:
        raise ScheduleError(f"iota: length must be a positive int or an extent (a symbol name, tp.extent), got "
                            f"{type(length).__name__} {length!r:.60}")
    unknown = [v for v in sorted(extent.free_vars()) if v not in fusion.symbols]
    if unknown:
        raise ScheduleError(f"iota: length {extent} names {', '.join(unknown)}, no extent symbol of this fusion")
    return extent
