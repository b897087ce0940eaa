"""The Hopper GEMM recipe as an autotuning recipe: for one problem (M, N, K, the operands' majors,
the output dtype), build(**config) is hopper_gemm with the configuration's block tile, stages,
cluster, persistence and grid group; `space` the default space over them; `inputs()` random
operands of the problem on the GPU.

    result = tp.autotune(HopperGemmTuning(4096, 4096, 4096))     # the default space, 108 candidates
    result = tp.autotune(matmul_tuning(a, w.t()))                 # the problem of matmul(a, w.t())
    (d,) = result.kernel.run(*operands(a, w.t()))

The rest of each candidate is matmul.py's schedule for the shape class (warp-specialized, the
epilogue of the output dtype); sizes may be symbols (the aligned extents then assumed multiples of
ALIGN_ELEMENTS, as matmul.py's kernels). Imports only the public `tileproof` API; torch when
inputs are made.
"""

from __future__ import annotations

import dataclasses

import tileproof as tp

from .hopper_gemm import hopper_gemm
from .hopper_params import Cluster, HopperTile
from .matmul import ALIGN_ELEMENTS, SMS, Matmul, contiguous_extents, params_for
from .params import GridOrder

SPACE = {
    "tile": [(128, 128), (128, 256), (256, 128)],  # the block tile (M, N)
    "stages": [3, 4, 5],  # TMA stages over K (prefetch stages - 2, as matmul.py's schedule)
    "cluster": [1, 2],  # blocks per cluster along x, B's tile multicast to them
    "persistent": [True, False],  # a persistent grid of one block per SM, or one block per tile
    "group": [1, 8, 16],  # M tiles per group of the grid order (L2 reuse of A)
}


class HopperGemmTuning:
    """An autotuning recipe (build, space, inputs) for D = A @ B on the Hopper GEMM recipe: see the
    module's text. m, n, k: ints or symbol names; a_major, b_major: "K" or "MN"; out_dtype: the
    output's dtype name (bfloat16, float16, float32)."""

    def __init__(self, m, n, k, *, a_major: str = "K", b_major: str = "K", out_dtype: str = "bfloat16",
                 sms: int = SMS):
        for name, value in (("a_major", a_major), ("b_major", b_major)):
            if value not in ("K", "MN"):
                raise tp.ScheduleError(f"HopperGemmTuning: {name} must be 'K' or 'MN', got {value!r}")
        self.m, self.n, self.k = m, n, k
        self.a_major, self.b_major, self.out_dtype, self.sms = a_major, b_major, out_dtype, sms
        self.base = params_for(a_major, b_major, out_dtype)  # checks out_dtype

    def __repr__(self) -> str:
        return (f"HopperGemmTuning({self.m!r}, {self.n!r}, {self.k!r}, a_major={self.a_major!r}, "
                f"b_major={self.b_major!r}, out_dtype={self.out_dtype!r}, sms={self.sms})")

    @property
    def space(self) -> dict[str, list]:
        return {name: list(values) for name, values in SPACE.items()}

    def params(self, *, tile, stages, cluster, persistent, group):
        """The HopperGemmParams of one configuration (tp.ScheduleError for one the recipe refuses)."""
        pipeline = dataclasses.replace(self.base.pipeline, stages=stages, prefetch=stages - 2)
        return dataclasses.replace(self.base, tile=HopperTile(m=tile[0], n=tile[1]), pipeline=pipeline,
                                   grid=GridOrder(group=group, persistent=self.sms if persistent else None),
                                   cluster=Cluster(size=cluster))

    def build(self, *, tile=(128, 256), stages=4, cluster=2, persistent=True, group=16) -> tp.Fusion:
        """The candidate's fusion (the defaults: matmul.py's schedule)."""
        fusion = hopper_gemm(self.m, self.n, self.k, self.params(tile=tile, stages=stages, cluster=cluster,
                                                                 persistent=persistent, group=group))
        sizes = {"M": self.m, "N": self.n, "K": self.k}
        for extent in contiguous_extents(self.a_major, self.b_major):
            if isinstance(sizes[extent], str):
                fusion.assume(f"{sizes[extent]} % {ALIGN_ELEMENTS} == 0")
        return fusion

    def inputs(self) -> tuple:
        """Random operands of the problem on the GPU, as the recipe takes them: A [M, 1, K] and
        B [1, N, K], each laid out in its major (ints m, n, k only)."""
        try:
            import torch  # an optional extra: imported only when the recipe is called on tensors
        except ImportError as e:
            raise tp.NoDeviceError(f"{self!r}: inputs are made with PyTorch, which is not importable ({e})") from None
        if not torch.cuda.is_available():
            raise tp.NoDeviceError(f"{self!r}: inputs are made on the GPU, and PyTorch sees none")
        if not all(isinstance(s, int) for s in (self.m, self.n, self.k)):
            raise tp.ScheduleError(f"{self!r}: inputs need int sizes; pass the arrays to tp.autotune(inputs=...)")
        m, n, k = self.m, self.n, self.k

        def random(rows, cols):
            return (torch.randn(rows, cols, device="cuda") / 8).to(torch.bfloat16)

        a = random(m, k) if self.a_major == "K" else random(k, m).t()
        b = random(n, k).t() if self.b_major == "K" else random(k, n)  # [K, N]
        return operands(a, b)


def operands(a, b) -> tuple:
    """matmul's natural operands A [M, K], B [K, N] as the recipe's views A [M, 1, K], B [1, N, K]."""
    return a.unsqueeze(1), b.t().unsqueeze(0)


def matmul_tuning(a, b, out_dtype: str = "bfloat16") -> HopperGemmTuning:
    """The autotuning recipe of matmul(a, b, out_dtype)'s problem: its sizes and majors (checked as
    matmul checks them), timed on these operands."""
    entry = Matmul(out_dtype)
    a_major, b_major = entry.majors(a, b)
    (m, k), n = a.shape, b.shape[1]
    recipe = HopperGemmTuning(m, n, k, a_major=a_major, b_major=b_major, out_dtype=entry.out_dtype)
    recipe.inputs = lambda: operands(a, b)
    return recipe


__all__ = ["SPACE", "HopperGemmTuning", "matmul_tuning", "operands"]
