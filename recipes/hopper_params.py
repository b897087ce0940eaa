"""The parameters of the Hopper wgmma GEMM recipe (hopper_gemm.py), grouped as nvFuser's
MatmulParams groups them: the block tile and its warpgroups (HopperTile), the TMA pipeline and
its warp specialization (TmaPipeline), the grid's block order (GridOrder), the cluster and its
multicast (Cluster), the output's path (Epilogue) and each operand's layout (Operand); all in
HopperGemmParams. Every group checks its fields at construction (tp.ScheduleError). Imports only
the public `tileproof` API.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import tileproof as tp

from .params import Epilogue, GridOrder, Params

SWIZZLES = (128, 64, 32)


@dataclass(frozen=True, kw_only=True, repr=False)
class HopperTile(Params):
    """The block tile and its warpgroups' wgmma tiles (nvFuser's cta_tile and warp_tile).

    m, n: the block tile's rows and columns of D.
    swizzle: the operands' swizzle in bytes (128, 64 or 32), also the K tile: one swizzle span
        of bfloat16 (64 at 128 bytes).
    warpgroup_rows: 64: a warpgroup per 64 rows, one Hopper_64_{n}_16 wgmma per 16 columns of K;
        128: a warpgroup per 128 rows, two 64-row wgmmas each (a loop mi).
    split_n: two warpgroups splitting the columns instead, each issuing m / 64
        Hopper_64_{n / 2}_16 wgmmas per 16 columns of K (192 x 192: three 64 x 96 x 16 each).
    """

    m: int = 128
    n: int = 128
    swizzle: int = 128
    warpgroup_rows: int = 64
    split_n: bool = False

    def __post_init__(self):
        self._check_choice("warpgroup_rows", (64, 128))
        self._check_bool("split_n")
        self._check_int("m", low=64, multiple_of=64 if self.split_n else self.warpgroup_rows)
        self._check_choice("swizzle", SWIZZLES)
        if self.split_n and self.warpgroup_rows != 64:
            self._fail("warpgroup_rows", "64 with split_n (the warpgroups split the columns, not the rows)",
                       self.warpgroup_rows)
        self._check_int("n", multiple_of=16 if self.split_n else 8)
        if not hasattr(tp.MmaMacro, f"Hopper_64_{self.n // 2 if self.split_n else self.n}_16"):
            self._fail("n", "twice a wgmma N (8 to 256) with split_n" if self.split_n else "a wgmma N, a multiple "
                       "of 8 from 8 to 256", self.n)

    @property
    def macro(self) -> tp.MmaMacro:
        """Each warpgroup's wgmma: Hopper_64_{n}_16, or Hopper_64_{n / 2}_16 with split_n."""
        return getattr(tp.MmaMacro, f"Hopper_64_{self.n // 2 if self.split_n else self.n}_16")


@dataclass(frozen=True, kw_only=True, repr=False)
class TmaPipeline(Params):
    """A's and B's TMA loads over the K loop (nvFuser's circular_buffer_options and
    circular_buffering_strategy).

    stages: tiles of each operand circular-buffered over the K loop (1: none), an mbarrier each.
    prefetch: the TMA loads issued ahead (-1: stages - 1; the verifier judges every value).
    warp_specialized: tp.WarpSpecialized(...): a producer warpgroup loads the stages, the
        consumers release each on an empty mbarrier (None: every warpgroup loads and computes).
    war_mbarriers: tp.Pipelined(uses_mbarrier_for_war=True): a stage refilled after each
        warpgroup released it on an empty mbarrier instead of after a __syncthreads.
    """

    stages: int = 1
    prefetch: int = -1
    warp_specialized: tp.WarpSpecialized | None = None
    war_mbarriers: bool = False

    def __post_init__(self):
        self._check_int("stages")
        self._check_type("prefetch", int)
        self._check_type("warp_specialized", tp.WarpSpecialized, none_ok=True)
        self._check_bool("war_mbarriers")
        if self.stages == 1 and (self.warp_specialized is not None or self.war_mbarriers):
            self._fail("stages", "at least 2 with warp_specialized or war_mbarriers (they order the refills of "
                       "circular-buffered stages)", self.stages)
        if self.warp_specialized is not None and self.war_mbarriers:
            self._fail("war_mbarriers", "False with warp_specialized (its consumers always release the stages on "
                       "empty mbarriers)", self.war_mbarriers)

    @property
    def strategy(self) -> tp.WarpSpecialized | tp.Pipelined | None:
        """The circular_buffer strategy: warp-specialized, Pipelined with WAR mbarriers, or the default."""
        return self.warp_specialized or (tp.Pipelined(True) if self.war_mbarriers else None)


@dataclass(frozen=True, kw_only=True, repr=False)
class Cluster(Params):
    """Thread block clusters (nvFuser's cluster_dims).

    size: clusters of `size` blocks along blockIdx.x (M tiles of one N tile), B's tile loaded
        once per cluster and multicast to its blocks (warp-specialized schedules only: the
        verifier rejects the others, CLUSTER-MULTICAST).
    spread: B's tile loaded as `size` boxes (a serial loop of them), one by each block of the
        cluster, each multicast to all (CUTLASS's split of a multicast tile).
    """

    size: int = 1
    spread: bool = False

    def __post_init__(self):
        self._check_int("size")
        self._check_bool("spread")
        if self.spread and self.size == 1:
            self._fail("spread", "False without a cluster (it spreads B's loads over the cluster's blocks)",
                       self.spread)


def swizzled_box(tile, swizzle_bytes):
    """The operand tile [.., rows, one swizzle span of K] as the TMA's swizzled box lays it out
    (Operand's default layout)."""
    tile.apply_mma_swizzle_for_tma_load(getattr(tp.MmaInputSmemSwizzle, f"B{swizzle_bytes}"))


@dataclass(frozen=True, kw_only=True, repr=False)
class Operand(Params):
    """One operand (A or B): its layout in global memory and how its shared tile is laid out
    and loaded.

    major: "K": K innermost in global memory (A [M, K], B [N, K] row-major); "MN": M (A) or N
        (B) innermost, the layout of a transposed A or of a @ b's B: its tile laid out as MN-major
        TMA boxes (a loop of one box per swizzle span of rows), read by wgmma transposed.
    layout: a K-major tile's shared layout, layout(tile, swizzle_bytes) on the tile
        [.., rows, one swizzle span of K] (swizzled_box: the TMA's swizzled box). Another lays
        out a schedule to teach with, which the verifier judges (examples/invalid/wgmma.py).
    load: the copy that fills the shared tile (the TMA; Set keeps the TMA's box as the loop,
        to be rescheduled onto the threads, examples/valid/wgmma.py; cp.async is rejected by
        the verifier, MMA-OPERAND-LAYOUT: no proxy fence after its wait).
    """

    major: str = "K"
    layout: Callable = swizzled_box
    load: tp.LoadStoreOpType = tp.LoadStoreOpType.TMA

    def __post_init__(self):
        self._check_choice("major", ("K", "MN"))
        if not callable(self.layout):
            self._fail("layout", "a function of (tile, swizzle bytes)", self.layout)
        self._check_type("load", tp.LoadStoreOpType)
        if self.major == "MN" and self.layout is not swizzled_box:
            self._fail("layout", "swizzled_box for an MN-major operand (its tile is laid out as MN-major boxes)",
                       self.layout)


@dataclass(frozen=True, kw_only=True, repr=False)
class HopperGemmParams(Params):
    """Every choice of the Hopper wgmma GEMM recipe (hopper_gemm): see each group's class."""

    tile: HopperTile = HopperTile()
    pipeline: TmaPipeline = TmaPipeline()
    grid: GridOrder = field(default_factory=GridOrder)
    cluster: Cluster = Cluster()
    epilogue: Epilogue = field(default_factory=Epilogue)
    a: Operand = Operand()
    b: Operand = Operand()

    def __post_init__(self):
        for name, kind in (("tile", HopperTile), ("pipeline", TmaPipeline), ("grid", GridOrder),
                           ("cluster", Cluster), ("epilogue", Epilogue), ("a", Operand), ("b", Operand)):
            self._check_type(name, kind)
        if self.epilogue.by_box and self.tile.split_n:
            self._fail("epilogue", "an Epilogue without by_box where the warpgroups split the columns (a warpgroup "
                       "holds a whole TMA box of the output only where they split the rows)", self.epilogue)


__all__ = ["Cluster", "HopperGemmParams", "HopperTile", "Operand", "TmaPipeline", "swizzled_box"]
