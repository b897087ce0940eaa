"""Valid TMAs on global tensors whose allocation domain merges logical axes (nvFuser's
`tv.merge(0); tv.set_allocation_domain(tv.get_loop_domain(), contiguity)`). A merge lays its
axes out outer then inner with no gap, so the memory order is the allocation domain with each
merged axis expanded into its logical axes, contiguous with each other (model/global_layout.py).
A TMA consumer that merges them back gets one tensor-map dimension of size M*N and the stride
of N; one that boxes them separately gets a dimension per axis, and a partial box then stops
at the logical edge instead of running into the next row of the merged axis.

Each is gmem T0 -> (TMA) smem T1 -> gmem T2 unless stated; T2 takes T1's block axes, so each
block stores the tile it loaded. tests/codegen/test_codegen_tma.py checks the tensor maps and
the global element each copy reads; tests/gpu/test_tma_allocation.py runs them.
"""

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


def allocate_merged(t, merge, contiguity=True):
    """Allocate t along its loop domain after `merge(t)` (merges of its logical axes), then
    give it back its logical loop domain: the merges are a layout, not a schedule."""
    merge(t)
    t.set_allocation_domain(t.get_loop_domain(), contiguity)
    t.set_loop_domain(t.get_logical_domain())


def tma_load(name, shape, merge, contiguity=True, dtype=tp.float32):
    """T0 (gmem, allocation merged by `merge`) -> T1 (smem, TMA load) -> T2 (gmem)."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(shape, dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    allocate_merged(t0, merge, contiguity)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion, t1, t2


@tp.schedule(expect=tp.accepted())
def tma_alloc_merged_outer():
    """T0[M, N{12}, K] allocated [M*N, K]; the TMA domain is the allocation domain: T1 merges M
    and N again and boxes (16, 32) innermost first, a 2-D TMA of sizes (K, 12M). Symbolic M and
    K (boxes need not divide); K % 4 == 0 so the row stride 4K bytes is a multiple of 16, and
    M <= 87380 so the merged dimension's 16-row boxes, ceil(12 M / 16) of them on blockIdx.y,
    are at most 65535 (LAUNCH-GRID; its coordinates then fit int32 too: TMA-COORD-RANGE)."""
    fusion, t1, t2 = tma_load("tma_alloc_merged_outer", ["M", 12, "K"], lambda t: t.merge(0))
    fusion.assume("K % 4 == 0")
    fusion.assume("M <= 87380")
    for t in (t1, t2):
        t.merge(0).split(1, 32).split(0, 16)  # [MNo, MNi{16}, Ko, Ki{32}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(2).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_alloc_merged_inner():
    """fp16 T0[M{64}, N{6}, K{40}] allocated [M, N*K]; T1 merges N and K (240) and boxes it by
    64 (128 bytes; the last box is partial) and M by 8."""
    fusion, t1, t2 = tma_load("tma_alloc_merged_inner", [64, 6, 40], lambda t: t.merge(1), dtype=tp.float16)
    for t in (t1, t2):
        t.merge(1).split(1, 64).split(0, 8)  # [Mo, Mi{8}, NKo, NKi{64}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(2).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_alloc_merged_padded_rows():
    """T0[M{6}, N{20}, K{96}] allocated [M*N, K] with contiguity (False, True): rows of K are
    padded, so the merged axis has a launch-time stride (that of N, the axis inside the merge);
    M steps N of those rows. T1 merges M and N (M is contiguous with N inside the merge) and
    boxes (8, 32)."""
    fusion, t1, t2 = tma_load("tma_alloc_merged_padded_rows", [6, 20, 96], lambda t: t.merge(0),
                              contiguity=[False, True])
    for t in (t1, t2):
        t.merge(0).split(1, 32).split(0, 8)  # [MNo, MNi{8}, Ko, Ki{32}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(2).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_alloc_merged_boxed_apart():
    """T0[M{8}, N{12}, K{64}] allocated [M*N, K], but T1 boxes N by 8 on its own: a 3-D TMA
    (K, N, M) over the one merged allocation axis. 8 does not divide 12, so N's second box
    is partial; as its own dimension the hardware clips it at N = 12 instead of reading the
    next M's rows."""
    fusion, t1, t2 = tma_load("tma_alloc_merged_boxed_apart", [8, 12, 64], lambda t: t.merge(0))
    for t in (t1, t2):
        t.split(2, 32).split(1, 8)  # [M, No, Ni{8}, Ko, Ki{32}]
        t.axis(0).parallelize(P.BIDz)
        t.axis(1).parallelize(P.BIDy)
        t.axis(3).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(4).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_alloc_merged_permuted():
    """T0[M{10}, N{16}, K{12}] allocated [N, M*K]: memory is N-major with rows of M*K. T1
    merges M and K (adjacent and contiguous in memory, though not in the logical order) into
    one dimension of 120 boxed by 32, and boxes N by 8. The tile's box IDs are allocated in
    memory order [Ni, MKi], as the TMA writes them."""
    fusion, t1, t2 = tma_load("tma_alloc_merged_permuted", [10, 16, 12],
                              lambda t: t.merge(0, 2).reorder({1: 0}))
    for t in (t1, t2):
        t.merge(0, 2).split(1, 8).split(0, 32).reorder({1: 3})  # [MKo, No, Ni{8}, MKi{32}]
        t.axis(0).parallelize(P.BIDx)
        t.axis(1).parallelize(P.BIDy)
    t1.axis(2).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.accepted())
def tma_alloc_merged_store():
    """A TMA store into T2[M{8}, N{11}, K{64}] allocated [M*N, K]: gmem T0 -> smem T1 ->
    (TMA) gmem T2. T2 merges M and N and boxes (16, 32); 16 does not divide 88, so the last
    box is partial and the hardware drops its out-of-range rows."""
    with tp.Fusion("tma_alloc_merged_store") as fusion:
        t0 = tp.make_tensor([8, 11, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1, op=TMA)
        fusion.add_output(t2)
    allocate_merged(t2, lambda t: t.merge(0))
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.merge(0).split(1, 32).split(0, 16)  # [MNo, MNi{16}, Ko, Ki{32}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(2).parallelize(P.BIDx)
    t2.axis(1).parallelize(P.Bulk)
    t2.axis(3).parallelize(P.Bulk)
    return fusion
