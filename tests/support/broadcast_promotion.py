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


def cache_past_broadcast(shape=None):
    """out[M, N, K] = broadcast(a2)[M, 1, K] + b where a2 = set(a[M, K]) (a register cache), out split
    into [M BIDx, N TIDy, K/32, 32 TIDx] and propagated, inlined most: a2 [M, K/32, 32] meets its
    consumer's [M, b, K/32, 32] past the broadcast (nvFuser's getMatchedLeafPosWithoutReplayCasP),
    so it is inlined at 3 and runs inside the TIDy loop the broadcast shares. Returns the fusion
    and (a2, ab, out); symbolic or of `shape` (M, N, K)."""
    with tp.Fusion("cache_past_broadcast") as fusion:
        if shape is None:
            a, b = tp.make_contig_tensor(2), tp.make_contig_tensor(3)
        else:
            a = tp.make_contig_concrete_tensor([shape[0], shape[2]])
            b = tp.make_contig_concrete_tensor(list(shape))
        fusion.add_input(a)
        fusion.add_input(b)
        a2 = tp.set(a)
        ab = tp.broadcast(a2, [False, True, False])
        out = tp.add(ab, b)
        fusion.add_output(out)
    if shape is None:
        fusion.assume("T1_1 <= 32")  # the block's TIDy extent
    out.split(2, 32)
    tp.propagate_transforms(out)
    for tv in (a2, ab, out):
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(-1).parallelize(P.TIDx)
    ab.axis(1).parallelize(P.Serial)
    out.axis(1).parallelize(P.TIDy)
    tp.inline_most(fusion)
    return fusion, a2, ab, out
