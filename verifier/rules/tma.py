"""TMA descriptor rules: the TMA a schedule implies (hw/tma.py) must be encodable by
cuTensorMapEncodeTiled and issuable by cp.async.bulk.tensor. Each numeric rule is a z3
proof over every admitted size; a failure names the TMA dimension (innermost first),
its IterDomains, the value and the limit."""

from __future__ import annotations

import math
from typing import Callable, Iterator

import sympy
import z3

from ...model.expr import Expr, const, mod, to_sympy
from ...model.notation import user_str
from ...hw.tma import InferredTma, TmaDim, TmaInfo
from ...hw.tma_roles import ViewKind
from ...model.types import MemoryType, ParallelType
from ..analysis.tma import (MAX_BOX, MAX_RANK, STRIDE_ALIGN, extents_of, inferred_tmas, inner_bytes_hint,
                            split_making, unencodable)
from ..causes import box_retyped, propose_memory_types
from ..context import VerifyContext
from ..diagnostics import Diagnostic, Severity
from ..findings import finding, report_values, stride_names
from ..monotone import proved_over_integers
from ..registry import rule
from ..solver import Outcome, Verdict, assumption_terms

MAX_ELEMENT_STRIDE, STRIDE_LIMIT = 8, 2**40
REFS = "nvFuser doc/dev/tma.md; CUDA driver API cuTensorMapEncodeTiled; measured on H200"


def _inferred(ctx: VerifyContext) -> Iterator[InferredTma]:
    """TMAs whose descriptor could be inferred (the others are reported by TMA-VIEW)."""
    return (t for t in inferred_tmas(ctx) if t.info.ok)


def _where(info: TmaInfo, d: TmaDim | None = None) -> dict:
    ids = info.id_map()
    names = list(d.ids + d.box_ids + d.tile_ids) if d is not None else []
    origin = next((ids[n].origin for n in reversed(names) if n in ids and ids[n].origin), None)
    return dict(tensor=info.consumer.name, ids=list(dict.fromkeys(names)), location=origin or info.consumer.origin)


def _box_hint(info: TmaInfo, d: TmaDim) -> str:
    t = split_making(info, d, lambda t: t.inner_split and t.inner.name in d.box_ids + d.tile_ids)
    if t is None:
        return (f"box at most {MAX_BOX} elements on this dimension: split its box ID further and leave the rest "
                f"to the loop nest")
    return (f"split {t.in_.label()} by at most {MAX_BOX} in place of {user_str(to_sympy(t.factor))}, "
            f"leaving the rest to the loop nest")


def _element_stride_hint(info: TmaInfo, d: TmaDim) -> str:
    t = split_making(info, d, lambda t: t.outer.name in d.tile_ids and t.in_.name in d.box_ids)
    if t is None:
        return (f"make the element stride at most {MAX_ELEMENT_STRIDE}: it is the inner extent of the split "
                f"whose outer output is the Bulk tile")
    return (f"split {t.in_.label()} by at most {MAX_ELEMENT_STRIDE} in place of {user_str(to_sympy(t.factor))}: "
            f"the inner extent of that split ({t.inner.label()}) is the element stride between the "
            f"{t.outer.label()} tile elements")


def _innermost_stride_hint(info: TmaInfo, d: TmaDim) -> str:
    t = split_making(info, d, lambda t: t.outer.name in d.tile_ids and t.in_.name in d.box_ids)
    if t is None:
        return "do not stride the innermost TMA dimension: make its Bulk tile the inner output of its split"
    return (f"do not stride the innermost TMA dimension: the tile {t.outer.label()} is the outer output of the "
            f"split of {t.in_.label()} by {user_str(to_sympy(t.factor))}, so its elements are "
            f"{user_str(t.inner.extent)} apart ({t.inner.label()}); make the Bulk tile the inner output of that split")


def _unchecked(ctx: VerifyContext, info: TmaInfo, code: str, dim: int | None = None) -> list[str]:
    """The note of the finding that makes the TMA unencodable at every size: its shared-memory
    rules (tma_smem.py) are left out."""
    never = unencodable(ctx, info)
    return [never.note()] if never is not None and (never.code, never.dim) == (code, dim) else []


def _remainder_zero(q, e):
    return q.eq(e["remainder"], const(0))


def _prove(ctx: VerifyContext, exprs: dict[str, Expr], claim: Callable, extra: tuple = (), smallest: str | None = None):
    """Prove claim(q, exprs) for every admitted size; `exprs` (and `extra` constants)
    are the hint so the bit-vector width fits every term, and the counterexample values."""
    key = ("tma", claim.__name__, tuple(exprs.items()), extra)

    def run():
        hint = list(exprs.values()) + [const(c) for c in extra]
        if proved_over_integers(ctx, hint, lambda q: claim(q, exprs)):
            return Outcome(Verdict.PROVED)
        q = ctx.query(hint)
        return q.prove(claim(q, exprs), values=exprs, smallest=exprs[smallest] if smallest else None)

    return ctx.memo(key, run)


@rule("TMA-VIEW", family="tma")
def tma_view(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Between the global allocation domain and the TMA domain there is only a view.

    What it checks:
        The transforms of the TMA consumer that role inference leaves (those not between
        the TMA domain and the tile/coordinate IDs) are splits that divide for every
        admitted size and merges of adjacent IDs whose outer ID is contiguous in the
        global tensor; no swizzle. A box is rotated through an enclosing split when the
        box divides the split's inner extent, or when it is a TMA load's dense box (the
        part past the inner extent lands in shared-memory holes: TMA-TILE-CONTIGUITY and
        TMA-WHOLE-TILES place it); otherwise (a store, a strided box) that split is part
        of the view and must divide. The global allocation domain is read in memory order,
        a merged allocation axis as the logical axes it merges (contiguous with each
        other); an allocation axis made by a split or swizzle is reported by name. Also
        reports a TMA whose domain cannot be inferred.
    Why the hardware needs it:
        A TMA dimension is a (size, byte stride) pair. An indivisible split has holes and
        a discontiguous merge has no single stride, so neither describes memory: the
        descriptor would address the wrong elements.
    Example:
        fusion, t0, t1, t2 = tma_copy("view", [64, 128], contiguity=[False, True])
        t1.merge(0).split(0, 64)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    Fix:
        fusion, t0, t1, t2 = tma_copy("view", [64, 128], contiguity=[True, True])
        t1.merge(0).split(0, 64)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    References:
        nvFuser doc/dev/tma.md (step 1, define box by rotation); nvFuser doc/reading/divisibility-of-split.md;
        docs/hardware.md#tma-dimensions-are-views-of-memory
    """
    # Formal statement: for every split S of the view (the consumer's transforms inference leaves, not
    #   tile/non-tile mixing), for all admitted sizes s: extent(S.in)(s) mod f(s) == 0, f = the inner
    #   extent (the factor for an outer split); structural: each view merge joins adjacent IDs whose outer
    #   one is contiguous, no view swizzle, and a consumer with Bulk IDs has an inferable TMA domain (its global
    #   tensor allocated along logical axes and merges of them)
    unshared = []  # the TMA-VIEW findings of tiles set_memory_type(Shared) would fix
    for tma in inferred_tmas(ctx):
        info = tma.info
        has_bulk = any(i.parallel_type is ParallelType.Bulk for i in info.consumer.loop)
        tile = _tile_not_shared(tma)
        for p in info.problems:
            if has_bulk:
                d = finding("TMA-VIEW", f"cannot infer the TMA of {tma.op}: {p}",
                            hint=(f"put the tile in shared memory: {tile.name}.set_memory_type(tp.MemoryType.Shared)"
                                  if tile is not None else
                                  "define the TMA domain with splits and merges of the global tensor's axes, "
                                  "then box it with an inner split whose inner output is Bulk"),
                            counterexample={"rank so far": info.rank}, tensor=info.consumer.name,
                            location=tma.op.origin)
                if tile is not None:
                    unshared.append((tile.name, d))
                yield d
        for step in tma.view:
            if step.mixing or step.kind is ViewKind.MERGE_OK:
                continue  # TMA-MIXED-TRANSFORM explains a mixing step
            t = step.transform
            where = dict(tensor=info.consumer.name, ids=[i.name for i in t.inputs + t.outputs],
                         location=t.outputs[0].origin)
            shown = dict(counterexample=extents_of(t.inputs), **where)
            if step.kind is ViewKind.SPLIT:
                exprs = {"extent": step.divided, "factor": step.factor, "remainder": mod(step.divided, step.factor)}
                out = _prove(ctx, exprs, _remainder_zero)
                note = f" ({step.note})" if step.note else ""
                yield from report_values(
                    ctx, "TMA-VIEW", out, f"that the view split {t} divides",
                    lambda v, when: (f"the TMA domain of {info.gmem.name} is not a view{when}: {t} does not divide, "
                                     f"{v['extent']} % {v['factor']} = {v['remainder']}{note}"),
                    ["extent", "factor", "remainder"],
                    hint="make the split divide (pad or choose a factor of the extent), or box the inner output "
                         "with a factor that divides it so the box can be rotated", **where)
            else:
                message, hint = STRUCTURAL[step.kind]
                yield finding("TMA-VIEW", f"the TMA domain of {info.gmem.name} is not a view: {t} {message}",
                              hint=hint, **shown)
    if unshared:
        _shared_tiles_fix(ctx, unshared)


def _tile_not_shared(tma: InferredTma):
    """The end of a TMA that should be its shared-memory tile but is not in shared memory: the one
    end that is neither a fusion input nor output (those stay global) nor shared, where the other
    end is global (a tile left in registers, or set to global memory, which makes the copy
    global-to-global); None otherwise."""
    ends = (tma.op.inputs[0], tma.info.consumer)
    tiles = [t for t in ends if t.memory_type is not MemoryType.Shared and not (t.is_fusion_input or t.is_fusion_output)]
    if len(tiles) != 1 or any(t.memory_type is not MemoryType.Global for t in ends if t is not tiles[0]):
        return None
    return tiles[0]


def _shared_tiles_fix(ctx: VerifyContext, unshared: list[tuple[str, Diagnostic]]) -> None:
    """Propose on the first finding of `unshared` (tile name, TMA-VIEW finding of a TMA whose
    tile is not in shared memory) the one call per tile that puts it there, when a copy of the
    fusion with those calls has no TMA-VIEW error; the other findings then follow from it."""
    names = list(dict.fromkeys(name for name, _ in unshared))
    first = unshared[0][1]
    if propose_memory_types(ctx, first, {n: MemoryType.Shared for n in names}, ["TMA-VIEW"]):
        calls = " and ".join(f"{n}.set_memory_type(tp.MemoryType.Shared)" for n in names)
        first.hint = (f"put the TMA's {'tile' if len(names) == 1 else 'tiles'} in shared memory: {calls} (verified: "
                      f"with {'it' if len(names) == 1 else 'them'}, every TMA of this fusion can be inferred)")


STRUCTURAL = {  # view failures that need no proof: (what is wrong, how to fix it)
    ViewKind.MERGE_NOT_ADJACENT: (
        "merges IDs that are not adjacent (outer then inner) in the global allocation order",
        "merge neighbouring axes in allocation order, or reorder the global allocation domain"),
    ViewKind.MERGE_DISCONTIGUOUS: (
        "merges a discontiguous outer ID, which has no single stride",
        "keep those axes as separate TMA dimensions, or make the global tensor contiguous"),
    ViewKind.SWIZZLE: ("is not a split or merge", "swizzle the shared-memory allocation, not the TMA domain"),
}


@rule("TMA-RANK", family="tma")
def tma_rank(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A TMA has at most 5 dimensions after compositing.

    What it checks:
        The number of dimensions the TMA domain collapses to (a partitioned ID is one;
        adjacent contiguous IDs of the form [coordinates..., boxes...] composite into
        one) is at most 5.
    Why the hardware needs it:
        cuTensorMapEncodeTiled takes tensorRank 1..5 and cp.async.bulk.tensor exists
        in .1d to .5d only (rank 6 is refused before reaching the driver).
    Example:
        fusion, t0, t1, t2 = tma_copy("rank6", [2, 2, 2, 2, 2, 64], contiguity=[False] * 5 + [True])
        t1.axis(5).parallelize(tp.ParallelType.Bulk)
    Fix:
        fusion, t0, t1, t2 = tma_copy("rank5", [2, 2, 2, 2, 2, 64], contiguity=[True] + [False] * 4 + [True])
        t1.axis(5).parallelize(tp.ParallelType.Bulk)
    References:
        PTX ISA 9.7.9.25.5.2 (cp.async.bulk.tensor .dim); CUDA driver API cuTensorMapEncodeTiled (tensorRank);
        docs/hardware.md#tma-rank
    """
    # Formal statement: none, structural: the composited TMA domain of each inferred TMA has rank <= 5
    for tma in _inferred(ctx):
        info = tma.info
        if info.rank > MAX_RANK:
            dims = "; ".join(info.describe(k) for k in range(info.rank))
            yield finding("TMA-RANK", f"the TMA of {tma.op} has {info.rank} dimensions, the limit is {MAX_RANK}",
                          notes=[f"dimensions, innermost first: {dims}", *_unchecked(ctx, info, "TMA-RANK")],
                          counterexample={"rank": info.rank, "limit": MAX_RANK},
                          hint="make neighbouring axes contiguous so they composite, merge coordinate axes in the "
                               "TMA domain, or leave whole axes to the loop nest (several TMAs)",
                          **_where(info))


@rule("TMA-BOX-SIZE", family="tma")
def tma_box_size(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every box size is between 1 and 256.

    What it checks:
        For each TMA dimension after compositing, the box (the boxing split's factor,
        the product of composited box IDs, or 1 for an implicit size-one box) is at
        most 256 for every admitted size.
    Why the hardware needs it:
        cuTensorMapEncodeTiled rejects boxDim[i] outside 1..256 (257 measured rejected on H200).
    Example:
        fusion, t0, t1, t2 = tma_copy("box512", [64, 4096])
        t1.split(1, 512)
        t1.axis(0).parallelize(tp.ParallelType.BIDy); t1.axis(1).parallelize(tp.ParallelType.BIDx)
        t1.axis(2).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    Fix:
        fusion, t0, t1, t2 = tma_copy("box256", [64, 4096])
        t1.split(1, 256)
        t1.axis(0).parallelize(tp.ParallelType.BIDy); t1.axis(1).parallelize(tp.ParallelType.BIDx)
        t1.axis(2).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    References:
        CUDA driver API cuTensorMapEncodeTiled (boxDim); measured on H200; docs/hardware.md#tma-box-size
    """
    # Formal statement: for every dimension k of each inferred TMA, for all admitted sizes s: box_k(s) <= 256
    #   (box_k >= 1 is not part of the query)
    for tma in _inferred(ctx):
        info = tma.info
        for k, d in enumerate(info.dims):
            def fits(q, e):
                return q.le(e["box"], const(MAX_BOX))

            out = _prove(ctx, {"box": d.box_expr}, fits, (MAX_BOX,), smallest="box")
            yield from report_values(
                ctx, "TMA-BOX-SIZE", out, f"that the box of TMA dimension {k} is at most {MAX_BOX}",
                lambda v, when, k=k: f"{info.describe(k)} has box {v['box']}{when}, the limit is {MAX_BOX}",
                ["box"], hint=_box_hint(info, d), notes=_unchecked(ctx, info, "TMA-BOX-SIZE", k), **_where(info, d))


@rule("TMA-INNER-BYTES", family="tma")
def tma_inner_bytes(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The innermost box and each transfer are whole multiples of 16 bytes.

    What it checks:
        box[0] x element bytes % 16 == 0 for the innermost TMA dimension, and the bytes
        of one transfer, prod(ceil(box[i] / elementStride[i])) x element bytes, % 16 == 0,
        for every admitted size.
    Why the hardware needs it:
        cuTensorMapEncodeTiled rejects an inner box that is not a multiple of 16 bytes
        (fp16 box 4 and 12 rejected, 8 accepted on H200), and the mbarrier expects the
        transfer's byte count, which nvFuser requires to be a multiple of 16.
    Example:
        fusion, t0, t1, t2 = tma_copy("inner12", [12], dtype=tp.float16)
        t1.axis(0).parallelize(tp.ParallelType.Bulk)
    Fix:
        fusion, t0, t1, t2 = tma_copy("inner16", [16], dtype=tp.float16)
        t1.axis(0).parallelize(tp.ParallelType.Bulk)
    References:
        CUDA driver API cuTensorMapEncodeTiled (boxDim[0] * elementSize % 16); PTX ISA 9.7.9.25.5.2; measured on H200;
        docs/hardware.md#tma-inner-box-bytes, docs/hardware.md#tma-transaction-bytes
    """
    # Formal statement: for each inferred TMA (element size es), for all admitted sizes s:
    #   (box_0(s) * es) mod 16 == 0; and, once that is proved, (prod_k tile_k(s) * es) mod 16 == 0
    #   (tile_k = ceil(box_k / elementStride_k): one transfer's bytes)
    for tma in _inferred(ctx):
        info = tma.info
        elem = info.gmem.dtype.bytes
        d0 = info.dims[0]

        inner = d0.box_expr * elem
        out = _prove(ctx, {"bytes": inner, "remainder": mod(inner, STRIDE_ALIGN)}, _remainder_zero, (STRIDE_ALIGN,))
        yield from box_retyped(ctx, report_values(
            ctx, "TMA-INNER-BYTES", out, "that the inner box is a multiple of 16 bytes",
            lambda v, when: (f"{info.describe(0)} has an inner box of {v['bytes']} bytes{when} "
                             f"({d0.box} x {elem}), not a multiple of {STRIDE_ALIGN}"),
            ["bytes", "remainder"],
            hint=inner_bytes_hint(info), notes=_unchecked(ctx, info, "TMA-INNER-BYTES", 0),
            **_where(info, d0)), info.consumer)
        if not out.proved:
            continue
        total = info.bytes_per_transfer_expr
        out = _prove(ctx, {"bytes": total, "remainder": mod(total, STRIDE_ALIGN)}, _remainder_zero, (STRIDE_ALIGN,))
        tiles = " x ".join(str(d.tile) for d in info.dims)
        yield from report_values(
            ctx, "TMA-INNER-BYTES", out, "that one transfer is a multiple of 16 bytes",
            lambda v, when: (f"one transfer of the TMA of {tma.op} moves {v['bytes']} bytes{when} "
                             f"(tiles {tiles} x {elem} bytes), not a multiple of {STRIDE_ALIGN}"),
            ["bytes", "remainder"], hint="change a box or element stride so the tile's byte count is a multiple of 16",
            **_where(info, d0))


@rule("TMA-ELEMENT-STRIDE", family="tma")
def tma_element_stride(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Element strides are between 1 and 8, and the innermost one is 1.

    What it checks:
        The factor of every striding split (the element stride of its TMA dimension) is
        at most 8 for every admitted size, and the innermost TMA dimension has no
        striding split (element stride 1).
    Why the hardware needs it:
        cuTensorMapEncodeTiled rejects elementStrides outside 1..8 (9 measured rejected),
        and without interleave the innermost element stride is ignored by the hardware,
        so a strided innermost tile would silently load a dense one.
    Example:
        fusion, t0, t1, t2 = tma_copy("stride16", [1024, 64])
        t1.split(0, 64).split(1, 16).reorder({2: 1})
        t1.set_allocation_domain(t1.get_loop_domain(), True)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(2).parallelize(tp.ParallelType.Bulk)
        t1.axis(3).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    Fix:
        fusion, t0, t1, t2 = tma_copy("stride4", [1024, 64])
        t1.split(0, 64).split(1, 4).reorder({2: 1})
        t1.set_allocation_domain(t1.get_loop_domain(), True)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(2).parallelize(tp.ParallelType.Bulk)
        t1.axis(3).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    References:
        CUDA driver API cuTensorMapEncodeTiled (elementStrides); nvFuser csrc/device_lower/analysis/tma.cpp;
        docs/hardware.md#tma-element-strides
    """
    # Formal statement: for each inferred TMA, for all admitted sizes s: e_0(s) == 1 and e_k(s) <= 8
    #   for every dimension k >= 1 (e_k: the element stride; e_k >= 1 is not part of the query)
    for tma in _inferred(ctx):
        info = tma.info
        for k, d in enumerate(info.dims):
            if k == 0:
                def one(q, e):
                    return q.eq(e["element stride"], const(1))

                out = _prove(ctx, {"element stride": d.element_stride_expr}, one)
                limit_text, hint = "the innermost dimension must have 1", _innermost_stride_hint(info, d)
            else:
                def fits(q, e):
                    return q.le(e["element stride"], const(MAX_ELEMENT_STRIDE))

                out = _prove(ctx, {"element stride": d.element_stride_expr}, fits, (MAX_ELEMENT_STRIDE,))
                limit_text = f"the limit is {MAX_ELEMENT_STRIDE}"
                hint = _element_stride_hint(info, d)
            yield from box_retyped(ctx, report_values(
                ctx, "TMA-ELEMENT-STRIDE", out, f"the element stride of TMA dimension {k}",
                lambda v, when, k=k, limit_text=limit_text: (
                    f"{info.describe(k)} has element stride {v['element stride']}{when}, {limit_text}"),
                ["element stride"], hint=hint, **_where(info, d)), info.consumer)


@rule("TMA-GLOBAL-STRIDE", family="tma")
def tma_global_stride(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Global strides are multiples of 16 bytes below 2^40, and the innermost dimension is contiguous.

    What it checks:
        The innermost TMA dimension has a memory stride of 1 element (it derives from a
        contiguous innermost allocation axis). Every other dimension's byte stride, derived
        from the global tensor's extents and contiguity, is a multiple of 16 and below
        2^40 for every admitted size. A stride behind a discontiguous axis is a launch-time
        value (`stride.T0.3`) that the encode call checks; it is not proved here.
    Why the hardware needs it:
        cuTensorMapEncodeTiled has no stride for dimension 0 (it is the element size) and
        rejects strides that are not multiples of 16 or reach 2^40 (120 rejected, 144 accepted on H200).
    Example:
        fusion, t0, t1, t2 = tma_copy("rows98", [64, 98])
        t1.split(1, 32).split(0, 8)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(2).parallelize(tp.ParallelType.BIDy)
        t1.axis(1).parallelize(tp.ParallelType.Bulk); t1.axis(3).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    Fix:
        fusion, t0, t1, t2 = tma_copy("rows128", [64, 128])
        t1.split(1, 32).split(0, 8)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(2).parallelize(tp.ParallelType.BIDy)
        t1.axis(1).parallelize(tp.ParallelType.Bulk); t1.axis(3).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx, tp.ParallelType.BIDy])
    References:
        CUDA driver API cuTensorMapEncodeTiled (globalStrides); nvFuser csrc/device_lower/analysis/tma.cpp; measured on H200;
        docs/hardware.md#tma-global-strides
    """
    # Formal statement: structural: dimension 0's stride in elements is the constant 1; for every
    #   dimension k >= 1 whose byte stride g_k is over extent symbols only (not a launch-time stride),
    #   for all admitted sizes s: g_k(s) mod 16 == 0 and g_k(s) < 2^40
    symbols = set(ctx.fusion.symbols)
    for tma in _inferred(ctx):
        info = tma.info
        d0 = info.dims[0]
        if d0.stride_elements_expr != const(1):
            yield finding("TMA-GLOBAL-STRIDE",
                          f"{info.describe(0)} is not contiguous in {info.gmem.name}: its stride is "
                          f"{stride_names(user_str(d0.stride_elements))} elements"
                          f"{', known only at launch' if 'stride.' in str(d0.stride_elements) else ''}; the "
                          f"innermost TMA dimension must have stride 1",
                          counterexample={"stride elements": stride_names(user_str(d0.stride_elements))},
                          hint=f"make {info.gmem.name}'s innermost axis contiguous (contiguity True for it where "
                               f"{info.gmem.name} is created)",
                          **_where(info, d0))
        for k, d in enumerate(info.dims[1:], start=1):
            s = d.stride_bytes_expr
            if not s.free_vars() <= symbols:
                continue  # a launch-time stride: cuTensorMapEncodeTiled checks it

            def ok(q, e):
                return z3.And(q.eq(e["remainder"], const(0)), q.lt(e["stride bytes"], const(STRIDE_LIMIT)))

            out = _prove(ctx, {"stride bytes": s, "remainder": mod(s, STRIDE_ALIGN)}, ok, (STRIDE_ALIGN, STRIDE_LIMIT))
            yield from report_values(
                ctx, "TMA-GLOBAL-STRIDE", out, f"the global stride of TMA dimension {k}",
                lambda v, when, k=k: (f"{info.describe(k)} has a global stride of {v['stride bytes']} bytes{when}; "
                                      f"it must be a multiple of {STRIDE_ALIGN} and below 2^40"),
                ["stride bytes", "remainder"], hint=_stride_hint(ctx, info, s, out), **_where(info, d))


def _stride_hint(ctx: VerifyContext, info: TmaInfo, stride: Expr, out: Outcome) -> str:
    """The fix of a global stride: where the stride is c x (sizes), the assumption on the sizes
    that makes it a multiple of 16 (or keeps it below 2^40), in the Python a user writes, when a
    query shows that it suffices with the fusion's own assumptions and contradicts none of them;
    else padding the rows."""
    pad = (f"pad the rows of {info.gmem.name} to a multiple of {STRIDE_ALIGN} bytes (a discontiguous tensor with "
           f"a padded stride), or composite this dimension with its inner neighbour")
    if out.status is not Verdict.COUNTEREXAMPLE:
        return pad
    coeff, sizes = sympy.factor_terms(to_sympy(stride)).as_coeff_Mul()
    if not coeff.is_Integer or not sizes.free_symbols:
        return pad
    if out.values.get("remainder"):
        need = STRIDE_ALIGN // math.gcd(int(coeff), STRIDE_ALIGN)
        cond = sympy.Eq(sympy.Mod(sizes, need), 0)
        if need == 1:
            return pad
    else:
        cond = sympy.Le(sizes, (STRIDE_LIMIT - 1) // int(coeff))

    def check() -> bool:
        exprs = [stride, mod(stride, STRIDE_ALIGN), const(STRIDE_ALIGN), const(STRIDE_LIMIT)]
        q = ctx.query(exprs + assumption_terms(cond))
        q.assume_sympy(cond)
        fixed = q.prove(z3.And(q.eq(mod(stride, STRIDE_ALIGN), const(0)), q.lt(stride, const(STRIDE_LIMIT))))
        return fixed.proved and q.prove(z3.BoolVal(False, q.ctx)).status is Verdict.COUNTEREXAMPLE  # not vacuous
    if not ctx.memo(("tma-stride-assumption", stride, str(cond)), check):
        return pad
    return f"if every size you run satisfies it, state it: fusion.assume(\"{user_str(cond)}\"); otherwise {pad}"


@rule("TMA-FTTC", family="tma", severity=Severity.WARNING)
def tma_fttc(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """No dimension has an element stride e with e < box < size and box % e != 0 (a warning).

    What it checks:
        The fundamental theorem of TMA correctness: for some dimension, e < B < S and
        B % e != 0, with e the element stride, B the box and S the tensor size on that
        dimension. The rule searches all admitted sizes for such a dimension.
    Why the hardware needs it:
        TMA fills out-of-bounds elements with zero, but a strided box that does not end
        on a stride leaves in-bounds holes that are not zero-filled. Any consumer that
        needs holes to be zero (a reduction, an MMA) then reads garbage; strong
        correctness is unachievable for such a schedule (weak correctness still holds).
    Example:
        fusion, t0, t1, t2 = tma_copy("fttc", [1024, 64])
        t1.split(0, 8).split(1, 3).reorder({2: 1})
        t1.set_allocation_domain(t1.get_loop_domain(), True)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(2).parallelize(tp.ParallelType.Bulk)
        t1.axis(3).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    Fix:
        fusion, t0, t1, t2 = tma_copy("fttc", [1024, 64])
        t1.split(0, 8).split(1, 4).reorder({2: 1})
        t1.set_allocation_domain(t1.get_loop_domain(), True)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(2).parallelize(tp.ParallelType.Bulk)
        t1.axis(3).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    References:
        nvFuser doc/reading/tma-modeling-in-depth.md (Theorem 6, FTTC); nvFuser doc/dev/tma.md (step 3);
        docs/hardware.md#tma-out-of-bounds-fill
    """
    # Formal statement: for every dimension k of each inferred TMA whose element stride e is not the
    #   constant 1, for all admitted sizes s: not (e(s) < B(s) < S(s) and B(s) mod e(s) != 0)
    #   (B: the box, S: the tensor size on that dimension)
    for tma in _inferred(ctx):
        info = tma.info
        for k, d in enumerate(info.dims):
            if d.element_stride_expr == const(1):
                continue

            def safe(q, e):
                return z3.Not(z3.And(q.lt(e["element stride"], e["box"]), q.lt(e["box"], e["size"]),
                                     q.ne(e["remainder"], const(0))))

            exprs = {"element stride": d.element_stride_expr, "box": d.box_expr, "size": d.size_expr,
                     "remainder": mod(d.box_expr, d.element_stride_expr)}
            out = _prove(ctx, exprs, safe)
            yield from report_values(
                ctx, "TMA-FTTC", out, f"the FTTC condition of TMA dimension {k}",
                lambda v, when, k=k: (f"{info.describe(k)} has element stride {v['element stride']} < box "
                                      f"{v['box']} < size {v['size']} and {v['box']} % {v['element stride']} = "
                                      f"{v['remainder']}{when}: holes inside the tensor are not zero-filled"),
                ["element stride", "box", "size"],
                hint="make the box a multiple of the element stride (or the element stride at least the box), "
                     "if the holes must read as zero", **_where(info, d))
