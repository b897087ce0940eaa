"""Invalid TMAs on global tensors with a scheduled allocation domain: what a tensor map cannot
describe. Memory order is the allocation domain with its merges expanded into logical axes
(model/global_layout.py); a split in the allocation domain has no such order, and a TMA
domain must merge axes that are adjacent and contiguous in it. Each is gmem T0 -> (TMA) smem
T1 -> gmem T2, fp32, T2 with T1's block axes.
"""

import tileproof as tp

P = tp.ParallelType
TMA = tp.LoadStoreOpType.TMA


def tma_load(name, shape, alloc, contiguity=True):
    """T0 (gmem, allocated along its loop domain after `alloc(t0)`) -> T1 (smem, TMA) -> T2."""
    with tp.Fusion(name) as fusion:
        t0 = tp.make_tensor(shape)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    alloc(t0)
    t0.set_allocation_domain(t0.get_loop_domain(), contiguity)
    t0.set_loop_domain(t0.get_logical_domain())
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion, t1, t2


@tp.schedule(expect=tp.rejected("TMA-VIEW", "LOWERING-SUPPORTED", messages=["allocation axis 1", "split"]))
def tma_alloc_split():
    """T0[64, 128] allocated [I0, I1 / 32, 32]: a split in the allocation domain. Neither the
    tensor map nor the code generator's global layout takes it (the outer stride would count
    padding when the split does not divide), so TMA-VIEW names the allocation axis and
    LOWERING-SUPPORTED the layout."""
    fusion, t1, t2 = tma_load("tma_alloc_split", [64, 128], lambda t: t.split(1, 32))
    for t in (t1, t2):
        t.split(1, 32).split(0, 8)  # [I0o, I0i{8}, I1o, I1i{32}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(2).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-VIEW", messages=["discontiguous"]))
def tma_alloc_merged_padded_flattened():
    """T0[M{6}, N{20}, K{96}] allocated [M*N, K] with padded rows (contiguity False, True), and T1
    flattens all three axes into one dimension boxed by 256: M*N is contiguous inside, but K's
    rows are padded, so merge(M*N, K) has no single stride."""
    fusion, t1, t2 = tma_load("tma_alloc_merged_padded_flattened", [6, 20, 96], lambda t: t.merge(0),
                              contiguity=[False, True])
    for t in (t1, t2):
        t.merge(0).merge(0).split(0, 256)  # [MNKo, MNKi{256}]
        t.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    return fusion


@tp.schedule(expect=tp.rejected("TMA-VIEW", messages=["not adjacent"]))
def tma_alloc_merge_against_memory_order():
    """T0[M{8}, N{16}, K{64}] allocated [N*M, K] (N outer in memory), but T1 merges M (outer) with
    N: in memory N comes first, so M*N is not a view of T0's memory."""
    fusion, t1, t2 = tma_load("tma_alloc_merge_against_memory_order", [8, 16, 64],
                              lambda t: t.merge(1, 0))
    for t in (t1, t2):
        t.merge(0).split(1, 32).split(0, 16)  # [MNo, MNi{16}, Ko, Ki{32}]
        t.axis(0).parallelize(P.BIDy)
        t.axis(2).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.Bulk)
    t1.axis(3).parallelize(P.Bulk)
    return fusion
