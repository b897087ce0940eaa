"""The ldmatrix / stmatrix access model shared by the LDSM rules (verifier/rules/ldsm.py).

For one LdMatrix (shared -> the Local consumer, whose loop domain issues it) or StMatrix
(the Local producer -> the Shared consumer) the access model (verifier/access.py) gives, for
every thread t (linear id x + y*bdx + z*bdx*bdy, lane t % 32), loop point and vector element
v (the consumer's Vectorize'd loop IDs, row-major: model/indexing.py vector_index), the
shared-memory byte offset E(t, v) of the element the schedule assigns there. `Terms` puts
E through the hardware's map (model/ldsm_layout.py): where the hardware moves lane t's
element v, the row address each lane supplies (the expression the code generator passes),
and the fragment the registers hold, in the map of the instruction's element width
(`Ldsm.layout`: 16-bit, or 32-bit for an ldmatrix of float32). `instruction_shape` and
`collective` decide, once per instruction, whether an instruction fits and whole warps issue it:
every rule's premise.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from ...execution.statements import element_offset
from ...model.expr import Expr, add, const, mod, mul, substitute, var
from ...model.fusion import Op
from ...execution.indexing import indices_from_loop, producer_logical, vector_point
from ...hw.ldmatrix import ROW_BYTES, WIDTHS, Layout, at_lane, lane_of, layout, warp_start
from ...model.tensor import TensorView
from ...model.types import Direction, LoadStoreOpType, MemoryType, OpKind
from ..access import AccessModel, build, var_name
from ..context import Access, VerifyContext
from ..findings import when_clause
from ..solver import Outcome, Verdict

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

    @property
    def layout(self) -> Layout:
        """The hardware map for the shared tensor's element width (2 or 4 bytes; instruction_shape
        refuses other widths before anything asks)."""
        return layout(self.smem.dtype.bytes)

    def where(self) -> dict:
        return dict(tensor=self.issuer.name, ids=[i.name for i in self.issuer.loop], location=self.op.origin,
                    labels=[f"shared tensor {self.smem.name} created at {self.smem.origin}",
                            f"register tensor {self.regs.name} created at {self.regs.origin}"])


def accesses(ctx: VerifyContext) -> list[Ldsm]:
    def make() -> list[Ldsm]:
        out = []
        for op in ctx.fusion.exprs:
            if op.kind is not OpKind.LOAD_STORE or op.op_type not in LDSM_OPS:
                continue
            if op.op_type is LoadStoreOpType.LdMatrix:
                acc = Access(op, Direction.LOAD, op.inputs[0], op.output, 0)
                out.append(Ldsm(op, op.inputs[0], op.output, build(ctx, acc)))
            else:
                acc = Access(op, Direction.STORE, op.output, op.output, -1)
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
    """E(t, v): the byte offset from the start of the shared buffer (in the iteration's tile of a
    circular buffer, as the code generator's statement offset)."""
    alloc = ctx.allocations[a.smem.name]
    return mul(element_offset(a.smem, a.m.indices, alloc), a.smem.dtype.bytes)


def _buffer_offset(ctx: VerifyContext, a: Ldsm) -> Expr:
    """Where the buffer starts, from the 1024-aligned dynamic base (model/smem_plan.py)."""
    return ctx.smem_plan.offset(a.smem.name)


def _row_col(a: Ldsm) -> tuple[Expr, Expr] | None:
    """The register tensor's logical (row, column): its last two logical axes that are not
    broadcasts (an MMA operand [M, 1, K] is the M x K matrix)."""
    axes = [k for k, i in enumerate(a.regs.logical) if not i.is_broadcast]
    if len(axes) < 2:
        return None
    idx_c = indices_from_loop(a.issuer)
    if a.op.op_type is LoadStoreOpType.LdMatrix:
        return idx_c[a.regs.logical[axes[-2]].uid], idx_c[a.regs.logical[axes[-1]].uid]
    logical = producer_logical(a.op, 0, idx_c)
    return logical[axes[-2]], logical[axes[-1]]


def _execution(a: Ldsm, env: dict[str, Expr] | None = None) -> list[tuple[Expr, Expr]]:
    """(index, bound) pairs: the thread is active and the point is no hole (after env)."""
    env = env or {}
    pairs = list(a.m.active) + [(c.lhs, c.rhs) for c in a.m.valid]
    return [(substitute(i, env), substitute(e, env)) for i, e in pairs]


def holds(q, pairs) -> z3.BoolRef:
    conds = [q.lt(i, e) for i, e in pairs]
    return z3.And(*conds) if conds else z3.BoolVal(True, q.ctx)


def _flat(pairs) -> list[Expr]:
    return [x for p in pairs for x in p]


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
    layout: Layout  # the map of the element width

    def hint(self) -> list[Expr]:
        out = [self.tid, self.reg, self.block_threads, self.lane, self.mate, self.offset, self.row_start,
               self.expected, self.buffer, self.supplied, self.supplied_address,
               mod(self.supplied_address, ROW_BYTES)]
        if self.layout.elements_per_register > 1:
            out.append(mod(self.reg, self.layout.elements_per_register))
        if self.fragment is not None:
            row, col, row0, col0, want_row, want_col, (ra, ca), (rb, cb) = self.fragment
            w = self.layout.row_elements
            out += [row, col, row0, col0, want_row, want_col, ra, ca, rb, cb,
                    add(ra, 8), add(rb, 8), add(ca, w), add(cb, w)]
        return out + _flat(self.mine) + _flat(self.theirs)


def terms(ctx: VerifyContext, a: Ldsm) -> Terms:
    return ctx.memo(("ldsm-terms", id(a.op)), lambda: _build_terms(ctx, a))


def _build_terms(ctx: VerifyContext, a: Ldsm) -> Terms:
    m = a.m
    L = a.layout
    tid, reg = m.tid, m.reg
    lane = lane_of(tid)
    mate = add(warp_start(tid), var(OTHER_LANE))
    theirs = _execution(a, {**m.thread_env(mate), **_vector_env(a, var(OTHER_ELEMENT))})
    matrix, row, column = L.fragment(lane, reg)  # where the hardware puts lane t's element v
    offset = _offset(ctx, a)
    row_start = L.row_address(offset, matrix, row, m.dims, _element_env(a))
    expected = add(row_start, mul(column, L.element_bytes))
    buffer = _buffer_offset(ctx, a)
    supplied = L.supplied_address(offset, m.dims, _element_env(a))
    claims = None
    rc = _row_col(a)
    if rc is not None:
        r, c = rc

        def origin(e: Expr, m: Expr) -> Expr:  # e at column 0 of row 0 of matrix m
            return _at(a, e, *L.holder(m, 0))

        row0, col0 = origin(r, matrix), origin(c, matrix)
        ra, ca = origin(r, var(MATRIX_A)), origin(c, var(MATRIX_A))
        rb, cb = origin(r, var(MATRIX_B)), origin(c, var(MATRIX_B))
        claims = (r, c, row0, col0, add(row0, row), add(col0, column), (ra, ca), (rb, cb))
    return Terms(tid, reg, m.block_threads, lane, _execution(a), mate, theirs, offset, row_start, expected,
                 buffer, supplied, add(buffer, supplied), claims, L)


def query(ctx: VerifyContext, a: Ldsm):
    """One z3 context for every claim about the instruction (each claim gets a fresh solver):
    the variables, their ranges and the rendered terms are the same."""
    def make():
        shape = instruction_shape(ctx, a)
        n, matrices = shape.elements, shape.matrices
        return ctx.query(terms(ctx, a).hint(), {**a.m.ranges, OTHER_LANE: const(32), OTHER_ELEMENT: const(n),
                                                 MATRIX_A: const(matrices), MATRIX_B: const(matrices)})
    return ctx.memo(("ldsm-query", id(a.op)), make)


# -- the instruction shape and whole warps (memoized, shared by the three rules) ---------------


@dataclass
class Shape:
    problem: str | None  # why no ldmatrix/stmatrix instruction fits, else None
    counterexample: dict
    hint: str
    elements: int = 0  # when the shape fits: 2, 4 or 8 (16-bit), 1, 2 or 4 (32-bit)
    layout: Layout | None = None  # the map of the element width, when the shape fits
    memory: tuple[str, MemoryType] | None = None  # a side in the wrong memory: (its tensor, the memory it needs)

    @property
    def matrices(self) -> int:
        return self.layout.matrices[self.elements]


def instruction_shape(ctx: VerifyContext, a: Ldsm) -> Shape:
    return ctx.memo(("ldsm-shape", id(a.op)), lambda: _decide_shape(ctx, a))


def _decide_shape(ctx: VerifyContext, a: Ldsm) -> Shape:
    want_smem = ("reads shared memory into registers" if a.op.op_type is LoadStoreOpType.LdMatrix
                 else "writes registers to shared memory")
    for t, memory, side in ((a.smem, MemoryType.Shared, "shared"), (a.regs, MemoryType.Local, "register")):
        if t.memory_type is not memory:
            return Shape(f"the {a.describe}: {t.name} is in {t.memory_type} memory, but {a.name} {want_smem}",
                         {f"{t.name} in {memory} memory": 0},
                         f"set the {side} side's memory type: {t.name}.set_memory_type(tp.MemoryType.{memory})",
                         memory=(t.name, memory))
    width = a.smem.dtype.bytes
    if width not in WIDTHS or a.regs.dtype.bytes != width:
        return Shape(f"the {a.describe} moves {a.smem.dtype} elements ({a.smem.dtype.bytes} bytes); "
                     f"{a.name}.m8n8 moves 16-bit elements (.b16)"
                     + (", or 32-bit ones as pairs of them (ldmatrix only)" if a.op.op_type is LoadStoreOpType.LdMatrix
                        else ""),
                     {"element bytes": a.smem.dtype.bytes, "required bytes": 2},
                     f"use a 16-bit dtype (float16, bfloat16)"
                     + (" or float32" if a.op.op_type is LoadStoreOpType.LdMatrix else "")
                     + f" on both sides, or a plain tp.set for {a.smem.dtype}")
    if width == 4 and a.op.op_type is LoadStoreOpType.StMatrix:
        return Shape(f"the {a.describe} moves {a.smem.dtype} elements (4 bytes); tileproof models 32-bit "
                     f"elements for ldmatrix only: stmatrix is modelled for 16-bit elements (.b16)",
                     {"element bytes": 4, "required bytes": 2},
                     f"store the {a.smem.dtype} registers with a plain tp.set, or stmatrix a 16-bit tensor")
    L = layout(width)
    n, sizes = _elements(ctx, a, L)
    if n not in L.matrices:
        got = f"{n} elements{when_clause(sizes)}" if n is not None else f"{a.m.num_regs} elements, a number that depends on the sizes"
        if L.element_bytes == 2:
            return Shape(f"the {a.describe} gives each thread {got}; .x1, .x2 and .x4 give 2, 4 or 8",
                         {**sizes, "elements per thread": n if n is not None else 0},
                         "vectorize the register axes so each thread moves 2 (x1), 4 (x2) or 8 (x4) elements: "
                         "split the inner column by 2, merge in the matrix axes and parallelize with "
                         "tp.ParallelType.Vectorize")
        return Shape(f"the {a.describe} gives each thread {got}; with {L.bits}-bit elements .x1, .x2 and .x4 "
                     f"give 1, 2 or 4",
                     {**sizes, "elements per thread": n if n is not None else 0},
                     "vectorize the matrix axes so each thread moves 1 (x1), 2 (x2) or 4 (x4) 32-bit elements, "
                     "one per matrix: TIDx = merge(row % 8, column % 4), Vectorize = merge(matrix axes...)")
    return Shape(None, {}, "", n, L)


def _elements(ctx: VerifyContext, a: Ldsm, L: Layout) -> tuple[int | None, dict[str, int]]:
    """Elements per thread, or a number of elements the assumptions admit that is not one of
    L.matrices (2, 4 or 8 16-bit, 1, 2 or 4 32-bit elements), with the sizes giving it; a
    symbolic vector extent must be fixed by the assumptions."""
    MATRICES = L.matrices
    n = ctx.concrete(a.m.num_regs)
    if n is not None:
        return n, {}
    for k in MATRICES:
        q = ctx.query([a.m.num_regs, const(k)])
        if q.prove(q.eq(a.m.num_regs, const(k))).proved:
            return k, {}
    q = ctx.query([a.m.num_regs] + [const(k) for k in MATRICES])
    out = q.prove(z3.Or(*[q.eq(a.m.num_regs, const(k)) for k in MATRICES]), values={"n": a.m.num_regs})
    if out.status is Verdict.COUNTEREXAMPLE:
        return out.values["n"], ctx.symbols_of(out.model)
    return None, {}  # several of the instruction's sizes admitted: no one instruction


def collective(ctx: VerifyContext, a: Ldsm) -> Outcome:
    return ctx.memo(("ldsm-collective", id(a.op)), lambda: _prove_collective(ctx, a))


def _prove_collective(ctx: VerifyContext, a: Ldsm) -> Outcome:
    # Formal statement: forall t < B, loop point s, v < n, l < 32, v' < n:
    #   executes(t, s, v) => 32*(t/32) + l < B and executes(32*(t/32) + l, s, v')
    x = terms(ctx, a)
    q = query(ctx, a)
    claim = z3.Implies(holds(q, x.mine), z3.And(q.lt(x.mate, x.block_threads), holds(q, x.theirs)))
    return q.prove(claim, values={"thread": x.tid, "lane": x.lane, "element": x.reg, "mate": x.mate,
                                  "B": x.block_threads, "other element": var(OTHER_ELEMENT)}, smallest=x.tid)


def well_formed(ctx: VerifyContext, a: Ldsm) -> bool:
    """An instruction exists (shape) and whole warps issue it: the other rules' premise."""
    return instruction_shape(ctx, a).problem is None and collective(ctx, a).proved
