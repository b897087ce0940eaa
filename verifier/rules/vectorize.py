"""Vectorization: a Vectorize axis becomes one access per shared/global operand, or is rejected."""

from __future__ import annotations

from typing import Iterator

import z3

from ...hw.cp_async import is_cp_async
from ...execution.statements import LAUNCH_TYPES, element_offset, tensor_execution, vector_axis, vector_position
from ...model.global_layout import global_strides
from ...model.expr import add, const, mod, substitute, var
from ...model.simplify import Simplifier, multiple_of
from ...model.tensor import TensorView
from ...model.types import LoadStoreOpType, MemoryType, OpKind, ParallelType
from ...model.vectorize import (
    VECTOR_BYTES, Finding, VectorOperand, peel_vector, unit_stride, vector_findings,
)
from ..causes import propose_retype
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome, stride_names
from ..registry import rule
from ..solver import MAX_EXTENT, Outcome

# instructions whose Vectorize axis is a register fragment, proved by their own rules (and any
# access to tensor memory, whichever op makes it)
FRAGMENT_OPS = (LoadStoreOpType.LdMatrix, LoadStoreOpType.StMatrix, LoadStoreOpType.TMemLoad,
                LoadStoreOpType.TMemStore, LoadStoreOpType.TMA)


def plain_statement(tv: TensorView) -> bool:
    """Whether tv's statement is a plain load, store or arithmetic (no fragment instruction,
    reduction or tensor-memory access, whose Vectorize axes their own rules judge)."""
    op = tv.definition
    if op.kind is OpKind.LOAD_STORE and op.op_type in FRAGMENT_OPS:
        return False
    if op.kind is OpKind.REDUCTION:
        return False  # no vector statement: REDUCTION-PARALLEL rejects a Vectorize axis of a reduction
    return MemoryType.Tensor not in [tv.memory_type] + [t.memory_type for t in op.inputs]  # tcgen05: registers


def vector_operands(ctx: VerifyContext, tv: TensorView) -> tuple[list[VectorOperand], str, int] | None:
    """tv's operands as its vector statement touches them (the code generator's offsets), the
    vector axis' index variable and width; None where tv has no plain vector statement."""
    axis = vector_axis(tv)
    if axis is None or axis.static_extent is None or not plain_statement(tv):
        return None
    op = tv.definition
    ex = tensor_execution(tv, ctx.block_dims)
    index = ex.env[axis.uid]
    if index.op != "var":
        return None  # extent 1
    ranges = ex.guarded_ranges
    tensors = [tv] + list(op.inputs)
    if any(t.memory_type is MemoryType.Global and global_strides(t) is None for t in tensors):
        return None  # no global layout to vectorize over: LOWERING-SUPPORTED / GLOBAL-INTERMEDIATE report it
    indices = [ex.indices] + [ex.operand_indices(k) for k in range(len(op.inputs))]
    over = Simplifier(ranges)
    operands = [VectorOperand(t.name, t.memory_type, t.dtype,
                              over.simplify(element_offset(t, idx, ctx.allocations.get(t.name))))
                for t, idx in zip(tensors, indices)]
    return operands, index.value, axis.static_extent


def _vectors(ctx: VerifyContext):
    for tv in ctx.executed():
        got = ctx.memo(("vector-operands", tv.name), lambda: vector_operands(ctx, tv))
        if got is not None:
            yield (tv, *got)


def _where(tv: TensorView) -> dict:
    axis = vector_axis(tv)
    return dict(tensor=tv.name, ids=[axis.name], location=axis.origin or tv.origin)


@rule("VECTORIZE-WIDTH", family="vectorize")
def vectorize_width(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A Vectorize axis moves 2, 4, 8 or 16 bytes of every shared or global operand at once.

    What it checks:
        For every statement whose loop domain ends in a Vectorize axis of extent n (plain
        loads, stores, arithmetic and casts; ldmatrix, tcgen05 and TMA fragments have their own
        rules), each shared- or global-memory operand moves n * element bytes in one access:
        2, 4, 8 or 16 bytes, with its own element size (a cast from bfloat16 to float32 moves
        2n bytes of its input and 4n of its output). Register operands may have any width
        (they are accessed element by element where needed). Such a statement has one
        Vectorize axis, and only axes bound to thread or block indices after it (a loop of
        the thread inside it would move its elements one at a time, the vector dropped).
    Why the hardware needs it:
        A GPU thread's widest load or store is 16 bytes (ld/st.v4.b32; .v2.b64); there is
        no 12- or 32-byte access. A wider or odd vector would have to be split into several
        accesses, which is not the vector the schedule asked for; nvFuser rejects it.
    Example:
        fusion, t0, t1 = copy_chain("twelve_bytes", [48], copies=1)
        t1.split(0, 3)
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        fusion, t0, t1 = copy_chain("sixteen_bytes", [48], copies=1)
        t1.split(0, 4)
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    References:
        PTX ISA, ld / st (vector operands .v2, .v4 of .b8 .. .b64, at most 128 bits); CUDA C++
        Programming Guide, device memory accesses (naturally aligned 1-, 2-, 4-, 8- or 16-byte words);
        docs/hardware.md#vector-loads-and-stores
    """
    # Formal statement: none, structural (n * bytes(dtype) in {2, 4, 8, 16} for each shared/global operand;
    #   one Vectorize axis, with only thread- and block-bound axes after it)
    reported = set()
    for tv in ctx.executed():
        for d in _not_one_vector(tv):
            reported.add(tv.name)
            yield _retyped(ctx, d, tv, ParallelType.Serial)
    for tv, operands, _, n in _vectors(ctx):
        if is_cp_async(tv.definition) or tv.name in reported:
            continue  # one cp.async moves the vector: CPASYNC-SIZE checks its bytes; one cause a tensor
        found = vector_findings(operands, n)
        if found:  # one cause a statement: its one vector, too wide for each operand named
            # too wide: the help's narrower split is the fix, unless the axis was given a type its
            # loop-mates do not have (a Vectorize put on a block axis)
            yield _retyped(ctx, _too_wide(tv, operands, n, found), tv, None)


def _retyped(ctx: VerifyContext, d: Diagnostic, tv: TensorView, fallback: ParallelType | None) -> Diagnostic:
    """d with, in its help, the one verified parallelize of a Vectorize axis of tv that fixes it
    (the axis given the type its loop-mates or mapped axes have, else `fallback`: causes.propose_retype)."""
    axes = [(tv.name, k, fallback) for k, i in enumerate(tv.loop) if i.parallel_type is ParallelType.Vectorize]
    call = propose_retype(ctx, d, axes, ["VECTORIZE-WIDTH", "INLINE-PARALLEL-MATCH", "VECTORIZE-CONTIGUOUS"],
                          ["VECTORIZE-WIDTH"])
    if call is not None:
        d.hint += f"; verified: {call} leaves every vector one access"
    return d


def _not_one_vector(tv: TensorView) -> Iterator[Diagnostic]:
    """A plain statement with a shared or global operand whose Vectorize axes are not one access:
    two or more of them (nvFuser allows one), or one with a loop of the thread inside it (its
    elements would be moved one at a time: the vector silently dropped)."""
    vec = [k for k, i in enumerate(tv.loop) if i.parallel_type is ParallelType.Vectorize]
    op = tv.definition
    accessed = [t for t in [tv, *op.inputs] if t.memory_type in (MemoryType.Shared, MemoryType.Global)]
    if not vec or not accessed or not plain_statement(tv):
        return
    where = dict(tensor=tv.name, ids=[tv.loop[k].name for k in vec], location=tv.loop[vec[-1]].origin or tv.origin)
    shown = ", ".join(f"axis {k} ({tv.loop[k].label()})" for k in vec)
    if len(vec) > 1:
        yield finding(
            "VECTORIZE-WIDTH",
            f"{tv.name} has {len(vec)} Vectorize axes ({shown}); one access moves the elements of one Vectorize "
            f"axis, and nvFuser allows one a tensor",
            notes=[f"`{op}` reads or writes {', '.join(t.name for t in accessed)} in shared or global memory"],
            counterexample={"vectorize_axes": len(vec)},
            hint=f"merge the axes into one before parallelizing it as Vectorize, or parallelize all but the "
                 f"innermost as Unroll", **where)
        return
    k = vec[0]
    if vector_position(tv) is None:
        inner = next(j for j in range(k + 1, tv.ndim) if tv.loop[j].parallel_type not in LAUNCH_TYPES)
        yield finding(
            "VECTORIZE-WIDTH",
            f"{tv.name}'s Vectorize axis {k} ({tv.loop[k].label()}) has a loop of each thread inside it, axis "
            f"{inner} ({tv.loop[inner].label()}): its elements would be moved one at a time, not as one access",
            notes=[f"only axes bound to thread or block indices may follow a Vectorize axis (they are no loops "
                   f"of the thread)"],
            counterexample={"vectorize_axis": k, "inner_loop_axis": inner},
            hint=f"reorder {tv.name} so that axis {inner} comes before its Vectorize axis, or parallelize axis "
                 f"{k} as Unroll", **where)


def _too_wide(tv: TensorView, operands: list[VectorOperand], n: int, found: list[Finding]) -> Diagnostic:
    """The VECTORIZE-WIDTH diagnostic of a statement's findings: n elements of each operand they
    name are no legal access."""
    named = [f.operand for f in found]
    # a cast's operands differ in element size: the vector must be one access of each
    accessed = [x for x in operands if x.memory is not MemoryType.Local]
    fits = [k for k in range(2, 17) if all(k * x.dtype.bytes in VECTOR_BYTES for x in accessed)]
    places = {}  # memory -> the operands in it
    for o in named:
        places.setdefault(o.memory, []).append(o.tensor)
    notes = [f"{' and '.join(ts)} {'is' if len(ts) == 1 else 'are'} in {m.value.lower()} memory; one thread moves "
             f"at most 16 bytes per access" for m, ts in places.items()]
    dtypes = f"({named[0].dtype})"
    if len({x.dtype.bytes for x in accessed}) > 1:
        sizes = ", ".join(f"{x.tensor} {x.dtype} {n * x.dtype.bytes} bytes" for x in accessed)
        notes.append(f"`{tv.definition}` moves operands of different element sizes; the vector of {n} is "
                     f"{sizes}: each shared or global operand must be one legal access")
        dtypes = "(" + ", ".join(f"{x.tensor} {x.dtype}" for x in accessed) + ")"
    if len({o.dtype for o in named}) == 1:
        each = " each" if len(named) > 1 else ""
        moved = (f"{n} elements of {' and of '.join(o.tensor for o in named)} ({named[0].dtype}) at once: "
                 f"{found[0].bytes} bytes{each}")
    else:
        moved = f"{n} elements at once: " + ", ".join(f"{f.bytes} bytes of {f.operand.tensor} ({f.operand.dtype})"
                                                     for f in found)
    return finding(
        "VECTORIZE-WIDTH",
        f"{tv.name}'s Vectorize axis moves {moved}, not one access of 2, 4, 8 or 16 bytes",
        notes=notes,
        counterexample={"elements": n, "bytes": found[0].bytes},
        hint=f"split the vectorized axis by {' or '.join(map(str, fits))} {dtypes} instead of {n}",
        **_where(tv),
    )


@rule("VECTORIZE-CONTIGUOUS", family="vectorize")
def vectorize_contiguous(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A Vectorize axis steps through consecutive elements of every shared or global operand.

    What it checks:
        For every statement whose loop domain ends in a Vectorize axis (plain loads, stores
        and arithmetic), the element offset of each shared- or global-memory operand is
        `rest + v` for the axis index v, v appearing nowhere else: the n elements of one
        vector are consecutive in memory. A counterexample shows two neighbouring vector
        elements and the offsets they touch.
    Why the hardware needs it:
        A vector access reads or writes one contiguous, aligned run of bytes. A Vectorize
        axis whose elements are strided (the outer output of a split, a transposed operand,
        a discontiguous global axis) cannot be one access; nvFuser rejects it, and emitting
        it element by element silently drops the vectorization the schedule asked for.
    Example:
        fusion, t0, t1 = copy_chain("strided_vector", [64], copies=1)
        t1.split(0, 4, inner_split=False).reorder({1: 0})  # [I{16}, O{4}]: O strides by 16
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        fusion, t0, t1 = copy_chain("consecutive_vector", [64], copies=1)
        t1.split(0, 4)
        t1.axis(1).parallelize(tp.ParallelType.Vectorize)
    References:
        PTX ISA, ld / st vector operands (one naturally aligned contiguous access); nvFuser
        csrc/device_lower/validation.cpp (validateAndCollectVectorizeInfo: contiguity);
        docs/hardware.md#vector-loads-and-stores
    """
    # Formal statement: for every shared/global operand o of a vector statement of width n, every
    #   admitted size and every point of the statement's loop nest (v its vector index, v < n - 1):
    #   offset_o(v + 1) == offset_o(v) + 1  and  offset_o(v := 0) % n == 0
    # (run-time strides of discontiguous global axes: positive multiples of n, checked at launch)
    for tv, operands, name, n in _vectors(ctx):
        wide = {f.operand for f in vector_findings(operands, n)}
        for o in operands:
            if o.memory is MemoryType.Local or o in wide:
                continue
            out = ctx.memo(("vector-contiguous", tv.name, o.tensor), lambda: _prove_contiguous(ctx, tv, o, name, n))
            yield from report_outcome(
                "VECTORIZE-CONTIGUOUS", out, f"that {tv.name}'s vector is one access of {o.tensor}",
                lambda out: _not_contiguous(ctx, tv, o, name, n, out), **_where(tv))


def _prove_contiguous(ctx: VerifyContext, tv: TensorView, o: VectorOperand, name: str, n: int):
    ex = tensor_execution(tv, ctx.block_dims)
    v = var(name)
    ranges = {**ex.guarded_ranges, name: const(max(n - 1, 1))}
    strides = sorted(o.offset.free_vars() - set(ranges) - set(ctx.extent_symbols))
    ranges.update({s: const(MAX_EXTENT) for s in strides})
    first, second = o.offset, substitute(o.offset, {name: add(v, const(1))})
    start = substitute(o.offset, {name: const(0)})
    values = {"offset of element v": first, "offset of element v + 1": second, "offset of element 0": start}
    q = ctx.query(list(values.values()) + [mod(start, const(n))], ranges)
    for s in strides:  # bind_strides refuses a stride that is not a positive multiple of the vector
        q.add(q.eq(mod(var(s), const(n)), const(0)), z3.UGE(q.var(s), q.val(1)) if q.bv else q.var(s) >= 1)
    # the vector index split off a multiple of n (an assumed one too: N % 4 == 0): no solver needed
    steps = ctx.admitted.steps()
    peeled = peel_vector(o.offset, name, n, steps)
    step = q.eq(second, add(first, const(1))) if not unit_stride(peeled, name) else z3.BoolVal(True, q.ctx)
    if is_cp_async(tv.definition):  # its addresses' alignment is CPASYNC-ALIGN's, in bytes
        return q.prove(step, values=values)
    aligned = (z3.BoolVal(True, q.ctx) if unit_stride(peeled, name) and multiple_of(substitute(peeled, {name: const(0)}), n, steps)
               else q.eq(mod(start, const(n)), const(0)))
    return q.prove(z3.And(step, aligned), values=values)


def _not_contiguous(ctx: VerifyContext, tv: TensorView, o: VectorOperand, name: str, n: int,
                    out: Outcome) -> Diagnostic:
    val = out.values
    point = {k: x for k, x in out.model.items() if k in ctx.fusion.symbols or k.startswith(f"{tv.name}.")
             or k.startswith("stride.") or k.startswith(("threadIdx", "blockIdx"))}
    stepped = val["offset of element v + 1"] == val["offset of element v"] + 1
    if stepped:  # consecutive, but the first element is not on a vector boundary
        what = (f"its vector starts at offset {val['offset of element 0']} of {o.tensor}, not a multiple of {n} "
                f"elements, so the {n * o.dtype.bytes}-byte access is misaligned")
    else:
        what = (f"it does not step through consecutive elements of {o.tensor}: element v = {point.get(name, 0)} is "
                f"at offset {val['offset of element v']} and the next at {val['offset of element v + 1']}")
    return finding(
        "VECTORIZE-CONTIGUOUS",
        f"{tv.name}'s Vectorize axis is not one access of {o.tensor} ({o.memory.value.lower()} memory): {what}",
        notes=[stride_names(f"{o.tensor}[{o.offset}] with the vector index {name}")],
        counterexample={stride_names(k): x for k, x in {**point, **val}.items()},
        hint=f"vectorize the inner output of a split of {o.tensor}'s innermost contiguous axis "
             f"(split(axis, {n}) with inner_split=True, then parallelize the inner axis as Vectorize)",
        **_where(tv),
    )
