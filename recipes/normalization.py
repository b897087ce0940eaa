"""Row normalizations and softmax, scheduled the nvFuser way (issue 35 item 2): softmax,
log_softmax, layer_norm, rms_norm and cross_entropy (forward) over the last axis of a row-major
tensor, at a symbolic row length N and row count M.

    softmax(x)                          exp(x - max) / sum(exp(x - max)), per row
    log_softmax(x)                      x - max - log(sum(exp(x - max)))
    layer_norm(x, weight, bias, eps)    (x - mean) * rsqrt(var + eps) * weight + bias (var biased)
    rms_norm(x, weight, eps)            x * rsqrt(mean(x^2) + eps) * weight
    cross_entropy(logits, target)       sum(p * (logsumexp(x) - x)), per row, float32:
                                        PyTorch's F.cross_entropy(logits, probabilities, reduction
                                        ="none"); a one-hot target is the class-index loss

Each is a builder of a tp.Fusion per row class (RowClass: the dtype, the vector and the vectors
per thread) and an entry (Softmax, LayerNorm, ...) that takes PyTorch tensors, picks the class
from the row length, and runs the class's kernel, verified for every M and every N the class
admits, compiled on first use. tp.as_torch_op takes the entries.

The schedule (schedule_rows) is nvFuser's inner persistent one: a block per row; the row split
[M, batch, ceil(N / (vector * batch)), vector] with the middle axis on TIDx (the threads follow
N, the registers per thread are a constant), written on the output and copied to every tensor
with propagate_transforms and parallelize_all_like; the input's register cache loads a 16-byte
vector per thread and step, the output stores one; inline_most places every statement. The
cache is read by the first reduction and again after its total, so inline_most keeps it whole
at the row loop (model/unmappable.py): the row stays in registers, read from global memory
once. The float32 values are recomputed from it where each consumer needs them (one cast per
use), so only the 16-bit row is held. The reductions combine over the block (warp shuffles, then
shared memory). Long rows take nvFuser's non-persistent (looped) form instead: a block of a fixed
number of threads steps over the row, and each use of the row reads it in its own loop.
Imports only the public `tileproof` API; torch when called.
"""

from __future__ import annotations

import abc
import dataclasses
from collections import OrderedDict

import tileproof as tp

from .entry_cache import lru_entry

P = tp.ParallelType
VECTOR_BYTES = 16  # one global load / store per thread and step
MAX_THREADS = 1024
BATCHES = (1, 2, 4, 8)  # 16-byte vectors per thread a class holds (8: 64 16-bit elements)
UNROLLED_BATCHES = (1, 2, 4)  # classes whose batch loop is unrolled (8 would repeat LayerNorm's
# statements 1216 times, past UNROLL-LENGTH's 1024)
DTYPES = ("bfloat16", "float16", "float32")
LONG_ROW = 16384  # rows from this many elements on are staged in shared memory (row_class)
LONG_SHAPE = (2, 512)  # a staged class's vectors a thread a step and threads, unless an op picks its own
LOOPED_THREADS = 512  # a looped class's block (rows longer than STAGED_BYTES)
STAGED_BYTES = 1 << 17  # a staged class's row in shared memory at most (128 KiB of the 227 KiB a block has)
LONGEST_LOOPED_ROW = 2**31 - 1  # a size's range (model/symbol_ranges.py)
LOG2_E = 1.4426950408889634  # exp(v) = exp2(v log2(e))


@dataclasses.dataclass(frozen=True)
class RowClass:
    """The rows one kernel takes: `dtype` (its name), `vector` elements per load (16 bytes or
    fewer where N is not a multiple), `batch` loads per thread, at most `max_threads` threads (a power
    of two up to 1024: the kernel's __launch_bounds__, so a class of fewer threads keeps more
    registers a thread), `rows` rows a block (on TIDy, each its own `max_threads` threads on TIDx:
    at 32 a warp per row, whose reductions are warp shuffles without a block barrier), and `serial`
    such steps a block runs one after the other, its input rows in a register circular buffer of
    `stages` (the next step's rows loaded while this one computes: more bytes in flight than the
    threads an SM holds can ask for at once). `whole`: every thread has all `batch` vectors
    (N % (vector * batch) == 0, so the kernel checks no bound per element); otherwise the last
    threads' vectors past N are predicated off. Admits every N with N % vector == 0 (and
    N % (vector * batch) == 0 where whole) and N <= vector * batch * max_threads."""

    dtype: str = "bfloat16"
    vector: int = 8
    batch: int = 1
    max_threads: int = MAX_THREADS
    rows: int = 1
    serial: int = 1
    stages: int = 2
    whole: bool = True
    looped: bool = False
    staged: bool = False

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise tp.ScheduleError(f"RowClass: dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if not isinstance(self.whole, bool):
            raise tp.ScheduleError(f"RowClass: whole must be True or False, got {self.whole!r}")
        if not isinstance(self.looped, bool):
            raise tp.ScheduleError(f"RowClass: looped must be True or False, got {self.looped!r}")
        if not isinstance(self.staged, bool):
            raise tp.ScheduleError(f"RowClass: staged must be True or False, got {self.staged!r}")
        if self.staged and not self.looped:
            raise tp.ScheduleError("RowClass: staged rows are read in loops: give looped=True too")
        if self.looped and (self.rows > 1 or self.serial > 1):
            raise tp.ScheduleError(f"RowClass: a looped class takes one row a block (rows=1, serial=1), got rows="
                                   f"{self.rows}, serial={self.serial}")
        if isinstance(self.serial, bool) or not isinstance(self.serial, int) or self.serial < 1:
            raise tp.ScheduleError(f"RowClass: serial must be a positive int, got {self.serial!r}")
        for name in ("vector", "batch", "max_threads", "rows"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1):
                raise tp.ScheduleError(f"RowClass: {name} must be a positive power of two, got {v!r}")
        if self.max_threads * self.rows > MAX_THREADS:
            raise tp.ScheduleError(f"RowClass: max_threads x rows must be at most {MAX_THREADS}, got "
                                   f"{self.max_threads} x {self.rows}")
        if isinstance(self.stages, bool) or not isinstance(self.stages, int) or not 2 <= self.stages <= self.serial + 1:
            raise tp.ScheduleError(f"RowClass: stages must be an int from 2 to serial + 1 = {self.serial + 1}, "
                                   f"got {self.stages!r}")
        if self.vector * getattr(tp, self.dtype).bytes > VECTOR_BYTES:
            raise tp.ScheduleError(f"RowClass: vector {self.vector} of {self.dtype} is more than {VECTOR_BYTES} bytes")

    @property
    def max_row(self) -> int:
        """The longest row: what the threads hold, what shared memory holds for a staged class, or
        for a looped class any (a size's range)."""
        if self.staged:
            return STAGED_BYTES // getattr(tp, self.dtype).bytes
        return LONGEST_LOOPED_ROW if self.looped else self.vector * self.batch * self.max_threads

    @property
    def tag(self) -> str:
        """The class in a kernel's name: bfloat16_v8_b2_t512 (_r4: 4 rows a block; _s4x2: 4 steps
        a block, 2 stages)."""
        rows = f"_r{self.rows}" if self.rows > 1 else ""
        serial = f"_s{self.serial}x{self.stages}" if self.serial > 1 else ""
        holes = "" if self.whole or (self.batch == 1 and not self.looped) else "_p"
        looped = "_s" if self.staged else "_l" if self.looped else ""
        return f"{self.dtype}_v{self.vector}_b{self.batch}_t{self.max_threads}{rows}{serial}{looped}{holes}"

    @property
    def multiple(self) -> int:
        """What N must be a multiple of."""
        if not self.whole:
            return self.vector
        return self.vector * self.batch * (self.max_threads if self.looped else 1)

    def admits(self, n: int) -> bool:
        return n % self.multiple == 0 and 0 < n <= self.max_row

    def threads(self, n: int) -> int:
        """A row's threads at row length n (the block has `rows` times as many)."""
        return self.max_threads if self.looped else -(-n // (self.vector * self.batch))


def row_class(n: int, dtype: str = "bfloat16", long_shape: tuple[int, int] = LONG_SHAPE,
              most_vectors: int = UNROLLED_BATCHES[-1], wide_from: int | None = None,
              long_row: int = LONG_ROW) -> RowClass:
    """The class a row of n elements runs in: the widest vector dividing n (16 bytes at most), and
    the most vectors a thread holds, of UNROLLED_BATCHES up to `most_vectors` (an op's choice,
    RowOp.most_vectors), that cut n into whole threads (n a
    multiple of vector * batch: no bound checked per element) of at most MAX_THREADS; where none
    does, the fewest of BATCHES that fit MAX_THREADS threads, whole where n allows. Its
    `max_threads` the power of two (at least a warp) at or above the threads n takes.

    More vectors a thread and fewer threads measured best at every row length below LONG_ROW
    (H200, bfloat16; benchmarks/normalization.py): the fixed costs of a row (its block reductions,
    the max and the bounds) are paid once per thread, over more elements. From `wide_from`
    elements on (an op's choice, RowOp.wide_from; None: never), the most of BATCHES (8 vectors,
    its batch loop not unrolled) that cut n into whole threads.

    From `long_row` elements on (LONG_ROW unless an op measured otherwise, RowOp.long_row), and
    for rows longer than a block holds in registers: the staged
    class of `long_shape` (vectors a thread a step, threads: an op's choice, RowOp.long_shape),
    whose block copies the row into shared memory (one 1-D bulk copy, or cp.async for vectors
    under 16 bytes) and reads it from there at each use; for rows longer than STAGED_BYTES, the looped class of one vector a thread a step over
    LOOPED_THREADS threads, which reads the row from global memory (L2) at each use. A block of
    a row held in 1024 threads' registers leaves the SM idle while it reduces; a staged row's
    loads are all in flight at once, and 2-3 such blocks share an SM."""
    width = getattr(tp, dtype).bytes
    vector = VECTOR_BYTES // width
    while n % vector:
        vector //= 2
    most = BATCHES[-1] if wide_from is not None and n >= wide_from else most_vectors
    whole = [b for b in reversed(BATCHES)
             if b <= most and n % (vector * b) == 0 and n // (vector * b) <= MAX_THREADS]
    fitting = [b for b in BATCHES if -(-n // (vector * b)) <= MAX_THREADS]
    if n >= long_row or not (whole or fitting):
        if n * width <= STAGED_BYTES:
            batch, threads = long_shape
            return RowClass(dtype, vector, batch, threads, looped=True, staged=True,
                            whole=n % (vector * batch * threads) == 0)
        return RowClass(dtype, vector, 1, LOOPED_THREADS, looped=True, whole=n % (vector * LOOPED_THREADS) == 0)
    batch = whole[0] if whole else fitting[0]
    threads = -(-n // (vector * batch))
    return RowClass(dtype, vector, batch, max(32, 1 << (threads - 1).bit_length()),
                    whole=n % (vector * batch) == 0)


# -- the fusions ----------------------------------------------------------------------------------


def _row_input(fusion, dtype) -> tp.TensorView:
    x = tp.make_tensor(["M", "N"], contiguity=True, dtype=getattr(tp, dtype))
    fusion.add_input(x)
    return x


def _weight_input(fusion, dtype) -> tp.TensorView:
    w = tp.make_tensor(["N"], contiguity=True, dtype=getattr(tp, dtype))
    fusion.add_input(w)
    return w


def _float(t: tp.TensorView) -> tp.TensorView:
    """t in float32: a cast of its own for each use, so that only t's row is held."""
    return tp.cast(t, tp.float32) if t.dtype != tp.float32 else tp.set(t)


def _read(x: tp.TensorView, rows: "RowClass") -> tp.TensorView:
    """A row input x at one of its uses, in float32: in a looped class, through a copy of its own
    (that use's load of the row from global memory, in its own loop over the row), else x itself
    (its one register cache, schedule_rows)."""
    if not rows.looped:
        return _float(x)
    copy = tp.set(x)
    return tp.cast(copy, tp.float32) if copy.dtype != tp.float32 else copy


def _row(t: tp.TensorView) -> tp.TensorView:
    """A per-row value [M] broadcast along the row [M, 1]."""
    return tp.broadcast(t, [False, True])


def _assume(fusion, rows: RowClass) -> None:
    fusion.assume(f"N % {rows.multiple} == 0")
    if rows.max_row < LONGEST_LOOPED_ROW:
        fusion.assume(f"N <= {rows.max_row}")


def _exp_less_max(x: tp.TensorView, m: tp.TensorView, rows: "RowClass") -> tp.TensorView:
    """exp(x - m) as exp2(x log2(e) - m log2(e)) (x a row, m its row value [M, 1]): one fused
    multiply-add and one ex2 an element, where exp's range reduction costs several instructions."""
    return tp.exp2(tp.sub(tp.mul(_read(x, rows), LOG2_E), tp.mul(m, LOG2_E)))


def softmax_fusion(rows: RowClass, log: bool = False) -> tp.Fusion:
    """softmax (or log_softmax) over each row of x [M, N], in x's dtype, scheduled. The row is
    divided by its sum as a multiplication by the sum's reciprocal (one division a row)."""
    with tp.Fusion(f"{'log_' if log else ''}softmax_{rows.tag}") as fusion:
        x = _row_input(fusion, rows.dtype)
        m = _row(tp.max(_read(x, rows), 1))
        s = tp.sum(_exp_less_max(x, m, rows), 1)
        if log:
            y = tp.sub(tp.sub(_read(x, rows), m), _row(tp.log(s)))
        else:
            y = tp.mul(_exp_less_max(x, m, rows), _row(tp.reciprocal(s)))
        out = tp.cast(y, x.dtype) if x.dtype != tp.float32 else y
        fusion.add_output(out)
    _assume(fusion, rows)
    schedule_rows(fusion, out, rows)
    return fusion


def layer_norm_fusion(rows: RowClass, eps: float = 1e-5, weight: bool = True, bias: bool = True) -> tp.Fusion:
    """(x - mean) * rsqrt(var + eps) * weight + bias over each row of x [M, N] (var biased, as
    torch.nn.functional.layer_norm), weight and bias [N] (inputs in that order; without `weight` or
    `bias`, as F.layer_norm's None), all of one dtype, scheduled."""
    _check_eps(eps)
    _check_flags("layer_norm_fusion", weight=weight, bias=bias)
    with tp.Fusion(f"layer_norm{_affine_tag(weight, bias)}_{rows.tag}") as fusion:
        x = _row_input(fusion, rows.dtype)
        w = _weight_input(fusion, rows.dtype) if weight else None
        b = _weight_input(fusion, rows.dtype) if bias else None
        # the mean, then the sum of squared deviations from it: nvFuser's layer_norm is a Welford
        # (tp.var_mean), which its segmenter translates into these two passes for a row one kernel
        # holds (TranslateApplicableWelford): Welford's division per element made this kernel
        # 0.57-0.76 of a copy on an H200, where the two passes run at 0.80-0.97
        mean = _row(tp.div(tp.sum(_read(x, rows), 1), "N"))

        def centered():
            return tp.sub(_read(x, rows), mean)

        c = centered()
        var = tp.div(tp.sum(tp.mul(c, c), 1), "N")
        inv = _row(tp.rsqrt(tp.add(var, eps)))
        y = tp.mul(centered(), inv)
        if w is not None:
            y = tp.mul(y, _float(_columns(w)))
        if b is not None:
            y = tp.add(y, _float(_columns(b)))
        out = tp.cast(y, x.dtype) if x.dtype != tp.float32 else y
        fusion.add_output(out)
    _assume(fusion, rows)
    schedule_rows(fusion, out, rows)
    return fusion


def rms_norm_fusion(rows: RowClass, eps: float = 1e-6, weight: bool = True) -> tp.Fusion:
    """x * rsqrt(mean(x^2) + eps) * weight over each row of x [M, N], weight [N] (without `weight`,
    as F.rms_norm's None), scheduled."""
    _check_eps(eps)
    _check_flags("rms_norm_fusion", weight=weight)
    with tp.Fusion(f"rms_norm{_affine_tag(weight, False)}_{rows.tag}") as fusion:
        x = _row_input(fusion, rows.dtype)
        w = _weight_input(fusion, rows.dtype) if weight else None
        xf = _read(x, rows)
        inv = _row(tp.rsqrt(tp.add(tp.div(tp.sum(tp.mul(xf, xf), 1), "N"), eps)))
        y = tp.mul(_read(x, rows), inv)
        if w is not None:
            y = tp.mul(y, _float(_columns(w)))
        out = tp.cast(y, x.dtype) if x.dtype != tp.float32 else y
        fusion.add_output(out)
    _assume(fusion, rows)
    schedule_rows(fusion, out, rows)
    return fusion


def cross_entropy_fusion(rows: RowClass) -> tp.Fusion:
    """Per row of logits x [M, N] and target probabilities p [M, N] (one dtype): the float32 loss
    sum(p * (logsumexp(x) - x)) = -sum(p * log_softmax(x)), scheduled."""
    with tp.Fusion(f"cross_entropy_{rows.tag}") as fusion:
        x = _row_input(fusion, rows.dtype)
        p = _row_input(fusion, rows.dtype)
        m = tp.max(_read(x, rows), 1)
        lse = tp.add(tp.log(tp.sum(_exp_less_max(x, _row(m), rows), 1)), m)
        # one reduction after logsumexp: two sums of the same row would share its loop, and a
        # reduction's total is stored where its loop ends
        loss = tp.sum(tp.mul(_read(p, rows), tp.sub(_row(lse), _read(x, rows))), 1)
        fusion.add_output(loss)
    _assume(fusion, rows)
    schedule_rows(fusion, loss, rows)
    return fusion


def _columns(w: tp.TensorView) -> tp.TensorView:
    """A weight [N] as [1, N], read by every row."""
    return tp.broadcast(w, [True, False])


def _check_flags(op: str, **flags) -> None:
    for name, v in flags.items():
        if not isinstance(v, bool):
            raise tp.ScheduleError(f"{op}: {name} must be True or False, got {v!r}")


def _affine_tag(weight: bool, bias: bool) -> str:
    """A kernel name's mark of the affine inputs: "" with a weight (and LayerNorm's bias), else
    which are missing."""
    return "" if weight and bias else "_no_weight_no_bias" if not weight and not bias else \
        "_no_bias" if weight else "_no_weight"


def _check_eps(eps) -> None:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise tp.ScheduleError(f"eps must be a non-negative number, got {eps!r}")


# -- the schedule ---------------------------------------------------------------------------------


def schedule_rows(fusion: tp.Fusion, out: tp.TensorView, rows: RowClass) -> None:
    """nvFuser's inner persistent schedule (see the module's text) on a fusion whose inputs are
    rows [M, N] and weights [N]: caches for the inputs, the row split on the output (a row, or a
    per-row reduction), propagated and parallelized, the caches' loads and a row output's stores
    vectorized, the vector axes unrolled, inline_most, then the batch axes unrolled (in
    UNROLLED_BATCHES' classes), and with `serial` steps a block, the steps unrolled and the row
    inputs' caches circular-buffered over them. A looped class splits the row into steps of
    `batch` vectors a thread over `max_threads` threads, and each use of a row reads it in a loop
    of its own (the statements inlined into those loops; a reduction's loop ends before its
    consumers' begin)."""
    # a looped class's rows are read by each use's own copy (_read): only the weights are cached;
    # a staged class's rows are first copied whole into shared memory, which the copies read
    caches = [t.cache_after() for t in fusion.inputs if not rows.looped or len(t.logical) == 1]
    reread = [t for t in fusion.inputs if rows.staged and len(t.logical) == 2
              and sum(t in u.definition.inputs for u in fusion.tensors if u.definition is not None) > 1]
    # rows of 16-byte vectors: one 1-D bulk copy a row (cp.async.bulk, after the split below: its
    # own [M, N] loop), issued by one thread, so that the threads issue no loads (H200: softmax and
    # RMSNorm at 32768 elements 0.90 -> 0.93 of a copy); narrower vectors: a cp.async a vector a thread
    bulk = rows.vector * getattr(tp, rows.dtype).bytes == VECTOR_BYTES
    staged = [] if bulk else [_staged(t, tp.LoadStoreOpType.CpAsync) for t in reread]
    caches += staged
    per_row = any(i.is_reduction for i in out.logical)  # cross_entropy's loss [M]: the last reduction
    ref = out
    ref.split(1, rows.vector)
    if rows.looped:  # [M, ceil(N / (vector threads batch)), batch, threads, vector]
        ref.split(1, rows.max_threads)
        ref.split(1, rows.batch)
    else:
        ref.split(1, rows.batch, inner_split=False)  # [M, batch, ceil(N / (vector batch)), vector]
    if rows.serial > 1:  # [ceil(M / serial), serial, batch, threads, vector]
        ref.split(0, rows.serial)
    if rows.rows > 1:  # [ceil(M / (rows serial)), rows (TIDy), (serial,) batch, threads, vector]
        ref.split(0, rows.rows)
        ref.axis(1).parallelize(P.TIDy)
    tp.propagate_transforms(ref)
    ref.axis(0).parallelize(P.BIDx)
    ref.axis(-2).parallelize(P.TIDx)
    tp.parallelize_all_like(ref)
    if bulk:
        for t in reread:
            staged.append(_staged(t, tp.LoadStoreOpType.CpAsyncBulk))
            staged[-1].axis(0).parallelize(P.BIDx)
            staged[-1].axis(1).parallelize(P.Bulk)
    computed = [t for t in fusion.tensors if not t.is_fusion_input]
    row_axes = 1 + (rows.rows > 1) + (rows.serial > 1)  # the axes M was split into
    n_axes = 4 if rows.looped else 3  # the axes N was split into
    if rows.looped:  # each use's copy of a row (_read) loads 16 bytes a step
        sources = [*fusion.inputs, *staged]
        caches += [t for t in computed if t.definition.name == "set" and any(t.definition.inputs[0] is s for s in sources)
                   and not any(t is s for s in staged)]

    def along_m(t) -> bool:  # a row or a per-row value (not a weight [N], whose broadcast M axis is BIDx{1})
        return t.axis(0).parallel_type == P.BIDx and not t.axis(0).is_broadcast

    def along_n(t) -> bool:  # [(M axes,) (steps,) batch, threads, vector]: a row or a weight
        return len(t.loop) - (row_axes if along_m(t) else 0) == n_axes

    for t in computed:
        if along_n(t) and not t.axis(-1).is_broadcast and not t.axis(-1).is_reduction:
            t.axis(-1).parallelize(P.Unroll)
    for t in caches:
        t.axis(-1).parallelize(P.Vectorize)
    if not per_row:
        out.axis(-1).parallelize(P.Vectorize)
    tp.inline_most(fusion)
    # after inlining: an unrolled batch loop is one the statements inlined into it run in (inline_most
    # would stop before it); the persistent cache's registers are then indexed by constants. So are
    # the stages of a circular buffer over the serial steps, which are unrolled too
    for t in computed:
        if rows.batch in UNROLLED_BATCHES and along_n(t) and not t.axis(-3).is_broadcast:
            t.axis(-3).parallelize(P.Unroll)
        if rows.serial > 1 and along_m(t):
            t.axis(row_axes - 1).parallelize(P.Unroll)
    if rows.serial > 1:
        for t in caches:
            if along_m(t) and t.compute_at == row_axes:  # a row held whole (not one read where used)
                t.circular_buffer(rows.stages, rows.stages - 1)


def _staged(t: tp.TensorView, op: tp.LoadStoreOpType) -> tp.TensorView:
    """A row input's copy in shared memory, which its uses read."""
    copy = t.cache_after(op)
    copy.set_memory_type(tp.MemoryType.Shared)
    return copy


# -- PyTorch entries ------------------------------------------------------------------------------


def _torch():
    try:
        import torch  # an optional extra: imported only when a recipe is called
    except ImportError as e:
        raise ImportError(f"tileproof.recipes.normalization takes PyTorch tensors ({e})") from None
    return torch


class RowOp(abc.ABC):
    """An entry: PyTorch tensors in, a new tensor out, a kernel per row class compiled on first use
    (kept for the entry's life). Subclasses name the op, its inputs and its fusion."""

    name = "row_op"
    input_names: tuple[str, ...] = ("x",)
    output_count = 1
    # row_class's choices, measured per op (H200, bfloat16, benchmarks/normalization.py):
    long_shape: tuple[int, int] = LONG_SHAPE  # the staged class for long rows
    long_row = LONG_ROW  # rows from this many elements on are staged
    most_vectors = UNROLLED_BATCHES[-1]  # the most vectors a thread holds below wide_from
    wide_from: int | None = None  # rows from this many elements on take 8 vectors a thread where whole

    def __init__(self, target: str = "sm_90a"):
        self.target = target
        self._kernels: dict[RowClass, tp.Kernel] = {}

    @abc.abstractmethod
    def fusion(self, rows: RowClass) -> tp.Fusion:
        """The op's schedule for a row class."""

    def kernel(self, rows: RowClass) -> tp.Kernel:
        """The row class's kernel (verified and compiled on first use)."""
        k = self._kernels.get(rows)
        if k is None:
            k = self._kernels[rows] = tp.compile(self.fusion(rows), self.target)
        return k

    def rows_of(self, x) -> tuple[int, int, RowClass]:
        """(M, N, the row class) of a row input after the checks."""
        torch = _torch()
        if not isinstance(x, torch.Tensor):
            raise tp.InputError(f"{self.name}: x must be a torch.Tensor, got {type(x).__name__}")
        dtype = str(x.dtype).removeprefix("torch.")
        if dtype not in DTYPES:
            raise tp.InputError(f"{self.name}: x must be one of {', '.join(DTYPES)}, got {dtype}")
        if x.dim() < 1 or x.numel() == 0:
            raise tp.InputError(f"{self.name}: x must have at least one element and one axis, got shape {list(x.shape)}")
        if not x.is_contiguous():
            raise tp.InputError(f"{self.name}: x must be contiguous (rows along its last axis), got strides "
                                f"{list(x.stride())}: pass x.contiguous()")
        n = x.shape[-1]
        return x.numel() // n, n, self.row_class(n, dtype)

    def row_class(self, n: int, dtype: str = "bfloat16") -> RowClass:
        """The class a row of n elements runs in for this op (row_class with the op's measured shapes)."""
        return row_class(n, dtype, self.long_shape, self.most_vectors, self.wide_from, self.long_row)

    def _aligned(self, rows: RowClass, x, *others) -> None:
        """x and the other inputs start where their vector loads may (asked only of real tensors:
        a fake one, under torch.compile, has no address)."""
        for what, t in zip(self.input_names, (x, *others)):
            if t.data_ptr() % (rows.vector * t.element_size()):
                raise tp.InputError(f"{self.name}: {what} does not start at a {rows.vector * t.element_size()}-byte "
                                    f"aligned address, which its vector loads need (pass {what}.clone())")

    def _like_x(self, what: str, t, x, shape) -> None:
        torch = _torch()
        if not isinstance(t, torch.Tensor):
            raise tp.InputError(f"{self.name}: {what} must be a torch.Tensor, got {type(t).__name__}")
        if list(t.shape) != list(shape):
            raise tp.InputError(f"{self.name}: {what} must have shape {list(shape)}, got {list(t.shape)}")
        if t.dtype != x.dtype:
            raise tp.InputError(f"{self.name}: {what} is {str(t.dtype).removeprefix('torch.')} but x is "
                                f"{str(x.dtype).removeprefix('torch.')}; pass {what}.to(x.dtype)")
        if t.device != x.device:
            raise tp.InputError(f"{self.name}: {what} is on {t.device} and x on {x.device}; both must be on one GPU")
        if not t.is_contiguous():
            raise tp.InputError(f"{self.name}: {what} must be contiguous: pass {what}.contiguous()")

    def __call__(self, x, *others):
        m, n, rows = self.rows_of(x)
        self.check_others(x, others)
        self._aligned(rows, x, *others)
        (out,) = self.kernel(rows).run(x.reshape(m, n), *others)
        return out.reshape(self.out_shape(x))

    def check_others(self, x, others) -> None:
        if others:
            raise tp.InputError(f"{self.name}: takes {len(self.input_names)} tensors, got {1 + len(others)}")

    def out_shape(self, x):
        return x.shape

    def fake(self, x, *others):
        """The output as __call__ returns it, without running (tp.as_torch_op's fake implementation)."""
        self.rows_of(x)
        self.check_others(x, others)
        torch = _torch()
        return torch.empty(self.out_shape(x), dtype=self.out_dtype(x), device=x.device)

    def out_dtype(self, x):
        return x.dtype


class Softmax(RowOp):
    """softmax over the last axis (log=True: log_softmax)."""

    long_shape = (2, 256)  # 0.92 of a copy at 16384 and 32768 elements, where (4, 256) ran 0.92 and 0.90
    wide_from = 8192  # 8 vectors a thread: 0.97 of a copy at 8192, where 4 ran 0.95

    def __init__(self, log: bool = False, target: str = "sm_90a"):
        super().__init__(target)
        if not isinstance(log, bool):
            raise tp.InputError(f"softmax: log must be True or False, got {log!r}")
        self.log = log
        self.name = "log_softmax" if log else "softmax"

    def fusion(self, rows: RowClass) -> tp.Fusion:
        return softmax_fusion(rows, log=self.log)


class _Normalization(RowOp):
    weights: tuple[str, ...] = ()  # the [N] inputs after x, in order; an entry made without one takes fewer

    def __init__(self, eps: float, target: str = "sm_90a", **present):
        super().__init__(target)
        try:
            _check_eps(eps)
        except tp.ScheduleError as e:
            raise tp.InputError(f"{self.name}: {e}") from None
        try:
            _check_flags(self.name, **present)
        except tp.ScheduleError as e:
            raise tp.InputError(str(e)) from None
        self.eps = float(eps)
        self.present = present
        self.weights = tuple(w for w in self.weights if present[w])
        self.input_names = ("x", *self.weights)

    def check_others(self, x, others) -> None:
        if len(others) != len(self.weights):
            takes = f"x and {', '.join(self.weights)}" if self.weights else "x only"
            raise tp.InputError(f"{self.name}: takes {takes}, got {1 + len(others)} tensors")
        for what, t in zip(self.weights, others):
            self._like_x(what, t, x, [x.shape[-1]])


class LayerNorm(_Normalization):
    """layer_norm over the last axis with weight and bias [N] (torch.nn.functional.layer_norm);
    weight=False or bias=False: an entry without that input (F.layer_norm's None)."""

    name = "layer_norm"
    input_names = ("x", "weight", "bias")
    weights = ("weight", "bias")
    # 8 vectors a thread at 8192 and 16384 elements: 0.94 and 0.93 of a copy, where 4 vectors ran 0.92 and the
    # staged classes at most 0.87; staged from 32768, one vector a step over 512 threads: 0.82 (2: 0.80)
    wide_from = 8192
    long_row = 32768
    long_shape = (1, 512)

    def __init__(self, eps: float = 1e-5, target: str = "sm_90a", weight: bool = True, bias: bool = True):
        super().__init__(eps, target, weight=weight, bias=bias)

    def fusion(self, rows: RowClass) -> tp.Fusion:
        return layer_norm_fusion(rows, self.eps, **self.present)


class RMSNorm(_Normalization):
    """rms_norm over the last axis with weight [N] (torch.nn.functional.rms_norm); weight=False:
    an entry without it (F.rms_norm's None)."""

    name = "rms_norm"
    input_names = ("x", "weight")
    weights = ("weight",)
    most_vectors = 2  # measured faster than 4 at 1024, 4096 and 8192 elements (H200: 0.98 of a copy at 8192, 0.95)

    def __init__(self, eps: float = 1e-6, target: str = "sm_90a", weight: bool = True):
        super().__init__(eps, target, weight=weight)

    def fusion(self, rows: RowClass) -> tp.Fusion:
        return rms_norm_fusion(rows, self.eps, **self.present)


class CrossEntropy(RowOp):
    """The float32 loss per row of logits and target probabilities of one shape and dtype
    (F.cross_entropy(logits.float(), target.float(), reduction="none"))."""

    name = "cross_entropy"
    input_names = ("logits", "target")
    long_shape = Softmax.long_shape  # its logits are read as softmax's

    def fusion(self, rows: RowClass) -> tp.Fusion:
        return cross_entropy_fusion(rows)

    def check_others(self, x, others) -> None:
        if len(others) != 1:
            raise tp.InputError(f"cross_entropy: takes logits and target, got {1 + len(others)} tensors")
        self._like_x("target", others[0], x, x.shape)

    def __call__(self, x, target):
        m, n, rows = self.rows_of(x)
        self.check_others(x, (target,))
        self._aligned(rows, x, target)
        (out,) = self.kernel(rows).run(x.reshape(m, n), target.reshape(m, n))
        return out.reshape(self.out_shape(x))

    def out_shape(self, x):
        return x.shape[:-1]

    def out_dtype(self, x):
        return _torch().float32


ENTRY_CACHE_SIZE = 16  # entries the calls keep, one per op, eps and target (LRU): each holds its kernels
_entries: "OrderedDict[tuple, RowOp]" = OrderedDict()


def _entry(kind, *args) -> RowOp:
    return lru_entry(_entries, (kind, *args), lambda: kind(*args), ENTRY_CACHE_SIZE)


def _last_axis(op: str, x, dim) -> None:
    ndim = getattr(x, "ndim", None)
    if ndim is not None and dim not in (-1, ndim - 1):
        raise tp.InputError(f"{op}: only dim=-1 (the last axis, contiguous) is supported, got dim={dim!r}")


def softmax(x, dim: int = -1, target: str = "sm_90a"):
    """softmax(x, dim=-1) in x's dtype (bfloat16, float16, float32), rows of any length."""
    _last_axis("softmax", x, dim)
    return _entry(Softmax, False, target)(x)


def log_softmax(x, dim: int = -1, target: str = "sm_90a"):
    """log_softmax(x, dim=-1) in x's dtype."""
    _last_axis("log_softmax", x, dim)
    return _entry(Softmax, True, target)(x)


def _eps_key(eps):
    return float(eps) if isinstance(eps, (int, float)) and not isinstance(eps, bool) else eps


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5, target: str = "sm_90a"):
    """F.layer_norm(x, [N], weight, bias, eps) over the last axis, all of x's dtype; weight or bias
    None: none (a kernel without that input)."""
    given = [t for t in (weight, bias) if t is not None]
    return _entry(LayerNorm, _eps_key(eps), target, weight is not None, bias is not None)(x, *given)


def rms_norm(x, weight=None, eps: float = 1e-6, target: str = "sm_90a"):
    """F.rms_norm(x, [N], weight, eps) over the last axis, all of x's dtype; weight None: none."""
    return _entry(RMSNorm, _eps_key(eps), target, weight is not None)(x, *([weight] if weight is not None else []))


def cross_entropy(logits, target, arch: str = "sm_90a"):
    """The float32 loss per row: F.cross_entropy(logits, target, reduction="none") with target the
    class probabilities (one-hot for class indices), of logits' shape and dtype."""
    return _entry(CrossEntropy, arch)(logits, target)


__all__ = ["BATCHES", "ENTRY_CACHE_SIZE", "LONG_ROW", "LONG_SHAPE", "LOOPED_THREADS", "STAGED_BYTES", "UNROLLED_BATCHES", "CrossEntropy", "DTYPES", "LayerNorm", "MAX_THREADS", "RMSNorm", "RowClass", "RowOp",
           "Softmax", "cross_entropy", "cross_entropy_fusion", "layer_norm", "layer_norm_fusion",
           "log_softmax", "rms_norm", "rms_norm_fusion", "row_class", "schedule_rows", "softmax", "softmax_fusion"]
