"""The shape-aware choice of recipes.matmul: given (M, N, K, the majors, the output's bytes, the
GPU's SMs), which of a few verified configurations (CONFIGS) runs the GEMM, and with how many K
splits. Pure arithmetic on ints: no tileproof, no torch (recipes/matmul.py builds and runs the
kernels; the parameters each configuration stands for are there, in hopper_params_for and
split_k_params_for).

The estimate follows nvFuser's Hopper heuristic (csrc/scheduler/matmul_utils.cpp,
fillOptimalHopperTileSizes), which scores a tile by the bytes its wave-quantized grid loads: here a
configuration's time is the larger of

    compute   rounds x (K tiles + FIXED_K_TILES) x one K tile's wgmmas at EFFICIENCY of the
              SM's peak, rounds = ceil(tile slots / SMs): the wave quantization (a persistent
              grid's slots include the tiles past M that its groups of M tiles pad)
    memory    the bytes A, B, the output (and split-K's float32 partials) move through DRAM, at
              a bandwidth that grows with the blocks streaming them (HALF the SMs saturate it)

plus, for split-K, the second kernel that sums the partials (its bytes and a launch). Split-K cuts
K into S slices, S times the blocks: a shape with fewer output tiles than SMs and a long K (or a
decode GEMM, M = 16) fills the GPU. Split-K in one kernel (grid_reduce: split_k.py split_k_grid,
a grid reduction over blockIdx.z) has no second launch and no producer warps (its stream needs
every SM, not half): its blocks write their whole tiles' float32 partials to the workspace and
read them back (DRAM bytes, counted once each way), and the last block of each tile adds the S
partial tiles alone (COMBINE_BYTES_PER_S, one SM's reads; a guess until the benchmark times it).
The constants are an H100 / H200's; the benchmark
(benchmarks/matmul_shapes.py) times every configuration at each shape beside the choice, so that
a wrong pick shows.
"""

from __future__ import annotations

from dataclasses import dataclass

PEAK_FLOPS = 989e12  # bf16 dense tensor-core FLOP/s of an H100 / H200 SXM (132 SMs)
PEAK_SMS = 132
DRAM_BYTES_PER_S = 4.0e12  # sustained (H200 4.8 TB/s peak, H100 3.35)
LAUNCH_S = 3e-6  # the second kernel of split-K: its launch and ramp
COMBINE_BYTES_PER_S = 100e9  # one SM reading the workspace (the last block's combine of a one-kernel split-K)
FIXED_K_TILES = 2  # a tile's pipeline fill and epilogue, in K tiles' time
K_TILE = 64  # the recipe's K tile: one 128-byte swizzle span of bfloat16
SPLITS = (2, 3, 4, 6, 8, 12, 16)  # split-K counts tried (recipes/split_k.py admits up to 64)
MIN_SPLIT_K_TILES = 4  # a split shorter than this many K tiles spends more on its fill than it gains
ALIGN = 8  # contiguous extents in multiples of 8 elements (16-byte TMA rows)
GRID_YZ = 65535
MN_MAJOR_KS = 2**20  # recipes/split_k.py: an MN-major operand's split at most 2^20 long, M or N below 2^19
MN_MAJOR_EXTENT = 2**19


@dataclass(frozen=True, kw_only=True)
class MatmulConfig:
    """One configuration of recipes.matmul's kernels (see recipes/matmul.py for the parameters).

    name: how the benchmark and the errors call it.
    tile: the block tile (rows, columns), one warpgroup per 64 rows, two consumer warpgroups.
    stages, prefetch: A's and B's TMA stages and loads ahead, a producer warpgroup filling them.
    cluster: blocks a cluster along blockIdx.x (B's tile multicast), 1 or 2.
    group: M tiles a group in the persistent grid's tile order.
    persistent: a persistent grid of one block an SM; else one block a tile (split_k's grid).
    split_k: K cut into S slices (recipes/split_k.py: partials, then their sum), S chosen per shape.
    swap_ab: split-K computing D's transpose, B^T A^T (cuBLAS's decode kernels do so): `tile` is
        then the kernel's over (N, M), M's few rows the wgmma's N; admitted where M fits one
        column tile, compiled at a shape only (its partials stored transposed, read by the sum).
    grid_reduce: split-K in one kernel (split_k.py split_k_grid: the slices' accumulators combined
        by a grid reduction over blockIdx.z, no warp specialization: `registers` unused).
    efficiency: the fraction of an SM's peak its K loop reaches (the estimate's, from the H200
        runs of benchmarks/hopper_matmul.py: 128 x 256 about 0.8, 128 x 128 less reuse a load).
    registers: setmaxnreg's (producer, consumer) registers a thread: 232 for two consumer
        warpgroups (their 64 x 256 accumulators and the pool's 64 K), 256 for one (a 64-row tile).
    """

    name: str
    tile: tuple[int, int]
    stages: int
    prefetch: int
    cluster: int = 1
    group: int = 1
    persistent: bool = True
    split_k: bool = False
    grid_reduce: bool = False
    swap_ab: bool = False
    efficiency: float = 0.8
    registers: tuple[int, int] = (40, 232)

    def __post_init__(self):
        if self.split_k and (self.persistent or self.cluster != 1):
            raise ValueError(f"MatmulConfig {self.name}: split_k runs one block a tile, no cluster")
        if self.swap_ab and (not self.split_k or self.grid_reduce):
            raise ValueError(f"MatmulConfig {self.name}: swap_ab is a two-kernel split-K's "
                             f"(split_k=True, no grid_reduce)")
        if self.grid_reduce and not self.split_k:
            raise ValueError(f"MatmulConfig {self.name}: grid_reduce is split-K's one-kernel form (split_k=True)")
        if self.persistent and self.group % self.cluster:
            raise ValueError(f"MatmulConfig {self.name}: a cluster's blocks share B's tile, so the group must be a "
                             f"multiple of the cluster")


WIDE = MatmulConfig(name="128x256_persistent_group_16_cluster_2", tile=(128, 256), stages=4, prefetch=2, cluster=2,
                    group=16)
CONFIGS = (
    WIDE,  # the large shapes' schedule (benchmarks/hopper_matmul.py's headline)
    MatmulConfig(name="128x256_persistent_group_2_cluster_2", tile=(128, 256), stages=4, prefetch=2, cluster=2,
                 group=2),  # few M tiles: groups of 16 would pad them with empty tiles
    MatmulConfig(name="128x128_persistent_group_16_cluster_2", tile=(128, 128), stages=6, prefetch=4, cluster=2,
                 group=16, efficiency=0.7),  # twice the tiles: a finer last wave
    MatmulConfig(name="128x256_split_k", tile=(128, 256), stages=4, prefetch=2, persistent=False, split_k=True),
    # 0.76: on an H200 it ran 1.04-1.08 of cuBLAS at 512x512x32768 in four runs where 128x256_split_k ran
    # 0.97-1.0, and about even at 1024x1024x16384 (results/matmul_shapes/h200.json; the A/B runs of issue 34)
    MatmulConfig(name="128x128_split_k", tile=(128, 128), stages=6, prefetch=4, persistent=False, split_k=True,
                 efficiency=0.76),
    # decode (M <= 64): one consumer warpgroup, no rows of a 128-row tile wasted; B's stream is the time
    MatmulConfig(name="64x256_persistent", tile=(64, 256), stages=4, prefetch=2, efficiency=0.6,
                 registers=(40, 256)),
    MatmulConfig(name="64x256_split_k", tile=(64, 256), stages=4, prefetch=2, persistent=False, split_k=True,
                 efficiency=0.6, registers=(40, 256)),
    # few rows and a long K without split-K's partials: 128 x 8192 x 8192 is 2 x 64 tiles of 64 x 128, one
    # round, the cluster's two M tiles sharing each B tile (multicast); deep stages for B's stream
    MatmulConfig(name="64x128_persistent_group_2_cluster_2", tile=(64, 128), stages=8, prefetch=6, cluster=2,
                 group=2, efficiency=0.6, registers=(40, 256)),
    # decode (M <= 16): D^T = B^T A^T in tiles of 64 of N by M's 16 rows (wgmma's N = 16: no rows wasted),
    # split-K, deep stages for B's stream
    MatmulConfig(name="64x16_split_k_swapped", tile=(64, 16), stages=8, prefetch=6, persistent=False, split_k=True,
                 swap_ab=True, efficiency=0.5, registers=(40, 256)),
)
# split-K in one kernel: the slices combined by a grid reduction, no second launch. Verified, correct on
# the GPU, and forced by name only (config=...): on an H200 they ran 0.25-0.43 of cuBLAS where the
# two-kernel split-K runs 0.85-0.98 (16x4096x4096: 9.0 against 23.6 TFLOP/s; the last block's serial
# combine of S whole float32 tiles is the time; `git show fff003e:benchmarks/results/matmul_shapes/h200.json`)
ONE_KERNEL_SPLIT_K = (
    MatmulConfig(name="128x128_split_k_grid", tile=(128, 128), stages=4, prefetch=2, persistent=False, split_k=True,
                 grid_reduce=True, efficiency=0.6),
    MatmulConfig(name="64x256_split_k_grid", tile=(64, 256), stages=4, prefetch=2, persistent=False, split_k=True,
                 grid_reduce=True, efficiency=0.5),
    MatmulConfig(name="64x128_split_k_grid", tile=(64, 128), stages=4, prefetch=2, persistent=False, split_k=True,
                 grid_reduce=True, efficiency=0.5),
)
BY_NAME = {c.name: c for c in CONFIGS + ONE_KERNEL_SPLIT_K}


@dataclass(frozen=True)
class Choice:
    """A configuration at a shape: its K splits (1 without split-K) and the estimate's seconds."""

    config: MatmulConfig
    splits: int
    seconds: float


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def admits(config: MatmulConfig, m: int, n: int, k: int, splits: int = 1, a_major: str = "K",
           b_major: str = "K") -> bool:
    """Whether the configuration's kernels take this shape (recipes/split_k.py's assumptions for
    split-K: K a multiple of 8 S, N's tiles on blockIdx.y, MN-major splits' strides below 2^40
    bytes; one-kernel split-K: N's tiles on blockIdx.y and every split at least one K tile); the
    persistent kernels take every shape recipes.matmul accepts; a swapped split-K (swap_ab) the
    shapes whose M fits one column tile, its kernel's M and N being N and M."""
    if not config.split_k:
        return splits == 1
    if config.swap_ab:
        if m > config.tile[1]:
            return False
        m, n, a_major, b_major = n, m, b_major, a_major
    if config.grid_reduce:  # K's tiles in S runs of ceil(tiles / S): no run past K's end
        tiles = _cdiv(k, K_TILE)
        return 2 <= splits <= tiles and _cdiv(tiles, _cdiv(tiles, splits)) == splits and \
            _cdiv(n, config.tile[1]) <= GRID_YZ
    if splits < 2 or k % (ALIGN * splits) or _cdiv(n, config.tile[1]) > GRID_YZ:
        return False
    ks = k // splits
    return all(ks <= MN_MAJOR_KS and extent < MN_MAJOR_EXTENT
               for major, extent in ((a_major, m), (b_major, n)) if major == "MN")


def shape_group(config: MatmulConfig, m: int) -> int:
    """A persistent configuration's group at M: the largest multiple of the cluster up to its
    group that pads M's tiles to the fewest slots (a group of 16 over M's 2 tiles would pad them
    with 14 empty ones, 8 times the slots: 256 x 8192 x 8192 on 128 x 128 tiles; over 30 tiles,
    with 2: a group of 10 pads none)."""
    tiles = _cdiv(m, config.tile[0])
    groups = range(config.cluster, config.group + 1, config.cluster)
    return min(groups, key=lambda g: (_cdiv(tiles, g) * g, -g))


def balanced_grid(shape, block, group: int, sms: int = PEAK_SMS, cluster: int = 1) -> int:
    """A persistent grid at M x N (`shape`) for `block` tiles taken in groups of `group` M tiles: as
    few steps as `sms` blocks take over the grouped tiles (those past M in the last group included),
    then as few blocks as take that many steps, a multiple of `cluster`: 128 blocks of 16 tiles at
    8192^3, not 132 blocks of which 68 run a 16th tile."""
    mo, no = (_cdiv(d, b) for d, b in zip(shape, block))
    tiles = _cdiv(mo, group) * group * no
    steps = _cdiv(tiles, sms)
    blocks = _cdiv(tiles, steps)
    return min(sms - sms % cluster, _cdiv(blocks, cluster) * cluster)


def estimate(config: MatmulConfig, m: int, n: int, k: int, splits: int = 1, *, sms: int = PEAK_SMS,
             out_bytes: int = 2, specialize: bool = True) -> float:
    """The model's seconds for `config` with `splits` K slices at M x N x K (see the module's text);
    a persistent grid's group is shape_group's where the kernel is compiled at the shape
    (`specialize`), the configuration's own in a shape class's kernel."""
    bm, bn = config.tile
    mo, no = (_cdiv(n, bm), _cdiv(m, bn)) if config.swap_ab else (_cdiv(m, bm), _cdiv(n, bn))
    if config.persistent:
        group = shape_group(config, m) if specialize else config.group
        slots = _cdiv(mo, group) * group * no
        blocks = sms - sms % config.cluster
    else:
        slots = mo * no * splits
        blocks = sms
    rounds = _cdiv(slots, blocks)
    k_tiles = _cdiv(_cdiv(k, splits), K_TILE)
    k_tile_s = 2 * bm * bn * K_TILE / (PEAK_FLOPS / PEAK_SMS * config.efficiency)
    compute = rounds * (k_tiles + FIXED_K_TILES) * k_tile_s
    streaming = min(1.0, min(slots, blocks) / (sms / 2))
    if config.grid_reduce:  # the whole tiles' partials written and read back, the last block's combine
        streaming = min(1.0, min(slots, blocks) / sms)  # no producer warps: fewer loads in flight a block
        workspace = 4 * slots * bm * bn
        memory = (2 * (m * k + k * n) + 2 * workspace + out_bytes * m * n) / (DRAM_BYTES_PER_S * streaming)
        return max(compute, memory) + 4 * splits * bm * bn / COMBINE_BYTES_PER_S
    partials = 4 * splits * m * n if splits > 1 else 0
    memory = (2 * (m * k + k * n) + (partials or out_bytes * m * n)) / (DRAM_BYTES_PER_S * streaming)
    total = max(compute, memory)
    if splits > 1:
        total += (partials + out_bytes * m * n) / DRAM_BYTES_PER_S + LAUNCH_S
    return total


def candidates(config: MatmulConfig, m: int, n: int, k: int, a_major: str = "K", b_major: str = "K",
               **model) -> list[Choice]:
    """Each admitted split count of `config` (1 alone without split-K) with its estimate."""
    out = []
    for splits in (SPLITS if config.split_k else (1,)):
        if admits(config, m, n, k, splits, a_major, b_major) and (
                splits == 1 or _cdiv(k // splits, K_TILE) >= MIN_SPLIT_K_TILES):
            out.append(Choice(config, splits, estimate(config, m, n, k, splits, **model)))
    return out


def choose(m: int, n: int, k: int, *, a_major: str = "K", b_major: str = "K", sms: int = PEAK_SMS,
           out_bytes: int = 2, configs=CONFIGS, specialize: bool = True) -> Choice:
    """The configuration (and splits) of least estimated time among `configs` that admit the
    shape; ties go to the earlier configuration (the wide tile first). At M <= 64 only the 64-row
    tiles without a cluster where one admits: a 128-row tile's second warpgroup computes rows past
    M alone, and a cluster's second block along M an empty tile (H200, 16 x 4096 x 4096, five
    runs: 64 x 256 split-K 0.87-0.88 of cuBLAS, 128 x 128 split-K 0.84-0.85; 16 x 14336 x 4096:
    64 x 256 split-K 0.90, the 64 x 128 tile in clusters of 2 0.80; the estimate's memory-bound
    times a few percent apart)."""
    best = None
    if m <= 64:
        configs = tuple(c for c in configs if c.tile[0] <= 64 and c.cluster == 1) or configs
    if not specialize:  # a shape class's kernels: no swapped split-K (compiled at a shape only)
        configs = tuple(c for c in configs if not c.swap_ab)
    for config in configs:
        for choice in candidates(config, m, n, k, a_major, b_major, sms=sms, out_bytes=out_bytes,
                                 specialize=specialize):
            if best is None or choice.seconds < best.seconds:
                best = choice
    if best is None:
        raise ValueError(f"no configuration admits M = {m}, N = {n}, K = {k} among "
                         f"{', '.join(c.name for c in configs)}")
    return best


__all__ = ["BY_NAME", "CONFIGS", "ONE_KERNEL_SPLIT_K", "Choice", "MatmulConfig", "WIDE", "admits", "balanced_grid", "candidates", "choose",
           "estimate", "shape_group"]
