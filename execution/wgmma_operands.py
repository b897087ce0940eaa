"""A wgmma's shared-memory operands as the schedule lays them out, and the descriptor that names
that layout to the hardware: one derivation for the verifier (WGMMA-SMEM-LAYOUT,
WGMMA-DESCRIPTOR) and the code generator (the descriptors it emits).

For each instruction instance (a point of the MmaOp's non-Mma loops) and operand element
(mn, k) of A (64 x 16: row m) or B (N x 16: column n), `byte_offset(mn, k)` is where the
schedule's allocation puts that element, in bytes from the operand tensor's buffer (its stage
included). The descriptor is read off the schedule: the start address is element (0, 0)'s
(un-swizzled: the swizzle is an involution), SBO the distance between its 8-row groups, the
layout the swizzle of the TMA that fills the buffer. The hardware then reads element (mn, k) at
hardware_address(start, ...) (hw/wgmma.py); WGMMA-SMEM-LAYOUT proves that equal to
byte_offset(mn, k) for every instance and element. The buffer's base is a multiple of the
swizzle's 8-row pattern (execution/smem_plan.py aligns TMA buffers so), so the XOR the hardware
takes on absolute address bits is the same on offsets from the base.

An operand is K-major (the TMA box's inner dimension is K, one swizzle span of it) or MN-major
(the box's inner dimension M or N: element (1, 0) next to (0, 0)), swizzled or in 8 x 16-byte
core matrices (CUTLASS's INTERLEAVE: SBO between 16-byte chunks of MN, LBO between groups of 8 K
rows); the instruction's transpose bit says which (codegen/emit/mma.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .allocation import compute_allocation
from .statements import element_offset
from ..model.expr import Expr, add, const, evaluate, mul, substitute, try_int
from ..model.simplify import simplify
from ..model.options import MmaInputSmemSwizzle
from ..model.mma_op import ELEMENT_VARS
from .mma import fragments
from .mma_execution import mma_execution
from ..hw.tma import swizzle_bytes_of
from ..hw.wgmma import CORE_ROW, SWIZZLE_OF_BYTES, hardware_address, hardware_swizzle


@dataclass(frozen=True)
class WgmmaOperand:
    """Operand `role` ("A" or "B") of MmaOp output `tv` at the instruction instance of `ex`
    (mma_execution's view of the role, its element variable left free)."""

    tv: object
    role: str
    ex: object
    swizzle: MmaInputSmemSwizzle
    sbo: int  # K-major: bytes between 8-row groups; MN-major: between groups of 8 K rows (at the first instance),
    # unswizzled between 16-byte chunks of MN
    lbo: int  # K-major: between core-matrix columns along K (no swizzle); MN-major: between swizzle spans of MN,
    # unswizzled between groups of 8 K rows
    major: str = "K"  # "MN" where consecutive elements of a row (A) or column (B) are adjacent in memory
    # (mn, k) -> byte_offset: the same for every operand of this tv, role and ex (wgmma_operand
    # builds three in turn, and the rule and the code generator ask the same elements again)
    offsets: dict = field(default_factory=dict, compare=False, repr=False)

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
        got = self.offsets.get((mn, k))
        if got is None:
            got = self.offsets[(mn, k)] = self._byte_offset(mn, k)
        return got

    def _byte_offset(self, mn, k) -> Expr:
        inst = fragments(self.tv).inst
        v = mn * inst.k + k if self.role == "A" else k * inst.n + mn  # MacroFragments.position's order
        index = {u: substitute(e, {ELEMENT_VARS[self.role]: v})
                 for u, e in self.ex.operand_indices("AB".index(self.role)).items()}
        return element_offset(self.tensor, index, compute_allocation(self.tensor)) * const(self.tensor.dtype.bytes)

    @property
    def span(self) -> int:
        """Elements of MN in one swizzle span (16 bytes unswizzled): an MN-major row's length."""
        return (self.swizzle.swizzle_bytes if self.swizzle.value else CORE_ROW) // self.tensor.dtype.bytes

    def field_elements(self) -> dict[str, tuple[int, int]]:
        """The element (mn, k) whose distance from (0, 0) each field measures: K-major (8, 0) for SBO
        and (0, 16 bytes of K) for LBO; MN-major swizzled (0, 8) and (one span, 0); MN-major in core
        matrices (one 16-byte chunk, 0) and (0, 8)."""
        if self.major == "MN" and not self.swizzle.value:
            return {"SBO": (self.span, 0), "LBO": (0, 8)}
        if self.major == "MN":
            return {"SBO": (0, 8), "LBO": (self.span, 0)}
        return {"SBO": (8, 0), "LBO": (0, CORE_ROW // self.tensor.dtype.bytes)}

    def measured(self) -> dict[str, Expr]:
        """Where element (0, 0) ("start") and the elements SBO and LBO measure (field_elements) lie,
        at this instance: SBO = measured["SBO"] - measured["start"]."""
        out = {"start": self.byte_offset(const(0), const(0))}
        for name, (mn, k) in self.field_elements().items():
            out[name] = self.byte_offset(const(mn), const(k))
        return out

    def fields(self) -> list[tuple[str, int]]:
        """The descriptor fields the layout uses (WGMMA-SMEM-LAYOUT proves each the same at every
        instance): SBO across 8-row (K-major) or 8-K-row (MN-major) groups where there are more,
        LBO across K columns unswizzled (K-major) or across MN spans (MN-major)."""
        if self.major == "MN" and not self.swizzle.value:
            return [("LBO", self.lbo)] + ([("SBO", self.sbo)] if self.rows > self.span else [])
        if self.major == "MN":
            return [("SBO", self.sbo)] + ([("LBO", self.lbo)] if self.rows > self.span else [])
        return ([("SBO", self.sbo)] if self.rows > 8 else []) + ([("LBO", self.lbo)] if not self.swizzle.value else [])

    @property
    def start(self) -> Expr:
        """The descriptor's start address: element (0, 0)'s, as the hardware sees it."""
        return hardware_swizzle(self.byte_offset(const(0), const(0)), self.swizzle)

    def hardware(self, mn, k) -> Expr:
        """Where the descriptor makes the hardware read element (mn, k)."""
        return hardware_address(self.start, self.major, self.swizzle, self.tensor.dtype.bytes, mn, k, self.lbo, self.sbo)


def wgmma_operand(tv, launch: dict, role: str, names: dict[int, str] | None = None) -> WgmmaOperand:
    """The layout of MmaOp output tv's operand `role` as the descriptor describes it."""
    ex = mma_execution(tv, launch, role, names)
    t = tv.definition.inputs["AB".index(role)]
    swizzle = SWIZZLE_OF_BYTES.get(swizzle_bytes_of(t)[0], MmaInputSmemSwizzle.NoSwizzle)
    first = {name: const(0) for name in ex.ranges}  # the first instance
    draft = WgmmaOperand(tv, role, ex, swizzle, 0, 0)
    start = draft.byte_offset(const(0), const(0))

    def gap(offset: Expr) -> Expr:
        """From element (0, 0) to the element at `offset`, at the first instance."""
        return simplify(substitute(add(offset, mul(start, const(-1))), first), {})

    def distance(offset: Expr) -> int:
        """gap(offset) as a number. Where the layout makes it depend on the sizes (a tile allocated
        across a loop of symbolic extent), any admitted value gives a candidate: WGMMA-SMEM-LAYOUT
        proves the descriptor for all."""
        d = gap(offset)
        n = try_int(d)
        return n if n is not None else evaluate(d, {v: 1 for v in d.free_vars()})

    # MN-major: element (1, 0) next to (0, 0)
    mn_major = try_int(gap(draft.byte_offset(const(1), const(0)))) == t.dtype.bytes
    op = WgmmaOperand(tv, role, ex, swizzle, 0, 0, "MN" if mn_major else "K", draft.offsets)
    at = op.measured()
    if mn_major and not swizzle.value:  # 8 x 16-byte core matrices: SBO between MN chunks, LBO between K groups
        sbo = distance(at["SBO"]) if op.rows > op.span else CORE_ROW
        lbo = distance(at["LBO"])
    elif mn_major:
        sbo = distance(at["SBO"])
        lbo = distance(at["LBO"]) if op.rows > op.span else CORE_ROW
    else:
        sbo = distance(at["SBO"]) if op.rows > 8 else 8 * swizzle.swizzle_bytes  # one 8-row group: unused
        lbo = distance(at["LBO"]) if swizzle is MmaInputSmemSwizzle.NoSwizzle else CORE_ROW
    return WgmmaOperand(tv, role, ex, swizzle, sbo, lbo, op.major, draft.offsets)

__all__ = ["WgmmaOperand", "wgmma_operand"]
