"""The schedules that benchmarks/gpu_kernels.py times (issue 4): plain tileproof schedules,
verified by tp.verify and lowered by the general code generator (no hand-written CUDA).

    pointwise_add(m, n, threads=256, unroll=2)       out = a + b, 16-byte vectors, no TMA
    tma_pointwise_add()                              the TMA example of examples/valid/tma_smem.py
    transpose(dtype, m, n, tile_m=.., tile_n=..)     out[j, i] = a[i, j] through an XOR-swizzled tile
                                                     (regs=vec: a vec x vec register block per lane)
    unswizzled_transpose(dtype)                      tests/support/codegen_schedules.py's 32 x 32 tile (baseline)

The transpose moves one tile_m x tile_n tile per block through shared memory:

    load   T0 (global) -> T1 (shared): each lane moves a 16-byte vector along the input's
           contiguous axis; a warp covers whole 128-byte lines of input rows.
    read   T1 -> T3 (registers, transposed): a lane gathers one vector's worth of elements
           (4 fp32 or 8 bf16) of one input column: rows r, r+1, .. of one column j.
    store  T3 -> T2 (global): one 16-byte vector along the output's contiguous axis; 8 lanes
           cover 128 contiguous bytes of one output row, a warp 4 output rows (lanes_m=16:
           16 lanes, 256 bytes, 2 rows).

T1's allocation is [.., rh{8}, rl{vec}, .., cl{8}, e{vec}] (rows and 16-byte column chunks)
with the chunk index XORed with rh = (row / vec) % 8. In the read, the 8 lane groups of a
warp take rows whose rh are 0..7, so their chunks land in 8 different groups of 4 banks,
and the 4 lanes of a group read 4 adjacent columns of one chunk: conflict-free (proved by
SMEM-BANK-CONFLICT). The load writes whole 16-byte chunks, and XOR with rh permutes the
8 chunks of each 128-byte quarter-warp phase, so it is conflict-free too. With lanes_m=16 the
read takes 16 rows but only 8 bank groups exist: a 2-way conflict (reported); still, storing
2 x 256 bytes per warp instead of 4 x 128 was 1 % faster on the H200.

regs=vec: a register block instead of one vector per lane. A lane reads a vec x vec block of
T1 with vec 16-byte shared loads along the input rows (rows vec*l + 0..vec-1 for lane l of a
quarter-warp phase: rh = l, so the 8 chunks land in 8 bank groups, conflict-free even with lanes_m=16),
holds it in T3 (vec x vec registers, input-row major), and stores vec 16-byte vectors along
the output rows, each gathering a column of T3 (stride vec; the code generator reads a
strided register operand element by element, Operand.per_element).

Fastest on an H200 (benchmarks/README.md): fp32 64 x 64, 8 warps, raster "m", lanes_m=16,
regs=4; bf16 128 x 128, 16 warps, raster "m", lanes_m=16.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import tileproof as tp

P = tp.ParallelType
XOR = tp.SwizzleType.XOR
ROOT = Path(__file__).resolve().parent.parent
SIZE = 16384  # 16384 x 16384 = 2^28 elements


def _dtype(name: str) -> tp.DataType:
    return getattr(tp, name)


def pointwise_add(m: int = SIZE, n: int = SIZE, dtype: str = "float32", threads: int = 256, unroll: int = 2):
    """out = a + b over [m, n] (contiguous): merged to 1-D, each thread adds `unroll` 16-byte
    vectors that lie `threads` vectors apart (every access coalesced), blocks on BIDx."""
    dt = _dtype(dtype)
    vec = 16 // dt.bytes
    with tp.Fusion(f"pointwise_add_t{threads}_u{unroll}") as fusion:
        a = tp.make_contig_concrete_tensor([m, n], dtype=dt)
        b = tp.make_contig_concrete_tensor([m, n], dtype=dt)
        fusion.add_input(a)
        fusion.add_input(b)
        out = tp.add(a, b)
        fusion.add_output(out)
    out.merge(0).split(0, vec).split(0, threads)  # [m*n/(vec*threads), threads, vec]
    if unroll > 1:
        out.split(0, unroll)  # [blocks, unroll, threads, vec]
        out.axis(1).parallelize(P.Unroll)
    out.axis(0).parallelize(P.BIDx)
    out.axis(-2).parallelize(P.TIDx)
    out.axis(-1).parallelize(P.Vectorize)
    return fusion


def tma_pointwise_add():
    """examples/valid/tma_smem.py's tma_pointwise_vectorized_store (16384 x 16384 fp32)."""
    return _load(ROOT / "examples/valid/tma_smem.py", "tma_pointwise_vectorized_store")()


def transpose(dtype: str = "float32", m: int = SIZE, n: int = SIZE, *, tile_m: int | None = None,
              tile_n: int = 128, warps: int = 8, raster: str = "m", group: int | None = None,
              lanes_m: int = 8, regs: int | None = None):
    """out[N, M] = a[M, N] through an XOR-swizzled shared tile of tile_m x tile_n elements.

    tile_m (input rows per block) and tile_n (input columns per block) must be multiples of
    8 vectors (32 fp32, 64 bf16); warps x 32 threads per block. The block order (raster):
    "m": BIDx runs over the tiles of M (input rows), BIDy over N: the blocks in flight write
    whole output rows; "n": the other way round; group=G: a 1-D grid, G tiles along M
    fastest, then N, then the next G tiles along M. lanes_m: lanes of a warp along the
    output row in the store (8: 4 rows x 128 bytes per warp, conflict-free; 16: 2 rows x 256
    bytes, with 2-way bank conflicts in the transposed read, which SMEM-BANK-CONFLICT reports).
    regs=vec (4 fp32, 8 bf16): each thread moves a vec x vec block through registers instead:
    vec 16-byte shared reads along the input row into T3 (vec x vec, rows of the input), then
    vec 16-byte global stores along the output row, each gathering a column of T3 (stride vec).
    """
    dt = _dtype(dtype)
    vec = 16 // dt.bytes  # elements per 16-byte vector
    tile_m = 8 * vec if tile_m is None else tile_m
    if tile_m % (8 * vec) or tile_n % (8 * vec):
        raise ValueError(f"transpose: tile_m and tile_n must be multiples of {8 * vec} for {dtype}")
    if (tile_m * tile_n // vec) % (32 * warps) or (tile_m * tile_n // vec) < 32 * warps:
        raise ValueError(f"transpose: a {tile_m} x {tile_n} tile has too few vectors for {warps} warps")
    if lanes_m not in (8, 16) or tile_m % (lanes_m * vec):
        raise ValueError(f"transpose: lanes_m must be 8 or 16 and divide tile_m / {vec}")
    if raster not in ("m", "n"):
        raise ValueError(f"transpose: raster must be 'm' or 'n', got {raster!r}")
    if regs not in (None, vec):
        raise ValueError(f"transpose: regs must be {vec} (a {vec} x {vec} block per thread) for {dtype}, got {regs}")
    if regs and ((tile_m // vec) * (tile_n // vec)) % (32 * warps):
        raise ValueError(f"transpose: a {tile_m} x {tile_n} tile has too few {vec} x {vec} blocks for {warps} warps")
    order = f"g{group}" if group else raster
    lanes = ("" if lanes_m == 8 else f"_l{lanes_m}") + (f"_r{regs}" if regs else "")
    with tp.Fusion(f"transpose_{dtype}_{tile_m}x{tile_n}_w{warps}_{order}{lanes}") as fusion:
        t0 = tp.make_contig_concrete_tensor([m, n], dtype=dt)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.transpose(t1, 0, 1)
        fusion.add_output(t2)
    t3 = t2.cache_before()  # T3 = transpose(T1) in registers, T2 = set(T3)
    t1.set_memory_type(tp.MemoryType.Shared)

    def blocks(t) -> int:
        """[Mo, No, ..] -> the block axes; returns how many."""
        if group:
            t.split(0, group).reorder({1: 2, 2: 1}).merge(0).merge(0)  # [Moo*No*Moi, ..]
            t.axis(0).parallelize(P.BIDx)
            return 1
        t.axis(0).parallelize(P.BIDx if raster == "m" else P.BIDy)
        t.axis(1).parallelize(P.BIDy if raster == "m" else P.BIDx)
        return 2

    # T1 [M, N] -> [Mo, No, Mi{tile_m}, Ni{tile_n}] -> [blocks.., Mi, Ni]
    t1.split(1, tile_n).split(0, tile_m).reorder({1: 2})
    k = blocks(t1)
    loop = t1.get_loop_domain()
    # allocation [blocks.., rhh, rh{8}, rl{vec}, ch, cl{8}, e{vec}], cl ^= rh
    t1.split(k + 1, vec).split(k + 1, 8)  # Ni -> [ch, cl{8}, e{vec}]
    t1.split(k, vec).split(k, 8)  # Mi -> [rhh, rh{8}, rl{vec}]
    t1.swizzle(XOR, k + 1, k + 4)
    t1.set_allocation_domain(t1.get_loop_domain())
    t1.set_loop_domain(loop)
    # load loop [blocks.., it, TIDy{warps}, TIDx{32}, v{vec}]: lanes along the input row
    t1.split(k + 1, vec).merge(k).split(k, 32).split(k, warps)
    t1.axis(k).parallelize(P.Unroll)
    t1.axis(k + 1).parallelize(P.TIDy)
    t1.axis(k + 2).parallelize(P.TIDx)
    t1.axis(k + 3).parallelize(P.Vectorize)

    if regs:
        _register_blocks(t3, t2, k, blocks, tile_m, tile_n, warps, lanes_m, vec)
        t1.inline_at(k)
        t3.inline_at(k + 3)  # T3 holds one vec x vec block per thread
        return fusion
    # T3, T2 [N, M] -> [blocks.., it, TIDy{warps}, TIDx{32/lanes_m columns x lanes_m vectors}, v{vec}]
    for t in (t3, t2):
        t.split(1, tile_m).split(0, tile_n)  # [No, Nj, Mo, Mi]
        t.reorder({0: 1, 1: 2, 2: 0})  # [Mo, No, Nj, Mi]
        blocks(t)  # [blocks.., Nj, Mi]
        t.split(k + 1, vec).split(k + 1, lanes_m)  # [.., Nj, Mco, Mci{lanes_m}, v]
        t.split(k, 32 // lanes_m)  # [.., Njo, Nji{32/lanes_m}, Mco, Mci, v]
        t.reorder({k + 1: k + 2, k + 2: k + 1})  # [.., Njo, Mco, Nji, Mci, v]
        t.merge(k + 2)  # lanes: [.., Njo, Mco, lanes{32}, v]
        t.merge(k)  # [.., tasks, lanes, v]
        t.split(k, warps)  # [.., it, warps, lanes, v]
        t.axis(k).parallelize(P.Unroll)
        t.axis(k + 1).parallelize(P.TIDy)
        t.axis(k + 2).parallelize(P.TIDx)
    t3.axis(k + 3).parallelize(P.Unroll)
    t2.axis(k + 3).parallelize(P.Vectorize)
    t1.inline_at(k)  # one tile per block: T1 holds the block's tile
    t3.inline_at(k + 3)  # T3 holds one vector per thread
    return fusion


def _register_blocks(t3, t2, k: int, blocks, tile_m: int, tile_n: int, warps: int, lanes_m: int, vec: int):
    """T3, T2 [N, M] -> [blocks.., it, TIDy{warps}, TIDx{32/lanes_m x lanes_m blocks}, Nb{vec}, Mb{vec}]:
    a lane owns the vec x vec block of output rows Njo * vec + Nb and columns Mio * vec + Mb.
    T2 stores along Mb (Vectorize: one 16-byte store per output row); T3 is read from T1
    along Nb (T3 reordered to [.., Mb, Nb], Vectorize on Nb: one 16-byte shared read per
    input row). The 8 lanes of a quarter-warp phase take 8 consecutive blocks along M, rows
    whose rh are 0..7, so their 16-byte chunks land in 8 different groups of 4 banks."""
    for t in (t3, t2):
        t.split(1, tile_m).split(0, tile_n)  # [No, Nj, Mo, Mi]
        t.reorder({0: 1, 1: 2, 2: 0})  # [Mo, No, Nj, Mi]
        blocks(t)  # [blocks.., Nj, Mi]
        t.split(k + 1, vec).split(k, vec)  # [.., Njo, Nb{vec}, Mio, Mb{vec}]
        t.split(k + 2, lanes_m).split(k, 32 // lanes_m)  # [.., Njoo, Njoi, Nb, Mco, Mci{lanes_m}, Mb]
        t.reorder({k + 1: k + 2, k + 2: k + 4, k + 3: k + 1, k + 4: k + 3})  # [.., Njoo, Mco, Njoi, Mci, Nb, Mb]
        t.merge(k + 2)  # lanes: [.., Njoo, Mco, lanes{32}, Nb, Mb]
        t.merge(k)  # [.., tasks, lanes, Nb, Mb]
        t.split(k, warps)  # [.., it, warps, lanes, Nb, Mb]
        t.axis(k).parallelize(P.Unroll)
        t.axis(k + 1).parallelize(P.TIDy)
        t.axis(k + 2).parallelize(P.TIDx)
    t2.axis(k + 3).parallelize(P.Unroll)
    t2.axis(k + 4).parallelize(P.Vectorize)
    t3.reorder({k + 3: k + 4, k + 4: k + 3})  # [.., Mb, Nb]
    t3.axis(k + 3).parallelize(P.Unroll)
    t3.axis(k + 4).parallelize(P.Vectorize)
    # allocated in this order ([.., Mb, Nb]: Nb innermost, the vector), not in T3's logical [N, M] order
    t3.set_allocation_domain(t3.get_loop_domain(), True)


def unswizzled_transpose(dtype: str = "float32"):
    """tests/support/codegen_schedules.py's smem_transpose: a 32 x 32 tile, scalar accesses, no
    swizzle (32-way bank conflicts in the transposed read). Symbolic M x N."""
    return _load(ROOT / "tests/support/codegen_schedules.py", "smem_transpose")(dtype)


# The configurations benchmarks/gpu_kernels.py sweeps (the best is reported).
def _configs(*rows):
    out = []
    for tm, tn, w, o, *extra in rows:
        cfg = dict(tile_m=tm, tile_n=tn, warps=w, **({"group": o} if isinstance(o, int) else {"raster": o}))
        if extra and extra[0] != 8:
            cfg["lanes_m"] = extra[0]
        if len(extra) > 1:
            cfg["regs"] = extra[1]
        out.append(cfg)
    return out


TRANSPOSE_CONFIGS = {  # (tile_m, tile_n, warps, raster "m"/"n" or group G[, lanes_m[, regs]])
    "float32": _configs((64, 64, 8, "m"), (64, 64, 8, "n"), (64, 64, 4, "m"), (32, 128, 8, "m"),
                        (64, 128, 8, "m"), (128, 64, 8, "m"), (32, 64, 4, "m"), (128, 128, 8, "m"),
                        (128, 128, 16, "m"), (64, 64, 8, 64), (64, 64, 8, "m", 16), (64, 128, 8, "m", 16),
                        (128, 64, 8, "m", 16),
                        (64, 64, 8, "m", 8, 4), (64, 64, 8, "m", 16, 4), (64, 64, 4, "m", 8, 4),
                        (64, 128, 8, "m", 16, 4), (128, 64, 8, "m", 16, 4), (128, 128, 8, "m", 16, 4)),
    "bfloat16": _configs((64, 128, 8, "m"), (64, 128, 8, "n"), (128, 128, 8, "m"), (128, 64, 8, "m"),
                         (64, 256, 8, "m"), (64, 64, 4, "m"), (128, 256, 8, "m"), (128, 128, 16, "m"), (128, 128, 8, 32),
                         (128, 128, 8, "m", 16), (128, 128, 16, "m", 16), (128, 64, 8, "m", 16),
                         (128, 256, 16, "m"), (256, 64, 8, "m"),
                         (128, 128, 8, "m", 8, 8), (128, 128, 4, "m", 16, 8), (128, 128, 8, "m", 16, 8),
                         (128, 256, 8, "m", 16, 8)),
}
POINTWISE_CONFIGS = [dict(threads=128, unroll=1), dict(threads=256, unroll=1),
                     dict(threads=256, unroll=2), dict(threads=256, unroll=4), dict(threads=128, unroll=4)]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)
