"""nvFuser tests/cpp/test_circular_buffering.cpp, translated (tests/support/nvfuser.py says how).

Parameterised TESTs take a few of nvFuser's instantiations, named as gtest names them
("stage_2_prefetch_neg1": 2 stages, prefetch -1, i.e. 1). nvFuser's computeAt(consumer, pos) from a
producer is written as inline_at(pos) on each tensor it places (the tensors between producer and
consumer). Where nvFuser throws at launch only because the circular loop is shorter than its
stages (executor_utils.cpp validateCircularBuffering), tileproof predicates the prologue and
accepts (issue item 1): those cases are `differs`, with a `run` that shows the values.
"""

import pytest

import tileproof as tp
from support.nvfuser import THROWS, VALID, Case, check, params
from tileproof.execution.warp_roles import registers_per_thread

P = tp.ParallelType
SHARED = tp.MemoryType.Shared
TMA = tp.LoadStoreOpType.CpAsyncBulkTensorTile  # tileproof also calls it LoadStoreOpType.TMA


def prefetch_name(stages: int, prefetch: int) -> str:
    """gtest's parameter name of nvFuser's nonTMAName."""
    return f"stage_{stages}_prefetch_{'neg' + str(-prefetch) if prefetch < 0 else prefetch}"


def torch_exp(t):
    return t.exp()


def run_unary(reference, sizes):
    """A run checking out = reference(t0) for a 1-D input at each size."""
    def run(kernel, torch):
        for n in sizes:
            t0 = torch.randn(n, device="cuda")
            (out,) = kernel.run(t0)
            torch.testing.assert_close(out, reference(t0), rtol=1e-5, atol=1e-5)
    return run


# -- CircularBufferingTest (NonTma): plain copies into shared memory and registers ----------------

def single_dim(stages, prefetch, *, shared: bool):
    """SingleDim1 (shared: tv1 in shared memory, computeAt(tv3, 1)) and SingleDim2 (registers,
    computeAt(tv3, -1)): out = in + 1 through tv1, tiles [I0/128, 4 (BIDx), 32 (TIDx)]."""
    with tp.Fusion("single_dim1" if shared else "single_dim2") as fusion:
        tv0 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.add(tv1, 1.0)
        tv3 = tp.set(tv2)
        fusion.add_output(tv3)
    if shared:
        tv1.set_memory_type(SHARED)
    tv3.split(-1, 128).split(-1, 32)  # [I0/128, 4, 32]
    tp.propagate_transforms(tv3)
    for tv in (tv1, tv2):  # tv0->computeAt(tv3, 1 or -1)
        tv.inline_at(1 if shared else -1)
    tv3.axis(-2).parallelize(P.BIDx)
    tv3.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(tv3)
    tv1.circular_buffer(stages, prefetch)
    return fusion


def single_dim3(stages, prefetch, *, producer_inside=False):
    """producer_inside: circular-buffer tv2 while its producer tv1 is computed inside the loop
    (nvFuser's ASSERT_ANY_THROW); otherwise move tv2 to position 2 first, as the TEST goes on."""
    with tp.Fusion("single_dim3") as fusion:
        tv0 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        tv1 = tp.add(tv0, 1.0)
        tv2 = tp.set(tv1)
        tv3 = tp.add(tv2, 1.0)
        fusion.add_output(tv3)
    tv1.set_memory_type(SHARED)
    tv3.split(-1, 128).split(-1, 32)  # [I0/128, 4, 32]
    tp.propagate_transforms(tv3)
    for tv in (tv1, tv2):  # tv0->computeAt(tv3, 1)
        tv.inline_at(1)
    if not producer_inside:
        tv2.inline_at(2)  # tv2->computeAt(tv3, 2)
    tv2.circular_buffer(stages, prefetch)
    tv3.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(tv3)
    return fusion


def single_dim_unswitch1(stages, prefetch):
    """Circular buffering smem -> registers under an Unswitch loop."""
    with tp.Fusion("single_dim_unswitch1") as fusion:
        tv0 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        tv1 = tp.add(tv0, 1.0)
        tv2 = tp.set(tv1)
        tv3 = tp.add(tv2, 1.0)
        fusion.add_output(tv3)
    tv1.set_memory_type(SHARED)
    tv3.split(-1, 128).split(-1, 32).split(-1, 8)  # [I0/128, 4, 4, 8]
    tp.propagate_transforms(tv3)
    for tv in (tv1, tv2):  # tv0->computeAt(tv3, 2)
        tv.inline_at(2)
    tv2.inline_at(-1)  # tv2->computeAt(tv3, -1)
    tv3.axis(-1).parallelize(P.TIDx)
    tv3.axis(1).parallelize(P.Unswitch)
    tp.parallelize_all_like(tv3)
    tv2.circular_buffer(stages, prefetch)
    return fusion


def single_dim_unswitch2(stages, prefetch):
    """Circular buffering gmem -> smem under an Unswitch loop."""
    with tp.Fusion("single_dim_unswitch2") as fusion:
        tv0 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.add(tv1, 1.0)
        fusion.add_output(tv2)
    tv1.set_memory_type(SHARED)
    tv2.split(-1, 128).split(-1, 32).split(-1, 8)  # [I0/128, 4, 4, 8]
    tp.propagate_transforms(tv2)
    tv1.inline_at(2)  # tv0->computeAt(tv2, 2)
    tv1.inline_at(-1)  # tv1->computeAt(tv2, -1)
    tv2.axis(-1).parallelize(P.TIDx)
    tv2.axis(1).parallelize(P.Unswitch)
    tp.parallelize_all_like(tv2)
    tv1.circular_buffer(stages, prefetch)
    return fusion


def single_dim_unroll(stages, prefetch):
    """Circular buffering smem -> registers inside an Unroll loop."""
    with tp.Fusion("single_dim_unroll") as fusion:
        tv0 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        tv1 = tp.add(tv0, 1.0)
        tv2 = tp.set(tv1)
        tv3 = tp.add(tv2, 1.0)
        fusion.add_output(tv3)
    tv1.set_memory_type(SHARED)
    tv3.split(-1, 128).split(-1, 16).split(-2, 4).split(-2, 2)  # [I0/128, 2, 2, 2, 16]
    tp.propagate_transforms(tv3)
    for tv in (tv1, tv2):  # tv0->computeAt(tv3, 1)
        tv.inline_at(1)
    tv2.inline_at(-1)  # tv2->computeAt(tv3, -1)
    tv3.axis(2).parallelize(P.Unroll)
    tv3.axis(4).parallelize(P.TIDx)
    tv2.circular_buffer(stages, prefetch)
    return fusion


def single_dim_vectorize(stages, prefetch):
    with tp.Fusion("single_dim_vectorize") as fusion:
        tv0 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        tv1 = tp.set(tv0)
        tv2 = tp.add(tv1, 1.0)
        fusion.add_output(tv2)
    fusion.assume("T0_0 % 4 == 0")  # nvFuser checks at launch that the vector divides the extent (200)
    tv2.split(-1, 128).split(-1, 4)  # [I0/128, 32, 4]
    tp.propagate_transforms(tv2)
    tv1.inline_at(2)  # tv1->computeAt(tv2, 2)
    tv2.axis(-2).parallelize(P.TIDx)
    tv1.axis(-1).parallelize(P.Vectorize)
    tv1.circular_buffer(stages, prefetch)
    return fusion


def multiple_tensors(stages, prefetch):
    with tp.Fusion("multiple_tensors") as fusion:
        tv0 = tp.make_contig_tensor(1)
        tv1 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        fusion.add_input(tv1)
        tv2 = tp.set(tv0)
        tv3 = tp.set(tv1)
        tv4 = tp.add(tv2, tv3)
        fusion.add_output(tv4)
    tv4.split(0, 32).split(0, 4)  # [I0/32/4, 4, 32]
    tp.propagate_transforms(tv4)
    tv2.inline_at(1)  # tv0->computeAt(tv4, 1)
    tv3.inline_at(1)  # tv1->computeAt(tv4, 1)
    tv4.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(tv4)
    tv2.circular_buffer(stages, prefetch)
    tv3.circular_buffer(stages, prefetch)
    return fusion


def nested_tensors(stages, prefetch):
    """Nested circular buffers: gmem -> smem over the outer loop, smem -> registers inside."""
    with tp.Fusion("nested_tensors") as fusion:
        tv0 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        out = tp.add(tv0, 1.0)
        fusion.add_output(out)
    tv2 = tv0.cache_after()
    tv3 = tv2.cache_after()
    out.split(0, 32).split(0, 4)  # [I0/32/4, 4, 32]
    tp.propagate_transforms(out)
    tv2.set_memory_type(SHARED)
    tv2.inline_at(1)  # tv2->computeAt(out, 1)
    tv3.inline_at(-1)  # tv3->computeAt(out, -1)
    out.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(out)
    tv2.circular_buffer(stages, prefetch)
    tv3.circular_buffer(stages, prefetch)
    return fusion


def smem_block_gemm_cache(stages, prefetch):
    """FusionSmemBlockGemmCache with both operands circular-buffered in smem and in registers."""
    bsx, tsx = 32, 8
    with tp.Fusion("smem_block_gemm_cache") as fusion:
        tv0 = tp.make_tensor(["M", "K"])  # makeSymbolicTensor(2); the extents nvFuser maps, named (item 7)
        tv1 = tp.make_tensor(["K", "N"])
        tv2 = tp.broadcast(tv0, [False, False, True])
        tv3 = tp.broadcast(tv1, [True, False, False])
        tv4 = tp.mul(tv2, tv3)
        tv5 = tp.sum(tv4, [1])
        fusion.add_input(tv0)
        fusion.add_input(tv1)
        fusion.add_output(tv5)
    fusion.assume(f"N <= 65535 * {bsx}")  # gridDim.y = ceil(N / 32): nvFuser checks it at launch
    tv6 = tv5.cache_before()
    tv0_cache_local = tv0.cache_after()
    tv1_cache_local = tv1.cache_after()
    tv0_cache_smem = tv0.cache_after()
    tv1_cache_smem = tv1.cache_after()
    tv6.split(-1, bsx).split(-1, tsx).split(1, bsx).split(0, bsx).split(1, tsx)
    # [M/BSX, BSX/TSX, TSX, K/BSX, BSX, N/BSX, BSX/TSX, TSX]
    tv6.reorder({4: 7, 7: 6, 6: 5, 2: 4, 1: 3, 3: 2, 5: 1, 0: 0})
    # [M/BSX, N/BSX, K/BSX, BSX/TSX, BSX/TSX, TSX, TSX, BSX]
    tv6_rf = tv6.rfactor([-1])
    tp.propagate_transforms(tv6_rf)
    # tv0->computeAt(tv6, 3), tv1->computeAt(tv6, 3): the [M, K] and [K, N] caches share tv6's loops 0 and 2
    # (their consumers' broadcast axis between is passed over: getMatchedLeafPosWithoutReplayPasC)
    for tv in (tv0_cache_smem, tv0_cache_local, tv1_cache_smem, tv1_cache_local):
        tv.inline_at(2)
    for tv in (tv2, tv3, tv4, tv6_rf):
        tv.inline_at(3)
    tv6_rf.inline_at(-2)  # tv6_rf->computeAt(tv6, -1): all of tv6's axes (tv6_rf's last is rBSX)
    for tv in (tv0_cache_local, tv2, tv1_cache_local, tv3, tv4):
        tv.inline_at(-1)  # tv*_cache_local->computeAt(tv6_rf, -1)
    tv0_cache_smem.set_memory_type(SHARED)
    tv1_cache_smem.set_memory_type(SHARED)
    tv5.axis(0).parallelize(P.BIDx)
    tv5.axis(1).parallelize(P.BIDy)
    tv5.axis(-3).parallelize(P.TIDy)
    tv5.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(tv5)
    tv0_cache_local.circular_buffer(stages, prefetch)
    tv1_cache_local.circular_buffer(stages, prefetch)
    tv0_cache_smem.circular_buffer(stages, prefetch)
    tv1_cache_smem.circular_buffer(stages, prefetch)
    return fusion


def vector(stages, prefetch):
    """Vectorized reads of circular-buffered registers feeding a reduction."""
    with tp.Fusion("vector") as fusion:
        tv0 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        tv1 = tp.add(tv0, 1.0)
        tv2 = tp.sum(tv1, [0])
        fusion.add_output(tv2)
    fusion.assume("T0_0 % 4 == 0")  # nvFuser checks at launch that the vector divides the extent (200)
    tv2c = tv2.cache_before()
    tv1cw = tv1.cache_after()
    tv1cr = tv1cw.cache_after()
    tv1cw.split(-1, 32)
    tv1cr.split(-1, 32).split(-1, 4)
    tv1cr.axis(-1).parallelize(P.Vectorize)
    tv1cw.inline_at(1)  # tv1cw->computeAt(tv1cr, 1)
    tv1.split(-1, 32)  # tv0->computeAt(tv1cw, -1) replays tv1cw's split onto tv1
    tv1.inline_at(-1)
    tv2c.split(-1, 32).split(-1, 4)
    tv1cr.inline_at(2)  # tv1cr->computeAt(tv2c, 2)
    tv1cw.set_memory_type(SHARED)
    tv1cr.circular_buffer(stages, prefetch)
    return fusion


def cp_async_tile(stages, prefetch, *, op, vectorize, reader_split):
    """CpAsync1 / CpAsync2 / NoSync: a 33 x 48 tile's rows copied into smem (cp.async or a plain
    copy), circular-buffered over the rows and read by threads in another order."""
    m, n = 33, 48
    with tp.Fusion("cp_async_tile") as fusion:
        tv0 = tp.make_contig_concrete_tensor([m, n])
        tv1 = tp.make_contig_concrete_tensor([m, n])
        fusion.add_input(tv0)
        fusion.add_input(tv1)
        tv2 = tp.add(tv0, tv1)
        fusion.add_output(tv2)
    tv0_shared = tv0.cache_after(op)
    tv0_shared.set_memory_type(SHARED)
    tv0_shared.inline_at(1)  # tv0->computeAt(tv2, 1)
    tv0_shared.split(1, 4)
    if vectorize:
        tv0_shared.axis(-1).parallelize(P.Vectorize)
    tv0_shared.axis(-2).parallelize(P.TIDx)
    tv2.split(1, reader_split)
    tv2.axis(-1 if vectorize else -2).parallelize(P.TIDx)
    tv0_shared.circular_buffer(stages, prefetch)
    return fusion


def run_copy(shape):
    """A run checking the copy of one input of `shape`, bit for bit."""
    def run(kernel, torch):
        t0 = torch.randn(*shape, device="cuda")
        (out,) = kernel.run(t0)
        assert torch.equal(out, t0)
    return run


def run_add(sizes):
    """A run checking out = t0 + t1 for two 1-D inputs of each size (one extent: the add unifies them)."""
    def run(kernel, torch):
        for n in sizes:
            t0, t1 = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
            (out,) = kernel.run(t0, t1)
            torch.testing.assert_close(out, t0 + t1)
    return run


def run_matmul(shapes, *, broadcast_inputs=False):
    """A run checking out = t0 @ t1 for t0 [M, K], t1 [K, N] at each (M, K, N); `broadcast_inputs`:
    t0 [M, K, 1], t1 [1, K, N] and out = (t0 * t1).sum(1) (MatmulWithBroadcastedInput)."""
    def run(kernel, torch):
        for m, k, n in shapes:
            t0, t1 = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
            if broadcast_inputs:
                t0, t1 = t0.unsqueeze(2), t1.unsqueeze(0)
            (out,) = kernel.run(t0, t1)
            expected = (t0 * t1).sum(1) if broadcast_inputs else t0 @ t1
            torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-3)
    return run


def run_binary_concrete(kernel, torch):
    t0 = torch.randn(33, 48, device="cuda")
    t1 = torch.randn(33, 48, device="cuda")
    (out,) = kernel.run(t0, t1)
    torch.testing.assert_close(out, t0 + t1)


def non_tma_cases() -> list[Case]:
    cases = []

    def add(test, stages, prefetch, build, verdict=VALID, **kw):
        cases.append(Case(f"CircularBufferingTest.{test}/{prefetch_name(stages, prefetch)}",
                          lambda: build(stages, prefetch), verdict, **kw))

    short = ("nvFuser throws at launch (validateCircularBuffering): the circular loop of {n} iterations is "
             "shorter than {s} stages; tileproof predicates the prologue, the run checks the values")
    plus2 = run_unary(lambda t: t + 2, [1000, 999, 4])
    plus1 = run_unary(lambda t: t + 1, [1000, 999, 4, 1])
    plus1_by4 = run_unary(lambda t: t + 1, [1000, 200, 4])  # sizes its vectors of 4 divide

    item1_tidx = ("item 1: rejected with PIPELINE-STAGES: the axis left of the compute-at position is TIDx; "
                  "nvFuser takes the innermost serial loop left of it")
    for s, p in ((2, -1), (5, 0), (9, 3)):
        kw = {"differs": short.format(n=8, s=9)} if s == 9 else {}
        for test, shared in (("SingleDim1", True), ("SingleDim2", False)):
            add(test, s, p, lambda s, p, shared=shared: single_dim(s, p, shared=shared), THROWS if s == 9 else VALID,
                run=plus1, **kw)
    for s, p in ((2, -2), (5, 2)):
        add("SingleDim3", s, p, single_dim3, THROWS if s > 4 else VALID, run=plus2,
            **({"differs": short.format(n=4, s=s)} if s > 4 else {}))
        cases.append(Case(f"CircularBufferingTest.SingleDim3/{prefetch_name(s, p)}/producer_inside_loop",
                          lambda s=s, p=p: single_dim3(s, p, producer_inside=True), THROWS,
                          codes=("PIPELINE-STAGES",)))
        add("SingleDimUnswitch1", s, p, single_dim_unswitch1, THROWS if s > 4 else VALID, run=plus2,
            **({"differs": short.format(n=4, s=s)} if s > 4 else {}))
        add("SingleDimUnswitch2", s, p, single_dim_unswitch2, THROWS if s > 4 else VALID, run=plus1,
            **({"differs": short.format(n=4, s=s)} if s > 4 else {}))
        add("SingleDimUnroll", s, p, single_dim_unroll, THROWS if s > 2 else VALID, run=plus2,
            **({"differs": short.format(n=2, s=s)} if s > 2 else {}))
        add("SingleDimVectorize", s, p, single_dim_vectorize, THROWS if s > 2 else VALID, run=plus1_by4,
            **({"differs": short.format(n=2, s=s)} if s > 2 else {}))
        add("NestedTensors", s, p, nested_tensors, THROWS if s > 4 else VALID, run=plus1,
            **({"differs": short.format(n=4, s=s)} if s > 4 else {}))
    for s, p in ((2, -1), (9, 0)):
        add("Vector", s, p, vector, THROWS if s > 8 else VALID,
            run=run_unary(lambda t: (t + 1).sum(0), [200, 1000, 36]),
            **({"differs": short.format(n=7, s=s)} if s > 8 else {}))
    for s, p in ((2, -1), (5, 1)):
        add("MultipleTensors", s, p, multiple_tensors, run=run_add([1000, 999, 128, 1]))
    add("SmemBlockGemmCache", 2, -1, smem_block_gemm_cache,
        run=run_matmul([(154, 45, 1524), (64, 64, 64), (33, 7, 100)]))  # the TEST's shape, whole tiles, ragged
    for s, p in ((2, -1), (5, -2), (9, 0)):
        add("CpAsync1", s, p, lambda s, p: cp_async_tile(s, p, op=tp.LoadStoreOpType.CpAsync, vectorize=True,
                                                         reader_split=12), run=run_binary_concrete)
        add("CpAsync2", s, p, lambda s, p: cp_async_tile(s, p, op=tp.LoadStoreOpType.CpAsync, vectorize=False,
                                                         reader_split=4), run=run_binary_concrete)
        add("NoSync", s, p, lambda s, p: cp_async_tile(s, p, op=tp.LoadStoreOpType.Set, vectorize=False,
                                                       reader_split=4), run=run_binary_concrete)
    return cases


# -- TmaCircularBufferingTest (Hopper): TMA loads into circular-buffered shared tiles ------------

TYPES = {  # nvFuser's printed CircularBufferType -> tileproof's
    "Pipelined": lambda: tp.Pipelined(),
    "PipelinedMBarrierForWAR": lambda: tp.Pipelined(uses_mbarrier_for_war=True),
    "WarpSpecializedOnTIDxRegisterSharing_NoneStageSlicePosition_None": lambda: tp.WarpSpecialized(P.TIDx),
    "WarpSpecializedOnTIDyRegisterSharing_NoneStageSlicePosition_None": lambda: tp.WarpSpecialized(P.TIDy),
    "WarpSpecializedOnTIDxRegisterSharing_64_168StageSlicePosition_None":
        lambda: tp.WarpSpecialized(P.TIDx, num_registers=(64, 168)),
    "WarpSpecializedOnTIDyRegisterSharing_64_168StageSlicePosition_None":
        lambda: tp.WarpSpecialized(P.TIDy, num_registers=(64, 168)),
}


def load_type(name: str):
    """nvFuser's LoadStoreOpType by name: CpAsyncBulkTensorTile is tileproof's TMA; CpAsyncBulk
    (1-D bulk copies) has no tileproof name yet (raises AttributeError)."""
    return TMA if name == "CpAsyncBulkTensorTile" else getattr(tp.LoadStoreOpType, name)


def tma_single_dim(stages, prefetch, cb_type, op, *, outer_split=None):
    """SingleDim; outer_split=Unroll / Unswitch: SingleDimUnroll / SingleDimUnswitch (an outer
    split by 4 of the tile loop, on that parallel type)."""
    with tp.Fusion("tma_single_dim") as fusion:
        tv0 = tp.make_contig_tensor(1)
        fusion.add_input(tv0)
        tv1 = tp.exp(tv0)
        fusion.add_output(tv1)
    tv2 = tv0.cache_after(load_type(op))
    tv2.set_memory_type(SHARED)
    tv1.split(-1, 256)  # [M/bid, bid]
    if outer_split is not None:
        tv1.split(0, 4)  # [M/bid/unroll, unroll, bid]
    tp.propagate_transforms(tv1)
    tp.inline_all_at(tv1, 1)
    if outer_split is not None:
        tv1.axis(1).parallelize(getattr(P, outer_split))
    tv2.axis(-1).parallelize(P.Bulk)
    tv1.axis(-1).parallelize(P.TIDx)
    tv2.circular_buffer(stages, prefetch, TYPES[cb_type]())
    return fusion


def tma_multi_dim(stages, prefetch, cb_type, op):
    with tp.Fusion("tma_multi_dim") as fusion:
        tv0 = tp.make_contig_tensor(2)
        fusion.add_input(tv0)
        tv1 = tp.exp(tv0)
        fusion.add_output(tv1)
    fusion.assume("T0_1 % 4 == 0")  # TMA's row stride, a multiple of 16 bytes: nvFuser checks it at launch
    tv2 = tv0.cache_after(TMA)
    tv2.set_memory_type(SHARED)
    tv1.split(-1, 256).split(0, 4).reorder({-2: -3})  # [M/bod, N/bid, bod, bid]
    tp.propagate_transforms(tv1)
    tp.inline_all_at(tv1, 2)
    tv1.merge(-2, -1).split(-1, 256)  # [M/bod, N/bid, (bod * bid) / 256, 256]
    tv1.axis(0).parallelize(P.BIDx)
    tv1.axis(-1).parallelize(P.TIDx)
    tv2.axis(0).parallelize(P.BIDx)
    tv2.axis(-1).parallelize(P.Bulk)
    tv2.axis(-2).parallelize(P.Bulk)
    tv2.circular_buffer(stages, prefetch, TYPES[cb_type]())
    return fusion


def tma_pointwise(stages, prefetch, cb_type, op, *, output_exp=False):
    """Pointwise: out = a + b, both TMA-loaded and circular-buffered over the tiles of a row;
    output_exp: BarSyncWarpSpecializedPointwise's exp(a + b) with a + b in shared memory."""
    with tp.Fusion("tma_pointwise") as fusion:
        tv0 = tp.make_tensor(["M", "N"], contiguity=True)  # the extents nvFuser maps, named (item 7)
        tv1 = tp.make_tensor(["M", "N"], contiguity=True)
        fusion.add_input(tv0)
        fusion.add_input(tv1)
        tv2 = tp.add(tv0, tv1)
        out = tp.exp(tv2) if output_exp else tv2
        fusion.add_output(out)
    fusion.assume("N % 4 == 0")  # TMA's row stride, a multiple of 16 bytes: nvFuser checks it at launch
    if output_exp:
        tv2.set_memory_type(SHARED)
    tv3 = tv0.cache_after(load_type(op))
    tv3.set_memory_type(SHARED)
    tv4 = tv1.cache_after(load_type(op))
    tv4.set_memory_type(SHARED)
    out.split(-1, 256)  # [M, N/bid, bid]
    tp.propagate_transforms(out)
    tp.inline_all_at(tv2, 2)
    for tv in (tv3, tv4):
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(2).parallelize(P.Bulk)
        tv.circular_buffer(stages, prefetch, TYPES[cb_type]())
    out.split(-1, 256)
    out.axis(0).parallelize(P.BIDx)
    out.axis(-1).parallelize(P.TIDx)
    return fusion


def tma_inner_reduction(stages, prefetch, cb_type, op):
    with tp.Fusion("tma_inner_reduction") as fusion:
        tv0 = tp.make_contig_tensor(2)
        fusion.add_input(tv0)
        fusion.assume("T0_1 % 4 == 0")  # TMA's row stride, a multiple of 16 bytes: nvFuser checks it at launch
        # the stages' rows fit in shared memory: nvFuser sizes it at launch and refuses a launch past the capacity
        fusion.assume("T0_1 <= 8192")
        tv1 = tp.sum(tv0, [-1])
        fusion.add_output(tv1)
    tv2 = tv0.cache_after(load_type(op))
    tv2.set_memory_type(SHARED)
    tv1.split(0, 4).split(-1, 256)  # [M/epc, epc, N/bid, bid]
    tp.propagate_transforms(tv1)
    tv1.merge(-2, -1).split(-1, 256)  # [M/epc, epc, N/tdx, tdx]
    tv1.axis(0).parallelize(P.BIDx)
    tv1.axis(-1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    tv2.axis(0).parallelize(P.BIDx)
    tv2.axis(-1).parallelize(P.Bulk)
    tv2.circular_buffer(stages, prefetch, TYPES[cb_type]())
    return fusion


def tma_outer_reduction(stages, prefetch, cb_type, op):
    with tp.Fusion("tma_outer_reduction") as fusion:
        tv0 = tp.make_contig_tensor(2)
        fusion.add_input(tv0)
        fusion.assume("T0_1 % 4 == 0")  # TMA's row stride, a multiple of 16 bytes: nvFuser checks it at launch
        tv1 = tp.sum(tv0, [0])
        fusion.add_output(tv1)
    tv2 = tv0.cache_after(load_type(op))
    tv2.set_memory_type(SHARED)
    tv1.split(1, 256).reorder({1: 0})  # [N/bid, M, bid]
    tp.propagate_transforms(tv1)
    tv1.axis(0).parallelize(P.BIDx)
    tv1.axis(2).parallelize(P.TIDx)
    tv2.axis(0).parallelize(P.BIDx)
    tv2.axis(2).parallelize(P.Bulk)
    tp.inline_most(fusion)
    tv2.circular_buffer(stages, prefetch, TYPES[cb_type]())
    return fusion


def tma_matmul(stages, prefetch, cb_type, op, *, broadcast_inputs=False):
    """Matmul (MatmulWithBroadcastedInput: the operands declared [M, K, 1] and [1, K, N]): a
    multiply-sum of TMA-loaded tiles, register copies of them circular-buffered too, the output
    stored by TMA."""
    bsx, tsx, tsy = 64, 32, 16
    with tp.Fusion("tma_matmul") as fusion:
        if broadcast_inputs:
            tv0 = tp.make_tensor(["M", "K", 1], contiguity=True)  # the extents nvFuser maps, named (item 7)
            tv1 = tp.make_tensor([1, "K", "N"], contiguity=True)
            fusion.add_input(tv0)
            fusion.add_input(tv1)
            a, b = tv0, tv1
        else:
            tv0 = tp.make_tensor(["M", "K"], contiguity=True)  # the extents nvFuser maps, named (item 7)
            tv1 = tp.make_tensor(["K", "N"], contiguity=True)
            fusion.add_input(tv0)
            fusion.add_input(tv1)
            a, b = tp.broadcast(tv0, [False, False, True]), tp.broadcast(tv1, [True, False, False])
        tv5 = tp.sum(tp.mul(a, b), [1])
        fusion.add_output(tv5)
    fusion.assume("K % 4 == 0")  # TMA's row strides, multiples of 16 bytes: nvFuser checks them at launch
    fusion.assume("N % 4 == 0")
    fusion.assume(f"N <= 65535 * {bsx}")  # gridDim.y = ceil(N / 64): nvFuser checks it at launch
    tv6 = tv5.cache_before(TMA)
    tv6.set_memory_type(SHARED)
    tv0_cache_local = tv0.cache_after()
    tv1_cache_local = tv1.cache_after()
    tv0_cache_smem = tv0.cache_after(TMA)
    tv1_cache_smem = tv1.cache_after(TMA)
    tv0_cache_smem.set_memory_type(SHARED)
    tv1_cache_smem.set_memory_type(SHARED)
    tv6.split(-1, bsx).split(-1, tsx).split(1, bsx).split(0, bsx).split(1, tsy)
    tv6.reorder({4: 7, 7: 6, 6: 4, 2: 5, 1: 3, 3: 2, 5: 1, 0: 0})
    # [M/BSX, N/BSX, K/BSX, BSX/TSY, BSX/TSX, TSY, TSX, BSX]
    tv6_rf = tv6.rfactor([-1])
    tp.propagate_transforms(tv6_rf)
    tv5.axis(0).parallelize(P.BIDx)
    tv5.axis(1).parallelize(P.BIDy)
    tv5.axis(-2).parallelize(P.TIDy)
    tv5.axis(-1).parallelize(P.TIDx)
    tp.parallelize_all_like(tv5)
    bulk_a, bulk_b = ((-5, -3, -1), (-4, -2, -1)) if broadcast_inputs else ((-3, -2, -1), (-3, -2, -1))
    for i in bulk_a:
        tv0_cache_smem.axis(i).parallelize(P.Bulk)
    for i in bulk_b:
        tv1_cache_smem.axis(i).parallelize(P.Bulk)
    for i in (-4, -3, -2, -1):
        tv5.axis(i).parallelize(P.Bulk)
    tp.inline_most(fusion)
    tv0_cache_local.circular_buffer(stages, prefetch)
    tv1_cache_local.circular_buffer(stages, prefetch)
    tv0_cache_smem.circular_buffer(stages, prefetch, TYPES[cb_type]())
    tv1_cache_smem.circular_buffer(stages, prefetch, TYPES[cb_type]())
    return fusion


def elect_sync_compatibility(shape=None):
    """A 1-D TMA box whose issuing loop is inside a TIDx axis of 4: nvFuser's ElectSync predicate
    (one thread issues) cannot hold threadIdx.x < 4 (it throws). `shape`: concrete sizes."""
    with tp.Fusion("elect_sync_compatibility") as fusion:
        inp = tp.make_contig_tensor(3) if shape is None else tp.make_contig_concrete_tensor(shape)
        fusion.add_input(inp)
        out = tp.set(inp)
        fusion.add_output(out)
    smem_cache = inp.cache_after(TMA)
    smem_cache.set_memory_type(SHARED)
    for tv in (smem_cache, out):
        tv.merge(0).merge(0).split(0, 256).split(0, 4).split(0, 2)  # [I/256/4/2, 2, 4, 256]
        tv.axis(0).parallelize(P.BIDx)
    smem_cache.axis(2).parallelize(P.TIDx)
    smem_cache.axis(3).parallelize(P.Bulk)
    out.axis(3).parallelize(P.TIDx)
    tp.inline_all_at(out, 2)
    smem_cache.circular_buffer(2)
    return fusion


def register_sharing_pointwise_custom():
    """RegisterSharingCircularBufferingPointwiseCustom: the Pointwise schedule, warp-specialized on
    TIDx with setmaxnreg 64 / 192."""
    return tma_pointwise(4, 1, "WarpSpecializedOnTIDxRegisterSharing_64_192", "CpAsyncBulkTensorTile")


TYPES["WarpSpecializedOnTIDxRegisterSharing_64_192"] = lambda: tp.WarpSpecialized(P.TIDx, num_registers=(64, 192))


def register_sharing_cta(bdim, ws_on, *, dynamic=False):
    """TmaRegisterSharing.CtaShapeShmoo (dynamic: TmaRegisterSharingDynamicShapesExpectFail): a
    CpAsyncBulk copy of each block's rows, squared by a bdim.x x bdim.y x bdim.z block,
    warp-specialized on `ws_on` with the register counts the TEST computes."""
    gdimx = 2
    with tp.Fusion("register_sharing_cta") as fusion:
        tv0 = tp.make_contig_tensor(2)
        fusion.add_input(tv0)
        tv1 = tp.set(tv0, op=tp.LoadStoreOpType.CpAsyncBulk)
        tv1.set_memory_type(SHARED)
        tv2 = tp.mul(tv1, tv1)
        fusion.add_output(tv2)
    bx, by, bz = bdim
    tv2.split(0, gdimx, inner_split=False).split(2, bx).split(2, by)
    if not dynamic:
        tv2.split(2, bz)
    tv2.axis(-1).parallelize(P.TIDx)
    tv2.axis(-2).parallelize(P.TIDy)
    tv2.axis(-3).parallelize(P.TIDz)
    tv2.axis(0).parallelize(P.BIDx)
    tv1.split(0, gdimx, inner_split=False)
    tv1.axis(0).parallelize(P.BIDx)
    tv1.axis(2).parallelize(P.Bulk)
    tv1.inline_at(2)
    tv1.circular_buffer(2, 1, tp.WarpSpecialized(ws_on, num_registers=_shmoo_registers(bdim, ws_on)))
    # nvFuser checks at launch what tileproof proves from these: a bulk copy of a multiple of 16 bytes, and
    # the two stages of a row in shared memory
    fusion.assume("T0_1 % 4 == 0")
    fusion.assume("T0_1 <= 16384")
    return fusion


def _shmoo_other_threads(bdim, ws_on) -> int:
    """getOtherActiveThreads: the block's threads per index of the warp-specialized axis."""
    bx, by, bz = bdim
    return {P.TIDx: by * bz, P.TIDy: bx * bz, P.TIDz: bx * by}[ws_on]


def _shmoo_registers(bdim, ws_on):
    """The setmaxnreg counts CtaShapeShmoo computes (getNumRegisters): the consumers take 8 more than
    the registers a thread gets at the padded block's size, the 128-thread producer gives up 8 per
    consumer thread per producer thread; none where the producer's padding along TIDx is under a
    warp (the TEST's `getTmaPadThreads(ws_pt, bdim) < 32`)."""
    others = _shmoo_other_threads(bdim, ws_on)
    if ws_on is P.TIDx and 128 // others < 32:
        return None
    computation = bdim[0] * bdim[1] * bdim[2]
    initial = registers_per_thread(computation + 128)
    return initial - computation // 128 * 8, initial + 8


WS_NONE = "RegisterSharing_NoneStageSlicePosition_None"
WS_REGS = "RegisterSharing_64_168StageSlicePosition_None"
TMA_PARAMS = [  # instantiations of nvFuser's tmaCircularBufferingParams: (stages, prefetch, M, N, type, op)
    (4, -1, 128, 1024, "Pipelined", "CpAsyncBulkTensorTile"),
    (2, -1, 1024, 1024, "Pipelined", "CpAsyncBulkTensorTile"),
    (4, 0, 128, 1024, "PipelinedMBarrierForWAR", "CpAsyncBulkTensorTile"),
    (4, -1, 500, 1024, "WarpSpecializedOnTIDx" + WS_NONE, "CpAsyncBulkTensorTile"),
    (4, -2, 128, 2048, "WarpSpecializedOnTIDy" + WS_NONE, "CpAsyncBulkTensorTile"),
    (2, -1, 128, 2048, "WarpSpecializedOnTIDy" + WS_NONE, "CpAsyncBulk"),
]


def tma_name(stages, prefetch, m, n, cb_type, op) -> str:
    """gtest's parameter name of nvFuser's tmaName."""
    return f"{prefetch_name(stages, prefetch)}_M_{m}_N_{n}_{cb_type}_{op}"


_PAD_GAP = ("item 3 (follow-up): nvFuser pads the warp-specialized axis by 128 / (the other axes' threads) indices "
            "also under thread axes above it, so its 128-thread producer lies at the end of each of their rows; "
            "tileproof accepts a producer only as whole warpgroups after the consumers (WS-ROLES). ")
# why each instance stays refused (nvFuser's kernels run here without a GPU run either way)
_MIXED_WARPS = ("Here bdimx 48 puts producer and consumer threads in 8 of the 12 warps: the consumers' bar.sync "
                "(barrier.sync.aligned: every thread of a warp executes it) and its count of 32 per arriving warp "
                "do not hold there, so accepting needs consumer roles without block barriers and warp-collective "
                "ops, proved as such; nvFuser gives no setmaxnreg here")
_MIXED_WARPGROUPS = ("Here the producer is whole warps (4, 5, 10, 11) but shares warpgroups 1 and 2 with consumer warps, "
                     "and nvFuser's setmaxnreg (152 / 176) runs .dec and .inc in one warpgroup, where PTX requires "
                     "the same setmaxnreg by all its warps (.sync.aligned). A probe on an H200 (driver 580.159) ran a 384-thread "
                     "block with .dec in warps 4, 5, 10, 11 and .inc in the others to completion with the right values, so "
                     "the hardware does not show nvFuser wrong there; tileproof keeps to the ISA's requirement")
SHMOO_GAPS = {((32, 4, 2), P.TIDx): _PAD_GAP + _MIXED_WARPS, ((32, 4, 2), P.TIDy): _PAD_GAP + _MIXED_WARPGROUPS,
              ((128, 2, 1), P.TIDx): _PAD_GAP + _MIXED_WARPGROUPS}

WS_256 = ("nvFuser refuses a producer beside more than 128 threads of the other dimensions (TIDx 256 next to "
          "the TIDy producer); the hardware runs it: the producer index's 256 threads load (one elects), every "
          "consumer thread releases each stage after its reads, and the values are exact on an H200 "
          "(tests/gpu/test_nvfuser.py)")


def run_2d(reference, shapes, inputs=1):
    """A run checking out = reference(*ts) for `inputs` 2-D inputs at each shape."""
    def run(kernel, torch):
        for shape in shapes:
            ts = [torch.randn(*shape, device="cuda") for _ in range(inputs)]
            (out,) = kernel.run(*ts)
            torch.testing.assert_close(out, reference(*ts), rtol=1e-5, atol=1e-4)
    return run


WS_RUNS = {"SingleDim": run_unary(torch_exp, [4096, 5000, 70001]),
           "SingleDimUnroll": run_unary(torch_exp, [4096, 5000, 70001]),
           "SingleDimUnswitch": run_unary(torch_exp, [4096, 5000, 70001]),
           "MultiDim": run_2d(torch_exp, [(128, 1024), (200, 520), (7, 2052)]),
           "Pointwise": run_2d(lambda a, b: a + b, [(128, 2048), (33, 1028), (3, 260)], inputs=2),
           "OuterReduction": run_2d(lambda a: a.sum(0), [(128, 2048), (300, 1028), (5, 260)]),
           # rows of a multiple of 4 (the TMA row stride) up to 8192 (the assumed shared-memory bound)
           "InnerReduction": run_2d(lambda a: a.sum(-1), [(128, 1024), (500, 1028), (7, 8192), (3, 4)])}


def tma_cases() -> list[Case]:
    cases = []
    for params_ in TMA_PARAMS:
        stages, prefetch, m, n, cb_type, op = params_
        name = tma_name(*params_)
        ws_y = "OnTIDy" in cb_type
        bulk_1d = op == "CpAsyncBulk"

        def add(test, build, verdict):
            if verdict == THROWS:  # TIDx 256 next to a TIDy producer: nvFuser throws at compile
                if bulk_1d:
                    cases.append(Case(f"TmaCircularBufferingTest.{test}/{name}", build, THROWS,
                                      codes=("BULK-COPY-BOUNDS",)))
                    return
                cases.append(Case(f"TmaCircularBufferingTest.{test}/{name}", build, THROWS, run=WS_RUNS[test],
                                  differs=WS_256))
                return
            # the TEST's shape (K = 1024), whole tiles, ragged tiles (K % 4 == 0, N % 4 == 0 assumed)
            matmul_shapes = [(m, 1024, n), (64, 64, 64), (100, 68, 132)]
            run = (run_unary(torch_exp, [4096, 5000, 70001])
                   if test == "SingleDimUnswitch" or (test.startswith("SingleDim") and "MBarrierForWAR" in cb_type)
                   else WS_RUNS.get(test) if test == "InnerReduction" or cb_type.startswith("WarpSpecializedOnTIDx")
                   else run_matmul(matmul_shapes) if test == "Matmul"
                   else run_matmul(matmul_shapes, broadcast_inputs=True) if test == "MatmulWithBroadcastedInput"
                   else None)
            cases.append(Case(f"TmaCircularBufferingTest.{test}/{name}", build, VALID, run=run))

        # TIDx 256 next to a TIDy producer: more than 128 other threads, nvFuser throws
        verdict_256 = THROWS if ws_y else VALID
        for test, outer in (("SingleDim", None), ("SingleDimUnroll", "Unroll"), ("SingleDimUnswitch", "Unswitch")):
            add(test, lambda p=params_, o=outer: tma_single_dim(*p[:2], *p[4:], outer_split=o), verdict_256)
        if not bulk_1d:  # nvFuser skips CpAsyncBulk: it loads 1-D boxes only
            add("MultiDim", lambda p=params_: tma_multi_dim(*p[:2], *p[4:]), verdict_256)
        add("Pointwise", lambda p=params_: tma_pointwise(*p[:2], *p[4:]), verdict_256)
        add("InnerReduction", lambda p=params_: tma_inner_reduction(*p[:2], *p[4:]), verdict_256)
        add("OuterReduction", lambda p=params_: tma_outer_reduction(*p[:2], *p[4:]), verdict_256)
        if not bulk_1d and "OnTIDx" not in cb_type:  # nvFuser skips both
            add("Matmul", lambda p=params_: tma_matmul(*p[:2], *p[4:]), VALID)
            add("MatmulWithBroadcastedInput", lambda p=params_: tma_matmul(*p[:2], *p[4:], broadcast_inputs=True),
                VALID)
    cases.append(Case("NVFuserTest.ElectSyncCompatibility", elect_sync_compatibility, THROWS,
                      codes=("TMA-COORD-RANGE",)))
    for shape in ([300, 300, 300], [64, 64, 64], [8, 8, 512]):
        cases.append(Case(f"NVFuserTest.ElectSyncCompatibility/{'x'.join(map(str, shape))}",
                          lambda shape=shape: elect_sync_compatibility(shape), THROWS, run=run_copy(shape),
                          differs="nvFuser refuses four issuing threads (its one-thread ElectSync predicate); the "
                                  "hardware takes them: each of the 4 threads arrives with its box's expect-tx on a "
                                  "stage mbarrier counting 4, and the copy is exact on an H200 "
                                  "(tests/gpu/test_nvfuser.py)"))
    cases.append(Case("NVFuserTest.BarSyncWarpSpecializedPointwise",
                      lambda: tma_pointwise(4, 1, "WarpSpecializedOnTIDx" + WS_NONE, "CpAsyncBulkTensorTile",
                                            output_exp=True), VALID,
                      run=run_2d(lambda a, b: (a + b).exp(), [(128, 1024), (33, 1028), (3, 260)], inputs=2)))
    cases.append(Case("NVFuserTest.RegisterSharingCircularBufferingPointwiseCustom",
                      register_sharing_pointwise_custom, VALID,
                      run=run_2d(lambda a, b: a + b, [(128, 1024), (33, 1028), (3, 260)], inputs=2)))
    cases.append(Case("NVFuserTest.TmaRegisterSharingDynamicShapesExpectFail",
                      lambda: register_sharing_cta((32, 4, 2), P.TIDx, dynamic=True), THROWS, codes=("WS-ROLES",)))
    for bdim in ((32, 4, 2), (128, 2, 1), (256, 1, 1)):  # the TEST's instantiations, every (bdim, ws_pt)
        for on in (P.TIDx, P.TIDy, P.TIDz):
            rows = bdim[0] * bdim[1] * bdim[2]  # the TEST's input: [stages x gdimx, the computation threads]
            name = f"TmaRegisterSharing.CtaShapeShmoo/cta_{bdim[0]}_{bdim[1]}_{bdim[2]}_pt_{on.name.lower()}"
            build = lambda b=bdim, o=on: register_sharing_cta(b, o)  # noqa: E731
            if _shmoo_other_threads(bdim, on) > 128:  # "The # active threads in other thread dimensions > 128"
                cases.append(Case(name, build, THROWS, codes=("WS-REGISTERS",)))
            else:
                cases.append(Case(name, build, VALID, run=run_2d(lambda a: a * a, [(4, rows), (6, rows), (4, 2 * rows)]),
                                  gap=SHMOO_GAPS.get((bdim, on))))
    return cases


CASES = non_tma_cases() + tma_cases()


@pytest.mark.parametrize("case", params(CASES))
def test_verdict(case):
    check(case)
