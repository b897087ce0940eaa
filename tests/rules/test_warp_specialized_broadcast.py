"""WS-ROLES and the warp-specialized axis on a load's own axes: an iteration axis bound to it would
split the load over the producer's one index (refused); a broadcast axis bound to it holds no index
of the load (accepted, as nvFuser's checkWarpSpecializedAxis allows: parallelize_all_like gives it
the axis it meets, e.g. TmaCircularBufferingTest.MatmulWithBroadcastedInput warp-specialized on TIDy)."""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.CpAsyncBulkTensorTile


def broadcast_matmul(load_a_over_tidy: bool = False):
    """out[M, N] = sum_K a[M, K, 1] * b[1, K, N] with TMA tiles of a and b warp-specialized on TIDy
    (nvFuser's MatmulWithBroadcastedInput schedule). b's tile's broadcast M axis (TSY) takes TIDy from
    parallelize_all_like; `load_a_over_tidy`: a's tile's M axis (TSY, an iteration axis) bound to TIDy
    instead of Bulk."""
    bsx, tsx, tsy = 64, 32, 16
    with tp.Fusion("broadcast_matmul") as fusion:
        a = tp.make_tensor(["M", "K", 1], contiguity=True)
        b = tp.make_tensor([1, "K", "N"], contiguity=True)
        fusion.add_input(a)
        fusion.add_input(b)
        out = tp.sum(tp.mul(a, b), [1])
        fusion.add_output(out)
    fusion.assume("K % 4 == 0")
    fusion.assume("N % 4 == 0")
    fusion.assume(f"N <= 65535 * {bsx}")
    staged = out.cache_before(TMA)
    staged.set_memory_type(tp.MemoryType.Shared)
    a_local, b_local = a.cache_after(), b.cache_after()
    a_smem, b_smem = a.cache_after(TMA), b.cache_after(TMA)
    a_smem.set_memory_type(tp.MemoryType.Shared)
    b_smem.set_memory_type(tp.MemoryType.Shared)
    staged.split(-1, bsx).split(-1, tsx).split(1, bsx).split(0, bsx).split(1, tsy)
    staged.reorder({4: 7, 7: 6, 6: 4, 2: 5, 1: 3, 3: 2, 5: 1, 0: 0})
    partial = staged.rfactor([-1])
    tp.propagate_transforms(partial)
    out.axis(0).parallelize(P.BIDx)
    out.axis(1).parallelize(P.BIDy)
    out.axis(-2).parallelize(P.TIDy)
    out.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(out)
    for i in (-5, -3, -1):
        a_smem.axis(i).parallelize(P.Bulk)
    for i in (-4, -2, -1):
        b_smem.axis(i).parallelize(P.Bulk)
    for i in (-4, -3, -2, -1):
        out.axis(i).parallelize(P.Bulk)
    if load_a_over_tidy:
        a_smem.axis(-3).parallelize(P.TIDy)
    tp.inline_most(fusion)
    for t in (a_local, b_local):
        t.circular_buffer(4, -2)
    for t in (a_smem, b_smem):
        t.circular_buffer(4, -2, tp.WarpSpecialized(P.TIDy))
    return fusion, a_smem, b_smem


def test_a_broadcast_axis_on_the_specialized_axis_is_accepted():
    fusion, a_smem, b_smem = broadcast_matmul()
    (on_tidy,) = [i for i in b_smem.loop if i.parallel_type is P.TIDy]
    assert on_tidy.is_broadcast
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [(d.code, d.message) for d in report.errors]
    src = tp.compile(fusion, "sm_90a").cuda_source
    assert "if (threadIdx.y >= 16U)" in src  # the producer warpgroup
    assert src.count("tp_bulk_load_2d(tp_smem(") == 2  # one load of each tile
    # the loads issued by the producer's first thread alone (the broadcast TIDy adds no index)
    assert src.count("if (threadIdx.y == 16U && threadIdx.x == 0U)") == 1 and "threadIdx.y < 16U" not in src


def test_an_iteration_axis_on_the_specialized_axis_is_refused():
    fusion, a_smem, b_smem = broadcast_matmul(load_a_over_tidy=True)
    report = tp.verify(fusion, "sm_90a")
    roles = [d for d in report.errors if d.code == "WS-ROLES"]
    assert [d for d in roles if f"{a_smem.name} is warp-specialized on TIDy and also parallelized on it (TIDy{{16}})"
            in d.message], [(d.code, d.message) for d in report.errors]
    assert not [d for d in roles if d.message.startswith(f"{b_smem.name} ")]
