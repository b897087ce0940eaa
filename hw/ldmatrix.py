"""ldmatrix / stmatrix (.m8n8.x{1,2,4}.b16): the hardware's map between a warp's lanes, its
registers and the rows of the matrices, written once and parametrized by the element width
(2 bytes: f16 / bf16; 4 bytes: f32 / tf32, CuTe's LDSM_U32x{1,2,4}_N on Float32). The verifier
proves schedules against it (verifier/analysis/ldsm.py, the LDSM rules) and the code generator
issues the instruction with it (codegen/lower/ldsm.py), so the row address the kernel supplies
is the one LDSM-ALIGNMENT proved aligned.

One instruction moves 1, 2 or 4 matrices of 8 rows x 16 bytes (PTX ISA 9.7.14.5.15,
9.7.14.5.16, Figure 104); a row is 8 16-bit or 4 32-bit columns. The hardware moves b16
halves, so a 32-bit element is the two halves one lane's register receives:

    supplying lane T   gives the shared address of row T % 8 of matrix T / 8 (`supplier`)
    receiving lane t   holds in register i the 4 bytes 4 (t % 4) .. 4 (t % 4) + 3 of row t / 4
                       of matrix i; with k = 4 / element bytes elements per register (2 or 1)
                       its element v is matrix v / k, row t / 4, column k (t % 4) + v % k
                       (`Layout.fragment`): 16-bit v -> (v / 2, t / 4, 2 (t % 4) + v % 2),
                       32-bit v -> (v, t / 4, t % 4), the mma.sync tf32 operand fragment

A schedule places element v of thread t at E(t, v): the issuing tensor's shared-memory
offset at that thread and at that point of its Vectorize IDs. The row lane T supplies
starts at the row's column 0, held by lane 4 (T % 8) of the same warp as element
k (T / 8) (`Layout.holder`), so its address is E(warp + 4 (T % 8), k (T / 8))
(`Layout.row_address`).

`layout(element_bytes)` gives the map of one width (B16, B32); the module-level names without a
width (ELEMENT_BYTES, ELEMENTS_PER_REGISTER, MATRICES, fragment, holder, row_address,
supplied_address) are the 16-bit map's. The map takes ints (counterexamples, messages) or Exprs
(proofs, the kernel) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..model.expr import Expr, add, substitute
from .threads import WARP, linear_thread, thread_env

MATRIX_ROWS = 8  # rows of a matrix, and the lanes supplying one matrix's rows
ROW_BYTES = 16  # one row is one 16-byte access
REGISTER_BYTES = 4  # a lane receives (gives) one 32-bit register per matrix
LANES_PER_ROW = ROW_BYTES // REGISTER_BYTES  # 4 lanes hold one row
WIDTHS = (2, 4)  # element bytes the map is written for: .b16 pairs, and 32-bit elements


@dataclass(frozen=True)
class Layout:
    """The map for elements of `element_bytes` bytes (2 or 4)."""

    element_bytes: int

    def __post_init__(self):
        if self.element_bytes not in WIDTHS:
            raise ValueError(f"ldmatrix/stmatrix move 16-bit or 32-bit elements, not {self.element_bytes}-byte ones")

    @property
    def bits(self) -> int:
        return 8 * self.element_bytes

    @property
    def elements_per_register(self) -> int:
        """k: the elements one 32-bit register holds (2 of 16 bits, 1 of 32)."""
        return REGISTER_BYTES // self.element_bytes

    @property
    def row_elements(self) -> int:
        """The columns of a matrix: 8 of 16 bits, 4 of 32 bits (16 bytes)."""
        return ROW_BYTES // self.element_bytes

    @property
    def matrices(self) -> dict[int, int]:
        """Elements per lane -> matrices per instruction (.x1, .x2, .x4)."""
        k = self.elements_per_register
        return {k * m: m for m in (1, 2, 4)}

    def matrix_of(self, element):
        """The matrix (register) of element v: v / k."""
        k = self.elements_per_register
        return element if k == 1 else element // k

    def first_element(self, matrix):
        """The first element of matrix m's register: k m."""
        k = self.elements_per_register
        return matrix if k == 1 else matrix * k

    def fragment(self, lane, element):
        """(matrix, row, column) of element v of receiving lane t: register v / k holds matrix
        v / k, row t / 4, columns k (t % 4) .. k (t % 4) + k - 1."""
        k = self.elements_per_register
        if k == 1:
            return element, lane // LANES_PER_ROW, lane % LANES_PER_ROW
        column = (lane % LANES_PER_ROW) * k + element % k
        return element // k, lane // LANES_PER_ROW, column

    def holder(self, matrix, row, column=0):
        """(lane, element) holding column `column` of row `row` of matrix `matrix` (the inverse of fragment)."""
        k = self.elements_per_register
        if k == 1:
            return row * LANES_PER_ROW + column, matrix
        return row * LANES_PER_ROW + column // k, matrix * k + column % k

    def row_address(self, offset: Expr, matrix, row, dims: tuple[Expr, Expr, Expr],
                    element_env: Callable[[Expr], dict[str, Expr]]) -> Expr:
        """Where the hardware reads (writes) row `row` of matrix `matrix`: `offset` (the
        schedule's E) at the lane and element holding the row's column 0."""
        lane, element = self.holder(matrix, row)
        return at_lane(offset, lane, element, dims, element_env)

    def supplied_address(self, offset: Expr, dims: tuple[Expr, Expr, Expr],
                         element_env: Callable[[Expr], dict[str, Expr]]) -> Expr:
        """The address the current thread gives as supplying lane T (its lane): E(warp + 4 (T % 8), k (T / 8))."""
        row, matrix = supplier(lane_of(linear_thread(dims)))
        return self.row_address(offset, matrix, row, dims, element_env)


def layout(element_bytes: int) -> Layout:
    """The map for one element width; ValueError for widths other than 2 and 4 bytes."""
    return B16 if element_bytes == 2 else B32 if element_bytes == 4 else Layout(element_bytes)


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


def at_lane(e: Expr, lane: Expr, element: Expr, dims: tuple[Expr, Expr, Expr],
            element_env: Callable[[Expr], dict[str, Expr]]) -> Expr:
    """e at lane `lane` of the current thread's warp and element `element` of its Vectorize
    IDs (`element_env`: their loop variables at that element), at the same loop point."""
    thread = add(warp_start(linear_thread(dims)), lane)
    return substitute(e, {**thread_env(thread, dims), **element_env(element)})


B16 = Layout(2)  # .b16: f16, bf16
B32 = Layout(4)  # 32-bit elements: f32 (tf32), CuTe LDSM_U32x{1,2,4}_N on Float32

# the 16-bit map under the names it had before the width was a parameter
ELEMENT_BYTES = B16.element_bytes
ELEMENTS_PER_REGISTER = B16.elements_per_register
MATRICES = B16.matrices
fragment = B16.fragment
holder = B16.holder
row_address = B16.row_address
supplied_address = B16.supplied_address
