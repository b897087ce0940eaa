"""tileproof: write a tile schedule in Python, get it proved safe before any code exists.

    import tileproof as tp
    with tp.Fusion() as fusion:
        t0 = tp.make_contig_concrete_tensor([2, 4]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    report = tp.verify(fusion, target="sm_90a")   # never raises on a bad schedule
    kernel = tp.compile(fusion, target="sm_90a")  # tp.ScheduleRejected(report) if it does not verify
    (out,) = kernel.run(a)                        # on the GPU; arrays with DLPack / CUDA array interface
"""

from .codegen.compile import Kernel, LaunchParams, compile  # noqa: A004 - tp.compile is the API
from .codegen.torch_op import as_torch_op
from .tuning import AutotuneResult, autotune
from .codegen.errors import (CompileError, InputError, NoDeviceError, PerformanceWarning, ScheduleRejected,
                             UnsupportedSchedule)
from .execution.allocation import Allocation, AllocatedId, compute_allocation as _compute_allocation
from .model.errors import InternalError, ScheduleError, TileproofError
from .model.fusion import Fusion, current_fusion as _current_fusion
from .model.inlining import inline_all_at
from .model.inlining import inline_most as _inline_most
from .model.iterdomain import IterDomain, Merge, Split, Swizzle
from .model.loop_map import propagate_parallel_types as _propagate_parallel_types
from .model.options import MmaInputSmemSwizzle, MmaLayout, MmaMacro, MmaOperand, Tf32Rounding
from .hw.mma_schedule import mma_output_allocation, schedule_mma_fragment
from .model.ops import broadcast, set, transpose  # noqa: A004 - nvFuser's name
from .model.tensor import iota, make_contig_concrete_tensor, make_contig_tensor, make_tensor
from .model import composite as _composite, mma_op as _mma_op, ops as _ops
from .model.grouped_reduction import group_reductions
from .model.welford import WelfordResult, welford as _welford
from .model.reduction import reduction as _reduction
from .model.scheduling import parallelize_all_like, propagate_transforms
from .model.loop_rotation import rotate_loop
from .model.targets import TARGETS, Target, get_target
from .model.options import Pipelined, WarpSpecialized
from .model.tensor import TensorView
from .hw.tma import TmaDim, TmaInfo, infer_tma as _infer_tma, tma_ops_of as _tma_ops_of
from .model.types import (
    CacheOp,
    DataType,
    Direction,
    IterType,
    LoadStoreOpType,
    MemoryType,
    ParallelType,
    SwizzleType,
    bfloat16,
    bool_ as bool,  # noqa: A001 - tp.bool, as torch.bool
    float16,
    float32,
    float64,
    int8,
    int32,
    int64,
)
from .schedule_files import Expectation, accepted, rejected, schedule
from .verifier.diagnostics import Diagnostic, Report, Severity
from .verifier.verify import verify
from .reports import terminal as _terminal  # registers the renderer of str(report)

__version__ = "0.1.0"


def inline_most(fusion: Fusion | None = None) -> None:
    """Inline every tensor as far as its consumers allow (the active fusion by default)."""
    if fusion is not None and not isinstance(fusion, Fusion):
        raise ScheduleError(f"inline_most: expected a tp.Fusion for fusion, got {type(fusion).__name__} {fusion!r:.60}")
    _inline_most(fusion if fusion is not None else _current_fusion())


def allocation(tv: TensorView) -> Allocation:
    """What is allocated for tv and why: `.ids` (each IterDomain, allocated or not, and the
    rule that decided), `.num_elements`, `.bytes`; for tensor memory `.lanes`, `.columns`,
    `.columns_allocated`. Computed as verify and compile see the schedule, on a snapshot whose
    loops give their parallel types to every member: its IterDomains are copies of tv's (the
    same names and `uid`s)."""
    if not isinstance(tv, TensorView):
        raise ScheduleError(f"allocation: expected a TensorView for tv, got {type(tv).__name__} {tv!r:.60}")
    # as verify and compile see it: a loop's parallel type given to every tensor the loop serves
    snap = tv.fusion.snapshot()
    _propagate_parallel_types(snap)
    return _compute_allocation(next(t for t in snap.tensors if t.name == tv.name))


def tma_info(tv: TensorView) -> TmaInfo:
    """The TMA that tv's schedule implies (tv: the shared or global tensor of a TMA op):
    `.rank`, `.dims` (innermost first; each dimension's `.box`, `.tile`, `.element_stride`,
    `.size` and `.stride_bytes` are ints, or sympy expressions of the fusion's symbols),
    `.swizzle_bytes`, `.direction`, `.bytes_per_transfer`, and `.problems` when it cannot be
    inferred."""
    if not isinstance(tv, TensorView):
        raise ScheduleError(f"tma_info: expected a TensorView for tv, got {type(tv).__name__} {tv!r:.60}")
    ops = _tma_ops_of(tv)
    if not ops:
        raise ScheduleError(f"tma_info: {tv.name} is not read or written by a TMA op (tp.set(..., op=tp.LoadStoreOpType.TMA))")
    if len(ops) > 1:
        raise ScheduleError(f"tma_info: {tv.name} takes part in {len(ops)} TMA ops; pass their shared-memory tensor instead")
    return _infer_tma(ops[0]).info


def add(a, b):
    """Elementwise a + b of two tensors of one dtype (broadcast axes stretch), or of a tensor and
    a number on either side (an int or float, converted to the tensor's compute type,
    DataType.compute; the result has the tensor's dtype; an integer tensor takes ints only);
    nvFuser's ops.add.

        t2 = tp.add(t0, t1); t3 = tp.add(t2, 1.0)"""
    return _ops.binary("add", a, b)


def sub(a, b):
    """Elementwise a - b, of tensors or a tensor and a number as tp.add; nvFuser's ops.sub.

        t1 = tp.sub(1.0, t0)   # 1 - t0"""
    return _ops.binary("sub", a, b)


def mul(a, b):
    """Elementwise a * b, of tensors or a tensor and a number as tp.add; nvFuser's ops.mul.

        t1 = tp.mul(t0, 0.5)"""
    return _ops.binary("mul", a, b)


def div(a, b):
    """Elementwise a / b, of tensors or a tensor and a number as tp.add (integer division
    truncates toward zero); nvFuser's ops.div."""
    return _ops.binary("div", a, b)


def cast(tv, dtype):
    """tv's values converted to `dtype` (tp.float32, float64, float16, bfloat16, int8, int32, int64,
    or the name): to a float type rounded to nearest even; from a float to an integer truncated
    toward zero, saturated to its range (as PTX cvt.rzi does), NaN to 0; between integers, the low bits.
    A cast to tv's own dtype is tp.set(tv). nvFuser's castOp(dtype, tv). Of an extent
    (tv.axis(0).extent, tp.extent) to tp.float64 / tp.float32 it is a scalar an op takes
    (nvFuser's castOp of a scalar Val; docs/ops.md).

        t1 = tp.cast(t0, tp.bfloat16)
        norm = tp.div(1.0, tp.cast(t0.axis(0).extent, tp.float64))   # reciprocal(double(N))"""
    return _ops.cast(tv, dtype)


def neg(a):
    """Elementwise -a; nvFuser's ops.neg."""
    return _ops.unary("neg", a)


def abs(a):  # noqa: A001 - elementwise op name
    """Elementwise |a|; nvFuser's ops.abs."""
    return _ops.unary("abs", a)


def exp(a):
    """Elementwise e ** a; nvFuser's ops.exp."""
    return _ops.unary("exp", a)


def relu(a):
    """Elementwise max(a, 0) (NaN stays NaN); nvFuser's ops.relu."""
    return _ops.unary("relu", a)


def sqrt(a):
    """Elementwise the square root (float types); nvFuser's ops.sqrt."""
    return _ops.unary("sqrt", a)


def exp2(a):
    """Elementwise 2 ** a (float types); nvFuser's ops.exp2."""
    return _ops.unary("exp2", a)


def expm1(a):
    """Elementwise e ** a - 1 (float types); nvFuser's ops.expm1."""
    return _ops.unary("expm1", a)


def log(a):
    """Elementwise the natural logarithm (float types); nvFuser's ops.log."""
    return _ops.unary("log", a)


def log2(a):
    """Elementwise the base-2 logarithm (float types); nvFuser's ops.log2."""
    return _ops.unary("log2", a)


def log1p(a):
    """Elementwise log(1 + a) (float types); nvFuser's ops.log1p."""
    return _ops.unary("log1p", a)


def rsqrt(a):
    """Elementwise 1 / sqrt(a), CUDA's rsqrtf (float types); nvFuser's ops.rsqrt."""
    return _ops.unary("rsqrt", a)


def reciprocal(a):
    """Elementwise 1 / a (float types); nvFuser's ops.reciprocal."""
    return _ops.unary("reciprocal", a)


def tanh(a):
    """Elementwise the hyperbolic tangent (float types); nvFuser's ops.tanh."""
    return _ops.unary("tanh", a)


def erf(a):
    """Elementwise the error function (float types); nvFuser's ops.erf."""
    return _ops.unary("erf", a)


def erfc(a):
    """Elementwise 1 - erf(a) (float types); nvFuser's ops.erfc."""
    return _ops.unary("erfc", a)


def sigmoid(a):
    """Elementwise 1 / (1 + e ** -a) (float types); nvFuser's ops.sigmoid."""
    return _ops.unary("sigmoid", a)


def silu(a):
    """Elementwise a * sigmoid(a) (float types); nvFuser's ops.silu."""
    return _ops.unary("silu", a)


def sin(a):
    """Elementwise the sine (float types); nvFuser's ops.sin."""
    return _ops.unary("sin", a)


def cos(a):
    """Elementwise the cosine (float types); nvFuser's ops.cos."""
    return _ops.unary("cos", a)


def floor(a):
    """Elementwise the largest integer <= a (float types); nvFuser's ops.floor."""
    return _ops.unary("floor", a)


def ceil(a):
    """Elementwise the smallest integer >= a (float types); nvFuser's ops.ceil."""
    return _ops.unary("ceil", a)


def logical_not(a):
    """Elementwise not a, of a bool tensor (bool); nvFuser's ops.logical_not."""
    return _ops.unary("logical_not", a)


def maximum(a, b):
    """Elementwise the larger of a and b (NaN wins, as PyTorch), of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.maximum."""
    return _ops.binary("maximum", a, b)


def minimum(a, b):
    """Elementwise the smaller of a and b (NaN wins), of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.minimum."""
    return _ops.binary("minimum", a, b)


def pow(a, b):
    """Elementwise a ** b (float types), of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.pow."""
    return _ops.binary("pow", a, b)


def fmod(a, b):
    """Elementwise the remainder of a / b with a's sign (C's fmod; % for integers), of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.fmod."""
    return _ops.binary("fmod", a, b)


def eq(a, b):
    """Elementwise a == b, a bool tensor, of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.eq."""
    return _ops.binary("eq", a, b)


def ne(a, b):
    """Elementwise a != b, a bool tensor (NaN != NaN), of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.ne."""
    return _ops.binary("ne", a, b)


def lt(a, b):
    """Elementwise a < b, a bool tensor, of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.lt."""
    return _ops.binary("lt", a, b)


def le(a, b):
    """Elementwise a <= b, a bool tensor, of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.le."""
    return _ops.binary("le", a, b)


def gt(a, b):
    """Elementwise a > b, a bool tensor, of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.gt."""
    return _ops.binary("gt", a, b)


def ge(a, b):
    """Elementwise a >= b, a bool tensor, of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.ge."""
    return _ops.binary("ge", a, b)


def logical_and(a, b):
    """Elementwise a and b, of bool tensors, of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.logical_and."""
    return _ops.binary("logical_and", a, b)


def logical_or(a, b):
    """Elementwise a or b, of bool tensors, of tensors of one dtype or a tensor and a value as tp.add; nvFuser's
    ops.logical_or."""
    return _ops.binary("logical_or", a, b)


def where(condition, a, b):
    """Elementwise a where the bool tensor `condition` holds, else b (nvFuser's where): a and b
    are tensors, their dtypes promoted (bfloat16 with float32 gives float32), or one of them a
    value (a number or an extent) that takes the other's dtype.

        t2 = tp.where(tp.gt(t0, 0), t0, 0.0)   # relu"""
    return _ops.where(condition, a, b)


def extent(tv, axis):
    """The extent of tv's axis `axis` (of its shape) as a value ops take: it becomes the kernel's
    size parameter, converted to the op's compute type (nvFuser's size(tv, dim)).

        t2 = tp.div(tp.sum(t0, 1), tp.extent(t0, 1))   # the row means; tp.div(..., "N") names the symbol"""
    return _ops.extent(tv, axis)


def gelu(x):
    """x * 0.5 * (1 + erf(x / sqrt(2))), nvFuser's gelu: made of tp.mul, tp.add and tp.erf."""
    return _composite.gelu(x)


def tanh_gelu(x):
    """The tanh approximation of GELU, nvFuser's tanh_gelu (PyTorch's gelu(approximate="tanh"))."""
    return _composite.tanh_gelu(x)


def mean(tv, axes):
    """The mean over `axes`: tp.sum divided by the product of their extents (an extent value),
    nvFuser's mean; float types.

        t1 = tp.mean(t0, 1)           # [M, N] -> [M]"""
    return _composite.mean(tv, axes)


def var_mean(tv, axes, correction=1):
    """(variance, mean) over `axes` with Bessel's `correction` (torch.var_mean), nvFuser's
    variance_mean: one Welford reduction (tp.welford), the variance its var_sum over
    max(N - correction, 0), the mean its avg; float32 or float64.

        var, mu = tp.var_mean(t0, [1])"""
    return _composite.var_mean(tv, axes, correction)


def welford(tv, axes):
    """One Welford reduction over `axes` (nvFuser's Welford): a tp.WelfordResult (avg, var_sum,
    n), three sibling tensors scheduled as one (an rfactor of one rfactors all three); float32 or
    float64. The variance is var_sum / n (biased) or var_sum / (n - 1).

        avg, var_sum, n = tp.welford(t0, [1])   # [M, N] -> three [M] tensors"""
    return _welford(tv, axes)


def sum(tv, axes):  # noqa: A001 - nvFuser's name
    """The sum of tv over `axes` (an int or a list of ints; negative counts from the end), added
    in tv's compute type (DataType.compute: float32 for the 16-bit floats, int32 for int8) and
    stored in tv's dtype. The output keeps each reduced axis in its logical domain as a reduction
    IterDomain (IterType.Reduction) to schedule; its shape drops them (nvFuser's keep_dim=False):
    tp.sum of an [M, N] tensor over axis 1 is an [M] array. Reduction axes run as a serial or
    unrolled loop, or across the threads of a block (TIDx/TIDy/TIDz); TensorView.rfactor splits a
    reduction in two. nvFuser's ops.sum(tv, axes).

        t1 = tp.sum(t0, 1)            # [M, N] -> [M]: row sums
        t2 = tp.sum(t0, [0, 1])       # every element"""
    return _reduction("sum", tv, axes)


def max(tv, axes):  # noqa: A001 - nvFuser's name
    """The largest value of tv over `axes`, as tp.sum (NaN wins, as in PyTorch: a NaN among the
    values gives NaN). nvFuser's ops.max(tv, axes).

        t1 = tp.max(t0, -1)           # [M, N] -> [M]"""
    return _reduction("max", tv, axes)


def min(tv, axes):  # noqa: A001 - nvFuser's name
    """The smallest value of tv over `axes`, as tp.max (NaN wins). nvFuser's ops.min(tv, axes)."""
    return _reduction("min", tv, axes)


def fused_multiply_sum(a, b, axes):
    """The sum over `axes` of a * b, added in float32 (nvFuser's fusedMultiplySum, an MmaOp):
    a and b have the same number of axes, a broadcast on the N axes and b on the M axes. With
    `d.definition.set_macro(tp.MmaMacro...)` and the macro's M, N, K tile as d's innermost loop
    IDs bound to tp.ParallelType.Mma, it runs on the tensor cores (mma.sync); otherwise as a
    reduction of fused multiply-adds.

        a3 = tp.broadcast(a, [False, True, False])   # [M, 1, K]
        b3 = tp.broadcast(b, [True, False, False])   # [1, N, K] (b is N x K: a @ b.T)
        d = tp.fused_multiply_sum(a3, b3, [-1])       # [M, N, rK]"""
    return _mma_op.fused_multiply_sum(a, b, axes)


def matmul(a, b):
    """a @ b for a [M, K] and b [K, N], in float32: tp.fused_multiply_sum of a as [M, K, 1] and
    b as [1, K, N] over axis 1 (the output's logical domain is [M, rK, N])."""
    return _mma_op.matmul(a, b)


# `from tileproof import *` brings every public name except those that would shadow a Python
# builtin: tp.abs, tp.bool, tp.compile, tp.max, tp.min, tp.pow, tp.set and tp.sum keep nvFuser's (and PyTorch's)
# names, so call them through `tp.`.
__all__ = [
    "AllocatedId",
    "Allocation",
    "AutotuneResult",
    "CacheOp",
    "CompileError",
    "DataType",
    "Diagnostic",
    "Direction",
    "Expectation",
    "Fusion",
    "InputError",
    "InternalError",
    "IterDomain",
    "IterType",
    "Kernel",
    "LaunchParams",
    "LoadStoreOpType",
    "MemoryType",
    "Merge",
    "MmaInputSmemSwizzle",
    "MmaLayout",
    "MmaMacro",
    "MmaOperand",
    "NoDeviceError",
    "ParallelType",
    "PerformanceWarning",
    "Pipelined",
    "Report",
    "ScheduleError",
    "ScheduleRejected",
    "Severity",
    "Split",
    "Swizzle",
    "SwizzleType",
    "TARGETS",
    "Target",
    "TensorView",
    "Tf32Rounding",
    "TileproofError",
    "TmaDim",
    "TmaInfo",
    "UnsupportedSchedule",
    "WarpSpecialized",
    "WelfordResult",
    "accepted",
    "add",
    "allocation",
    "as_torch_op",
    "autotune",
    "bfloat16",
    "broadcast",
    "cast",
    "ceil",
    "cos",
    "div",
    "eq",
    "erf",
    "erfc",
    "exp",
    "exp2",
    "expm1",
    "extent",
    "float16",
    "float32",
    "float64",
    "floor",
    "fmod",
    "fused_multiply_sum",
    "ge",
    "gelu",
    "get_target",
    "group_reductions",
    "gt",
    "inline_all_at",
    "inline_most",
    "int32",
    "int64",
    "int8",
    "iota",
    "le",
    "log",
    "log1p",
    "log2",
    "logical_and",
    "logical_not",
    "logical_or",
    "lt",
    "make_contig_concrete_tensor",
    "make_contig_tensor",
    "make_tensor",
    "matmul",
    "maximum",
    "mean",
    "minimum",
    "mma_output_allocation",
    "mul",
    "ne",
    "neg",
    "parallelize_all_like",
    "propagate_transforms",
    "reciprocal",
    "rejected",
    "relu",
    "rotate_loop",
    "rsqrt",
    "schedule",
    "schedule_mma_fragment",
    "sigmoid",
    "silu",
    "sin",
    "sqrt",
    "sub",
    "tanh",
    "tanh_gelu",
    "tma_info",
    "transpose",
    "var_mean",
    "verify",
    "welford",
    "where",
]
