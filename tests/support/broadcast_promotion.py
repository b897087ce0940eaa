"""A pointwise schedule whose broadcast operand is inlined through loop promotion, shared by the
execution tests (tests/execution/test_broadcast_promotion.py) and the GPU run
(tests/gpu/test_broadcast_promotion.py): out[I0, I1] = broadcast(a[I1]) + b[I0, I1], out merged and
split by `tile` into [BIDx, TIDx] and propagated, so a's cache [I1/tile, tile] and its broadcast
[(1*I1)/tile, tile] share out's loops [(I0*I1)/tile, tile] (nvFuser's loop promotion)."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def broadcast_add(shape=None, tile=128):
    """The fusion and its tensors (a2: a's cache, ab: its broadcast, out); symbolic or of `shape`."""
    with tp.Fusion("broadcast_add") as fusion:
        a = tp.make_contig_tensor(1) if shape is None else tp.make_contig_concrete_tensor([shape[1]])
        b = tp.make_contig_tensor(2) if shape is None else tp.make_contig_concrete_tensor(list(shape))
        fusion.add_input(a)
        fusion.add_input(b)
        a2 = tp.set(a)
        ab = tp.broadcast(a2, [True, False])
        out = tp.add(ab, b)
        fusion.add_output(out)
    if shape is None:
        fusion.assume("T1_0 * T1_1 <= 2147483647")  # the grid and the flat index fit
    out.merge(0).split(0, tile)
    tp.propagate_transforms(out)
    for tv in (a2, ab, out):
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion, a2, ab, out
