"""ldmatrix / stmatrix (.m8n8.{x1,x2,x4}.b16): the instruction shape and the rows each warp
supplies, 16-byte row alignment, and the register fragment layout.

For one LdMatrix (shared -> the Local consumer, whose loop domain issues it) or StMatrix
(the Local producer -> the Shared consumer) the access model (verifier/access.py) gives, for
every thread t (linear id x + y*bdx + z*bdx*bdy, lane t % 32), loop point and vector element
v (the consumer's Vectorize'd loop IDs, row-major), the shared-memory byte offset E(t, v)
of the element the schedule assigns there. The hardware's map is model/ldsm_layout.py:
lane T supplies row T%8 of matrix T/8, at the address A(T) = E(4*(T%8), 2*(T/8)) the code
generator gives it (supplied_address), the schedule's location of column 0 of that row;
lane t receives (or gives) row t/4, columns 2(t%4) + {0, 1} of each matrix, register i
holding matrix i (elements 2i and 2i + 1; fragment). Every claim is one z3 proof over all
threads, loop points, elements and admitted sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import z3

from ...model.expr import Expr, add, const, mod, mul, substitute, var
from ...model.fusion import Op
from ...model.indexing import indices_from_loop, linear_offset, producer_logical, vector_point
from ...model.ldsm_layout import (
    ELEMENT_BYTES, MATRICES, MATRIX_ROWS, ROW_BYTES, WARP, at_lane, fragment, holder, lane_of, row_address, supplied_address,
    supplier, supplier_lane, warp_start,
)
from ...model.smem_plan import plan_shared_memory
from ...model.tensor import TensorView
from ...model.types import LoadStoreOpType, MemoryType
from ..access import THREAD_VARS, AccessModel, build, var_name
from ..context import Access, VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, format_values, undecided
from ..registry import rule
from ..solver import Outcome

LDSM_OPS = (LoadStoreOpType.LdMatrix, LoadStoreOpType.StMatrix)
OTHER_LANE, OTHER_ELEMENT, MATRIX_A, MATRIX_B = "other lane", "other element", "matrix a", "matrix b"


@dataclass
class Ldsm:
    """One ldmatrix / stmatrix: the shared tensor, the register tensor and the access model."""

    op: Op
    smem: TensorView
    regs: TensorView
    m: AccessModel

    @property
    def name(self) -> str:
        return "ldmatrix" if self.op.op_type is LoadStoreOpType.LdMatrix else "stmatrix"

    @property
    def describe(self) -> str:
        if self.op.op_type is LoadStoreOpType.LdMatrix:
            return f"ldmatrix from {self.smem.name} into {self.regs.name}"
        return f"stmatrix from {self.regs.name} into {self.smem.name}"

    @property
    def issuer(self) -> TensorView:
        return self.op.output

    def where(self) -> dict:
        return dict(tensor=self.issuer.name, ids=[i.name for i in self.issuer.loop], location=self.op.origin,
                    labels=[f"shared tensor {self.smem.name} created at {self.smem.origin}",
                            f"register tensor {self.regs.name} created at {self.regs.origin}"])


def _accesses(ctx: VerifyContext) -> list[Ldsm]:
    def make() -> list[Ldsm]:
        out = []
        for op in ctx.fusion.exprs:
            if op.kind != "load_store" or op.op_type not in LDSM_OPS:
                continue
            if op.op_type is LoadStoreOpType.LdMatrix:
                acc = Access(op, "load", op.inputs[0], op.output, 0)
                out.append(Ldsm(op, op.inputs[0], op.output, build(ctx, acc)))
            else:
                acc = Access(op, "store", op.output, op.output, -1)
                out.append(Ldsm(op, op.output, op.inputs[0], build(ctx, acc)))
        return out

    return ctx.memo(("ldsm-accesses",), make)


# -- expressions of the index algebra over (thread, loop point, element) ----------------------


def _vector_env(a: Ldsm, element: Expr) -> dict[str, Expr]:
    """The Vectorize'd loop indices of register `element` (model/indexing.py vector_point)."""
    ids = a.m.vector_ids
    return dict(zip((var_name(a.m.acc, i) for i in ids), vector_point(element, [i.extent_expr for i in ids])))


def _element_env(a: Ldsm):
    return lambda element: _vector_env(a, element)


def _at(a: Ldsm, e: Expr, lane: Expr, element: Expr) -> Expr:
    """e at another lane of the thread's warp and another element, at the same loop point."""
    return at_lane(e, lane, element, a.m.dims, _element_env(a))


def _offset(ctx: VerifyContext, a: Ldsm) -> Expr:
    """E(t, v): the byte offset from the start of the shared buffer."""
    alloc = ctx.allocations[a.smem.name]
    return mul(linear_offset(alloc.strides(), a.m.indices), a.smem.dtype.bytes)


def _buffer_offset(ctx: VerifyContext, a: Ldsm) -> Expr:
    """Where the buffer starts, from the 1024-aligned dynamic base (model/smem_plan.py)."""
    plan = ctx.memo(("smem-plan",), lambda: plan_shared_memory(ctx.fusion, ctx.allocations))
    return plan.offset(a.smem.name)


def _row_col(a: Ldsm) -> tuple[Expr, Expr] | None:
    """The register tensor's logical (row, column): its last two logical axes."""
    if len(a.regs.logical) < 2:
        return None
    idx_c = indices_from_loop(a.issuer)
    if a.op.op_type is LoadStoreOpType.LdMatrix:
        return idx_c[a.regs.logical[-2].uid], idx_c[a.regs.logical[-1].uid]
    logical = producer_logical(a.op, 0, idx_c)
    return logical[-2], logical[-1]


def _execution(a: Ldsm, env: dict[str, Expr] | None = None) -> list[tuple[Expr, Expr]]:
    """(index, bound) pairs: the thread is active and the point is no hole (after env)."""
    env = env or {}
    pairs = list(a.m.active) + [(b.value, b.extent) for b in a.m.valid]
    return [(substitute(i, env), substitute(e, env)) for i, e in pairs]


def _holds(q, pairs) -> z3.BoolRef:
    conds = [q.lt(i, e) for i, e in pairs]
    return z3.And(*conds) if conds else z3.BoolVal(True, q.ctx)


def _flat(pairs) -> list[Expr]:
    return [x for p in pairs for x in p]


def _loop_values(a: Ldsm, model: dict[str, int], with_threads: bool = True) -> dict[str, int]:
    """Witness values of the loop indices (serial and block), and the thread indices in use."""
    threads = {k: model[k] for k, d in zip(THREAD_VARS, a.m.dims) if with_threads and k in model and d != const(1)}
    loops = {k: v for k, v in model.items() if k in a.m.ranges and k not in THREAD_VARS
             and k not in {var_name(a.m.acc, i) for i in a.m.vector_ids}}
    return {**threads, **loops}


# -- one query per instruction, shared by the three rules ------------------------------------------


@dataclass
class Terms:
    """The expressions the rules' claims are about, for one instruction (built once)."""

    tid: Expr
    reg: Expr
    block_threads: Expr
    lane: Expr
    mine: list[tuple[Expr, Expr]]  # the thread executes the instruction at this point
    mate: Expr  # lane OTHER_LANE of the thread's warp
    theirs: list[tuple[Expr, Expr]]  # the mate executes it with element OTHER_ELEMENT
    offset: Expr  # E(t, v)
    row_start: Expr  # E(4*(t/4), 2*(v/2)): where the row of lane t, element v starts
    expected: Expr  # the byte the hardware moves for lane t, element v
    buffer: Expr
    supplied: Expr  # E(4*(T%8), 2*(T/8)): the row address lane T = t % 32 supplies (what the kernel passes)
    supplied_address: Expr  # buffer + supplied
    fragment: tuple | None  # (row, col, row0, col0, want_row, want_col, (ra, ca), (rb, cb)), None: < 2 axes

    def hint(self) -> list[Expr]:
        out = [self.tid, self.reg, self.block_threads, self.lane, self.mate, self.offset, self.row_start,
               self.expected, self.buffer, self.supplied, self.supplied_address, mod(self.reg, 2),
               mod(self.supplied_address, ROW_BYTES)]
        if self.fragment is not None:
            row, col, row0, col0, want_row, want_col, (ra, ca), (rb, cb) = self.fragment
            out += [row, col, row0, col0, want_row, want_col, ra, ca, rb, cb,
                    add(ra, 8), add(rb, 8), add(ca, 8), add(cb, 8)]
        return out + _flat(self.mine) + _flat(self.theirs)


def _terms(ctx: VerifyContext, a: Ldsm) -> Terms:
    return ctx.memo(("ldsm-terms", id(a.op)), lambda: _build_terms(ctx, a))


def _build_terms(ctx: VerifyContext, a: Ldsm) -> Terms:
    m = a.m
    tid, reg = m.tid, m.reg
    lane = lane_of(tid)
    mate = add(warp_start(tid), var(OTHER_LANE))
    theirs = _execution(a, {**m.thread_env(mate), **_vector_env(a, var(OTHER_ELEMENT))})
    matrix, row, column = fragment(lane, reg)  # where the hardware puts lane t's element v
    offset = _offset(ctx, a)
    row_start = row_address(offset, matrix, row, m.dims, _element_env(a))
    expected = add(row_start, mul(column, ELEMENT_BYTES))
    buffer = _buffer_offset(ctx, a)
    supplied = supplied_address(offset, m.dims, _element_env(a))
    claims = None
    rc = _row_col(a)
    if rc is not None:
        r, c = rc

        def origin(e: Expr, m: Expr) -> Expr:  # e at column 0 of row 0 of matrix m
            return _at(a, e, *holder(m, 0))

        row0, col0 = origin(r, matrix), origin(c, matrix)
        ra, ca = origin(r, var(MATRIX_A)), origin(c, var(MATRIX_A))
        rb, cb = origin(r, var(MATRIX_B)), origin(c, var(MATRIX_B))
        claims = (r, c, row0, col0, add(row0, row), add(col0, column), (ra, ca), (rb, cb))
    return Terms(tid, reg, m.block_threads, lane, _execution(a), mate, theirs, offset, row_start, expected,
                 buffer, supplied, add(buffer, supplied), claims)


def _query(ctx: VerifyContext, a: Ldsm):
    """One z3 context for every claim about the instruction (each claim gets a fresh solver):
    the variables, their ranges and the rendered terms are the same."""
    def make():
        n = _shape(ctx, a).elements
        return ctx.query(_terms(ctx, a).hint(), {**a.m.ranges, OTHER_LANE: const(32), OTHER_ELEMENT: const(n),
                                                 MATRIX_A: const(n // 2), MATRIX_B: const(n // 2)})
    return ctx.memo(("ldsm-query", id(a.op)), make)


# -- the instruction shape and whole warps (memoized, shared by the three rules) ---------------


@dataclass
class Shape:
    problem: str | None  # why no ldmatrix/stmatrix instruction fits, else None
    counterexample: dict
    hint: str
    elements: int = 0  # 2, 4 or 8 when the shape fits

    @property
    def matrices(self) -> int:
        return MATRICES[self.elements]


def _shape(ctx: VerifyContext, a: Ldsm) -> Shape:
    return ctx.memo(("ldsm-shape", id(a.op)), lambda: _decide_shape(ctx, a))


def _decide_shape(ctx: VerifyContext, a: Ldsm) -> Shape:
    want_smem = "reads shared memory into registers" if a.name == "ldmatrix" else "writes registers to shared memory"
    for t, memory, side in ((a.smem, MemoryType.Shared, "shared"), (a.regs, MemoryType.Local, "register")):
        if t.memory_type is not memory:
            return Shape(f"the {a.describe}: {t.name} is in {t.memory_type} memory, but {a.name} {want_smem}",
                         {f"{t.name} in {memory} memory": 0},
                         f"set the {side} side's memory type: {t.name}.set_memory_type(tp.MemoryType.{memory})")
    if a.smem.dtype.bytes != ELEMENT_BYTES or a.regs.dtype.bytes != ELEMENT_BYTES:
        return Shape(f"the {a.describe} moves {a.smem.dtype} elements ({a.smem.dtype.bytes} bytes); "
                     f"{a.name}.m8n8 moves 16-bit elements (.b16)",
                     {"element bytes": a.smem.dtype.bytes, "required bytes": ELEMENT_BYTES},
                     f"use a 16-bit dtype (float16, bfloat16) or a plain tp.set for {a.smem.dtype}")
    n, sizes = _elements(ctx, a)
    if n not in MATRICES:
        when = f" when {format_values(sizes)}" if sizes else ""
        got = f"{n} elements{when}" if n is not None else f"{a.m.num_regs} elements, a number that depends on the sizes"
        return Shape(f"the {a.describe} gives each thread {got}; .x1, .x2 and .x4 give 2, 4 or 8",
                     {**sizes, "elements per thread": n if n is not None else 0},
                     "vectorize the register axes so each thread moves 2 (x1), 4 (x2) or 8 (x4) elements: "
                     "split the inner column by 2, merge in the matrix axes and parallelize with tp.ParallelType.Vectorize")
    return Shape(None, {}, "", n)


def _elements(ctx: VerifyContext, a: Ldsm) -> tuple[int | None, dict[str, int]]:
    """Elements per thread, or a number of elements the assumptions admit that is not 2, 4 or 8
    (with the sizes giving it); a symbolic vector extent must be fixed by the assumptions."""
    n = ctx.concrete(a.m.num_regs)
    if n is not None:
        return n, {}
    for k in MATRICES:
        q = ctx.query([a.m.num_regs, const(k)])
        if q.prove(q.eq(a.m.num_regs, const(k))).proved:
            return k, {}
    q = ctx.query([a.m.num_regs] + [const(k) for k in MATRICES])
    out = q.prove(z3.Or(*[q.eq(a.m.num_regs, const(k)) for k in MATRICES]), values={"n": a.m.num_regs})
    if out.status == "counterexample":
        return out.values["n"], ctx.symbols_of(out.model)
    return None, {}  # several of 2, 4 and 8 admitted: no one instruction


def _collective(ctx: VerifyContext, a: Ldsm) -> Outcome:
    return ctx.memo(("ldsm-collective", id(a.op)), lambda: _prove_collective(ctx, a))


def _prove_collective(ctx: VerifyContext, a: Ldsm) -> Outcome:
    # Formal statement: forall t < B, loop point s, v < n, l < 32, v' < n:
    #   executes(t, s, v) => 32*(t/32) + l < B and executes(32*(t/32) + l, s, v')
    x = _terms(ctx, a)
    q = _query(ctx, a)
    claim = z3.Implies(_holds(q, x.mine), z3.And(q.lt(x.mate, x.block_threads), _holds(q, x.theirs)))
    return q.prove(claim, values={"thread": x.tid, "lane": x.lane, "element": x.reg, "mate": x.mate,
                                  "B": x.block_threads, "other element": var(OTHER_ELEMENT)}, smallest=x.tid)


def _well_formed(ctx: VerifyContext, a: Ldsm) -> bool:
    """An instruction exists (shape) and whole warps issue it: the other rules' premise."""
    return _shape(ctx, a).problem is None and _collective(ctx, a).proved


# -- LDSM-THREAD-ROWS ---------------------------------------------------------------------------


@rule("LDSM-THREAD-ROWS", family="ldsm")
def ldsm_thread_rows(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """ldmatrix / stmatrix is an m8n8 .b16 instruction of whole warps whose lanes supply 16-byte rows.

    What it checks:
        For each LdMatrix / StMatrix: the shared side is in shared memory and the register
        side in registers; the elements are 16-bit; the consumer's Vectorize'd loop IDs give
        each thread 2, 4 or 8 elements (.x1 / .x2 / .x4: matrices = elements / 2); for every
        thread and loop point where one lane of a warp executes it, all 32 lanes of the warp
        exist and execute it with every element (no lane left out by TID extents or holes).
        Then, with E(t, v) the shared byte offset the schedule gives lane t's element v: for
        every warp, loop point, row r < 8, quad lane c < 4, matrix m and half h < 2,
        E(4r + c, 2m + h) == E(4r, 2m) + 2 * (2c + h): the row that lane 8m + r supplies
        (address E(4r, 2m)) is 16 contiguous bytes holding what lanes 4r..4r+3 hold.
    Why the hardware needs it:
        ldmatrix/stmatrix are .sync.aligned warp instructions that move 8x8 matrices of
        16-bit elements; lane 8m + r gives the address of row r of matrix m, the hardware
        reads (writes) 16 consecutive bytes there and hands them to lanes 4r .. 4r + 3, two
        elements each. A lane whose element lives elsewhere silently gets another element.
    Example:
        with tp.Fusion("ldmatrix_rows") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.set(t1, op=tp.LoadStoreOpType.LdMatrix); t3 = tp.set(t2)
            fusion.add_output(t3)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.split(1, 2)
        t1.set_allocation_domain([t1.axis(0), t1.axis(2), t1.axis(1)])
        for t in (t2, t3):
            t.split(1, 2).merge(0, 1)
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        with tp.Fusion("ldmatrix_rows") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.set(t1, op=tp.LoadStoreOpType.LdMatrix); t3 = tp.set(t2)
            fusion.add_output(t3)
        t1.set_memory_type(tp.MemoryType.Shared)
        for t in (t2, t3):
            t.split(1, 2).merge(0, 1)
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.Vectorize)
    References:
        PTX ISA 9.7.14.5.15 (ldmatrix) and 9.7.14.5.16 (stmatrix): .sync.aligned, m8n8, .b16,
        .x1/.x2/.x4, threads 8i..8i+7 give the rows of matrix i; Figure 104 (fragment)
    """
    for a in _accesses(ctx):
        shape = _shape(ctx, a)
        if shape.problem is not None:
            yield finding("LDSM-THREAD-ROWS", shape.problem, counterexample=shape.counterexample,
                          hint=shape.hint, **a.where())
            continue
        out = _collective(ctx, a)
        if out.status == "unknown":
            yield undecided("LDSM-THREAD-ROWS", f"that whole warps execute the {a.describe}", out, **a.where())
            continue
        if not out.proved:
            yield _partial_warp(ctx, a, out)
            continue
        yield from _rows(ctx, a, shape)


def _partial_warp(ctx: VerifyContext, a: Ldsm, out: Outcome) -> Diagnostic:
    v = out.values
    missing = (f"thread {v['mate']} does not exist (the block has {v['B']} threads)" if v["mate"] >= v["B"]
               else f"thread {v['mate']} does not execute it (element {v['other element']})")
    return finding(
        "LDSM-THREAD-ROWS",
        f"the {a.describe} is not executed by whole warps: thread {v['thread']} (lane {v['lane']} of warp "
        f"{v['thread'] // 32}) executes it but {missing}",
        notes=[f"{a.issuer.name} issues it over {', '.join(i.label() for i in a.issuer.loop)}",
               f"threads per block: {' x '.join(str(d) for d in a.m.dims)}; {a.name} is .sync.aligned: "
               f"all 32 lanes execute it, none predicated off"],
        counterexample={**ctx.symbols_of(out.model), **_loop_values(a, out.model), "thread": v["thread"],
                        "lane": v["lane"], "missing thread": v["mate"]},
        hint="give the issuing tensor's TIDx axis a multiple of 32 threads and make every split on its path "
             "divide (no holes inside a warp)",
        **a.where(),
    )


def _rows(ctx: VerifyContext, a: Ldsm, shape: Shape) -> Iterator[Diagnostic]:
    # Formal statement: forall t, s, v: executes(t, s, v) =>
    #   E(t, v) == E(32*(t/32) + 4*((t%32)/4), 2*(v/2)) + 2*(2*(t%4) + v%2)
    x = _terms(ctx, a)
    q = _query(ctx, a)
    out = q.prove(z3.Implies(_holds(q, x.mine), q.eq(x.offset, x.expected)),
                  values={"thread": x.tid, "lane": x.lane, "element": x.reg, "actual": x.offset,
                          "expected": x.expected, "row address": x.row_start}, smallest=x.tid)
    if out.status == "unknown":
        yield undecided("LDSM-THREAD-ROWS", f"that the {a.describe} reads whole 16-byte rows", out, **a.where())
        return
    if out.proved:
        return
    v = out.values
    matrix, r, col = fragment(v["lane"], v["element"])
    row_lane = supplier_lane(r, matrix)
    verb = "reads from" if a.name == "ldmatrix" else "writes to"
    yield finding(
        "LDSM-THREAD-ROWS",
        f"the {a.describe} does not move 16-byte matrix rows: lane {v['lane']} element {v['element']} is "
        f"row {r}, column {col} of matrix {matrix}, which the hardware {verb} byte {v['expected']} of "
        f"{a.smem.name} (lane {row_lane} supplies that row at byte {v['row address']}, + {col * ELEMENT_BYTES} for "
        f"column {col}), but the schedule puts it at byte {v['actual']}",
        notes=[f"x{shape.matrices}: lane 8m + r supplies row r of matrix m; lanes 4r .. 4r + 3 hold "
               f"its 8 columns, two each, so E(4r + c, 2m + h) must be E(4r, 2m) + 2 * (2c + h)",
               "the row address of lane T is E(4 * (T % 8), 2 * (T / 8)), the schedule's column 0 of that row"],
        counterexample={**ctx.symbols_of(out.model), **_loop_values(a, out.model), "thread": v["thread"],
                        "lane": v["lane"], "element": v["element"], "matrix": matrix, "row": r, "column": col,
                        "row address lane": row_lane, "row address": v["row address"],
                        "expected byte offset": v["expected"], "actual byte offset": v["actual"]},
        hint="store each 8-element matrix row contiguously in shared memory (the column axis innermost in the "
             "allocation domain, swizzles moving whole 16-byte chunks) and give lanes 4r .. 4r + 3 row r: "
             "TIDx = merge(row(8), column pair(4)), Vectorize = (matrix axes, column % 2)",
        **a.where(),
    )


# -- LDSM-ALIGNMENT -------------------------------------------------------------------------------


@rule("LDSM-ALIGNMENT", family="ldsm")
def ldsm_alignment(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """Every row address an ldmatrix / stmatrix lane supplies is 16-byte aligned.

    What it checks:
        For each LdMatrix / StMatrix that has an instruction shape and is executed by whole
        warps (LDSM-THREAD-ROWS reports the others): for every warp, loop point, row r < 8
        and matrix m, the absolute shared address of the row that lane 8m + r supplies,
        buffer offset + E(4r, 2m), is a multiple of 16. The buffer offset is the shared
        memory plan's (model/smem_plan.py), from the 1024-byte aligned dynamic base.
    Why the hardware needs it:
        Each row is read or written as one 16-byte access; PTX requires the row addresses
        to be naturally aligned. A misaligned address is a misaligned-address fault or
        wrong data.
    Example:
        with tp.Fusion("ldmatrix_padded") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.set(t1, op=tp.LoadStoreOpType.LdMatrix); t3 = tp.set(t2)
            fusion.add_output(t3)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.split(1, 3)
        for t in (t2, t3):
            t.split(1, 2).merge(0, 1)
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        with tp.Fusion("ldmatrix_padded") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.set(t1, op=tp.LoadStoreOpType.LdMatrix); t3 = tp.set(t2)
            fusion.add_output(t3)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.split(1, 4)
        for t in (t2, t3):
            t.split(1, 2).merge(0, 1)
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.Vectorize)
    References:
        PTX ISA 9.7.14.5.15 (ldmatrix: "the matrix addresses must be naturally aligned") and 9.7.14.5.16
    """
    for a in _accesses(ctx):
        if not _well_formed(ctx, a):
            continue
        # Formal statement: forall t, s, v: executes(t, s, v) and T < 8 * matrices, T = t % 32 =>
        #   (buffer + E(32*(t/32) + 4*(T%8), 2*(T/8))) % 16 == 0
        # (ldsm_layout.supplied_address: the row address lane T supplies, the expression the kernel passes)
        x = _terms(ctx, a)
        q = _query(ctx, a)
        supplying = z3.And(_holds(q, x.mine), q.lt(x.lane, const(MATRIX_ROWS * _shape(ctx, a).matrices)))
        out = q.prove(z3.Implies(supplying, q.eq(mod(x.supplied_address, ROW_BYTES), const(0))),
                      values={"thread": x.tid, "lane": x.lane, "address": x.supplied_address,
                              "buffer": x.buffer, "offset": x.supplied}, smallest=x.tid)
        if out.status == "unknown":
            yield undecided("LDSM-ALIGNMENT", f"that the {a.describe}'s row addresses are 16-byte aligned", out,
                            **a.where())
            continue
        if out.proved:
            continue
        v = out.values
        lane = v["lane"]
        r, matrix = supplier(lane)
        holder_lane, holder_element = holder(matrix, r)
        yield finding(
            "LDSM-ALIGNMENT",
            f"the {a.describe} has a misaligned row: lane {lane} supplies row {r} of matrix {matrix} at shared "
            f"address {v['address']} ({a.smem.name} at {v['buffer']} + {v['offset']}), not a multiple of 16",
            notes=[f"{a.name} reads or writes each 8-element row as one 16-byte access at the address its lane supplies",
                   f"the address of lane {lane} is the schedule's place of column 0 of that row: lane {holder_lane}, "
                   f"element {holder_element}"],
            counterexample={**ctx.symbols_of(out.model), **_loop_values(a, out.model, with_threads=False),
                            "warp": v["thread"] // WARP, "lane": lane,
                            "matrix": matrix, "row": r, "address": v["address"], "buffer offset": v["buffer"],
                            "byte offset": v["offset"], "address % 16": v["address"] % ROW_BYTES},
            hint=f"make every matrix row of {a.smem.name} start at a multiple of 8 elements: pad its rows to a "
                 f"multiple of 8 elements (no indivisible split of the column axis) and start the matrices on "
                 f"8-column boundaries",
            **a.where(),
        )


# -- LDSM-REGISTER-LAYOUT -----------------------------------------------------------------------------


@rule("LDSM-REGISTER-LAYOUT", family="ldsm")
def ldsm_register_layout(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """The registers of an ldmatrix / stmatrix hold the m8n8 fragment of 8x8 blocks of the register tensor.

    What it checks:
        For each LdMatrix / StMatrix that has an instruction shape and is executed by whole
        warps, with (row, col) the register tensor's logical indices on its last two logical
        axes (the Local consumer of an ldmatrix, the Local producer of a stmatrix) and
        (R_m, C_m) = (row, col) of lane 0 of the warp at element 2m (matrix m's origin): for
        every thread t, loop point and element v, row(t, v) == R_{v/2} + (t % 32) / 4 and
        col(t, v) == C_{v/2} + 2 * (t % 4) + v % 2; and for matrices a != b the 8x8 blocks at
        (R_a, C_a) and (R_b, C_b) do not overlap. So lane t element v is (row t/4, column
        2(t%4) + v%2) of matrix v/2, and each matrix is an 8x8 block of consecutive logical
        rows and columns (any block, in any order). This implies row(t, v) == row(4(t/4),
        2(v/2)) and col(t, v) == col(4(t/4), 2(v/2)) + 2(t%4) + v%2, and is stronger: the 8
        rows of a matrix are consecutive. A transposed fragment (.trans) is not modelled.
    Why the hardware needs it:
        The hardware fixes where each element lands in the registers: lane t receives row
        t/4, columns 2(t%4) and 2(t%4)+1 of every matrix. The schedule must agree, or the
        registers hold the data in an order the MMA (mma.sync / wgmma fragments) and the
        rest of the kernel do not expect; LDSM-THREAD-ROWS alone only makes the bytes land.
    Example:
        with tp.Fusion("ldmatrix_fragment") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.set(t1, op=tp.LoadStoreOpType.LdMatrix); t3 = tp.set(t2)
            fusion.add_output(t3)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.split(1, 2)
        t1.set_allocation_domain([t1.axis(1), t1.axis(0), t1.axis(2)])
        for t in (t2, t3):
            t.split(1, 2).merge(1, 0)
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        with tp.Fusion("ldmatrix_fragment") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 8], dtype=tp.float16); fusion.add_input(t0)
            t1 = tp.set(t0); t2 = tp.set(t1, op=tp.LoadStoreOpType.LdMatrix); t3 = tp.set(t2)
            fusion.add_output(t3)
        t1.set_memory_type(tp.MemoryType.Shared)
        for t in (t2, t3):
            t.split(1, 2).merge(0, 1)
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.Vectorize)
    References:
        PTX ISA 9.7.14.5.15, Figure 104 (ldmatrix fragment: row = lane / 4, column = 2 * (lane % 4) + i);
        CUTLASS include/cute/atom/copy_traits_sm75.hpp (SM75_U32x4_LDSM_N)
    """
    for a in _accesses(ctx):
        if not _well_formed(ctx, a):
            continue
        if _terms(ctx, a).fragment is None:
            yield finding(
                "LDSM-REGISTER-LAYOUT",
                f"the {a.describe}: the register tensor {a.regs.name} has {len(a.regs.logical)} logical axis; "
                f"an m8n8 fragment needs a row and a column axis",
                counterexample={"logical axes": len(a.regs.logical)},
                hint="give the register tensor at least two logical axes (rows, columns) and load 8x8 blocks of them",
                **a.where())
            continue
        yield from _fragment(ctx, a)


def _fragment(ctx: VerifyContext, a: Ldsm) -> Iterator[Diagnostic]:
    # Formal statement: forall t, s, v: executes(t, s, v) =>
    #   row(t, v) == row(w, 2*(v/2)) + (t%32)/4 and col(t, v) == col(w, 2*(v/2)) + 2*(t%4) + v%2,
    #   w = 32*(t/32); and forall a != b < matrices: block(a) and block(b) are disjoint
    x = _terms(ctx, a)
    row, col, row0, col0, want_row, want_col, (ra, ca), (rb, cb) = x.fragment
    q = _query(ctx, a)
    values = {"thread": x.tid, "lane": x.lane, "element": x.reg, "row": row, "col": col, "want row": want_row,
              "want col": want_col, "origin row": row0, "origin col": col0}
    out = q.prove(z3.Implies(_holds(q, x.mine), z3.And(q.eq(row, want_row), q.eq(col, want_col))),
                  values=values, smallest=x.tid)
    if out.status == "proved":
        disjoint = z3.Or(q.le(add(ra, 8), rb), q.le(add(rb, 8), ra), q.le(add(ca, 8), cb), q.le(add(cb, 8), ca))
        apart = z3.Implies(z3.And(_holds(q, x.mine), q.ne(var(MATRIX_A), var(MATRIX_B))), disjoint)
        out = q.prove(apart, values={"thread": x.tid, "row a": ra, "col a": ca, "row b": rb, "col b": cb,
                                     "a": var(MATRIX_A), "b": var(MATRIX_B)}, smallest=x.tid)
        if out.status == "counterexample":
            yield _overlap(ctx, a, out)
            return
    if out.status == "unknown":
        yield undecided("LDSM-REGISTER-LAYOUT", f"the register fragment of the {a.describe}", out, **a.where())
        return
    if out.proved:
        return
    v = out.values
    matrix, r, c = fragment(v["lane"], v["element"])
    name = a.regs.name
    yield finding(
        "LDSM-REGISTER-LAYOUT",
        f"the {a.describe} does not match the m8n8 fragment: lane {v['lane']} element {v['element']} holds "
        f"{name}[{v['row']}, {v['col']}], but the hardware puts row {r}, column {c} of matrix {matrix} there: "
        f"{name}[{v['want row']}, {v['want col']}] (matrix {matrix} starts at {name}[{v['origin row']}, "
        f"{v['origin col']}], element {2 * matrix} of lane 0)",
        notes=["lane t element v is (row t/4, column 2(t%4) + v%2) of matrix v/2 (register i = matrix i)",
               f"(row, column) are the logical indices of {name}'s last two axes"],
        counterexample={**ctx.symbols_of(out.model), **_loop_values(a, out.model), "lane": v["lane"],
                        "element": v["element"], "row": v["row"], "column": v["col"],
                        "expected row": v["want row"], "expected column": v["want col"]},
        hint=f"schedule {a.issuer.name}'s loop domain as the fragment: split rows by 8 and columns by 8 then 2, "
             f"TIDx = merge(row % 8, (column % 8) / 2), Vectorize = merge(matrix axes..., column % 2)",
        **a.where(),
    )


def _overlap(ctx: VerifyContext, a: Ldsm, out: Outcome) -> Diagnostic:
    v = out.values
    name = a.regs.name
    return finding(
        "LDSM-REGISTER-LAYOUT",
        f"the {a.describe} loads overlapping matrices: matrix {v['a']} starts at {name}[{v['row a']}, {v['col a']}] "
        f"and matrix {v['b']} at {name}[{v['row b']}, {v['col b']}], closer than 8 rows or 8 columns",
        notes=["each matrix of one instruction must be its own 8x8 block of the register tensor"],
        counterexample={**ctx.symbols_of(out.model), **_loop_values(a, out.model), "matrix a": v["a"],
                        "matrix b": v["b"], "row a": v["row a"], "column a": v["col a"], "row b": v["row b"],
                        "column b": v["col b"]},
        hint="give each matrix axis of the vectorized loop ID its own 8-row or 8-column block",
        **a.where(),
    )
