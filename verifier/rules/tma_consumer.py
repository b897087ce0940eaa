"""TMA consumer-schedule rules: where Bulk may appear, and which transforms may mix the
tile with the rest of the loop domain (the seed's step 5)."""

from __future__ import annotations

from typing import Iterator

from ...hw.bulk_copy import is_async_bulk_op
from ...model.types import IterType, ParallelType
from ..analysis.tma import extents_of, inferred_tmas
from ..causes import propose_retype
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding
from ..registry import rule


@rule("TMA-BULK-PLACEMENT", family="tma")
def tma_bulk_placement(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """ParallelType.Bulk marks exactly the tile IDs of a TMA consumer.

    What it checks:
        Bulk appears only in the loop domain of the output of a TMA op (cp.async.bulk.tensor)
        or of a 1-D bulk copy (tp.LoadStoreOpType.CpAsyncBulk, cp.async.bulk: its run),
        only on iteration IDs (not broadcast), and a TMA consumer has Bulk IDs for its
        tile; no ID of a TMA consumer is vectorized (the tile is moved by the TMA, not
        by vector instructions).
    Why the hardware needs it:
        Bulk IDs are lowered as trivial loops because one cp.async.bulk.tensor moves the
        whole tile. On an ordinary copy a Bulk loop would simply not execute its
        iterations; a TMA consumer without Bulk IDs would issue a TMA per element.
    Example:
        fusion, t0, t1, t2 = copy_chain("bulk_on_set", [1024, 64])  # t1 = tp.set(t0): no TMA
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    Fix:
        fusion, t0, t1, t2 = tma_copy("bulk_on_tma", [1024, 64])
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    References:
        nvFuser csrc/device_lower/validation.cpp (validateCpAsyncBulk); nvFuser doc/dev/tma.md (step 5);
        docs/hardware.md#tma-tile-layout-in-shared-memory
    """
    # Formal statement: none, structural: for every executed tensor, a Bulk loop ID implies a TMA definition;
    #   a TMA output has a Bulk loop ID, all of them Iteration IDs, and no Vectorize loop ID
    for tv in ctx.executed():
        tma = is_async_bulk_op(tv.definition)
        bulk = [i for i in tv.loop if i.parallel_type is ParallelType.Bulk]
        where = dict(tensor=tv.name, location=tv.origin)
        if bulk and not tma:
            d = finding("TMA-BULK-PLACEMENT",
                        f"{', '.join(i.label() for i in bulk)} of {tv.name} is Bulk, but {tv.name} is written by "
                        f"`{tv.definition}`, not by a TMA or bulk copy",
                        hint="use tp.set(..., op=tp.LoadStoreOpType.TMA) for this copy, or parallelize the axis otherwise",
                        ids=[i.name for i in bulk], counterexample=extents_of(bulk), **where)
            _retyped(ctx, d, [(tv.name, k, ParallelType.Serial) for k, i in enumerate(tv.loop) if i in bulk])
            yield d
        if not tma:
            continue
        if not bulk:
            yield finding("TMA-BULK-PLACEMENT", f"{tv.name} is written by a TMA but none of its loop IDs is Bulk, "
                                                f"so the TMA has no tile",
                          hint="box an axis (inner split) and parallelize the inner output with tp.ParallelType.Bulk",
                          ids=[i.name for i in tv.loop], counterexample={"Bulk IDs": 0}, **where)
        for k, i in enumerate(tv.loop):
            if i.parallel_type is ParallelType.Bulk and i.iter_type is not IterType.Iteration:
                d = finding("TMA-BULK-PLACEMENT", f"{i.label()} of {tv.name} is Bulk but is a broadcast ID, not part "
                                                  f"of a tile", hint="a broadcast ID is no part of a tile: give it its "
                                                                     "loop's type, or leave it serial",
                            ids=[i.name], counterexample=extents_of([i]), **where)
                _retyped(ctx, d, [(tv.name, k, ParallelType.Serial)])
                yield d
            if i.parallel_type is ParallelType.Vectorize:
                # inside the box (right of its first Bulk axis) the axis is the box's; left of it, a loop of
                # boxes (the circular loop, as its inlined mates have it): serial
                first = next((j for j, x in enumerate(tv.loop) if x.parallel_type is ParallelType.Bulk), len(tv.loop))
                d = finding("TMA-BULK-PLACEMENT", f"{i.label()} of the TMA consumer {tv.name} is vectorized; the tile "
                                                  f"is moved by the TMA, its IDs must be Bulk",
                            hint="parallelize tile IDs with tp.ParallelType.Bulk" if k > first else
                                 "an axis left of the box is a loop of boxes: give it its loop's type (serial)",
                            ids=[i.name], counterexample=extents_of([i]), **where)
                _retyped(ctx, d, [(tv.name, k, ParallelType.Bulk if k > first else ParallelType.Serial)])
                yield d


def _retyped(ctx: VerifyContext, d: Diagnostic, axes) -> None:
    """The one parallelize call that fixes d's axes, verified (causes.propose_retype), in its help."""
    call = propose_retype(ctx, d, axes, ["TMA-BULK-PLACEMENT", "INLINE-PARALLEL-MATCH", "REDUCTION-PARALLEL"],
                          ["TMA-BULK-PLACEMENT"])
    if call is not None:
        d.hint += f"; verified: {call} leaves Bulk on TMA tiles only"


@rule("TMA-MIXED-TRANSFORM", family="tma")
def tma_mixed_transform(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The TMA consumer never merges or swizzles a tile ID with a non-tile ID.

    What it checks:
        In the loop-domain schedule of a TMA consumer, a swizzle whose one output leads
        to Bulk (tile) IDs and the other to non-Bulk IDs, or a merge that is not a view
        of the global tensor and takes an ID whose sibling (the other output of the split
        that made it) is a tile ID: the tile and non-tile branches were transformed together.
    Why the hardware needs it:
        A TMA moves whole boxes; the tile is fixed by the boxing and striding splits. A
        merge or swizzle across the two branches has no box the hardware could move, and
        nvFuser infers the TMA domain only from schedules that keep the branches apart.
    Example:
        fusion, t0, t1, t2 = tma_copy("mixed", [256, 256])
        t1.split(1, 32).split(0, 32).reorder({1: 2})
        t1.merge(1, 2).split(1, 4)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(2).parallelize(tp.ParallelType.Bulk)
        t1.axis(3).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    Fix:
        fusion, t0, t1, t2 = tma_copy("separate", [256, 256])
        t1.split(1, 32).split(0, 32).reorder({1: 2})
        t1.merge(0, 1)
        t1.axis(0).parallelize(tp.ParallelType.BIDx); t1.axis(1).parallelize(tp.ParallelType.Bulk)
        t1.axis(2).parallelize(tp.ParallelType.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [tp.ParallelType.BIDx])
    References:
        nvFuser doc/dev/tma.md (step 4 and step 5: tile and non-tile IDs are transformed separately);
        docs/hardware.md#tma-tile-layout-in-shared-memory
    """
    # Formal statement: none, structural: no view transform of a TMA consumer mixes the branches: no swizzle
    #   with one output a tile role and the other not, no non-view merge of an ID whose split sibling is a tile ID
    for tma in inferred_tmas(ctx):
        info = tma.info
        for step in tma.view:
            if not step.mixing:
                continue
            t = step.transform
            ids = info.id_map()
            inf = tma.inference
            tiles = [o.label() for o in t.inputs + t.outputs if inf.is_tile(o)]
            siblings = [x.definition for x in t.inputs if x.definition is not None and x.definition.outputs]
            why = (f"tile IDs {', '.join(tiles)}" if tiles else
                   "an ID whose split sibling is a tile ID: " + "; ".join(str(s) for s in siblings))
            yield finding("TMA-MIXED-TRANSFORM",
                          f"{t} in the TMA consumer {info.consumer.name} transforms tile and non-tile IDs together "
                          f"({why})",
                          hint="transform the Bulk tile IDs and the coordinate IDs separately: merge coordinates "
                               "with coordinates and tile IDs with tile IDs",
                          counterexample=extents_of(t.inputs),
                          tensor=info.consumer.name, ids=[i.name for i in t.inputs + t.outputs if i.name in ids],
                          location=t.outputs[0].origin)
