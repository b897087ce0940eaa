"""A wgmma's shared-memory operands as the schedule lays them out, and the descriptor that names
that layout to the hardware: one derivation for the verifier (WGMMA-SMEM-LAYOUT,
WGMMA-DESCRIPTOR) and the code generator (the descriptors it emits).

For each instruction instance (a point of the MmaOp's non-Mma loops) and operand element
(mn, k) of A (64 x 16: row m) or B (N x 16: column n), `byte_offset(mn, k)` is where the
schedule's allocation puts that element, in bytes from the operand tensor's buffer (its stage
included). The descriptor is read off the schedule: the start address is element (0, 0)'s
(un-swizzled: the swizzle is an involution), SBO the distance between its 8-row groups, the
layout the swizzle of the TMA that fills the buffer. The hardware then reads element (mn, k) at
hardware_address(start, ...) (model/wgmma_descriptor.py); WGMMA-SMEM-LAYOUT proves that equal to
byte_offset(mn, k) for every instance and element. The buffer's base is a multiple of the
swizzle's 8-row pattern (model/smem_plan.py aligns TMA buffers so), so the XOR the hardware
takes on absolute address bits is the same on offsets from the base.

tileproof lowers K-major operands (the TMA box's inner dimension is K, one swizzle span of it).
"""

from __future__ import annotations

from dataclasses import dataclass

from .allocation import compute_allocation
from .execution import element_offset
from .expr import Expr, add, const, evaluate, mul, substitute, try_int
from .simplify import simplify
from .mma import MmaInputSmemSwizzle
from .mma_op import ELEMENT_VARS, fragments, mma_execution
from .tma import swizzle_bytes_of
from .wgmma_descriptor import (
    CORE_ROW,
    SWIZZLE_OF_BYTES,
    hardware_address,
    hardware_swizzle,
)


@dataclass(frozen=True)
class WgmmaOperand:
    """Operand `role` ("A" or "B") of MmaOp output `tv` at the instruction instance of `ex`
    (mma_execution's view of the role, its element variable left free)."""

    tv: object
    role: str
    ex: object
    swizzle: MmaInputSmemSwizzle
    sbo: int  # bytes between 8-row groups at the first instance (WGMMA-DESCRIPTOR: at every one)
    lbo: int  # bytes between core-matrix columns along K (no swizzle); unused when swizzled

    @property
    def tensor(self):
        return self.tv.definition.inputs["AB".index(self.role)]

    @property
    def rows(self) -> int:
        """The operand tile's M (A) or N (B) extent."""
        inst = fragments(self.tv).inst
        return inst.m if self.role == "A" else inst.n

    @property
    def depth(self) -> int:
        """The operand tile's K extent."""
        return fragments(self.tv).inst.k

    def byte_offset(self, mn, k) -> Expr:
        """Where the schedule puts element (mn, k), bytes from the buffer's start."""
        inst = fragments(self.tv).inst
        v = mn * inst.k + k if self.role == "A" else k * inst.n + mn  # MacroFragments.position's order
        index = {u: substitute(e, {ELEMENT_VARS[self.role]: v})
                 for u, e in self.ex.operand_indices("AB".index(self.role)).items()}
        return element_offset(self.tensor, index, compute_allocation(self.tensor)) * const(self.tensor.dtype.bytes)

    def measured(self) -> dict[str, Expr]:
        """Where the elements SBO and LBO measure to lie, at this instance: (8, 0) and (0, 16
        bytes of K); "start" is (0, 0), from which SBO = measured["SBO"] - measured["start"]."""
        return {"start": self.byte_offset(const(0), const(0)), "SBO": self.byte_offset(const(8), const(0)),
                "LBO": self.byte_offset(const(0), const(CORE_ROW // self.tensor.dtype.bytes))}

    @property
    def start(self) -> Expr:
        """The descriptor's start address: element (0, 0)'s, as the hardware sees it."""
        return hardware_swizzle(self.byte_offset(const(0), const(0)), self.swizzle)

    def hardware(self, mn, k) -> Expr:
        """Where the descriptor makes the hardware read element (mn, k)."""
        return hardware_address(self.start, "K", self.swizzle, self.tensor.dtype.bytes, mn, k, self.lbo, self.sbo)


def wgmma_operand(tv, launch: dict, role: str, names: dict[int, str] | None = None) -> WgmmaOperand:
    """The layout of MmaOp output tv's operand `role` as the descriptor describes it."""
    ex = mma_execution(tv, launch, role, names)
    t = tv.definition.inputs["AB".index(role)]
    swizzle = SWIZZLE_OF_BYTES.get(swizzle_bytes_of(t)[0], MmaInputSmemSwizzle.NoSwizzle)
    draft = WgmmaOperand(tv, role, ex, swizzle, 0, 0)
    at = draft.measured()
    first = {name: const(0) for name in ex.ranges}  # the first instance

    def distance(key: str) -> int:
        """From element (0, 0) to the element `key` measures, at the first instance. Where the
        layout makes it depend on the sizes (a tile allocated across a loop of symbolic extent),
        any admitted value gives a candidate: WGMMA-SMEM-LAYOUT proves the descriptor for all."""
        d = simplify(substitute(add(at[key], mul(at["start"], const(-1))), first), {})
        n = try_int(d)
        return n if n is not None else evaluate(d, {v: 1 for v in d.free_vars()})

    sbo = distance("SBO") if draft.rows > 8 else 8 * swizzle.swizzle_bytes  # one 8-row group: unused
    lbo = distance("LBO") if swizzle is MmaInputSmemSwizzle.NoSwizzle else CORE_ROW
    return WgmmaOperand(tv, role, ex, swizzle, sbo, lbo)


__all__ = ["WgmmaOperand", "wgmma_operand"]
