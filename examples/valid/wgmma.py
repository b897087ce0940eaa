"""Hopper matmuls on wgmma: both operands in shared memory (TMA loads, 128-byte swizzle), read by
wgmma.mma_async through matrix descriptors, the accumulators in each warpgroup's registers as
wgmma's D fragment."""

import sys
from pathlib import Path

import tileproof as tp

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from mma import grouped_blocks, permute, through_shared, tile_mnk, tile_multiples, tma_store_boxes

P = tp.ParallelType
LS = tp.LoadStoreOpType
SMEM_SWIZZLES = {128: tp.MmaInputSmemSwizzle.B128, 64: tp.MmaInputSmemSwizzle.B64, 32: tp.MmaInputSmemSwizzle.B32}


def swizzled_box(tile, swizzle_bytes):
    """The operand tile [.., rows, one swizzle span of K] as the TMA's swizzled box lays it out."""
    tile.apply_mma_swizzle_for_tma_load(SMEM_SWIZZLES[swizzle_bytes])


def mn_major_box(tile, swizzle_bytes):
    """The operand tile [.., rows (M or N), K] as an MN-major TMA box lays it out: [.., rows /
    span, K rows, span] with span one swizzle span of rows (64 bf16 for 128 bytes), swizzled:
    rows of MN contiguous, as a transposed operand (M-major A, N-major B) arrives from memory.
    wgmma reads it with its transpose bit set."""
    span = swizzle_bytes // tile.dtype.bytes
    tile.split(-2, span)
    tile.reorder({-1: -2, -2: -1})
    swizzled_box(tile, swizzle_bytes)


def patched_blocks(tensors, patch):
    """Bind the block tiles [Mo, No, ..] of `tensors` to blocks in patches of pm x pn tiles, each
    block running over its patch: [Mo / pm (blockIdx.x), No / pn (blockIdx.y), pm, pn (serial
    loops), ..]. A and B split their broadcast axis by 1 to have one for each loop of the other
    operand. Returns the axes added (2)."""
    pm, pn = patch
    for t in tensors:
        t.split(1, 1 if t.axis(1).is_broadcast else pn)  # [Mo, No / pn, pn, ..]
        t.split(0, 1 if t.axis(0).is_broadcast else pm)  # [Mo / pm, pm, No / pn, pn, ..]
        permute(t, [0, 2, 1, 3] + list(range(4, len(t.get_loop_domain()))))
        for i, p in ((0, P.BIDx), (1, P.BIDy)):
            if not t.axis(i).is_broadcast:
                t.axis(i).parallelize(p)
    return 2


def persistent_blocks(tensors, sms, group):
    """Bind the block tiles [Mo, No, ..] of `tensors` to a persistent grid of `sms` blocks: the
    tiles in groups of `group` M tiles [Mo / group, No, group] (the blocks running at once share
    their A tiles), merged into one tile index, split by `sms`: [tiles / sms (a serial loop),
    sms (blockIdx.x), ..]; block b computes tiles b, b + sms, ... A's and B's tiles merge their
    broadcast axis where D merges the other operand's tiles: the merge iterates D's tiles (loop
    promotion), each loading the operand's tile of D's tile. Returns the axes added (0)."""
    for t in tensors:
        t.split(0, 1 if t.axis(0).is_broadcast else group)  # [Mo / group, group, No, ..]
        permute(t, [0, 2, 1] + list(range(3, len(t.get_loop_domain()))))  # [Mo / group, No, group, ..]
        t.merge(0).merge(0).split(0, sms)  # [tiles / sms, sms, ..]
        t.axis(1).parallelize(P.BIDx)
    return 0


def warpgroup_tiles(t, split_n, rows=64, at=2):
    """A block tile [.., bm, bn, ..] (axes at, at + 1) as its warpgroups' wgmma tiles: one
    warpgroup per 64 rows [.., wg, 64, bn, ..], per `rows` rows [.., wg, mi, 64, bn, ..] (a loop mi
    over its rows / 64 wgmmas), or with split_n two warpgroups splitting the columns
    [.., wg, mi, 64, bn / 2, ..] (bm / 64 wgmmas each); wg bound to TIDy, mi unrolled."""
    bm, bn = t.axis(at).static_extent, t.axis(at + 1).static_extent
    if split_n:
        t.split(at + 1, bn // 2).split(at, 64)  # [.., mi, 64, wg, bn / 2, ..]
        rest = len(t.get_loop_domain()) - at - 4
        permute(t, list(range(at)) + [at + 2, at, at + 1, at + 3] + list(range(at + 4, at + 4 + rest)))
    elif rows > 64:
        t.split(at, rows).split(at + 1, 64)
    else:
        t.split(at, 64)
    t.axis(at).parallelize(P.TIDy)
    if split_n or rows > 64:
        t.axis(at + 1).parallelize(P.Unroll)


def stmatrix_epilogue(epilogue, macro, block, split_n=False, rows=64, by_box=False, swizzle=128):
    """[c, cs, out] of mma.through_shared: c = cast(D) in D's fragment layout ([Mo, No, wg (TIDy),
    (mi,) thread (TIDx), N / 16, 8]), cs = stmatrix(c) (a thread's 8 elements of a 16 x 16 tile:
    stmatrix.x4) into the TMA store's swizzled boxes, out = their TMA store (tma_store_boxes).
    by_box=True: c and cs [Mo, No, box, wg, (mi,) thread, N / 16 of the box, 8], a loop over the
    output's TMA boxes (one `swizzle` span: 64 columns, 32 at swizzle=64) outside the threads, so
    that cs can hold one box at a time."""
    tma_store_boxes(epilogue, block, swizzle, by_box=by_box)
    c, cs, _ = epilogue
    span = swizzle // cs.dtype.bytes
    for t in (c, cs):  # [Mo, No, bm, bn] -> [Mo, No, wg, (mi,) thread, N / 16, 8]: D's fragment
        if by_box and t is c:  # [Mo, No, box, bm, span] (cs's already): D's fragment of each box's columns
            t.split(3, span)
            permute(t, [0, 1, 3, 2, 4])
        warpgroup_tiles(t, split_n, rows, at=3 if by_box else 2)
        tp.schedule_mma_fragment(t, getattr(tp.MmaMacro, f"Hopper_64_{span}_16") if by_box else macro, "C")
        t.split(-1, 8)
        t.axis(-2).parallelize(P.Unroll)
    for t in epilogue if by_box else ():  # the box loop unrolled: c reads D's registers at constant indices
        t.axis(2).parallelize(P.Unroll)
    c.axis(-1).parallelize(P.Unroll)
    cs.axis(-1).parallelize(P.Vectorize)


def hopper(m, n, k, block=(128, 128), swizzle=128, stages=1, prefetch=-1, group=1, tile_layout=swizzled_box,
           specialized=None, out_dtype=tp.float32, patch=None, cluster=1, war_mbarriers=False, spread=False,
           persistent=None, stmatrix=False, store_by_box=False, a_major="K", b_major="K", warpgroup_rows=64,
           split_n=False, store_swizzle=128):
    """D[M, N] = sum_k A[M, 1, K] B[1, N, K] in float32, A and B bfloat16 and K-major: block tile
    block[0] x block[1] x (swizzle bytes of K), one warpgroup per 64 rows (TIDy), each issuing one
    Hopper_64_{block[1]}_16 wgmma per 16 columns of K; A's and B's tiles loaded by TMA as boxes of
    one swizzle span of K, allocated as the TMA's swizzled boxes; D's accumulators allocated as
    wgmma's D fragment (128 threads on TIDx) and stored to the output from there. stages > 1
    circular-buffers A's and B's tiles over the K loop, `prefetch` TMA loads ahead (an mbarrier
    per stage). group=G orders the blocks in groups of G M tiles (blockIdx.z the group, blockIdx.x
    the tile in it, blockIdx.y the N tile), as examples/valid/mma.py's tuned schedule does.
    tile_layout(tile, swizzle bytes) lays out each operand's shared tile (swizzled_box).
    specialized=tp.WarpSpecialized(...): the stages are loaded by a producer warpgroup instead.
    war_mbarriers=True: tp.Pipelined(uses_mbarrier_for_war=True), a stage refilled after each
    warpgroup released it on an empty mbarrier instead of after a __syncthreads.
    out_dtype: the output's dtype (a cast of the float32 accumulators where it is another).
    patch=(pm, pn): each block computes pm x pn tiles one after another (patched_blocks) instead
    of one (group is then unused): with about one block per SM the grid is one wave, and a
    warp-specialized producer loads the next tile while the consumers store this one.
    cluster=C: clusters of C blocks along blockIdx.x (the M tiles of one N tile), B's tile loaded
    once per cluster and multicast to its blocks (warp-specialized schedules only); with
    spread=True B's tile is loaded as `cluster` boxes (a serial loop of them), one by each block.
    persistent=S: a persistent grid of S blocks over the grouped tile order (persistent_blocks).
    stmatrix=True (a 16-bit out_dtype): D cast in its fragment layout, stored by stmatrix into a
    shared tile laid out as the TMA store's 128-byte-swizzled boxes, and stored by TMA
    (stmatrix_epilogue) instead of from each thread's registers.
    a_major="MN" / b_major="MN": A stored M-major ([K, M] row-major) / B stored N-major ([K, N]
    row-major, the layout of a @ b), its tile laid out as MN-major TMA boxes (mn_major_box, a
    loop of one box per swizzle span of rows), read by wgmma transposed.
    warpgroup_rows=128: a warpgroup per 128 rows instead of 64, two 64-row wgmmas each (a loop mi;
    a 256 x 128 tile of two warpgroups). split_n=True: the two warpgroups split the block tile's
    columns instead of its rows, each issuing bm / 64 Hopper_64_{bn / 2}_16 wgmmas per 16 columns
    of K (a 192 x 192 tile: three 64 x 96 x 16 a warpgroup, 144 accumulators a thread).
    store_by_box=True (with stmatrix, warpgroups splitting rows): the staging tile holds one
    64-column TMA box of the output, written and stored box by box (16 KiB instead of 64 for 128 x
    256: room for a fourth stage). store_swizzle=64: the output's boxes 32 columns wide (a block
    tile N of 224 is seven, not 3.5 boxes of 64)."""
    if store_by_box and (split_n or not stmatrix):
        raise ValueError("hopper: store_by_box stages the stmatrix epilogue (stmatrix=True) one TMA box (64 "
                         "columns, 32 at store_swizzle=64) at a time, which each warpgroup holds whole only where "
                         "they split the rows (split_n=False)")
    bm, bn = block
    bk = swizzle // 2
    macro = getattr(tp.MmaMacro, f"Hopper_64_{bn // 2 if split_n else bn}_16")
    with tp.Fusion("hopper_matmul") as fusion:
        a = tp.make_tensor([m, 1, k], dtype=tp.bfloat16)
        b = tp.make_tensor([1, n, k], dtype=tp.bfloat16)
        fusion.add_input(a)
        fusion.add_input(b)
        d = tp.fused_multiply_sum(a, b, [-1])
        out = tp.set(d) if out_dtype == tp.float32 else tp.cast(d, out_dtype)
        fusion.add_output(out)
    d.definition.set_macro(macro)
    mn_major = {t for t, major in ((a, a_major), (b, b_major)) if major == "MN"}
    for t in mn_major:  # M or N innermost in global memory: [1, K, M] / [1, K, N]
        t.set_allocation_domain([t.axis(2), t.axis(1), t.axis(0)] if t is a else [t.axis(0), t.axis(2), t.axis(1)],
                                True)
    sa = a.cache_after(LS.TMA)
    sb = b.cache_after(LS.TMA)
    for t in (sa, sb):
        t.set_memory_type(tp.MemoryType.Shared)
    for t in (d, sa, sb):
        tile_mnk(t, bm, bn, bk)
    d.split(5, 16)  # D [Mo, No, Ko, bm, bn, kk, K16] -> [Mo, No, Ko, wg, (mi,) M64, N, kk, K16]
    warpgroup_tiles(d, split_n, warpgroup_rows, at=3)
    kk = len(d.get_loop_domain()) - 2  # -> [Mo, No, Ko, wg, kk, (mi,) M64, N, K16]
    permute(d, [0, 1, 2, 3, kk] + list(range(4, kk)) + [kk + 1])
    # the accumulators: [Mo, No, Ko, kk, K16, wg, (mi,) thread (TIDx), v], wgmma's D fragment
    d.set_allocation_domain(tp.mma_output_allocation(d), True)
    d.axis(4).parallelize(P.Unroll)
    for i in (-3, -2, -1):
        d.axis(i).parallelize(P.Mma)
    if stmatrix:  # through shared memory: stmatrix, then a TMA store
        epilogue = through_shared(out)
        stmatrix_epilogue(epilogue, macro, block, split_n, warpgroup_rows, store_by_box, store_swizzle)
    else:  # the output [M, N] -> [Mo, No, wg, (mi,) thread, v]: D's fragment
        epilogue = [out]
        out.split(1, bn).split(0, bm)
        permute(out, [0, 2, 1, 3])
        warpgroup_tiles(out, split_n, warpgroup_rows)
        tp.schedule_mma_fragment(out, macro, "C", dtype=tp.bfloat16)
        if not (isinstance(n, int) and n % 2):  # an even N: no pair of columns straddles N's end (rows past M: both out)
            out.split(-1, 2).axis(-1).parallelize(P.Vectorize)  # D's element pairs are adjacent columns: 8-byte stores
        # the thread's accumulators read by constant indices: registers, not local memory
        out.axis(-2 if out.axis(-1).parallel_type is P.Vectorize else -1).parallelize(P.Unroll)
    # A [Mo, 1, Ko, bm, bk], B [1, No, Ko, bn, bk]: one TMA box each, swizzled
    for t, g in ((sa, a), (sb, b)):
        (mn_major_box if g in mn_major else tile_layout)(t, swizzle)
        if spread and t is sb:  # B's 8-row groups [bn / 8] -> [cluster (a loop of boxes), bn / 8 / cluster]
            t.split(3, bn // 8 // cluster)
        for i in t.get_loop_domain()[3 + ((spread and t is sb) or g in mn_major):]:  # past a loop of boxes
            i.parallelize(P.Bulk)
        t.set_allocation_domain(t.get_loop_domain(), True)
    tiles = (d, *epilogue, sa, sb)
    at = (patched_blocks(tiles, patch) if patch else persistent_blocks(tiles, persistent, group) if persistent
          else grouped_blocks(tiles, group))
    for t in (sa, sb):
        t.inline_at(3 + at)
        if stages > 1:
            t.circular_buffer(stages, prefetch, specialized or (tp.Pipelined(True) if war_mbarriers else None))
    d.inline_at(2 + at)
    if stmatrix:
        c, cs, _ = epilogue
        c.inline_at(len(c.loop) - 1)
        cs.inline_at(3 + at if store_by_box else 2 + at)  # by box: one box of shared memory, reused
    if cluster > 1:
        fusion.cluster_dims = (cluster, 1, 1)
        sb.multicast(P.BIDx)
    return fusion


@tp.schedule(expect=tp.accepted())
def hopper_matmul():
    """The smallest Hopper schedule: 128 x 128 block tiles of two warpgroups, one 64 x 128 x 16
    wgmma per warpgroup and 16 columns of K, one TMA box of A and of B per 64 columns of K."""
    return tile_multiples(hopper("M", "N", "K"), 64)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_wide():
    """128 x 256 block tiles: one 64 x 256 x 16 wgmma (128 accumulators a thread) per warpgroup and
    16 columns of K; 48 KiB of shared tiles plus the mbarriers."""
    return tile_multiples(hopper("M", "N", "K", block=(128, 256)), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted(), params={"block": ["128x128", "128x256"], "prefetch": [2, 3]})
def hopper_matmul_pipelined(block, prefetch):
    """The Hopper schedule with A's and B's tiles circular-buffered over the K loop: four stages,
    `prefetch` TMA loads ahead, one mbarrier per stage (iteration i waits for mbarrier
    i % 4's next phase: PIPELINE-RAW), one barrier per K tile before the refill of a stage
    (PIPELINE-WAR). With prefetch 2 a stage is refilled two iterations after its read, so each
    iteration's wgmma batch stays in flight while the next is issued (wgmma.wait_group 1); with
    prefetch 3 each batch is waited for at once."""
    bm, bn = (int(x) for x in block.split("x"))
    return tile_multiples(hopper("M", "N", "K", block=(bm, bn), stages=4, prefetch=prefetch), 64, n_multiple=bn)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_grouped():
    """The fastest Hopper schedule of benchmarks/hopper_matmul.py: 128 x 256 block tiles, four TMA
    stages two loads ahead (one wgmma batch in flight), the blocks in groups of 8 M tiles
    (blockIdx.z the group; M need only be a multiple of 128: the last group's blocks past M do
    nothing), D's adjacent column pairs stored 8 bytes at a time."""
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_grouped_war_mbarriers():
    """The grouped schedule with tp.Pipelined(uses_mbarrier_for_war=True): no __syncthreads in the
    K loop. Each warpgroup arrives on stage s's empty mbarrier once its wgmma.wait_group covers
    the batch that read s, and thread 0 waits on it before the TMA refills s: the refill of data
    i + 2 in iteration i waits for the releases of data i - 2, made in iteration i - 1."""
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8, war_mbarriers=True),
                          64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_k_tail():
    """The grouped schedule with K only a multiple of 8 (the TMA's 16-byte row stride): the last
    K tile reaches past K, where the TMA fills the box with zeros (K is a dimension of its
    tensor map, the coordinates past it out of bounds), so the last wgmma batch adds 0 x 0 there
    (REDUCTION-K proves every read past K finds those zeros)."""
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8), 8, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_m_tiles_in_a_loop():
    """The pipelined schedule with each block looping over the M tiles (blockIdx.x's axis made a
    serial loop): the circular K loop runs once per M tile. Its waits flip a phase bit per stage
    (each run loads every stage as often as it waits for it), and a barrier after the loop, after
    the last wgmma.wait_group, keeps the next tile's prologue from refilling a stage still read."""
    fusion = tile_multiples(hopper("M", "N", "K", stages=4, prefetch=2), 64)
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
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8, specialized=ws), 64,
                          n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_cluster():
    """The warp-specialized schedule with clusters of two blocks along blockIdx.x, two M tiles of
    one N tile: B's tile is loaded once per cluster, by the first block, and multicast into both
    (CLUSTER-MULTICAST proves both blocks would have loaded that box); each consumer warpgroup
    releases a stage in both blocks, whose empty mbarriers count the cluster's four consumer
    warpgroups, so a multicast never refills a stage the other block still reads."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8, specialized=ws,
                                 cluster=2), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_cluster_spread():
    """The clustered schedule with B's tile loaded as two boxes of 128 rows, one by each block of
    the cluster and multicast to both (CUTLASS's split of a multicast tile): each block's full
    mbarrier counts both boxes' arrivals, each block expects both boxes' bytes."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8, specialized=ws,
                                 cluster=2, spread=True), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_cluster_along_n():
    """Clusters of two N tiles (blockIdx.y) instead, A's tile multicast: N a multiple of 512, so
    the grid holds whole clusters (CLUSTER-MULTICAST proves it for every admitted N)."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    fusion = tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8, specialized=ws),
                            64, n_multiple=512)
    fusion.cluster_dims = (1, 2, 1)
    next(t for t in fusion.tensors if t.name == "T4").multicast(P.BIDy)  # A's tile
    return fusion


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_m_tiles_in_a_loop():
    """The warp-specialized schedule with each block looping over its group's M tiles (blockIdx.x's
    axis made a serial loop): the producer runs ahead into the next tile's K loop while the
    consumers store this one, the full and empty mbarriers' phases carried from tile to tile
    (each tile loads and releases every stage as often as it waits for it)."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    fusion = tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8, specialized=ws), 64,
                            n_multiple=256)
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
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8, specialized=ws,
                                 persistent=132), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_persistent_cluster():
    """The persistent schedule in clusters of two blocks, B's tile multicast: blocks 2c and 2c + 1
    compute tiles 2j and 2j + 1 of one group at every step (132 and 8 are even), two M tiles of
    one N tile (CLUSTER-MULTICAST proves the boxes equal for every admitted M and N)."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8, specialized=ws,
                                 persistent=132, cluster=2), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_stmatrix_epilogue():
    """The warp-specialized schedule with a bfloat16 output stored through shared memory: each
    consumer thread casts its accumulators and writes them with stmatrix.x4 (8 elements of a
    16 x 16 tile a lane) into a 128 x 256 tile laid out as four 128-byte-swizzled TMA boxes of 64
    columns, and one thread stores the boxes by TMA after a barrier of the consumers. Three
    stages (144 KiB) leave room for the 64 KiB tile."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=3, prefetch=1, group=8, specialized=ws,
                                 out_dtype=tp.bfloat16, stmatrix=True), 64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_stmatrix_by_box():
    """The stmatrix epilogue staged one 64-column TMA box at a time (store_by_box): a 16 KiB staging
    tile written four times per block tile, each time after the TMA store of the box before has
    read it (cp.async.bulk.wait_group.read, then a barrier of the consumers), so that four stages
    (192 KiB) fit beside it: benchmarks/hopper_matmul.py's fastest schedule, persistent in
    clusters of two with B multicast."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=16, specialized=ws,
                                 persistent=128, cluster=2, out_dtype=tp.bfloat16, stmatrix=True, store_by_box=True),
                          64, n_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_256_row_tiles():
    """256 x 128 block tiles: each consumer warpgroup owns 128 rows, two 64 x 128 x 16 wgmmas
    (a loop mi) per 16 columns of K, 128 accumulators a thread; D cast to bfloat16 and stored
    through the stmatrix staging tile (each warpgroup's stmatrix covers its two row tiles)."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(256, 128), warpgroup_rows=128, stages=3, prefetch=1, group=8,
                                 specialized=ws, out_dtype=tp.bfloat16, stmatrix=True), 64, m_multiple=256)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_split_n():
    """192 x 192 block tiles with the columns split between the consumer warpgroups: each issues
    three 64 x 96 x 16 wgmmas per 16 columns of K, reading its half of B's tile (rows 96 w to
    96 w + 95: descriptor start addresses WGMMA-SMEM-LAYOUT proves inside the swizzle atoms) and
    all of A's, 144 accumulators a thread; M and N need not be multiples of 192."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(192, 192), stages=4, prefetch=2, group=8, specialized=ws,
                                 split_n=True), 64, m_multiple=64, n_multiple=64)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_m_major_a():
    """A stored M-major (column-major, as a transposed A arrives): its tile laid out as two
    MN-major TMA boxes of 64 rows of M by 64 of K (rows of M contiguous, swizzled), which wgmma
    reads with imm-trans-a = 1 through a descriptor whose LBO steps over the 64-row spans and SBO
    over groups of 8 K rows (WGMMA-SMEM-LAYOUT proves every element's address)."""
    return tile_multiples(hopper("M", "N", "K", a_major="MN"), 64)


@tp.schedule(expect=tp.accepted())
def hopper_matmul_warp_specialized_n_major_b():
    """The warp-specialized schedule on a @ b's layout: B stored N-major ([K, N] row-major), its
    256 x 64 tile loaded as four MN-major boxes of 64 N (a loop of copies, each arriving on the
    stage's mbarrier), read by wgmma with imm-trans-b = 1."""
    ws = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))
    return tile_multiples(hopper("M", "N", "K", block=(128, 256), stages=4, prefetch=2, group=8, specialized=ws,
                                 b_major="MN"), 64, n_multiple=256)
