"""ldmatrix / stmatrix (.m8n8.x{1,2,4}.b16): the hardware's map between a warp's lanes, its
registers and the rows of the 8x8 matrices, written once. The verifier proves schedules
against it (verifier/analysis/ldsm.py, the LDSM rules) and the code generator issues the
instruction with it (codegen/lower/ldsm.py), so the row address the kernel supplies is the one
LDSM-ALIGNMENT proved aligned.

One instruction moves 1, 2 or 4 matrices of 8 rows x 8 16-bit columns (PTX ISA 9.7.14.5.15,
9.7.14.5.16, Figure 104):

    supplying lane T   gives the shared address of row T % 8 of matrix T / 8 (`supplier`)
    receiving lane t   holds in register i two columns of matrix i: its element v is
                       matrix v / 2, row t / 4, column 2 (t % 4) + v % 2 (`fragment`)

A schedule places element v of thread t at E(t, v): the issuing tensor's shared-memory
offset at that thread and at that point of its Vectorize IDs. The row lane T supplies
starts at the row's column 0, held by lane 4 (T % 8) of the same warp as element
2 (T / 8) (`holder`), so its address is E(warp + 4 (T % 8), 2 (T / 8)) (`row_address`).

The map takes ints (counterexamples, messages) or Exprs (proofs, the kernel) alike.
"""

from __future__ import annotations

from typing import Callable

from .expr import Expr, add, substitute
from .indexing import linear_thread, thread_env

WARP = 32
MATRIX_ROWS = 8  # rows of a matrix, and the lanes supplying one matrix's rows
ELEMENT_BYTES = 2  # .b16
ELEMENTS_PER_REGISTER = 2  # one 32-bit register holds two columns of a row
LANES_PER_ROW = MATRIX_ROWS // ELEMENTS_PER_REGISTER  # 4 lanes hold one row's 8 columns
ROW_BYTES = MATRIX_ROWS * ELEMENT_BYTES  # one row is one 16-byte access
MATRICES = {2: 1, 4: 2, 8: 4}  # elements per lane -> matrices per instruction (.x1, .x2, .x4)


def lane_of(thread):
    """The lane of a thread (linear id) in its warp."""
    return thread % WARP


def warp_start(thread):
    """The linear id of lane 0 of the thread's warp."""
    return (thread // WARP) * WARP


def supplier(lane):
    """(row, matrix) whose shared address supplying lane T gives: row T % 8 of matrix T / 8."""
    return lane % MATRIX_ROWS, lane // MATRIX_ROWS


def supplier_lane(row, matrix):
    """The lane supplying the address of row `row` of matrix `matrix` (the inverse of supplier)."""
    return matrix * MATRIX_ROWS + row


def fragment(lane, element):
    """(matrix, row, column) of element v of receiving lane t: register v / 2 holds matrix v / 2,
    row t / 4, columns 2 (t % 4) and 2 (t % 4) + 1."""
    column = (lane % LANES_PER_ROW) * ELEMENTS_PER_REGISTER + element % ELEMENTS_PER_REGISTER
    return element // ELEMENTS_PER_REGISTER, lane // LANES_PER_ROW, column


def holder(matrix, row, column=0):
    """(lane, element) holding column `column` of row `row` of matrix `matrix` (the inverse of fragment)."""
    lane = row * LANES_PER_ROW + column // ELEMENTS_PER_REGISTER
    return lane, matrix * ELEMENTS_PER_REGISTER + column % ELEMENTS_PER_REGISTER


def at_lane(e: Expr, lane: Expr, element: Expr, dims: tuple[Expr, Expr, Expr],
            element_env: Callable[[Expr], dict[str, Expr]]) -> Expr:
    """e at lane `lane` of the current thread's warp and element `element` of its Vectorize
    IDs (`element_env`: their loop variables at that element), at the same loop point."""
    thread = add(warp_start(linear_thread(dims)), lane)
    return substitute(e, {**thread_env(thread, dims), **element_env(element)})


def row_address(offset: Expr, matrix, row, dims: tuple[Expr, Expr, Expr],
                element_env: Callable[[Expr], dict[str, Expr]]) -> Expr:
    """Where the hardware reads (writes) row `row` of matrix `matrix`: `offset` (the
    schedule's E) at the lane and element holding the row's column 0."""
    lane, element = holder(matrix, row)
    return at_lane(offset, lane, element, dims, element_env)


def supplied_address(offset: Expr, dims: tuple[Expr, Expr, Expr],
                     element_env: Callable[[Expr], dict[str, Expr]]) -> Expr:
    """The address the current thread gives as supplying lane T (its lane): E(warp + 4 (T % 8), 2 (T / 8))."""
    row, matrix = supplier(lane_of(linear_thread(dims)))
    return row_address(offset, matrix, row, dims, element_env)
