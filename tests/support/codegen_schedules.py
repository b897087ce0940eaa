"""Schedules that exercise the code generator beyond the bundled examples: thread/block
parallel pointwise ops with symbolic sizes, vectorized copies, a transpose through
shared memory, broadcasts, half types, indivisible splits, a discontiguous input.

Each builder returns a Fusion; tests/codegen/test_codegen.py compiles them all, and
tests/gpu/test_kernels.py runs them against references.
"""

from __future__ import annotations

import tileproof as tp

P = tp.ParallelType


def _tile_1d(tv, threads: int) -> None:
    """[.., N] -> [BIDx, TIDx] over the merged axes."""
    while tv.ndim > 1:
        tv.merge(0)
    tv.split(0, threads)
    tv.axis(0).parallelize(P.BIDx)
    tv.axis(1).parallelize(P.TIDx)


def elementwise_1d(name: str, body, threads: int = 128) -> tp.Fusion:
    """out = body(x) for a symbolic float32 x [N] named "x": every computed tensor [BIDx, TIDx],
    inlined (the fusion the per-fusion options' tests compile: fast_math, dependent_launch)."""
    with tp.Fusion(name) as fusion:
        x = tp.make_tensor(["N"], dtype=tp.float32, name="x")
        fusion.add_input(x)
        fusion.add_output(body(x))
    for tv in fusion.tensors:
        if tv.definition is not None:
            _tile_1d(tv, threads)
    tp.inline_most(fusion)
    return fusion


def pointwise_add(dtype="float32", threads=128, shape=("M", "N")):
    """out = exp(a) + b over a symbolic 2-D shape, through register intermediates."""
    with tp.Fusion("pointwise_add") as fusion:
        a = tp.make_tensor(list(shape), dtype=dtype)
        b = tp.make_tensor(list(shape), dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        ea = tp.exp(a)
        out = tp.add(ea, b)
        fusion.add_output(out)
    for name in shape:
        if isinstance(name, str):  # at most 2^29 blocks on BIDx (LAUNCH-GRID)
            fusion.assume(f"{name} <= 262144")
    for tv in (ea, out):
        _tile_1d(tv, threads)
    tp.inline_most(fusion)
    return fusion


def binary_ops(dtype="float32"):
    """Every binary and unary op in one chain: ((a - b) * a / (|b| + 1)) max (-a) min sqrt(relu(a))."""
    from tileproof.model import ops

    with tp.Fusion("binary_ops") as fusion:
        a = tp.make_tensor(["N"], dtype=dtype)
        b = tp.make_tensor(["N"], dtype=dtype)
        one = tp.make_tensor(["N"], dtype=dtype)
        for t in (a, b, one):
            fusion.add_input(t)
        d = tp.sub(a, b)
        m = tp.mul(d, a)
        q = tp.div(m, tp.add(tp.abs(b), one))
        x = ops.binary("maximum", q, tp.neg(a))
        y = ops.binary("minimum", x, ops.unary("sqrt", ops.unary("relu", a)))
        fusion.add_output(y)
    for tv in fusion.tensors:
        if tv.definition is not None:
            _tile_1d(tv, 64)
    tp.inline_most(fusion)
    return fusion


def integer_ops(dtype="int32"):
    """Integer arithmetic: max(|a - b|, relu(a * b)) min (-a + b)."""
    from tileproof.model import ops

    with tp.Fusion("integer_ops") as fusion:
        a = tp.make_tensor(["N"], dtype=dtype)
        b = tp.make_tensor(["N"], dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        x = ops.binary("maximum", tp.abs(tp.sub(a, b)), ops.unary("relu", tp.mul(a, b)))
        y = ops.binary("minimum", x, tp.add(tp.neg(a), b))
        fusion.add_output(y)
    for tv in fusion.tensors:
        if tv.definition is not None:
            _tile_1d(tv, 128)
    tp.inline_most(fusion)
    return fusion


def vectorized_copy(dtype="float32", vector=4, threads=128):
    """[M, N] copy with N % vector == 0: each thread moves one vector through registers."""
    with tp.Fusion("vectorized_copy") as fusion:
        t0 = tp.make_tensor(["M", "N"], dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    fusion.assume(f"N % {vector} == 0")
    fusion.assume("M <= 262144")  # at most 2^29 blocks on BIDx (LAUNCH-GRID)
    fusion.assume("N <= 262144")
    for tv in (t1, t2):
        tv.split(1, vector)  # [M, N/v, v]
        tv.merge(0)  # [M*N/v, v]
        tv.split(0, threads)  # [.., threads, v]
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
        tv.axis(2).parallelize(P.Vectorize)
    t1.inline_at(2)
    return fusion


def merged_vector_copy(rows=64, cols=256, vector=4):
    """A contiguous copy merged before the vector split (the index has // and % to simplify)."""
    with tp.Fusion("merged_vector_copy") as fusion:
        t0 = tp.make_contig_concrete_tensor([rows, cols])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.merge(0).split(0, vector).split(0, 128)  # [blocks, 128, v]
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    t1.axis(2).parallelize(P.Vectorize)
    return fusion


def smem_transpose(dtype="float32", tile=32, rows=8):
    """out[N, M] = in[M, N] through a tile x tile shared-memory buffer: reads and writes
    are both coalesced (TIDx runs along the contiguous axis of each)."""
    with tp.Fusion("smem_transpose") as fusion:
        t0 = tp.make_tensor(["M", "N"], dtype=dtype)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.transpose(t1, 0, 1)
        fusion.add_output(t2)
    fusion.assume(f"M <= 65535 * {tile}")  # ceil(M / tile) blocks on BIDy (LAUNCH-GRID)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(1, tile).split(0, tile)  # [Mo, Mi, No, Ni]
    t1.reorder({1: 2, 2: 1})  # [Mo, No, Mi, Ni]
    t1.split(2, rows)  # [Mo, No, Mi/rows, rows, Ni]
    t2.split(1, tile).split(0, tile)  # [No, Ni, Mo, Mi]
    t2.reorder({0: 1, 1: 2, 2: 0})  # [Mo, No, Ni, Mi]
    t2.split(2, rows)  # [Mo, No, Ni/rows, rows, Mi]
    for tv in (t1, t2):
        tv.axis(0).parallelize(P.BIDy)
        tv.axis(1).parallelize(P.BIDx)
        tv.axis(3).parallelize(P.TIDy)
        tv.axis(4).parallelize(P.TIDx)
    t1.inline_at(2)
    return fusion


def broadcast_add(dtype="float32"):
    """out[M, N] = a[M, N] + bias[N] (bias broadcast along M)."""
    with tp.Fusion("broadcast_add") as fusion:
        a = tp.make_tensor(["M", "N"], dtype=dtype)
        bias = tp.make_tensor(["N"], dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(bias)
        bb = tp.broadcast(bias, [True, False])
        out = tp.add(a, bb)
        fusion.add_output(out)
    fusion.assume("M <= 65535")  # a block per row on BIDy (LAUNCH-GRID)
    for tv in (bb, out):
        tv.split(1, 64)
        tv.axis(0).parallelize(P.BIDy)
        tv.axis(1).parallelize(P.BIDx)
        tv.axis(2).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion


def indivisible_split(n=1000, factor=128):
    """A 1-D copy whose split leaves holes in the last block (n % factor != 0)."""
    with tp.Fusion("indivisible_split") as fusion:
        t0 = tp.make_contig_concrete_tensor([n])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.neg(t1)
        fusion.add_output(t2)
    for tv in (t1, t2):
        tv.split(0, factor)
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion


def strided_input(rows=16, cols=48):
    """The input's row stride is a kernel argument (its rows are discontiguous)."""
    with tp.Fusion("strided_input") as fusion:
        t0 = tp.make_tensor([rows, cols], contiguity=[False, True])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.axis(0).parallelize(P.BIDx)
    t1.axis(1).parallelize(P.TIDx)
    return fusion


def partial_threads():
    """Two tensors with different TIDx extents in one block: the shorter one is predicated,
    and the smem tensor written with fewer threads is read by all after a barrier."""
    with tp.Fusion("partial_threads") as fusion:
        t0 = tp.make_contig_concrete_tensor([4, 64])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.split(1, 2)  # [4, 32, 2]
    t1.axis(1).parallelize(P.TIDx)
    t2.axis(1).parallelize(P.TIDx)  # [4, TIDx{64}]
    return fusion


def serial_smem_reuse(rows=6, cols=32):
    """A shared row buffer rewritten in every iteration of a serial loop: barriers before
    the read and before the next write."""
    with tp.Fusion("serial_smem_reuse") as fusion:
        t0 = tp.make_contig_concrete_tensor([rows, cols])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    t1.axis(1).parallelize(P.TIDx)
    t2.split(1, 2)  # each thread reads another thread's words: [rows, 16, 2]
    t2.reorder({1: 2, 2: 1})  # [rows, 2, 16]
    t2.axis(2).parallelize(P.TIDx)
    t1.inline_at(1)
    return fusion


def big_smem_copy(rows=128, cols=128):
    """A whole [rows, cols] float tile per block in shared memory (64 KiB: above the 48 KiB
    a kernel gets without opting in), read back column-major by the block's threads."""
    with tp.Fusion("big_smem_copy") as fusion:
        t0 = tp.make_tensor(["B", rows, cols])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for tv in (t1, t2):
        tv.axis(0).parallelize(P.BIDx)
    t1.axis(2).parallelize(P.TIDx)  # [B, rows, TIDx{cols}]
    t2.reorder({1: 2})  # [B, cols, rows]
    t2.axis(2).parallelize(P.TIDx)  # each thread reads a row written by every other thread
    t1.inline_at(1)
    return fusion


def two_outputs(n=1000):
    """One register tensor inlined into two outputs, with an unrolled inner loop:
    o1 = -(a * b), o2 = |a * b|."""
    with tp.Fusion("two_outputs") as fusion:
        a = tp.make_tensor([n])
        b = tp.make_tensor([n])
        fusion.add_input(a)
        fusion.add_input(b)
        ab = tp.mul(a, b)
        o1 = tp.neg(ab)
        o2 = tp.abs(ab)
        fusion.add_output(o1)
        fusion.add_output(o2)
    for tv in (ab, o1, o2):
        tv.split(0, 4).split(0, 64)  # [blocks, 64, 4]
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
        tv.axis(2).parallelize(P.Unroll)
    tp.inline_most(fusion)
    return fusion


DTYPE_NAMES = ["float32", "float64", "float16", "bfloat16", "int8", "int32", "int64"]


def every_cast(source="float32", threads=128):
    """One input of `source` cast to each other dtype (six outputs) over a symbolic N."""
    with tp.Fusion(f"every_cast_{source}") as fusion:
        a = tp.make_tensor(["N"], dtype=source)
        fusion.add_input(a)
        for dest in DTYPE_NAMES:
            if dest != source:
                out = tp.cast(a, dest)
                fusion.add_output(out)
                _tile_1d(out, threads)
    return fusion


def vectorized_cast(source="float32", dest="bfloat16", vector=4, threads=128):
    """[M, N] source -> dest, `vector` elements per thread and access (N % vector == 0)."""
    with tp.Fusion("vectorized_cast") as fusion:
        a = tp.make_tensor(["M", "N"], contiguity=True, dtype=source)
        fusion.add_input(a)
        out = tp.cast(a, dest)
        fusion.add_output(out)
    fusion.assume(f"N % {vector} == 0")
    fusion.assume("M <= 262144")  # at most 2^29 blocks on BIDx (LAUNCH-GRID)
    fusion.assume("N <= 262144")
    out.merge(0).split(0, vector).split(0, threads)
    out.axis(0).parallelize(P.BIDx)
    out.axis(1).parallelize(P.TIDx)
    out.axis(2).parallelize(P.Vectorize)
    return fusion


def scalar_ops(dtype="float32"):
    """Every binary op with a number operand, on both sides: floats
    max(min((2 - a * 0.5) / 3 + 0.25, 1.5), -1) and its integer twin with int numbers."""
    from tileproof.model import ops

    integer = getattr(tp, dtype).is_integer
    with tp.Fusion("scalar_ops") as fusion:
        a = tp.make_tensor(["N"], dtype=dtype)
        fusion.add_input(a)
        if integer:
            x = tp.div(tp.sub(7, tp.mul(a, 3)), 2)
            y = ops.binary("maximum", ops.binary("minimum", tp.add(x, -5), 100), -100)
        else:
            x = tp.div(tp.sub(2.0, tp.mul(a, 0.5)), 3.0)
            y = ops.binary("maximum", ops.binary("minimum", tp.add(x, 0.25), 1.5), -1)
        fusion.add_output(y)
    for tv in fusion.tensors[1:]:
        _tile_1d(tv, 128)
    tp.inline_most(fusion)
    return fusion


def cast_chain(dtype="bfloat16"):
    """A mixed-precision chain: float32(a) * 2 + float32(b), rounded back to `dtype`, and its
    int32 truncation."""
    with tp.Fusion("cast_chain") as fusion:
        a = tp.make_tensor(["N"], dtype=dtype)
        b = tp.make_tensor(["N"], dtype=dtype)
        fusion.add_input(a)
        fusion.add_input(b)
        s = tp.add(tp.mul(tp.cast(a, tp.float32), 2), tp.cast(b, tp.float32))
        fusion.add_output(tp.cast(s, dtype))
        fusion.add_output(tp.cast(s, tp.int32))
    for tv in fusion.tensors[2:]:
        _tile_1d(tv, 128)
    tp.inline_most(fusion)
    return fusion


BUILDERS = {
    "pointwise_add": pointwise_add,
    "pointwise_add_f16": lambda: pointwise_add("float16"),
    "pointwise_add_bf16": lambda: pointwise_add("bfloat16"),
    "pointwise_add_f64": lambda: pointwise_add("float64"),
    "binary_ops": binary_ops,
    "integer_ops_int32": integer_ops,
    "integer_ops_int8": lambda: integer_ops("int8"),
    "integer_ops_int64": lambda: integer_ops("int64"),
    "vectorized_copy": vectorized_copy,
    "vectorized_copy_f16x8": lambda: vectorized_copy("float16", 8),
    "merged_vector_copy": merged_vector_copy,
    "smem_transpose": smem_transpose,
    "smem_transpose_bf16": lambda: smem_transpose("bfloat16"),
    "broadcast_add": broadcast_add,
    "indivisible_split": indivisible_split,
    "strided_input": strided_input,
    "partial_threads": partial_threads,
    "serial_smem_reuse": serial_smem_reuse,
    "big_smem_copy": big_smem_copy,
    "two_outputs": two_outputs,
    **{f"every_cast_{d}": (lambda d=d: every_cast(d)) for d in DTYPE_NAMES},
    "vectorized_cast_f32_bf16": vectorized_cast,
    "vectorized_cast_bf16_f32": lambda: vectorized_cast("bfloat16", "float32", 4),
    "scalar_ops": scalar_ops,
    "scalar_ops_int8": lambda: scalar_ops("int8"),
    "cast_chain": cast_chain,
}
