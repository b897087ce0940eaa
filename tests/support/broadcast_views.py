"""Schedules with a broadcast of a fusion input set to global memory (a view of the input,
model/producer_aliases.py, or a global intermediate where it is none), shared by the rule tests
(tests/rules/test_broadcast_views.py) and the GPU run (tests/gpu/test_broadcast_views.py)."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def bias_add(*, computed: bool = False):
    """out[M, N] = x[M, N] + bias[M] broadcast to [M, b1] in global memory, a block per row, 128
    threads over N. `computed`: the broadcast's input is exp(bias) in registers, which a view cannot
    read (the broadcast would copy it to global memory). Returns (fusion, the broadcast)."""
    with tp.Fusion("broadcast_view") as fusion:
        x = tp.make_contig_tensor(2, dtype=tp.float32)
        bias = tp.make_contig_tensor(1, dtype=tp.float32)
        fusion.add_input(x)
        fusion.add_input(bias)
        src = tp.exp(bias) if computed else bias
        b = tp.broadcast(src, [False, True])
        out = tp.add(x, b)
        fusion.add_output(out)
    b.set_memory_type(tp.MemoryType.Global)
    if computed:
        src.set_memory_type(tp.MemoryType.Local)
    out.split(1, 128)
    tp.propagate_transforms(out)
    for t in fusion.tensors:
        if not t.is_fusion_input:
            t.axis(0).parallelize(P.BIDx)
            if len(t.get_loop_domain()) > 1:
                t.axis(-1).parallelize(P.TIDx)
    return fusion, b


def permuted_broadcast():
    """out[M, N, b1] = set(broadcast(x[M, N])) with the broadcast in global memory allocated [N, M, b1]:
    not x's layout, so the broadcast would transpose x into a buffer of its own."""
    with tp.Fusion("permuted_broadcast") as fusion:
        x = tp.make_contig_tensor(2, dtype=tp.float32)
        fusion.add_input(x)
        b = tp.broadcast(x, [False, False, True])
        out = tp.set(b)
        fusion.add_output(out)
    b.set_memory_type(tp.MemoryType.Global)
    b.set_allocation_domain([b.axis(1), b.axis(0), b.axis(2)], True)
    for t in (b, out):
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.TIDx)
    return fusion, b


def global_copy(*, permuted: bool = False, computed: bool = False, copies: int = 1,
                cache_op: tp.CacheOp = tp.CacheOp.Unspecified):
    """out[M, N] = x[M, N] + c with c = set(y[M, N]) in global memory (`copies` plain copies in a row,
    each in global memory; the first with `cache_op`), a block per row, 128 threads over N: c is a
    view of y. `permuted`: c allocated [N, M], not y's layout, so the copy would transpose y into a
    buffer of its own; `computed`: c copies exp(y), computed into global memory, which no view reads
    as the kernel's input. Returns (fusion, the last copy)."""
    with tp.Fusion("global_copy") as fusion:
        x = tp.make_contig_tensor(2, dtype=tp.float32)
        y = tp.make_contig_tensor(2, dtype=tp.float32)
        fusion.add_input(x)
        fusion.add_input(y)
        src = tp.exp(y) if computed else y
        copies_ = [tp.set(src, cache_op=cache_op)]
        for _ in range(copies - 1):
            copies_.append(tp.set(copies_[-1]))
        out = tp.add(x, copies_[-1])
        fusion.add_output(out)
    for c in copies_ + ([src] if computed else []):
        c.set_memory_type(tp.MemoryType.Global)
    c = copies_[-1]
    if permuted:
        c.set_allocation_domain([c.axis(1), c.axis(0)], True)
    out.split(1, 128)
    tp.propagate_transforms(out)
    for t in fusion.tensors:
        if not t.is_fusion_input:
            t.axis(0).parallelize(P.BIDx)
            t.axis(-1).parallelize(P.TIDx)
    return fusion, c


def global_transpose(*, keep_order: bool = True):
    """out[N, M] = x[N, M] + transpose(y[M, N]) with the transpose in global memory, a block per
    row, 128 threads over M. `keep_order`: the transpose allocated [M, N] (y's order, so each element
    at y's offset: a view of y); else by its logical order [N, M], which would move data."""
    with tp.Fusion("global_transpose") as fusion:
        x = tp.make_contig_tensor(2, dtype=tp.float32)
        y = tp.make_contig_tensor(2, dtype=tp.float32)
        fusion.add_input(x)
        fusion.add_input(y)
        t = tp.transpose(y, 0, 1)
        out = tp.add(x, t)
        fusion.add_output(out)
    t.set_memory_type(tp.MemoryType.Global)
    if keep_order:
        t.set_allocation_domain([t.axis(1), t.axis(0)], True)
    out.split(1, 128)
    tp.propagate_transforms(out)
    for u in fusion.tensors:
        if not u.is_fusion_input:
            u.axis(0).parallelize(P.BIDx)
            u.axis(-1).parallelize(P.TIDx)
    return fusion, t
