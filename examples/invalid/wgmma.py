"""Hopper wgmma schedules the tensor cores would compute wrong or cannot issue: operand tiles the
descriptor cannot name (WGMMA-SMEM-LAYOUT: unswizzled rows, an M-major A, swizzle patterns that
straddle the warpgroups' tiles), a wgmma on a target without one (MMA-TARGET), accumulators
stored by a warp instead of the warpgroup that holds them (MMA-WARP-COLLECTIVE), operands filled
by thread copies instead of the TMA (MMA-OPERAND-LAYOUT).

Each is the Hopper GEMM recipe (tileproof.recipes.hopper_gemm, as examples/valid/wgmma.py's
hopper_matmul or hopper_matmul_wide's 128 x 256 tile use it) with one thing changed. Its tensors:
T0 = A [M, 1, K] and T1 = B [1, N, K] (global), T2 the accumulators, T3 the output, T4 and T5 A's
and B's shared tiles. The recipe lays each operand's tile out with its Operand's `layout`
(swizzled_box: apply_mma_swizzle_for_tma_load) and loads both with its `load` (the TMA); the
schedules below pass another layout or load (`_hopper_with`), or change a tensor of the fusion
it returns.
"""

import tileproof as tp
from tileproof.recipes import (Cluster, GridOrder, HopperGemmParams, HopperTile, Operand, TmaPipeline, hopper_gemm,
                               swizzled_box, tile_multiples)

P = tp.ParallelType
LS = tp.LoadStoreOpType


def _hopper_with(block=(128, 128), a_tile=swizzled_box, b_tile=swizzled_box, load=LS.TMA):
    """hopper_gemm("M", "N", "K") with a block x 64 tile, A's and B's shared tiles [.., rows, one
    swizzle span of K] laid out by `a_tile` / `b_tile` (functions of the tile and the swizzle
    bytes) and both loaded by `load`; the sizes assumed multiples of the block tile and of 64 (K)."""
    params = HopperGemmParams(tile=HopperTile(m=block[0], n=block[1]), a=Operand(layout=a_tile, load=load),
                              b=Operand(layout=b_tile, load=load))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=block[1])


def _plain_rows(t, swizzle_bytes):
    """The tile as the TMA box loads it without a swizzle: row r's 128 bytes at byte 128 r."""


@tp.schedule(expect=tp.rejected("WGMMA-SMEM-LAYOUT", messages=[
    "T2's wgmma reads A[1, 0] of T4 at byte 16 of its tile", "where the schedule stores byte 128",
    "T2's wgmma reads B[1, 0] of T5 at byte 16 of its tile"]))
def unswizzled_operand_rows():
    """Both operands' tiles as plain K-major rows of 128 bytes: TMA boxes without a swizzle,
    allocated as loaded. An unswizzled descriptor names 8 x 16-byte core matrices, whose row r
    lies 16 bytes after row r - 1, so wgmma reads A[1, 0] at byte 16, where the schedule put
    A[0, 8]; only the 128-byte swizzle lets a descriptor span whole 128-byte rows."""
    return _hopper_with(a_tile=_plain_rows, b_tile=_plain_rows)


def _m_major_unswizzled(t, swizzle_bytes):
    """[.., M (128), K (64)] -> [.., mo (2), K rows (64), mi (64: one 128-byte span of M)]: the
    rows of an M-major A's TMA boxes, not swizzled."""
    t.split(-2, 64)
    t.reorder({-1: -2, -2: -1})


@tp.schedule(expect=tp.rejected("WGMMA-SMEM-LAYOUT", messages=[
    "T2's wgmma reads A[0, 1] of T4 at byte 16 of its tile", "where the schedule stores byte 128",
    "unswizzled MN-major layout of the descriptor"]))
def m_major_a_unswizzled():
    """A stored M-major and its tile laid out so, but without the swizzle and not in core matrices:
    an unswizzled MN-major operand is read as 8 x 16-byte core matrices (8 elements of M, then the
    next K row 16 bytes on), so the hardware would read A[0, 1] 16 bytes after A[0, 0], where this
    tile's plain 128-byte rows of M hold A[8, 0]; A[0, 1] lies 128 bytes on."""
    fusion = _hopper_with(a_tile=_m_major_unswizzled)
    a = fusion.tensor("T0")
    a.set_allocation_domain([a.axis(2), a.axis(1), a.axis(0)], True)  # M innermost in global memory
    fusion.tensor("T4").axis(3).parallelize(P.Serial)  # mo: one box per 64 rows of A
    return fusion


def _rows_of_both_warpgroups(t, swizzle_bytes):
    """[.., M (128), K] -> [.., (r, wg) (128), K]: A's row 64 wg + r at row 2 r + wg of the tile,
    then the swizzled box: each 8-row swizzle pattern holds 4 rows of each warpgroup's tile."""
    t.split(-2, 64)  # [.., wg (2), r (64), K]
    t.reorder({-3: -2, -2: -3})  # [.., r, wg, K]
    t.merge(-3)
    swizzled_box(t, swizzle_bytes)


@tp.schedule(expect=tp.rejected("TMA-SWIZZLE-LAYOUT", "WGMMA-SMEM-LAYOUT", messages=[
    "T2's wgmma operand A (T4) at this instance when M = 128, K = 64, N = 256 starts at byte 128 of its buffer",
    "element (0, 0) at byte 144, element (8, 0) at byte 2192"]))
def swizzle_patterns_across_warpgroups():
    """hopper_matmul_wide's 128 x 256 tile with A's rows interleaved by warpgroup, so that each
    8-row, 1024-byte swizzle pattern holds rows of both warpgroups' 64 x 16 tiles. A descriptor
    names 8-row groups at one stride, each starting on a pattern's row 0; warpgroup 1's tile
    starts on row 1 (and its rows 0 and 8 lie 2048 bytes apart). The TMA's box writes A's rows
    in order, which is not this allocation either (TMA-SWIZZLE-LAYOUT)."""
    return _hopper_with(block=(128, 256), a_tile=_rows_of_both_warpgroups)


@tp.schedule(target="sm_100a", expect=tp.rejected("MMA-TARGET", messages=[
    "MmaMacro.Hopper_64_128_16 is a wgmma, which exists on sm_90a only; sm_100a has none"]))
def hopper_macro_on_sm100a():
    """hopper_matmul verified for sm_100a: wgmma exists on sm_90a only (the `a` in sm_90a is
    the architecture-specific feature set no later GPU inherits): ptxas refuses wgmma.mma_async
    for sm_100a, whose tensor cores take tcgen05.mma (accumulators in tensor memory) instead, an
    instruction tileproof has no MmaMacro for."""
    return _hopper_with()


@tp.schedule(expect=tp.rejected("MMA-ACCUM-LAYOUT", "MMA-WARP-COLLECTIVE", messages=[
    "the kernel must launch exactly 128 threads along TIDx (the warpgroup's threads), and it launches 32",
    "T3 reads T2[16, 0] in lane 0"]))
def accumulators_stored_by_one_warp():
    """The output stored by 32 threads on TIDx, each taking four threads' share of D's fragment
    in a loop. wgmma is issued by the 128 threads of a warpgroup (MMA-WARP-COLLECTIVE), each
    left holding its own part of D in registers: thread t cannot read thread t + 32's registers
    (MMA-ACCUM-LAYOUT)."""
    fusion = _hopper_with()
    out = fusion.tensor("T3")  # [Mo, No, wg, TIDx (128), v]: D's fragment
    out.axis(3).parallelize(P.Serial)
    out.split(3, 32)
    out.axis(4).parallelize(P.TIDx)
    return fusion


def _stored_by_threads(copy):
    """Both tiles filled by the threads by `copy`, 16 bytes each into the TMA's swizzled layout
    (examples/valid/wgmma.py hopper_matmul_operands_stored_by_threads: plain loads and st.shared)."""
    fusion = _hopper_with(load=getattr(LS, copy))
    for name in ("T4", "T5"):
        t = fusion.tensor(name)  # [.., 16, 8 rows, 1, 8 chunks, 8], Bulk: the TMA's box
        for i in t.get_loop_domain()[3:]:
            i.parallelize(P.Serial)
        t.merge(3).merge(3).merge(3).split(3, 128)  # [.., 8, 128, 8]: 16 bytes a thread
        t.axis(4).parallelize(P.TIDx)
        t.axis(5).parallelize(P.Vectorize)
    return fusion


@tp.schedule(params={"copy": ["CpAsync"]}, expect=lambda copy: tp.rejected("MMA-OPERAND-LAYOUT", messages=[
    "T2's operand a (T4) is written by `T4 = CpAsync(T0)`", "T2's operand b (T5) is written by `T5 = CpAsync(T1)`",
    "not on cp.async copies"]))
def operands_copied_by_threads(copy):
    """Both tiles filled by cp.async, 16 bytes a thread into the same swizzled layout. Those
    copies go through the generic proxy and wgmma reads through the async proxy: tileproof
    places the fence.proxy.async after the threads' plain stores (accepted:
    hopper_matmul_operands_stored_by_threads), not after a cp.async wait, so wgmma could read stale bytes."""
    return _stored_by_threads(copy)


@tp.schedule(expect=tp.rejected("PIPELINE-RAW", "PIPELINE-STAGES", messages=[
    "T2 reads T4 in iteration 0 before the copy of that iteration's data",
    "the copy of an iteration would be issued after its reads (PIPELINE-RAW)"]))
def tma_stages_loaded_late():
    """A's and B's tiles circular-buffered over four TMA stages with a prefetch of -1: each
    iteration would load the tile of the iteration before and read its own stage before any
    load of its data, past a wait on a phase the load has not completed. An mbarrier phase,
    waited for by parity, is the only sign that a TMA tile has landed."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256), pipeline=TmaPipeline(stages=4, prefetch=-5))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


def _warp_specialized(spec):
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=spec),
                              grid=GridOrder(group=8))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.rejected("WS-REGISTERS", messages=[
    "after setmaxnreg the block would hold 40 x 128 + 240 x 256 = 66560 registers, more than the 168 x 384 = 64512"]))
def warp_specialized_registers_past_the_pool():
    """hopper_matmul_warp_specialized with num_registers=(40, 240): the block is launched with 168
    registers a thread (384 threads, one block an SM), 64512 in all; the producer gives back
    128 x 128 of them, and the two consumer warpgroups ask for 2 x 128 x 72 more. Their
    setmaxnreg.inc would wait forever (CUTLASS issue #2007's hang)."""
    return _warp_specialized(tp.WarpSpecialized(P.TIDy, num_registers=(40, 240)))


@tp.schedule(expect=tp.rejected("WS-ROLES", "MMA-WARP-COLLECTIVE", messages=[
    "but the block also has threads on TIDy, above it: the producer (the last 64 TIDx indices of each of its rows)"]))
def warp_specialized_on_tidx():
    """The producer as 64 more threads of TIDx (nvFuser pads by 128 / the 2 TIDy rows): threads 128
    to 191 of each row, two halves spread over the block, not a warpgroup after the consumers
    (and the wgmma warpgroups would be launched 192 wide on TIDx)."""
    return _warp_specialized(tp.WarpSpecialized(P.TIDx))


@tp.schedule(expect=tp.rejected("WS-PING-PONG", messages=[
    "ping_pong with 1 consumer index on TIDy: no other warpgroup to take turns with"]))
def ping_pong_with_one_consumer_warpgroup():
    """A 64-row tile has one consumer warpgroup: ping_pong's turns would have no one to pass to."""
    spec = tp.WarpSpecialized(P.TIDy, ping_pong=True)
    params = HopperGemmParams(tile=HopperTile(m=64, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=spec), grid=GridOrder(group=8))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.rejected("WGMMA-INSTRUCTION-REGISTERS", messages=[
    "one Hopper_64_256_16 wgmma of T2 keeps 128 accumulators in each thread's registers",
    "it compiles the kernel for 128 registers a thread (65536 registers over the block's 512 threads)"]))
def three_consumer_warpgroups_of_64_x_256():
    """A 192 x 256 tile: three consumer warpgroups of one m64n256 wgmma each, and the producer,
    512 threads. ptxas compiles the kernel for 128 registers a thread, and one wgmma needs its
    128 accumulators and 26 more at once: NVRTC fails with "Insufficient registers", even with
    num_registers=(24, 160) (the limit is the launch's, not setmaxnreg's). The 192 x 192 tile
    (96 accumulators) compiles."""
    spec = tp.WarpSpecialized(P.TIDy, num_registers=(24, 160))
    params = HopperGemmParams(tile=HopperTile(m=192, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=spec))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, m_multiple=192, n_multiple=256)


def _clustered(along, tensor, specialized=True, n_multiple=256):
    """The warp-specialized (or grouped) 128 x 256 schedule in clusters of two blocks along
    `along`, `tensor` (T4: A's tile, T5: B's) multicast along it."""
    spec = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232)) if specialized else None
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=spec),
                              grid=GridOrder(group=8))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=n_multiple)
    fusion.cluster_dims = (2, 1, 1) if along is P.BIDx else (1, 2, 1)
    next(t for t in fusion.tensors if t.name == tensor).multicast(along)
    return fusion


@tp.schedule(expect=tp.rejected("CLUSTER-MULTICAST", messages=[
    "T4 is multicast along BIDx, but block 0 loads the box at (0, 0) and block 1 of its cluster the box at (0, 128)"]))
def multicast_of_a_tile_each_block_needs():
    """Clusters of two M tiles (blockIdx.x) with A's tile multicast: the first block would write
    its own 128 rows of A into both blocks, and the second block would multiply the wrong rows."""
    return _clustered(P.BIDx, "T4")


@tp.schedule(expect=tp.rejected("CLUSTER-MULTICAST", messages=[
    "the grid's extent along BIDy, 1 when", "N = 256, is not a multiple of the cluster's 2"]))
def cluster_past_the_grid():
    """Clusters of two N tiles (blockIdx.y), A's tile multicast to both: right for every pair,
    but N need only be a multiple of 256, so an odd number of N tiles leaves a block without a
    cluster, and the launch fails. hopper_matmul_warp_specialized_cluster_along_n assumes N a
    multiple of 512."""
    return _clustered(P.BIDy, "T4")


@tp.schedule(expect=tp.rejected("CLUSTER-MULTICAST", messages=[
    "T5 is multicast, but not circular-buffered with tp.WarpSpecialized"]))
def multicast_without_warp_specialization():
    """hopper_matmul_grouped's B multicast in clusters of two: each block's threads refill a stage
    after their own barrier, which does not wait for the other block's reads of it."""
    return _clustered(P.BIDx, "T5", specialized=False)


@tp.schedule(expect=tp.rejected("CLUSTER-MULTICAST", messages=["T5 is multicast along BIDx, but block "]))
def persistent_multicast_across_n_tiles():
    """hopper_matmul_warp_specialized_persistent in clusters of two blocks with B's tile multicast,
    but the tiles in row order (no groups of M tiles): blocks 2c and 2c + 1 compute tiles t and
    t + 1 of one M tile, which need two different N tiles of B, or of which the second lies past
    the last tile and skips the box the first multicasts into it (M = 128, N = 256: one tile)."""
    spec = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=spec),
                              grid=GridOrder(persistent=132), cluster=Cluster(size=2))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)
