"""matmul(a, b): D = A @ B on natural PyTorch operands through the Hopper GEMM recipe (hopper_gemm.py):
A [M, K] and B [K, N], bfloat16, each either major (A row-major, or M-major as a.t() of a [K, M]
tensor; B N-major as a row-major [K, N], or K-major as w.t() of a [N, K] weight), the output a new
row-major [M, N] tensor of `out_dtype` (bfloat16, float16 or float32; float32 accumulation).

    d = tileproof.recipes.matmul(a, w.t(), out_dtype=torch.bfloat16)   # a @ w.T, w [N, K]
    op = tp.as_torch_op(Matmul(out_dtype=torch.float32), name="mylib::mm")   # for torch.compile

Each call picks a configuration for its shape (matmul_heuristic.py: the block tile, stages,
cluster, persistence, group, split-K and its splits, by an estimate of time on the GPU's SMs) and
runs its kernels compiled AT THAT SHAPE (M, N, K, and split-K's S and K / S, as numbers; a
persistent grid of balanced_grid's blocks), verified there, compiled on first use and kept in a
bounded LRU cache per (configuration, majors, output dtype, M, N, K, splits, SMs). The same schedule
compiled for a shape class (M, N, K symbolic: shape_class_fusion, verified for every size whose
contiguous extents are multiples of 8, the 16-byte rows the TMA needs) runs a little slower (H200:
0.90 of cuBLAS at 8192^3 against 0.92 at the shape, 1.08 against 1.14 at 4096^3; 64-bit index
math, its divisions by the symbolic tile counts once a tile); Matmul(specialize=False) keeps those, one compile per shape class, for shapes seen once. The
persistent configurations are hopper_gemm (SCHEDULE's warp-specialized 128 x 256 tile of the
benchmarks, and its variants); split-K is split_k.py's two kernels, float32 partials of K's slices
and their sum, or its one kernel (split_k_grid, the *_split_k_grid configurations: the slices'
accumulators combined by a grid reduction over blockIdx.z, no second launch).
Matmul(config=...) forces one. Every bad operand is an InputError naming the operand
and what to pass. A call whose tensors have an earlier call's type, shape, strides, dtype and
device (its signature) skips the checks and the choice: each Matmul keeps a _Plan per signature
(the compiled set's key and the views' geometry) and checks only A's and B's 16-byte alignment;
a call at an earlier call's addresses on the same stream launches that call's packed launches again
(_Ready: an output allocated and one launch, two for split-K; H200 host time in
benchmarks/results/matmul_overhead).

A fused epilogue (matmul(..., bias=, residual=, scale=, activation=), or Matmul(epilogue=
EpilogueOps(...))) computes cast(activation(scale * A @ B + bias + residual)) on the accumulators
in registers before the output's cast (hopper_gemm.py epilogue_ops), in the persistent kernel, in
split-K's sum of the partials (split_k_sum) or in one-kernel split-K's last block (split_k_grid),
on the configurations that fuse it (epilogue_configs). Imports only the public `tileproof` API; torch when called.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass

import tileproof as tp

from .hopper_gemm import hopper_gemm
from .hopper_params import Cluster, HopperGemmParams, HopperTile, Operand, TmaPipeline
from .device import SMS, device_sms
from .entry_cache import lru_entry
from .matmul_heuristic import (BY_NAME, CONFIGS, ONE_KERNEL_SPLIT_K, WIDE, Choice, MatmulConfig, balanced_grid,
                               candidates, choose, shape_group)
from .params import Epilogue, EpilogueOps, GridOrder
from .split_k import SplitKParams, split_k_grid, split_k_operands, split_k_partials, split_k_sum

ALIGN_ELEMENTS = 8  # 16-byte rows and 16-byte aligned starts: the TMA's global strides and address
SCHEDULE = HopperGemmParams(
    tile=HopperTile(m=128, n=256),
    pipeline=TmaPipeline(stages=4, prefetch=2,
                         warp_specialized=tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))),
    grid=GridOrder(group=16, persistent=SMS), cluster=Cluster(size=2))
OUT_DTYPES = ("bfloat16", "float16", "float32")
CACHE_SIZE = 64  # compiled configurations at a shape a Matmul keeps (least recently used dropped)
PLANS_PER_SET = 64  # call signatures a Matmul remembers per compiled set it keeps (a plan is a few tuples)
PARTIALS_BYTES = 1 << 28  # split-K partials a Matmul keeps for its repeated calls (256 MiB; then let go)
ENTRY_CACHE_SIZE = 16  # Matmuls matmul() keeps, one per output dtype, target, config and epilogue (LRU): each
# holds up to CACHE_SIZE compiled sets, and a distinct epilogue scale is a distinct entry
LONG_ACTIVATIONS = ("gelu", "gelu_tanh")  # 5 and 9 ops a fragment element


def fuses(config: MatmulConfig, ops: EpilogueOps) -> bool:
    """Whether `config` runs `ops` fused: every configuration without ops; with gelu's 5 or 9 ops
    an element, split-K (its sum kernel runs the ops on a thread's VECTOR sums) and the persistent
    ones of at most 64 accumulators a consumer thread (n <= 128), whose unrolled epilogue stays
    within UNROLL-LENGTH's 1024 statements (tests/recipes/test_matmul_epilogue.py verifies each), as
    one-kernel split-K's (grid_reduce: the ops on its last block's fragments) of n <= 128."""
    return ops.activation not in LONG_ACTIVATIONS or (config.split_k and not config.grid_reduce) or \
        config.tile[1] <= 128


def epilogue_configs(ops: EpilogueOps) -> tuple[MatmulConfig, ...]:
    """The named configurations that run `ops` fused (the one-kernel split-K by name only:
    matmul_heuristic measured it slow)."""
    return tuple(c for c in CONFIGS + ONE_KERNEL_SPLIT_K if fuses(c, ops))


def params_for(a_major: str, b_major: str, out_dtype: str, ops: EpilogueOps = EpilogueOps()) -> HopperGemmParams:
    """SCHEDULE for one shape class: the operands' majors ("K" or "MN"), the output's dtype (a
    16-bit output through stmatrix and TMA stores one box at a time; float32 from registers) and
    the ops fused before the output's cast (EpilogueOps)."""
    dtype = getattr(tp, out_dtype)
    epilogue = (Epilogue(dtype=dtype, stmatrix=True, by_box=True, ops=ops) if dtype.bytes == 2
                else Epilogue(dtype=dtype, ops=ops))
    return dataclasses.replace(SCHEDULE, epilogue=epilogue, a=Operand(major=a_major), b=Operand(major=b_major))


def config_params(config: MatmulConfig, a_major: str, b_major: str, out_dtype: str,
                  sms: int = SMS, shape: tuple[int, int, int] | None = None,
                  ops: EpilogueOps = EpilogueOps()) -> HopperGemmParams | SplitKParams:
    """The recipe's parameters for a configuration of matmul_heuristic.py: SCHEDULE's (params_for)
    with its tile, stages, registers, cluster and group (at a shape: shape_group's) and a
    persistent grid of `sms` blocks (at a `shape` (M, N, K), balanced_grid's blocks over the
    shape's tiles), `ops` fused; split-K's partials kernel (no grid order, cluster or epilogue:
    its sum kernel fuses the ops; swap_ab: the operands' majors swapped, B^T its A), or its one
    kernel's (grid_reduce: the stages without warp specialization, which a grid combine excludes)."""
    tile = HopperTile(m=config.tile[0], n=config.tile[1])
    pipeline = dataclasses.replace(
        SCHEDULE.pipeline, stages=config.stages, prefetch=config.prefetch,
        warp_specialized=tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=config.registers))
    if config.grid_reduce:
        pipeline = TmaPipeline(stages=config.stages, prefetch=config.prefetch)
    if config.split_k:  # a swapped split-K's kernel reads B^T as its A and A^T as its B
        majors = (b_major, a_major) if config.swap_ab else (a_major, b_major)
        return SplitKParams(tile=tile, pipeline=pipeline, a=Operand(major=majors[0]), b=Operand(major=majors[1]))
    group = config.group if shape is None else shape_group(config, shape[0])
    blocks = sms if shape is None else balanced_grid(shape[:2], config.tile, group, sms, config.cluster)
    return dataclasses.replace(params_for(a_major, b_major, out_dtype, ops), tile=tile, pipeline=pipeline,
                               grid=GridOrder(group=group, persistent=blocks),
                               cluster=Cluster(size=config.cluster))


def config_fusions(config: MatmulConfig, a_major: str, b_major: str, out_dtype: str, sms: int = SMS,
                   shape: tuple[int, int, int] | None = None, splits: int = 1,
                   ops: EpilogueOps = EpilogueOps()) -> list:
    """The fusions a configuration runs, in order: the GEMM at `shape` (M, N, K) (shape_fusion) or,
    without one, the shape class's (shape_class_fusion), `ops` fused; or split-K's partials
    (split_k_partials: S = splits, M, N, KS = K / S at the shape, else symbolic) and their sum in
    the output dtype, `ops` fused (split_k_sum); or one-kernel split-K's (split_k_grid: `splits`
    runs of K's tiles combined over blockIdx.z, `ops` fused, at the shape or M, N, K symbolic)."""
    if config.grid_reduce:
        if not isinstance(splits, int) or splits < 2:
            raise tp.ScheduleError(f"config_fusions: {config.name} needs splits >= 2, got {splits!r}")
        params = config_params(config, a_major, b_major, out_dtype)
        fusion = split_k_grid(params, shape or ("M", "N", "K"), splits, getattr(tp, out_dtype), ops)
        if shape is None:
            for extent in contiguous_extents(a_major, b_major):
                fusion.assume(f"{extent} % {ALIGN_ELEMENTS} == 0")
        return [fusion]
    if config.split_k:
        params = config_params(config, a_major, b_major, out_dtype)
        if shape is None:
            if config.swap_ab:
                raise tp.ScheduleError(f"config_fusions: {config.name} is compiled at a shape only (its partials "
                                       f"are stored transposed): give shape=(M, N, K)")
            return [split_k_partials(params), split_k_sum(getattr(tp, out_dtype), ops=ops)]
        m, n, k = shape
        if splits < 2 or k % splits:
            raise tp.ScheduleError(f"config_fusions: {config.name} at K = {k} needs splits >= 2 dividing K, "
                                   f"got {splits}")
        partials = (split_k_partials(params, (splits, n, m, k // splits), transposed=True) if config.swap_ab
                    else split_k_partials(params, (splits, m, n, k // splits)))  # swapped: P^T, stored as P
        return [partials, split_k_sum(getattr(tp, out_dtype), (splits, m, n), ops)]
    if shape is None:
        return [shape_class_fusion(a_major, b_major, out_dtype, config, sms, ops)]
    return [shape_fusion(a_major, b_major, out_dtype, shape, config, sms, ops)]


def shape_fusion(a_major: str, b_major: str, out_dtype: str, shape: tuple[int, int, int],
                 config: MatmulConfig = WIDE, sms: int = SMS, ops: EpilogueOps = EpilogueOps()) -> tp.Fusion:
    """hopper_gemm at M x N x K = `shape` (numbers) with a persistent configuration's parameters
    and balanced_grid's blocks, `ops` fused: the kernel recipes.matmul runs at that shape."""
    if config.split_k:
        raise tp.ScheduleError(f"shape_fusion: {config.name} is split-K, its fusions come from config_fusions")
    return hopper_gemm(*shape, config_params(config, a_major, b_major, out_dtype, sms, shape, ops))


def shape_class_fusion(a_major: str, b_major: str, out_dtype: str, config: MatmulConfig = WIDE,
                       sms: int = SMS, ops: EpilogueOps = EpilogueOps()) -> tp.Fusion:
    """The shape class's fusion: hopper_gemm at symbolic M, N, K (SCHEDULE's, or a persistent
    configuration's on `sms` blocks; Matmul(specialize=False) runs it), assuming the extents the operands and the output are
    contiguous along multiples of ALIGN_ELEMENTS (A's K or M, B's K or N, N)."""
    if config.split_k:
        raise tp.ScheduleError(f"shape_class_fusion: {config.name} is split-K, its fusions come from config_fusions")
    fusion = hopper_gemm("M", "N", "K", config_params(config, a_major, b_major, out_dtype, sms, ops=ops))
    for extent in contiguous_extents(a_major, b_major):
        fusion.assume(f"{extent} % {ALIGN_ELEMENTS} == 0")
    return fusion


def contiguous_extents(a_major: str, b_major: str) -> list[str]:
    """The extents A, B and the row-major output are contiguous along (A's K or M, B's K or N, N):
    each a multiple of ALIGN_ELEMENTS for the TMA."""
    return sorted({"K" if a_major == "K" else "M", "K" if b_major == "K" else "N", "N"})


def _torch():
    try:
        import torch  # an optional extra: imported only when matmul is called
    except ImportError as e:
        raise ImportError(f"tileproof.recipes.matmul takes PyTorch tensors ({e})") from None
    return torch


def _dtype_name(dtype) -> str:
    name = dtype.name if isinstance(dtype, tp.DataType) else str(dtype).removeprefix("torch.")
    if name not in OUT_DTYPES:
        raise tp.InputError(f"matmul: out_dtype must be one of {', '.join(OUT_DTYPES)} (a torch dtype, a tp dtype "
                            f"or its name), got {dtype!r}")
    return name


def _major(t, name: str, rows: str, cols: str, inner_names: tuple[str, str]) -> str:
    """Which axis of the 2-D operand `t` [rows, cols] is contiguous: "K" or "MN", by its strides."""
    (r, c), (sr, sc) = t.shape, t.stride()
    if sc == 1 and (sr == c or r == 1):
        return inner_names[1]
    if sr == 1 and (sc == r or c == 1):
        return inner_names[0]
    raise tp.InputError(f"matmul: {name} [{rows}, {cols}] = {list(t.shape)} has strides {list(t.stride())}; it must be "
                        f"dense along one axis (row-major, or the .t() of a row-major tensor): pass {name}.contiguous()")


def _check(torch, a, b) -> None:
    for name, t in (("A", a), ("B", b)):
        if not isinstance(t, torch.Tensor):
            raise tp.InputError(f"matmul: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise tp.InputError(f"matmul: {name} must be 2-D ([M, K] for A, [K, N] for B), got shape {list(t.shape)}")
        if t.dtype != torch.bfloat16:
            raise tp.InputError(f"matmul: {name} must be bfloat16, got {str(t.dtype).removeprefix('torch.')}")
    if a.shape[1] != b.shape[0]:
        raise tp.InputError(f"matmul: A is [M, K] = {list(a.shape)} and B is [K, N] = {list(b.shape)}: their K differ "
                            f"(for B as [N, K], pass b.t())")
    if a.device != b.device:
        raise tp.InputError(f"matmul: A is on {a.device} and B on {b.device}; both must be on one GPU")


def _check_addresses(a, b) -> None:
    """A's and B's first elements at 16-byte aligned addresses (the TMA's): checked at every call."""
    for name, t in (("A", a), ("B", b)):
        if t.data_ptr() % (2 * ALIGN_ELEMENTS):
            raise tp.InputError(f"matmul: {name} does not start at a 16-byte aligned address, which the TMA "
                                f"needs (pass {name}.clone())")


def tensor_signature(t) -> tuple:
    """What a call's checks and choices read of a tensor, all but its address: its type, shape,
    strides, dtype and device (an exception for what is no tensor)."""
    return type(t), t.shape, t.stride(), t.dtype, t.device


@dataclass(frozen=True)
class _Plan:
    """What the checks and the choice decided for one call signature (each tensor's tensor_signature),
    so that a call with the same one only checks the addresses and launches: the compiled set's
    key in Matmul._kernels (what compiles it again if the LRU dropped it), whether it is split-K's
    two kernels (partials, then their sum; one-kernel split-K runs as the persistent kernels do),
    the (sizes, strides) of the views the kernels read of A and B (of B and A where `swapped`;
    torch's as_strided, one op each instead of two or three), and for each term the shape its
    bias is reshaped to (None: a residual, passed as it is)."""

    kernels_key: tuple
    a_view: tuple[tuple, tuple]
    b_view: tuple[tuple, tuple]
    split_k: bool
    term_shapes: tuple
    swapped: bool = False  # split-K of D^T: its partials [S, N, M] read by the sum as [S, M, N]


@dataclass(frozen=True)
class _Ready:
    """A call's launches packed once for one signature at one set of addresses on one stream
    (Kernel.prepared), so that a repeated call costs its launches and its output's allocation:
    all but the last launched as packed, the last allocating the output. It holds its kernels
    (their modules stay loaded) and split-K's float32 partials, one buffer per plan (a shape) and
    stream (Matmul._partials) that every such call on the stream reuses: the stream orders the sum
    kernel's reads before the next call's partials kernel writes, as torch's caching allocator
    hands a freed buffer to the next call on its stream (CUDA graphs captured on one stream share
    it, as they share a kernel's grid-reduction workspace)."""

    kernels: tuple
    launches: tuple
    held: tuple

    def current(self) -> bool:
        return all(k.current(launch) for k, launch in zip(self.kernels, self.launches))


def _view_geometry(view) -> tuple[tuple, tuple]:
    return tuple(view.shape), view.stride()


def _config(config) -> MatmulConfig | None:
    if config is None or isinstance(config, MatmulConfig):
        return config
    if isinstance(config, str) and config in BY_NAME:
        return BY_NAME[config]
    raise tp.InputError(f"matmul: config must be None (chosen per shape), a MatmulConfig or one of "
                        f"{', '.join(BY_NAME)}, got {config!r}")




class Matmul:
    """D = A @ B through the Hopper GEMM recipe, for one output dtype (see the module's text):
    call it on (a, b) for the output tensor; tp.as_torch_op(Matmul(...)) makes it an operator.
    config: None (each shape's choice, matmul_heuristic.choose), or a MatmulConfig or its name
    (matmul_heuristic.CONFIGS) to run every shape with (its splits still chosen per shape).
    specialize: True compiles each configuration at each call's shape (the faster kernels; a
    compile, about a second, the first time a shape comes); False the shape class's kernels (M, N,
    K symbolic: one compile serves every shape). cache_size: the compiled sets kept (LRU).
    epilogue: EpilogueOps fused before the output's cast, out = cast(activation(scale * A @ B +
    bias + residual)); the call then takes the bias ([N] or [1, N] for bias="column", [M] or
    [M, 1] for "row"; float32 or the output's dtype) and the residual ([M, N] row-major, the
    output's dtype) after a and b, in that order (input_names)."""

    output_count = 1

    def __init__(self, out_dtype="bfloat16", target: str = "sm_90a", config=None, specialize: bool = True,
                 cache_size: int = CACHE_SIZE, epilogue: EpilogueOps | None = None):
        self.out_dtype = _dtype_name(out_dtype)
        self.target = target
        self.config = _config(config)
        if not isinstance(epilogue, (EpilogueOps, type(None))):
            raise tp.InputError(f"matmul: epilogue must be an EpilogueOps or None, got {epilogue!r}")
        self.epilogue = epilogue or EpilogueOps()
        self.configs = epilogue_configs(self.epilogue)
        if self.config is not None and not fuses(self.config, self.epilogue):
            raise tp.InputError(f"matmul: configuration {self.config.name} does not fuse {self.epilogue!r} (gelu "
                                f"needs a tile of at most 128 columns or split-K's two kernels): "
                                f"pass one of {', '.join(c.name for c in self.configs)} or config=None")
        self.input_names = ("a", "b") + ("bias",) * (self.epilogue.bias is not None) + \
            ("residual",) * self.epilogue.residual
        if not isinstance(specialize, bool):
            raise tp.InputError(f"matmul: specialize must be True or False, got {specialize!r}")
        if self.config is not None and self.config.swap_ab and not specialize:
            raise tp.InputError(f"matmul: configuration {self.config.name} is compiled at each shape only (its "
                                f"partials are stored transposed): pass specialize=True or another configuration")
        if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 1:
            raise tp.InputError(f"matmul: cache_size must be a positive int, got {cache_size!r}")
        self.specialize = specialize
        self.cache_size = cache_size
        self._kernels: OrderedDict[tuple, list] = OrderedDict()
        self._choices: dict[tuple, Choice] = {}  # per call shape: the estimate's loop is a call's host time
        self._plans: dict[tuple, _Plan] = {}  # per call signature: the checks' and choice's host time
        self._ready: dict[tuple, _Ready] = {}  # per signature, addresses and stream: the packed launches
        self._partials: dict[tuple, object] = {}  # split-K's partials per plan (its shape) and stream (_Ready)
        self._partials_bytes = 0

    def __repr__(self) -> str:
        forced = "" if self.config is None else f", config={self.config.name!r}"
        symbolic = "" if self.specialize else ", specialize=False"
        fused = f", epilogue={self.epilogue!r}" if self.epilogue.any else ""
        return f"Matmul(out_dtype={self.out_dtype!r}, target={self.target!r}{forced}{symbolic}{fused})"

    def kernels(self, config: MatmulConfig, a_major: str, b_major: str, sms: int = SMS,
                shape: tuple[int, int, int] | None = None, splits: int = 1) -> list:
        """The configuration's kernels at `shape` (M, N, K) with `splits` K slices for split-K, or
        without a shape the shape class's (config_fusions; verified and compiled on first use, kept
        in the LRU cache of cache_size sets)."""
        return self._cached_kernels(self._kernels_key(config, a_major, b_major, sms, shape, splits))

    def _kernels_key(self, config: MatmulConfig, a_major: str, b_major: str, sms: int,
                     shape: tuple[int, int, int] | None, splits: int) -> tuple:
        split = config.split_k and (shape is not None or config.grid_reduce)  # a one-kernel split's S is a number
        return config, a_major, b_major, self.out_dtype, sms, shape, splits if split else None

    def _cached_kernels(self, key: tuple) -> list:
        """kernels() by its cache key (_kernels_key)."""
        kernels = self._kernels.get(key)
        if kernels is None:
            config, a_major, b_major, out_dtype, sms, shape, splits = key
            kernels = [tp.compile(f, self.target) for f in config_fusions(config, a_major, b_major, out_dtype, sms,
                                                                          shape, splits or 1, self.epilogue)]
            self._kernels[key] = kernels
            while len(self._kernels) > self.cache_size:
                self._kernels.popitem(last=False)
        else:
            self._kernels.move_to_end(key)
        return kernels

    def kernel(self, a_major: str, b_major: str) -> tp.Kernel:
        """The shape class's kernel of SCHEDULE, or of the first configuration that fuses the
        epilogue (verified and compiled on first use)."""
        return self.kernels(WIDE if WIDE in self.configs else self.configs[0], a_major, b_major)[0]

    def choice(self, a_major: str, b_major: str, m: int, n: int, k: int, sms: int = SMS) -> Choice:
        """The configuration and splits this entry runs at M x N x K: the forced configuration's
        best splits, or the estimate's best configuration (matmul_heuristic.choose); remembered
        per shape."""
        key = (a_major, b_major, m, n, k, sms)
        choice = self._choices.get(key)
        if choice is None:
            if len(self._choices) >= 64 * self.cache_size:
                self._choices.clear()
            choice = self._choices[key] = self._choose(a_major, b_major, m, n, k, sms)
        return choice

    def _choose(self, a_major: str, b_major: str, m: int, n: int, k: int, sms: int) -> Choice:
        out_bytes = getattr(tp, self.out_dtype).bytes
        if self.config is None:
            return choose(m, n, k, a_major=a_major, b_major=b_major, sms=sms, out_bytes=out_bytes,
                          configs=tuple(c for c in self.configs if c in CONFIGS), specialize=self.specialize)
        admitted = candidates(self.config, m, n, k, a_major, b_major, sms=sms, out_bytes=out_bytes,
                              specialize=self.specialize)
        if not admitted:
            raise tp.InputError(f"matmul: configuration {self.config.name} does not take M = {m}, N = {n}, K = {k} "
                                f"(split-K needs K a multiple of 8 x its splits, each at least 256 long; in one "
                                f"kernel, at least 4 K tiles of 64 a split)")
        return min(admitted, key=lambda c: c.seconds)

    def majors(self, a, b) -> tuple[str, str]:
        """(A's major, B's major) from the strides, after the checks of shape, dtype and device."""
        _check(_torch(), a, b)
        a_major = _major(a, "A", "M", "K", ("MN", "K"))
        b_major = _major(b, "B", "K", "N", ("K", "MN"))
        (m, k), n = a.shape, b.shape[1]
        sizes = {"M": m, "N": n, "K": k}
        for extent in contiguous_extents(a_major, b_major):
            if sizes[extent] % ALIGN_ELEMENTS:
                raise tp.InputError(
                    f"matmul: {extent} = {sizes[extent]} is not a multiple of {ALIGN_ELEMENTS}; with A "
                    f"{'row-major' if a_major == 'K' else 'M-major'}, B {'K' if b_major == 'K' else 'N'}-major and "
                    f"the row-major output, rows along {extent} must be a multiple of 16 bytes for the TMA (pad "
                    f"{extent}, or pass the operand in the other major)")
        _check_addresses(a, b)
        return a_major, b_major

    def terms(self, a, b, terms) -> list:
        """The bias and residual as the kernel takes them (bias float32 [1, N] or [M, 1], residual
        [M, N]), each checked: shape, dtype, device and strides (a and b checked already)."""
        torch = _torch()
        if len(terms) != len(self.input_names) - 2:
            raise tp.InputError(f"matmul: {self!r} takes {len(self.input_names)} tensors ({', '.join(self.input_names)}), "
                                f"got {2 + len(terms)}")
        (m, _), n = a.shape, b.shape[1]
        out_dtype = getattr(torch, self.out_dtype)
        views = []
        for name, t in zip(self.input_names[2:], terms):
            if not isinstance(t, torch.Tensor):
                raise tp.InputError(f"matmul: {name} must be a torch.Tensor, got {type(t).__name__}")
            if t.device != a.device:
                raise tp.InputError(f"matmul: {name} is on {t.device} and A on {a.device}; both must be on one GPU")
            if name == "residual":
                views.append(_residual(t, m, n, out_dtype))
            else:
                views.append(_bias(t, self.epilogue.bias, m, n, out_dtype))
        return views

    def __call__(self, a, b, *terms):
        try:
            key = tensor_signature(a) + tensor_signature(b) + (tuple(map(tensor_signature, terms)) if terms else ())
            stream = tp.Kernel.default_stream(a)
            ready = self._ready.get((key, a.data_ptr(), b.data_ptr(), *(t.data_ptr() for t in terms), stream))
        except Exception:  # noqa: BLE001 - no tensor: the checks say what is wrong
            key = ready = None
        if ready is not None and ready.current():
            for launch in ready.launches[:-1]:
                launch.launch()
            return ready.launches[-1].launch_new_outputs()[0]
        plan = self._plans.get(key) if key is not None else None
        if plan is None:
            plan = self._plan(a, b, terms)  # every check
            if key is not None:
                if len(self._plans) >= PLANS_PER_SET * self.cache_size:
                    self._plans.clear()
                self._plans[key] = plan
        elif a.data_ptr() % (2 * ALIGN_ELEMENTS) or b.data_ptr() % (2 * ALIGN_ELEMENTS):
            _check_addresses(a, b)  # the same signature passed every check but the addresses'
        kernels = self._kernels.get(plan.kernels_key)
        if kernels is None:
            kernels = self._cached_kernels(plan.kernels_key)  # dropped from the LRU since: compiled again
        else:
            self._kernels.move_to_end(plan.kernels_key)
        first, second = (b, a) if plan.swapped else (a, b)  # swapped: the kernel's A is B^T, its B is A^T
        views = first.as_strided(*plan.a_view), second.as_strided(*plan.b_view)
        given = [t if shape is None else t.reshape(shape).float() for t, shape in zip(terms, plan.term_shapes)]
        # the packed launches are kept where every argument is the caller's memory (a bias converted
        # to float32 is new memory at every call)
        keep = key is not None and all(g.data_ptr() == t.data_ptr() for g, t in zip(given, terms))
        if plan.split_k:
            partials, total = kernels
            p = self._partials.get((plan, stream)) if keep else None
            if p is not None:
                partials.run(*views, out=[p])
            else:
                (p,) = partials.run(*views)
                if keep:
                    self._hold_partials((plan, stream), p)  # a shape class's kernels: a buffer per shape
            summed = p.transpose(1, 2) if plan.swapped else p  # P^T [S, N, M] stored as P [S, M, N]
            (d,) = total.run(summed, *given)  # the sum kernel fuses the epilogue
            if keep:
                self._keep(key, a, b, terms, stream, kernels,
                           (partials.prepared(*views, out=[p]), total.prepared(summed, *given)), (p,))
            return d
        (d,) = kernels[0].run(*views, *given)
        if keep:
            self._keep(key, a, b, terms, stream, kernels, (kernels[0].prepared(*views, *given),), ())
        return d

    def _hold_partials(self, key: tuple, p) -> None:
        """Keep split-K's partials `p` for the calls of a plan on a stream; past PARTIALS_BYTES (or
        cache_size buffers) every buffer is let go, with the packed launches that write them."""
        nbytes = p.numel() * p.element_size()
        if len(self._partials) >= self.cache_size or self._partials_bytes + nbytes > PARTIALS_BYTES:
            self._partials.clear()
            self._partials_bytes = 0
            self._ready = {k: r for k, r in self._ready.items() if not r.held}
        self._partials[key] = p
        self._partials_bytes += nbytes

    def _keep(self, key, a, b, terms, stream: int, kernels, launches: tuple, held: tuple) -> None:
        if len(self._ready) >= PLANS_PER_SET * self.cache_size:
            self._ready.clear()
        self._ready[(key, a.data_ptr(), b.data_ptr(), *(t.data_ptr() for t in terms), stream)] = \
            _Ready(tuple(kernels), launches, held)

    def _plan(self, a, b, terms) -> _Plan:
        """Check every operand, choose the configuration, compile its kernels (first use): the
        _Plan of this call signature."""
        a_major, b_major = self.majors(a, b)
        self.terms(a, b, terms)
        sms = device_sms(_torch(), a.device)
        shape = (a.shape[0], b.shape[1], a.shape[1])
        choice = self.choice(a_major, b_major, *shape, sms)
        config = choice.config
        kernels_key = self._kernels_key(config, a_major, b_major, sms, shape if self.specialize else None,
                                        choice.splits)
        self._cached_kernels(kernels_key)
        two_kernels = config.split_k and not config.grid_reduce
        if two_kernels and config.swap_ab:  # B^T [S, N, 1, KS], A^T [S, 1, M, KS]: D^T's operands
            views = split_k_operands(b.t(), a.t(), choice.splits)
        elif two_kernels:  # A [S, M, 1, KS], B [S, 1, N, KS]: views of K's slices
            views = split_k_operands(a, b, choice.splits)
        else:  # A [M, 1, K], B [1, N, K]: the recipe's operands (split_k_grid's too)
            views = a.unsqueeze(1), b.t().unsqueeze(0)
        (m, _), n = a.shape, b.shape[1]
        term_shapes = tuple(None if name == "residual" else (1, n) if self.epilogue.bias == "column" else (m, 1)
                            for name in self.input_names[2:])
        return _Plan(kernels_key, *map(_view_geometry, views), two_kernels, term_shapes, config.swap_ab)

    def fake(self, a, b, *terms):
        """The output as run() allocates it, without running (tp.as_torch_op's fake implementation)."""
        torch = _torch()
        _check(torch, a, b)
        self.terms(a, b, terms)
        return torch.empty((a.shape[0], b.shape[1]), dtype=getattr(torch, self.out_dtype), device=a.device)


def _bias(t, kind: str, m: int, n: int, out_dtype):
    """A bias ([N] or [1, N] for a column bias, [M] or [M, 1] for a row bias) as the kernel's
    float32 [1, N] or [M, 1] (a 16-bit bias widened by PyTorch: M or N elements)."""
    length, shapes = (n, ([n], [1, n])) if kind == "column" else (m, ([m], [m, 1]))
    if list(t.shape) not in shapes:
        raise tp.InputError(f"matmul: a {kind} bias must be {' or '.join(map(str, shapes))} "
                            f"({'one value a column, N' if kind == 'column' else 'one value a row, M'} = {length}), "
                            f"got shape {list(t.shape)}")
    if t.dtype not in (out_dtype, _torch().float32):
        raise tp.InputError(f"matmul: bias must be float32 or the output's {str(out_dtype).removeprefix('torch.')}, "
                            f"got {str(t.dtype).removeprefix('torch.')}")
    if length > 1 and max(s for s, e in zip(t.stride(), t.shape) if e > 1) != 1:
        raise tp.InputError(f"matmul: bias has strides {list(t.stride())}; its {length} values must be contiguous "
                            f"(pass bias.contiguous())")
    vector = t.reshape(1, n) if kind == "column" else t.reshape(m, 1)
    return vector.float()


def _residual(t, m: int, n: int, out_dtype):
    if list(t.shape) != [m, n]:
        raise tp.InputError(f"matmul: residual must be [M, N] = {[m, n]}, got shape {list(t.shape)}")
    if t.dtype != out_dtype:
        raise tp.InputError(f"matmul: residual must be the output's {str(out_dtype).removeprefix('torch.')}, got "
                            f"{str(t.dtype).removeprefix('torch.')}")
    if not t.is_contiguous():
        raise tp.InputError(f"matmul: residual [M, N] has strides {list(t.stride())}; it must be row-major "
                            f"(pass residual.contiguous())")
    return t


def epilogue_of(bias=None, residual=None, scale=None, activation=None) -> EpilogueOps:
    """The EpilogueOps matmul's arguments ask for: a bias [N] or [1, N] is a column bias (PyTorch's
    broadcasting of a vector over rows), [M, 1] a row bias."""
    kind = None
    if bias is not None:
        shape = list(getattr(bias, "shape", ()))
        if len(shape) == 1 or (len(shape) == 2 and shape[0] == 1):
            kind = "column"
        elif len(shape) == 2 and shape[1] == 1:
            kind = "row"
        else:
            raise tp.InputError(f"matmul: bias must be a tensor [N] or [1, N] (a value a column) or [M, 1] (a value "
                                f"a row), got {shape if hasattr(bias, 'shape') else type(bias).__name__}")
    try:
        return EpilogueOps(scale=scale, bias=kind, residual=residual is not None, activation=activation)
    except tp.ScheduleError as e:
        raise tp.InputError(f"matmul: {e}") from None


_entries: "OrderedDict[tuple, Matmul]" = OrderedDict()
_plain_entries: dict[tuple, Matmul] = {}  # a call without epilogue, by its arguments as given (the checks passed)


def matmul(a, b, out_dtype="bfloat16", target: str = "sm_90a", config=None, specialize: bool = True, *,
           bias=None, residual=None, scale=None, activation=None):
    """D = A @ B (A [M, K], B [K, N], bfloat16, either major each) as a new row-major [M, N] tensor of
    out_dtype, through the Hopper GEMM recipe (a configuration chosen per shape, or `config`; its
    kernels compiled at the shape on first use, or with specialize=False per shape class). With
    any of bias, residual, scale and activation, the fused epilogue
    cast(activation(scale * A @ B + bias + residual)) (EpilogueOps; Matmul's text)."""
    plain = bias is None and residual is None and scale is None and activation is None and type(specialize) is bool
    if plain:  # type(specialize): a 1 must not find True's entry, whose Matmul refused it
        try:
            entry = _plain_entries.get((out_dtype, target, config, specialize))
        except TypeError:  # an unhashable argument: the checks below say what is wrong
            plain = entry = None
        if entry is not None:
            return entry(a, b)
    given = (out_dtype, target, config, specialize)
    config = _config(config)
    ops = epilogue_of(bias, residual, scale, activation)
    key = (_dtype_name(out_dtype), target, config, specialize, type(specialize), ops)  # 1 == True, refused
    entry = lru_entry(_entries, key, lambda: Matmul(key[0], target, config, specialize, epilogue=ops), ENTRY_CACHE_SIZE)
    if plain:
        if len(_plain_entries) >= CACHE_SIZE:
            _plain_entries.clear()
        _plain_entries[given] = entry
    return entry(a, b, *(t for t in (bias, residual) if t is not None))


__all__ = ["ALIGN_ELEMENTS", "CACHE_SIZE", "ENTRY_CACHE_SIZE", "LONG_ACTIVATIONS", "Matmul", "SCHEDULE",
           "config_fusions", "config_params", "contiguous_extents", "epilogue_configs", "epilogue_of", "matmul",
           "params_for", "shape_class_fusion", "shape_fusion"]
