"""Hopper matmuls on wgmma: both operands in shared memory (TMA loads, 128-byte swizzle), read by
wgmma.mma_async through matrix descriptors, the accumulators in each warpgroup's registers as
wgmma's D fragment.

Each schedule is the Hopper GEMM recipe (tileproof.recipes.hopper_gemm) with its parameters:
HopperTile (the block tile and its warpgroups), TmaPipeline (stages, prefetch, warp
specialization), GridOrder (groups of M tiles, a persistent grid), Cluster (B multicast),
Epilogue (the output's dtype and path) and Operand (A's and B's majors).
"""

import tileproof as tp
from tileproof.recipes import (Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, Operand, TmaPipeline,
                               hopper_gemm, tile_multiples)

P = tp.ParallelType
WS = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))  # a producer warpgroup, setmaxnreg 40 / 232


@tp.schedule(expect=tp.accepted())
def hopper_matmul():
    """The smallest Hopper schedule: 128 x 128 block tiles of two warpgroups, one 64 x 128 x 16
    wgmma per warpgroup and 16 columns of K, one TMA box of A and of B per 64 columns of K."""
    return tile_multiples(hopper_gemm("M", "N", "K"), 64)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_wide():
    """128 x 256 block tiles: one 64 x 256 x 16 wgmma (128 accumulators a thread) per warpgroup and
    16 columns of K; 48 KiB of shared tiles plus the mbarriers."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted(), params={"block": ["128x128", "128x256"], "prefetch": [2, 3]})
def hopper_matmul_pipelined(block, prefetch):
    """The Hopper schedule with A's and B's tiles circular-buffered over the K loop: four stages,
    `prefetch` TMA loads ahead, one mbarrier per stage (iteration i waits for mbarrier
    i % 4's next phase: PIPELINE-RAW), one barrier per K tile before the refill of a stage
    (PIPELINE-WAR). With prefetch 2 a stage is refilled two iterations after its read, so each
    iteration's wgmma batch stays in flight while the next is issued (wgmma.wait_group 1); with
    prefetch 3 each batch is waited for at once."""
    bm, bn = (int(x) for x in block.split("x"))
    params = HopperGemmParams(tile=HopperTile(m=bm, n=bn), pipeline=TmaPipeline(stages=4, prefetch=prefetch))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=bn)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_grouped():
    """The fastest Hopper schedule of benchmarks/hopper_matmul.py: 128 x 256 block tiles, four TMA
    stages two loads ahead (one wgmma batch in flight), the blocks in groups of 8 M tiles
    (blockIdx.z the group; M need only be a multiple of 128: the last group's blocks past M do
    nothing), D's adjacent column pairs stored 8 bytes at a time."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256), pipeline=TmaPipeline(stages=4, prefetch=2),
                              grid=GridOrder(group=8))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_grouped_war_mbarriers():
    """The grouped schedule with tp.Pipelined(uses_mbarrier_for_war=True): no __syncthreads in the
    K loop. Each warpgroup arrives on stage s's empty mbarrier once its wgmma.wait_group covers
    the batch that read s, and thread 0 waits on it before the TMA refills s: the refill of data
    i + 2 in iteration i waits for the releases of data i - 2, made in iteration i - 1."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, war_mbarriers=True), grid=GridOrder(group=8))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_k_tail():
    """The grouped schedule with K only a multiple of 8 (the TMA's 16-byte row stride): the last
    K tile reaches past K, where the TMA fills the box with zeros (K is a dimension of its
    tensor map, the coordinates past it out of bounds), so the last wgmma batch adds 0 x 0 there
    (REDUCTION-K proves every read past K finds those zeros)."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256), pipeline=TmaPipeline(stages=4, prefetch=2),
                              grid=GridOrder(group=8))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 8, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_m_tiles_in_a_loop():
    """The pipelined schedule with each block looping over the M tiles (blockIdx.x's axis made a
    serial loop): the circular K loop runs once per M tile. Its waits flip a phase bit per stage
    (each run loads every stage as often as it waits for it), and a barrier after the loop, after
    the last wgmma.wait_group, keeps the next tile's prologue from refilling a stage still read."""
    params = HopperGemmParams(pipeline=TmaPipeline(stages=4, prefetch=2))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64)
    for t in fusion.tensors:
        if t.loop and t.loop[0].parallel_type is P.BIDx:
            t.loop[0].parallelize(P.Serial)
    return fusion


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized():
    """The grouped schedule with a producer warpgroup (threadIdx.y == 2) issuing the TMA loads: it
    waits for each stage's empty mbarrier, which both consumer warpgroups arrive on once their
    wgmma batch has read it; the consumers wait for each stage's full mbarrier. setmaxnreg gives
    the producer 40 registers a thread and the consumers 232 (40 x 128 + 232 x 256 = 168 x 384)."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_ping_pong():
    """The warp-specialized schedule with its two consumer warpgroups taking turns at each K step's
    wgmma batch (WarpSpecialized(ping_pong=True)): warpgroup w waits on named barrier 2 + w, issues
    its batch and arrives on the other's; warpgroup 0 goes first, warpgroup 1 passes no turn after
    the last step. WS-PING-PONG proves the barriers balanced for every K and free of deadlock."""
    spec = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232), ping_pong=True)
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=spec), grid=GridOrder(group=8))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_cluster():
    """The warp-specialized schedule with clusters of two blocks along blockIdx.x, two M tiles of
    one N tile: B's tile is loaded once per cluster, by the first block, and multicast into both
    (CLUSTER-MULTICAST proves both blocks would have loaded that box); each consumer warpgroup
    releases a stage in both blocks, whose empty mbarriers count the cluster's four consumer
    warpgroups, so a multicast never refills a stage the other block still reads."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8),
                              cluster=Cluster(size=2))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_cluster_spread():
    """The clustered schedule with B's tile loaded as two boxes of 128 rows, one by each block of
    the cluster and multicast to both (CUTLASS's split of a multicast tile): each block's full
    mbarrier counts both boxes' arrivals, each block expects both boxes' bytes."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8),
                              cluster=Cluster(size=2, spread=True))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_cluster_along_n():
    """Clusters of two N tiles (blockIdx.y) instead, A's tile multicast: N a multiple of 512, so
    the grid holds whole clusters (CLUSTER-MULTICAST proves it for every admitted N)."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=512)
    fusion.cluster_dims = (1, 2, 1)
    next(t for t in fusion.tensors if t.name == "T4").multicast(P.BIDy)  # A's tile
    return fusion


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_m_tiles_in_a_loop():
    """The warp-specialized schedule with each block looping over its group's M tiles (blockIdx.x's
    axis made a serial loop): the producer runs ahead into the next tile's K loop while the
    consumers store this one, the full and empty mbarriers' phases carried from tile to tile
    (each tile loads and releases every stage as often as it waits for it)."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)
    for t in fusion.tensors:
        if t.loop and len(t.loop) > 1 and t.loop[1].parallel_type is P.BIDx:
            t.loop[1].parallelize(P.Serial)
    return fusion


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_persistent():
    """The warp-specialized schedule on a persistent grid of 132 blocks (an H100's SMs): the tiles
    in groups of 8 M tiles, one tile index split by 132, block b computing tiles b, b + 132, ...
    A's tile [Mo, 1] merges its broadcast where D merges [Mo, No]: its loop iterates D's tiles
    and loads A's tile Mo = tile / 8 / (N / 256) * 8 + tile % 8 of each (loop promotion). The
    producer warpgroup runs ahead into the next tile's K loop while the consumers store this one."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                              grid=GridOrder(group=8, persistent=132))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_persistent_cluster():
    """The persistent schedule in clusters of two blocks, B's tile multicast: blocks 2c and 2c + 1
    compute tiles 2j and 2j + 1 of one group at every step (132 and 8 are even), two M tiles of
    one N tile (CLUSTER-MULTICAST proves the boxes equal for every admitted M and N)."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                              grid=GridOrder(group=8, persistent=132), cluster=Cluster(size=2))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_stmatrix_epilogue():
    """The warp-specialized schedule with a bfloat16 output stored through shared memory: each
    consumer thread casts its accumulators and writes them with stmatrix.x4 (8 elements of a
    16 x 16 tile a lane) into a 128 x 256 tile laid out as four 128-byte-swizzled TMA boxes of 64
    columns, and one thread stores the boxes by TMA after a barrier of the consumers. Three
    stages (144 KiB) leave room for the 64 KiB tile."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=WS), grid=GridOrder(group=8),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted(warnings=("GRID-SIZE",)))
def hopper_matmul_warp_specialized_stmatrix_by_box():
    """The stmatrix epilogue staged one 64-column TMA box at a time (Epilogue.by_box): a 16 KiB staging
    tile written four times per block tile, each time after the TMA store of the box before has
    read it (cp.async.bulk.wait_group.read, then a barrier of the consumers), so that four stages
    (192 KiB) fit beside it: benchmarks/hopper_matmul.py's fastest schedule, persistent in
    clusters of two with B multicast."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS),
                              grid=GridOrder(group=16, persistent=128), cluster=Cluster(size=2),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True, by_box=True))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_256_row_tiles():
    """256 x 128 block tiles: each consumer warpgroup owns 128 rows, two 64 x 128 x 16 wgmmas
    (a loop mi) per 16 columns of K, 128 accumulators a thread; D cast to bfloat16 and stored
    through the stmatrix staging tile (each warpgroup's stmatrix covers its two row tiles)."""
    params = HopperGemmParams(tile=HopperTile(m=256, n=128, warpgroup_rows=128),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=WS), grid=GridOrder(group=8),
                              epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, m_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_split_n():
    """192 x 192 block tiles with the columns split between the consumer warpgroups: each issues
    three 64 x 96 x 16 wgmmas per 16 columns of K, reading its half of B's tile (rows 96 w to
    96 w + 95: descriptor start addresses WGMMA-SMEM-LAYOUT proves inside the swizzle atoms) and
    all of A's, 144 accumulators a thread; M and N need not be multiples of 192."""
    params = HopperGemmParams(tile=HopperTile(m=192, n=192, split_n=True),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, m_multiple=64, n_multiple=64)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_m_major_a():
    """A stored M-major (column-major, as a transposed A arrives): its tile laid out as two
    MN-major TMA boxes of 64 rows of M by 64 of K (rows of M contiguous, swizzled), which wgmma
    reads with imm-trans-a = 1 through a descriptor whose LBO steps over the 64-row spans and SBO
    over groups of 8 K rows (WGMMA-SMEM-LAYOUT proves every element's address)."""
    return tile_multiples(hopper_gemm("M", "N", "K", HopperGemmParams(a=Operand(major="MN"))), 64)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_n_major_b():
    """The warp-specialized schedule on a @ b's layout: B stored N-major ([K, N] row-major), its
    256 x 64 tile loaded as four MN-major boxes of 64 N (a loop of copies, each arriving on the
    stage's mbarrier), read by wgmma with imm-trans-b = 1."""
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8),
                              b=Operand(major="MN"))
    return tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_operands_stored_by_threads():
    """A's and B's tiles filled by the threads instead of the TMA: plain 16-byte loads and
    st.shared into the same 128-byte-swizzled layout. wgmma reads shared memory through the
    async proxy, so the barrier before it is preceded by fence.proxy.async in the writing
    threads (SMEM-RACE proves it there), and each K tile's wgmma batch completes
    (wgmma.wait_group 0) before the barrier that lets the next K tile's stores overwrite it."""
    params = HopperGemmParams(a=Operand(load=tp.LoadStoreOpType.Set), b=Operand(load=tp.LoadStoreOpType.Set))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64)
    for name in ("T4", "T5"):
        t = fusion.tensor(name)  # [.., 16, 8 rows, 1, 8 chunks, 8], Bulk: the TMA's box
        for i in t.get_loop_domain()[3:]:
            i.parallelize(P.Serial)
        t.merge(3).merge(3).merge(3).split(3, 128)  # [.., 8, 128, 8]: 16 bytes a thread
        t.axis(4).parallelize(P.TIDx)
        t.axis(5).parallelize(P.Vectorize)
    return fusion
