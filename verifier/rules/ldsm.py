"""ldmatrix / stmatrix (.m8n8.{x1,x2,x4}.b16): the instruction shape and the rows each warp
supplies (LDSM-THREAD-ROWS), 16-byte row alignment (LDSM-ALIGNMENT), and the register
fragment layout (LDSM-REGISTER-LAYOUT), for 16-bit elements and (ldmatrix only) 32-bit ones.

The claims are about the access model of verifier/analysis/ldsm.py: the schedule's shared
byte offset E(t, v) of thread t's element v, put through the hardware's map of
hw/ldmatrix.py. Lane T supplies row T%8 of matrix T/8 at the address
A(T) = E(4*(T%8), 2*(T/8)) the code generator gives it (supplied_address), the schedule's
location of column 0 of that row; lane t receives (or gives) row t/4, columns 2(t%4) + {0, 1}
of each matrix, register i holding matrix i (elements 2i and 2i + 1; fragment). With 32-bit
elements (an ldmatrix of float32: CuTe's LDSM_U32x{1,2,4}_N) a row is 4 elements, lane t
receives column t%4 and element v is register v, matrix v: below, k = 2 elements per register
(16-bit) or 1 (32-bit), and b = 2 or 4 bytes per element. Every claim is one z3 proof over all
threads, loop points, elements and admitted sizes.
"""

from __future__ import annotations

from typing import Iterator

import z3

from ...model.expr import add, const, mod, var
from ...hw.ldmatrix import MATRIX_ROWS, ROW_BYTES, WARP, supplier, supplier_lane
from ...hw.tma import tma_ops_of
from ...model.types import LoadStoreOpType
from ..access import THREAD_VARS, var_name
from ..analysis.ldsm import (
    MATRIX_A, MATRIX_B, Ldsm, Shape, accesses, collective, holds, instruction_shape, query, terms, well_formed,
)
from ..causes import propose_change, propose_memory_types
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome
from ..registry import rule
from ..solver import Outcome


def _loop_values(a: Ldsm, model: dict[str, int], with_threads: bool = True) -> dict[str, int]:
    """Witness values of the loop indices (serial and block), and the thread indices in use."""
    threads = {k: model[k] for k, d in zip(THREAD_VARS, a.m.dims) if with_threads and k in model and d != const(1)}
    loops = {k: v for k, v in model.items() if k in a.m.ranges and k not in THREAD_VARS
             and k not in {var_name(a.m.acc, i) for i in a.m.vector_ids}}
    return {**threads, **loops}


# -- LDSM-THREAD-ROWS ---------------------------------------------------------------------------


@rule("LDSM-THREAD-ROWS", family="ldsm")
def ldsm_thread_rows(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """ldmatrix / stmatrix is an m8n8 .b16 instruction of whole warps whose lanes supply 16-byte rows.

    What it checks:
        For each LdMatrix / StMatrix: the shared side is in shared memory and the register
        side in registers; the elements are 16-bit (or 32-bit, for ldmatrix); the consumer's
        Vectorize'd loop IDs give each thread 2, 4 or 8 16-bit elements (.x1 / .x2 / .x4:
        matrices = elements / 2) or 1, 2 or 4 32-bit ones (matrices = elements); for every
        thread and loop point where one lane of a warp executes it, all 32 lanes of the warp
        exist and execute it with every element (no lane left out by TID extents or holes;
        a stmatrix into a tile that only a TMA store reads, from registers computed from the
        accumulators, has no holes: it runs past M and N, where the store clips).
        Then, with E(t, v) the shared byte offset the schedule gives lane t's element v: for
        every warp, loop point, row r < 8, quad lane c < 4, matrix m and half h < 2,
        E(4r + c, 2m + h) == E(4r, 2m) + 2 * (2c + h): the row that lane 8m + r supplies
        (address E(4r, 2m)) is 16 contiguous bytes holding what lanes 4r..4r+3 hold. With
        32-bit elements (no half h): E(4r + c, m) == E(4r, m) + 4c.
    Why the hardware needs it:
        ldmatrix/stmatrix are .sync.aligned warp instructions that move 8x8 matrices of
        16-bit elements; lane 8m + r gives the address of row r of matrix m, the hardware
        reads (writes) 16 consecutive bytes there and hands them to lanes 4r .. 4r + 3, two
        elements (one 32-bit register) each. A lane whose element lives elsewhere silently
        gets another element.
    Example:
        fusion, t0, t1, t2, t3 = ldmatrix_copy("ldmatrix_rows")
        t1.split(1, 2)
        t1.set_allocation_domain([t1.axis(0), t1.axis(2), t1.axis(1)])  # column 2q + j of a row at j * 4 + q
    Fix:
        fusion, t0, t1, t2, t3 = ldmatrix_copy("ldmatrix_rows")  # t1 row-major: a row is 16 contiguous bytes
    References:
        PTX ISA 9.7.14.5.15 (ldmatrix) and 9.7.14.5.16 (stmatrix): .sync.aligned, m8n8, .b16,
        .x1/.x2/.x4, threads 8i..8i+7 give the rows of matrix i; Figure 104 (fragment);
        docs/hardware.md#ldmatrix-and-stmatrix-shape
    """
    # Formal statement: structural: the shared side is Shared, the register side Local, both b-byte,
    #   b = 2, or b = 4 for an ldmatrix; k = 4 / b elements per register;
    #   exists n0 in {k, 2k, 4k}: for all admitted sizes, n == n0 (n: elements per thread, Vectorize'd IDs);
    #   for all t < B, loop points s, v < n, l < 32, v' < n:
    #     executes(t, s, v) => 32*(t/32) + l < B and executes(32*(t/32) + l, s, v')   (whole warps)
    #   for all t, s, v: executes(t, s, v) =>
    #     E(t, v) == E(32*(t/32) + 4*((t%32)/4), k*(v/k)) + b*(k*(t%4) + v%k)      (16-byte rows, _rows)
    for a in accesses(ctx):
        shape = instruction_shape(ctx, a)
        if shape.problem is not None:
            d = finding("LDSM-THREAD-ROWS", shape.problem, counterexample=shape.counterexample,
                        hint=shape.hint, **a.where())
            # a side in the wrong memory (a register tile set to global) also makes it an intermediate
            # there, or a shared access of registers: the one call is the cause, where it is the fix
            if shape.memory is not None and propose_memory_types(ctx, d, dict([shape.memory]), ["LDSM-THREAD-ROWS"]):
                d.hint += " (verified: with it, LDSM-THREAD-ROWS holds)"
            yield d
            continue
        out = collective(ctx, a)
        yield from report_outcome("LDSM-THREAD-ROWS", out, f"that whole warps execute the {a.describe}",
                                  lambda out: _partial_warp(ctx, a, out), **a.where())
        if out.proved:
            yield from _rows(ctx, a, shape)


def _partial_warp(ctx: VerifyContext, a: Ldsm, out: Outcome) -> Diagnostic:
    v = out.values
    who = "it" if v["mate"] == v["thread"] else f"thread {v['mate']}"  # a hole inside the thread's own vector
    missing = (f"thread {v['mate']} does not exist (the block has {v['B']} threads)" if v["mate"] >= v["B"]
               else f"{who} skips element {v['other element']} of the same instruction (a hole)")
    return finding(
        "LDSM-THREAD-ROWS",
        f"the {a.describe} is not executed by whole warps: thread {v['thread']} (lane {v['lane']} of warp "
        f"{v['thread'] // 32}) executes it for element {v['element']} but {missing}",
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
    #   E(t, v) == E(32*(t/32) + 4*((t%32)/4), k*(v/k)) + b*(k*(t%4) + v%k)   (k = 4 / b)
    x = terms(ctx, a)
    q = query(ctx, a)
    out = q.prove(z3.Implies(holds(q, x.mine), q.eq(x.offset, x.expected)),
                  values={"thread": x.tid, "lane": x.lane, "element": x.reg, "actual": x.offset,
                          "expected": x.expected, "row address": x.row_start}, smallest=x.tid)
    yield from report_outcome("LDSM-THREAD-ROWS", out, f"that the {a.describe} reads whole 16-byte rows",
                              lambda out: _rows_in_logical_order(ctx, a, _misplaced_rows(ctx, a, shape, out)),
                              **a.where())


LAYOUT_CODES = ("LDSM-THREAD-ROWS", "LDSM-ALIGNMENT")  # what the shared tile's layout decides


def _rows_in_logical_order(ctx: VerifyContext, a: Ldsm, d: Diagnostic) -> Diagnostic:
    """d with, in its help, the shared tile allocated in its logical order (row-major: each matrix
    row's elements adjacent), where its allocation is another order (its loop domain's, which a
    propagation or a split changes with it where no allocation domain is set, or one set) and a
    copy of the schedule with it passes LAYOUT_CODES (causes.propose_change). Not for a tile a TMA
    loads or stores: its box and swizzle decide its layout."""
    tile = a.smem
    if tma_ops_of(tile) or [i.uid for i in tile.get_allocation_domain()] == [i.uid for i in tile.logical]:
        return d

    def change(fusion) -> None:
        t = fusion.tensor(tile.name)
        t.set_allocation_domain(t.get_logical_domain(), True)

    if propose_change(ctx, d, change, LAYOUT_CODES):
        d.hint = (f"allocate {tile.name} in its logical order: {tile.name}.set_allocation_domain("
                  f"{tile.name}.get_logical_domain(), True) (verified: with it, {', '.join(LAYOUT_CODES)} hold); "
                  f"otherwise: {d.hint}")
    return d


def _misplaced_rows(ctx: VerifyContext, a: Ldsm, shape: Shape, out: Outcome) -> Diagnostic:
    v = out.values
    L = a.layout
    matrix, r, col = L.fragment(v["lane"], v["element"])
    row_lane = supplier_lane(r, matrix)
    verb = "reads from" if a.op.op_type is LoadStoreOpType.LdMatrix else "writes to"
    if L.elements_per_register == 2:
        layout_note = (f"x{shape.matrices}: lane 8m + r supplies row r of matrix m; lanes 4r .. 4r + 3 hold "
                       f"its 8 columns, two each, so E(4r + c, 2m + h) must be E(4r, 2m) + 2 * (2c + h), where "
                       f"E(lane, element) is the byte of {a.smem.name} the schedule gives that register element")
        row_note = "the row address of lane T is E(4 * (T % 8), 2 * (T / 8)), the schedule's column 0 of that row"
        hint = ("store each 8-element matrix row contiguously in shared memory (the column axis innermost in the "
                "allocation domain, swizzles moving whole 16-byte chunks) and give lanes 4r .. 4r + 3 row r: "
                "TIDx = merge(row(8), column pair(4)), Vectorize = (matrix axes, column % 2)")
    else:
        layout_note = (f"x{shape.matrices}, {L.bits}-bit elements: lane 8m + r supplies row r of matrix m; lanes "
                       f"4r .. 4r + 3 hold its {L.row_elements} columns, one each, so E(4r + c, m) must be "
                       f"E(4r, m) + {L.element_bytes} * c, where E(lane, element) is the byte of {a.smem.name} the "
                       f"schedule gives that register element")
        row_note = "the row address of lane T is E(4 * (T % 8), T / 8), the schedule's column 0 of that row"
        hint = (f"store each {L.row_elements}-element matrix row contiguously in shared memory (the column axis "
                f"innermost in the allocation domain, swizzles moving whole 16-byte chunks) and give lanes "
                f"4r .. 4r + 3 row r: TIDx = merge(row(8), column(4)), Vectorize = (matrix axes)")
    return finding(
        "LDSM-THREAD-ROWS",
        f"the {a.describe} does not move 16-byte matrix rows: lane {v['lane']} element {v['element']} is "
        f"row {r}, column {col} of matrix {matrix}, which the hardware {verb} byte {v['expected']} of "
        f"{a.smem.name} (lane {row_lane} supplies that row at byte {v['row address']}, + {col * L.element_bytes} for "
        f"column {col}), but the schedule puts it at byte {v['actual']}",
        notes=[layout_note, row_note],
        counterexample={**ctx.symbols_of(out.model), **_loop_values(a, out.model), "thread": v["thread"],
                        "lane": v["lane"], "element": v["element"], "matrix": matrix, "row": r, "column": col,
                        "row address lane": row_lane, "row address": v["row address"],
                        "expected byte offset": v["expected"], "actual byte offset": v["actual"]},
        hint=hint,
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
        buffer offset + E(4r, 2m) (E(4r, m) with 32-bit elements), is a multiple of 16. The buffer offset is the shared
        memory plan's (execution/smem_plan.py), from the 1024-byte aligned dynamic base.
    Why the hardware needs it:
        Each row is read or written as one 16-byte access; PTX requires the row addresses
        to be naturally aligned. A misaligned address is a misaligned-address fault or
        wrong data.
    Example:
        fusion, t0, t1, t2, t3 = ldmatrix_copy("ldmatrix_padded")
        t1.split(1, 3)  # rows of 3 x 3 = 9 halves: 18 bytes apart
    Fix:
        fusion, t0, t1, t2, t3 = ldmatrix_copy("ldmatrix_padded")
        t1.split(1, 4)  # rows of 2 x 4 = 8 halves: 16 bytes apart
    References:
        PTX ISA 9.7.14.5.15 (ldmatrix: "the matrix addresses must be naturally aligned") and 9.7.14.5.16;
        docs/hardware.md#ldmatrix-row-alignment
    """
    # Formal statement: for each instruction with a shape and whole warps (LDSM-THREAD-ROWS), for all
    #   admitted sizes, t, loop points s, v < n, with T = t % 32:
    #   executes(t, s, v) and T < 8 * matrices => (buffer + E(32*(t/32) + 4*(T%8), k*(T/8))) % 16 == 0
    #   (k = 2 elements per register for 16-bit elements, 1 for 32-bit)
    #   (hw/ldmatrix.py supplied_address: the row address lane T supplies, the expression the kernel passes)
    for a in accesses(ctx):
        if not well_formed(ctx, a):
            continue
        x = terms(ctx, a)
        q = query(ctx, a)
        supplying = z3.And(holds(q, x.mine), q.lt(x.lane, const(MATRIX_ROWS * instruction_shape(ctx, a).matrices)))
        out = q.prove(z3.Implies(supplying, q.eq(mod(x.supplied_address, ROW_BYTES), const(0))),
                      values={"thread": x.tid, "lane": x.lane, "address": x.supplied_address,
                              "buffer": x.buffer, "offset": x.supplied}, smallest=x.tid)
        yield from report_outcome(
            "LDSM-ALIGNMENT", out, f"that the {a.describe}'s row addresses are 16-byte aligned",
            lambda out: _misaligned_row(ctx, a, out), **a.where())


def _misaligned_row(ctx: VerifyContext, a: Ldsm, out: Outcome) -> Diagnostic:
    v = out.values
    lane = v["lane"]
    r, matrix = supplier(lane)
    holder_lane, holder_element = a.layout.holder(matrix, r)
    row = f"{a.layout.row_elements}-element row"
    return finding(
        "LDSM-ALIGNMENT",
        f"the {a.describe} has a misaligned row: lane {lane} supplies row {r} of matrix {matrix} at shared "
        f"address {v['address']} ({a.smem.name} at {v['buffer']} + {v['offset']}), not a multiple of 16",
        notes=[f"{a.name} reads or writes each {row} as one 16-byte access at the address its lane supplies",
               f"the address of lane {lane} is the schedule's place of column 0 of that row: lane {holder_lane}, "
               f"element {holder_element}"],
        counterexample={**ctx.symbols_of(out.model), **_loop_values(a, out.model, with_threads=False),
                        "warp": v["thread"] // WARP, "lane": lane,
                        "matrix": matrix, "row": r, "address": v["address"], "buffer offset": v["buffer"],
                        "byte offset": v["offset"], "address % 16": v["address"] % ROW_BYTES},
        hint=f"make every matrix row of {a.smem.name} start at a multiple of {a.layout.row_elements} elements: pad "
             f"its rows to a multiple of {a.layout.row_elements} elements (no indivisible split of the column axis) "
             f"and start the matrices on {a.layout.row_elements}-column boundaries",
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
        rows of a matrix are consecutive. With 32-bit elements (ldmatrix of float32) a matrix
        is 8 rows x 4 columns, element v is matrix v and (R_v, C_v) is lane 0's element v:
        row(t, v) == R_v + (t % 32) / 4, col(t, v) == C_v + t % 4, and the 8x4 blocks do not
        overlap (the mma.sync tf32 operand fragment). A transposed fragment (.trans) is not modelled.
    Why the hardware needs it:
        The hardware fixes where each element lands in the registers: lane t receives row
        t/4, columns 2(t%4) and 2(t%4)+1 (32-bit: column t%4) of every matrix. The schedule must agree, or the
        registers hold the data in an order the MMA (mma.sync / wgmma fragments) and the
        rest of the kernel do not expect; LDSM-THREAD-ROWS alone only makes the bytes land.
    Example:
        fusion, t0, t1, t2, t3 = ldmatrix_copy("ldmatrix_fragment", fragment=False)
        t1.split(1, 2)
        t1.set_allocation_domain([t1.axis(1), t1.axis(0), t1.axis(2)])
        for t in (t2, t3):
            t.split(1, 2).merge(1, 0)  # lane 8q + r: not ldmatrix's 4r + q
            t.axis(0).parallelize(tp.ParallelType.TIDx)
        t2.axis(1).parallelize(tp.ParallelType.Vectorize)
    Fix:
        fusion, t0, t1, t2, t3 = ldmatrix_copy("ldmatrix_fragment")
    References:
        PTX ISA 9.7.14.5.15, Figure 104 (ldmatrix fragment: row = lane / 4, column = 2 * (lane % 4) + i);
        CUTLASS include/cute/atom/copy_traits_sm75.hpp (SM75_U32x4_LDSM_N);
        docs/hardware.md#ldmatrix-register-fragment
    """
    # Formal statement: for each instruction with a shape and whole warps (LDSM-THREAD-ROWS), structural:
    #   the register tensor has >= 2 logical axes (row, col: its last two); then for all admitted sizes,
    #   t, loop points s, v < n, with w = 32*(t/32), k = 4 / element bytes (2 or 1), W = 4k columns per
    #   matrix and (R(m), C(m)) = (row, col)(w, k*m):
    #     executes(t, s, v) => row(t, v) == R(v/k) + (t%32)/4 and col(t, v) == C(v/k) + k*(t%4) + v%k
    #   and for all matrices a != b: executes(t, s, v) => the 8xW blocks at (R(a), C(a)), (R(b), C(b)) are disjoint
    for a in accesses(ctx):
        if not well_formed(ctx, a):
            continue
        if terms(ctx, a).fragment is None:
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
    #   row(t, v) == row(w, k*(v/k)) + (t%32)/4 and col(t, v) == col(w, k*(v/k)) + k*(t%4) + v%k,
    #   w = 32*(t/32), k = 4 / element bytes; and forall a != b < matrices: the 8 x 4k blocks are disjoint
    x = terms(ctx, a)
    row, col, row0, col0, want_row, want_col, (ra, ca), (rb, cb) = x.fragment
    q = query(ctx, a)
    values = {"thread": x.tid, "lane": x.lane, "element": x.reg, "row": row, "col": col, "want row": want_row,
              "want col": want_col, "origin row": row0, "origin col": col0}
    out = q.prove(z3.Implies(holds(q, x.mine), z3.And(q.eq(row, want_row), q.eq(col, want_col))),
                  values=values, smallest=x.tid)
    refuted = _not_fragment
    if out.proved:  # then the matrices must not overlap
        w = a.layout.row_elements
        disjoint = z3.Or(q.le(add(ra, 8), rb), q.le(add(rb, 8), ra), q.le(add(ca, w), cb), q.le(add(cb, w), ca))
        apart = z3.Implies(z3.And(holds(q, x.mine), q.ne(var(MATRIX_A), var(MATRIX_B))), disjoint)
        out = q.prove(apart, values={"thread": x.tid, "row a": ra, "col a": ca, "row b": rb, "col b": cb,
                                     "a": var(MATRIX_A), "b": var(MATRIX_B)}, smallest=x.tid)
        refuted = _overlap
    yield from report_outcome("LDSM-REGISTER-LAYOUT", out, f"the register fragment of the {a.describe}",
                              lambda out: refuted(ctx, a, out), **a.where())


def _not_fragment(ctx: VerifyContext, a: Ldsm, out: Outcome) -> Diagnostic:
    v = out.values
    L = a.layout
    matrix, r, c = L.fragment(v["lane"], v["element"])
    name = a.regs.name
    if L.elements_per_register == 2:
        note = "lane t element v is (row t/4, column 2(t%4) + v%2) of matrix v/2 (register i = matrix i)"
        hint = (f"schedule {a.issuer.name}'s loop domain as the fragment: split rows by 8 and columns by 8 then 2, "
                f"TIDx = merge(row % 8, (column % 8) / 2), Vectorize = merge(matrix axes..., column % 2)")
    else:
        note = (f"{L.bits}-bit elements: lane t element v is (row t/4, column t%4) of matrix v (register v = "
                f"matrix v, an 8 x 4 block)")
        hint = (f"schedule {a.issuer.name}'s loop domain as the fragment: split rows by 8 and columns by 4, "
                f"TIDx = merge(row % 8, column % 4), Vectorize = merge(matrix axes...)")
    return finding(
        "LDSM-REGISTER-LAYOUT",
        f"the {a.describe} does not match the m8n8 fragment: lane {v['lane']} element {v['element']} holds "
        f"{name}[{v['row']}, {v['col']}], but the hardware puts row {r}, column {c} of matrix {matrix} there: "
        f"{name}[{v['want row']}, {v['want col']}] (matrix {matrix} starts at {name}[{v['origin row']}, "
        f"{v['origin col']}], element {L.first_element(matrix)} of lane 0)",
        notes=[note, f"(row, column) are the logical indices of {name}'s last two axes"],
        counterexample={**ctx.symbols_of(out.model), **_loop_values(a, out.model), "lane": v["lane"],
                        "element": v["element"], "row": v["row"], "column": v["col"],
                        "expected row": v["want row"], "expected column": v["want col"]},
        hint=hint,
        **a.where(),
    )


def _overlap(ctx: VerifyContext, a: Ldsm, out: Outcome) -> Diagnostic:
    v = out.values
    name = a.regs.name
    return finding(
        "LDSM-REGISTER-LAYOUT",
        f"the {a.describe} loads overlapping matrices: matrix {v['a']} starts at {name}[{v['row a']}, {v['col a']}] "
        f"and matrix {v['b']} at {name}[{v['row b']}, {v['col b']}], closer than 8 rows or "
        f"{a.layout.row_elements} columns",
        notes=[f"each matrix of one instruction must be its own 8x{a.layout.row_elements} block of the register tensor"],
        counterexample={**ctx.symbols_of(out.model), **_loop_values(a, out.model), "matrix a": v["a"],
                        "matrix b": v["b"], "row a": v["row a"], "column a": v["col a"], "row b": v["row b"],
                        "column b": v["col b"]},
        hint=f"give each matrix axis of the vectorized loop ID its own 8-row or {a.layout.row_elements}-column block",
        **a.where(),
    )
