"""Tensor cores: nvFuser's MMA vocabulary (MmaMacro with its packed encoding, MmaOperand,
MmaLayout, MmaInputSmemSwizzle), the instruction each macro issues, and the register fragment
of each instruction operand as a map of the index algebra.

A fragment map sends (thread, element v) to the (row, col) of the instruction's tile that the
thread's element v holds, and its inverse sends (row, col) back. The maps take ints (tests,
messages) or Exprs (model/expr.py) alike, so one definition is evaluated in Python, rendered to
z3 by the verifier and to CUDA by the code generator. A is M x K (row m, col k), B is K x N
(row k, col n), C / D is M x N. For mma.sync the thread is the lane l (0..31), with PTX's
g = l / 4 ("groupID") and q = l % 4 ("threadID_in_group"); for wgmma it is the thread
T (0..127) of the warpgroup, w = T / 32 its warp. Elements are numbered as PTX lists them
("low to high"): a 32-bit element (tf32, f32) is register v; 16-bit elements pack two to a
32-bit register, element v in register v / 2, the even element in the low half
(`Fragment.register_of`).

Sources: PTX ISA 9.0 sections 9.7.14.5.7 and 9.7.14.5.8 (mma.sync), 9.7.15.5.1.1.1 and
9.7.15.5.1.1.2 (wgmma register fragments); CUTLASS include/cute/atom/mma_traits_sm80.hpp and
mma_traits_sm90_gmma.hpp (the CuTe thread-value layouts each docstring quotes); nvFuser
csrc/mma_type.h (the names and the encoding). docs/hardware.md#tensor-core-fragment-layouts
has the formulas in one table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..model.errors import ScheduleError
from ..model.expr import ExprLike
from ..model.types import DataType, as_dtype
from ..model.options import MmaArch, MmaMacro, MmaOperand
from .tcgen05 import MMA_K_16BIT, MMA_M, MMA_PTX, mma_shape_problems
from .threads import WARP, WARPGROUP

REGISTER_BITS = 32

Index = ExprLike  # an int, or an Expr of the index algebra


# -- nvFuser's vocabulary ---------------------------------------------------------------------


# -- fragment maps: mma.sync m16n8k{8,16} -------------------------------------------------------


def mma_c_position(lane: Index, v: Index) -> tuple[Index, Index]:
    """C / D of mma.sync m16n8k8 and m16n8k16 (f32 accumulators): element v of lane l is
    row g + 8 (v / 2), column 2q + v % 2.

    PTX ISA 9.7.14.5.7 (Figure 77) and 9.7.14.5.8 (Figure 83): c0, c1 in row groupID, c2, c3
    in row groupID + 8, column threadID_in_group * 2 + (i & 1). CuTe SM80_16x8_Row =
    ((4,8),(2,2)):((32,1),(16,8)) over (M16, N8)."""
    return lane // 4 + 8 * (v // 2), 2 * (lane % 4) + v % 2


def mma_c_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of mma_c_position: (m, n) is held by lane 4 (m % 8) + n / 2 as element n % 2 + 2 (m / 8)."""
    return 4 * (row % 8) + col // 2, col % 2 + 2 * (row // 8)


def m16n8k8_tf32_a_position(lane: Index, v: Index) -> tuple[Index, Index]:
    """A of mma.sync m16n8k8 .tf32: element v of lane l is row g + 8 (v % 2), column q + 4 (v / 2).
    Not the 16-bit order: element 1 moves down 8 rows, not one column right.

    PTX ISA 9.7.14.5.7 (Figure 72): a0 (g, q), a1 (g + 8, q), a2 (g, q + 4), a3 (g + 8, q + 4).
    CuTe SM80_16x8x8_F32TF32TF32F32_TN ALayout = ((4,8),(2,2)):((16,1),(8,64)) over (M16, K8)."""
    return lane // 4 + 8 * (v % 2), lane % 4 + 4 * (v // 2)


def m16n8k8_tf32_a_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of m16n8k8_tf32_a_position: lane 4 (m % 8) + k % 4, element m / 8 + 2 (k / 4)."""
    return 4 * (row % 8) + col % 4, row // 8 + 2 * (col // 4)


def m16n8k8_tf32_b_position(lane: Index, v: Index) -> tuple[Index, Index]:
    """B of mma.sync m16n8k8 .tf32: element v of lane l is row (k) q + 4v, column (n) g.

    PTX ISA 9.7.14.5.7 (Figure 75): b0 in row threadID_in_group, b1 in row + 4, column groupID.
    CuTe SM80_16x8x8_F32TF32TF32F32_TN BLayout = ((4,8),2):((8,1),32) over (N8, K8)."""
    return lane % 4 + 4 * v, lane // 4


def m16n8k8_tf32_b_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of m16n8k8_tf32_b_position: (k, n) is held by lane 4n + k % 4 as element k / 4."""
    return 4 * col + row % 4, row // 4


def m16n8k16_a_position(lane: Index, v: Index) -> tuple[Index, Index]:
    """A of mma.sync m16n8k16 .f16 / .bf16: element v of lane l is row g + 8 ((v / 2) % 2),
    column 2q + v % 2 + 8 (v / 4). Registers 0..3 are the 8 x 8 blocks (rows 0-7, k 0-7),
    (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15): ldmatrix.x4's order.

    PTX ISA 9.7.14.5.8 (Figure 79): row groupID for a0, a1, a4, a5, else groupID + 8; column
    threadID_in_group * 2 + (i & 1), plus 8 for i >= 4. CuTe SM80_16x8x16_F16F16F16F16_TN
    ALayout = ((4,8),(2,2,2)):((32,1),(16,8,128)) over (M16, K16)."""
    return lane // 4 + 8 * ((v // 2) % 2), 2 * (lane % 4) + v % 2 + 8 * (v // 4)


def m16n8k16_a_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of m16n8k16_a_position: lane 4 (m % 8) + (k % 8) / 2, element k % 2 + 2 (m / 8) + 4 (k / 8)."""
    return 4 * (row % 8) + (col % 8) // 2, col % 2 + 2 * (row // 8) + 4 * (col // 8)


def m16n8k16_b_position(lane: Index, v: Index) -> tuple[Index, Index]:
    """B of mma.sync m16n8k16 .f16 / .bf16: element v of lane l is row (k) 2q + v % 2 + 8 (v / 2),
    column (n) g.

    PTX ISA 9.7.14.5.8 (Figure 81): row threadID_in_group * 2 + (i & 1), plus 8 for i >= 2;
    column groupID. CuTe SM80_16x8x16_F16F16F16F16_TN BLayout = ((4,8),(2,2)):((16,1),(8,64))
    over (N8, K16)."""
    return 2 * (lane % 4) + v % 2 + 8 * (v // 2), lane // 4


def m16n8k16_b_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of m16n8k16_b_position: (k, n) is held by lane 4n + (k % 8) / 2 as element k % 2 + 2 (k / 8)."""
    return 4 * col + (row % 8) // 2, row % 2 + 2 * (row // 8)


def m16n8k8_16bit_a_position(lane: Index, v: Index) -> tuple[Index, Index]:
    """A of mma.sync m16n8k8 .f16 / .bf16: element v of lane l is row g + 8 (v / 2), column 2q + v % 2.

    PTX ISA 9.7.14.5.7 (Figure 71): row groupID for a0, a1, groupID + 8 for a2, a3; column
    threadID_in_group * 2 + (i & 1). CuTe SM80_16x8x8_F16F16F16F16_TN ALayout = SM80_16x8_Row =
    ((4,8),(2,2)):((32,1),(16,8)) over (M16, K8)."""
    return lane // 4 + 8 * (v // 2), 2 * (lane % 4) + v % 2


def m16n8k8_16bit_a_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of m16n8k8_16bit_a_position: lane 4 (m % 8) + k / 2, element k % 2 + 2 (m / 8)."""
    return 4 * (row % 8) + col // 2, col % 2 + 2 * (row // 8)


def m16n8k8_16bit_b_position(lane: Index, v: Index) -> tuple[Index, Index]:
    """B of mma.sync m16n8k8 .f16 / .bf16: element v of lane l is row (k) 2q + v, column (n) g.

    PTX ISA 9.7.14.5.7 (Figure 74): row threadID_in_group * 2 + i, column groupID. CuTe
    SM80_16x8x8_F16F16F16F16_TN BLayout = SM80_8x8_Row = ((4,8),2):((16,1),8) over (N8, K8)."""
    return 2 * (lane % 4) + v, lane // 4


def m16n8k8_16bit_b_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of m16n8k8_16bit_b_position: (k, n) is held by lane 4n + k / 2 as element k % 2."""
    return 4 * col + row // 2, row % 2


# -- fragment maps: wgmma (thread T of the warpgroup, w = T / 32) -------------------------------


def wgmma_d_position(thread: Index, v: Index) -> tuple[Index, Index]:
    """D of wgmma m64nNk* (f32 accumulators, N / 2 per thread): element v of thread T is row
    16w + g + 8 ((v / 2) % 2), column 8 (v / 4) + 2q + v % 2, with l = T % 32, g = l / 4,
    q = l % 4. Warp w owns rows 16w .. 16w + 15, where every 8 columns repeat mma.sync's C.

    PTX ISA 9.7.15.5.1.1.1 (Figure 149), 9.7.15.5.1.1.2 (Figure 151): figures only. CuTe
    CLayout_64xN = ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512)) over (M64, N)."""
    lane = thread % WARP
    return 16 * (thread // WARP) + lane // 4 + 8 * ((v // 2) % 2), 8 * (v // 4) + 2 * (lane % 4) + v % 2


def wgmma_d_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of wgmma_d_position: thread 32 (m / 16) + 4 (m % 8) + (n % 8) / 2, element
    n % 2 + 2 ((m / 8) % 2) + 4 (n / 8)."""
    return (WARP * (row // 16) + 4 * (row % 8) + (col % 8) // 2,
            col % 2 + 2 * ((row // 8) % 2) + 4 * (col // 8))


def wgmma_a16_position(thread: Index, v: Index) -> tuple[Index, Index]:
    """A of wgmma m64nNk16 .f16 / .bf16 from registers (4 registers, 8 elements): element v of
    thread T is row 16w + g + 8 ((v / 2) % 2), column 2q + v % 2 + 8 (v / 4): mma.sync
    m16n8k16's A in each warp's 16 rows.

    PTX ISA 9.7.15.5.1.1.1 (Figure 148): a figure only. CuTe ALayout_64x16 = CLayout_64x16 =
    ((4,8,4),(2,2,2)):((128,1,16),(64,8,512)) over (M64, K16)."""
    lane = thread % WARP
    return 16 * (thread // WARP) + lane // 4 + 8 * ((v // 2) % 2), 2 * (lane % 4) + v % 2 + 8 * (v // 4)


def wgmma_a16_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of wgmma_a16_position: thread 32 (m / 16) + 4 (m % 8) + (k % 8) / 2, element
    k % 2 + 2 ((m / 8) % 2) + 4 (k / 8)."""
    return (WARP * (row // 16) + 4 * (row % 8) + (col % 8) // 2,
            col % 2 + 2 * ((row // 8) % 2) + 4 * (col // 8))


def wgmma_a_tf32_position(thread: Index, v: Index) -> tuple[Index, Index]:
    """A of wgmma m64nNk8 .tf32 from registers (4 registers): element v of thread T is row
    16w + g + 8 (v % 2), column q + 4 (v / 2): mma.sync m16n8k8 tf32's A in each warp's 16 rows.

    PTX ISA 9.7.15.5.1.1.2 (Figure 150): a figure only. CuTe ALayout_64x8 =
    ((4,8,4),(2,2)):((64,1,16),(8,256)) over (M64, K8)."""
    lane = thread % WARP
    return 16 * (thread // WARP) + lane // 4 + 8 * (v % 2), lane % 4 + 4 * (v // 2)


def wgmma_a_tf32_holder(row: Index, col: Index) -> tuple[Index, Index]:
    """Inverse of wgmma_a_tf32_position: thread 32 (m / 16) + 4 (m % 8) + k % 4, element
    (m / 8) % 2 + 2 (k / 4)."""
    return WARP * (row // 16) + 4 * (row % 8) + col % 4, (row // 8) % 2 + 2 * (col // 4)


# -- one wgmma's accumulators as the next one's A (attention: P = softmax(S), then P V) ------------


def accumulator_as_a(v: Index) -> tuple[Index, Index]:
    """Where D element v of a wgmma m64nNk16 (f32, N / 2 a thread) goes when D, converted to
    16 bits, is the A operand of a following RS wgmma m64nN'k16 over K = N: (the K step j = v / 8,
    whose A tile is D's columns 16 j .. 16 j + 15, and that step's A element v % 8). Register r of
    step j's A fragment is then D elements 8 j + 2 r (low half) and 8 j + 2 r + 1 (high half):
    consecutive accumulator registers packed, no exchange between threads. FlashAttention-3
    relies on it (S's fragment reused as P's); accumulator_feeds_a checks it holds."""
    return v // 8, v % 8


def accumulator_feeds_a(n: int) -> list[str]:
    """The elements where accumulator_as_a fails for a wgmma m64nNk16 D (N a multiple of 16):
    for every thread T of the warpgroup and D element v, D's (row, col) must be the (row, col + 16 j)
    of A element e of step j = accumulator_as_a(v). Every thread and element is enumerated
    (wgmma_d_position against wgmma_a16_position), so [] proves the layouts equal for this N."""
    if not (isinstance(n, int) and 16 <= n <= 256 and n % 16 == 0):
        raise ScheduleError(f"accumulator_feeds_a: n must be a multiple of 16 from 16 to 256 (whole K steps of 16), "
                            f"got {n!r}")
    wrong = []
    for t in range(WARPGROUP):
        for v in range(n // 2):
            j, e = accumulator_as_a(v)
            row, col = wgmma_a16_position(t, e)
            if wgmma_d_position(t, v) != (row, col + 16 * j):
                wrong.append(f"thread {t} D element {v} at {wgmma_d_position(t, v)}, A step {j} element {e} at "
                             f"{(row, col + 16 * j)}")
    return wrong


# -- fragments and instructions as data -------------------------------------------------------------


@dataclass(frozen=True)
class Fragment:
    """One operand's register fragment of one instruction: a rows x cols tile spread over
    `threads` threads holding `elements` elements each, by the map `position` (thread, v) ->
    (row, col) and its inverse `holder` (row, col) -> (thread, v)."""

    name: str  # "A of mma.sync.m16n8k8 tf32"
    rows: int
    cols: int
    threads: int
    elements: int  # per thread
    element_bits: int  # 32 (tf32, f32) or 16 (f16, bf16)
    position_map: Callable[[Index, Index], tuple[Index, Index]]
    holder_map: Callable[[Index, Index], tuple[Index, Index]]

    def position(self, thread: Index, element: Index) -> tuple[Index, Index]:
        """(row, col) of the tile that element `element` of `thread` holds."""
        return self.position_map(thread, element)

    def holder(self, row: Index, col: Index) -> tuple[Index, Index]:
        """(thread, element) holding (row, col) of the tile."""
        return self.holder_map(row, col)

    @property
    def per_register(self) -> int:
        """Elements in one 32-bit register: 1 for 32-bit elements, 2 for 16-bit ones."""
        return REGISTER_BITS // self.element_bits

    @property
    def registers(self) -> int:
        """32-bit registers per thread."""
        return self.elements // self.per_register

    def register_of(self, element: Index) -> tuple[Index, Index]:
        """(register, half) of an element: 16-bit element v is in register v / 2, half v % 2
        (0: bits 0-15, the even element); a 32-bit element is its own register, half 0."""
        if self.per_register == 1:
            return element, 0
        return element // 2, element % 2

    def element_of(self, register: Index, half: Index = 0) -> Index:
        """The element in (register, half): the inverse of register_of."""
        return register if self.per_register == 1 else 2 * register + half


@dataclass(frozen=True)
class MmaInstruction:
    """One tensor-core instruction: its PTX, shape m x n x k, the operands' PTX type, the
    threads that issue it together (a warp for mma.sync, a warpgroup for wgmma) and each
    operand's register fragment. `b` is None for wgmma, whose B is read from shared memory
    through a descriptor (so may A be: `a` is then its register form)."""

    ptx: str
    m: int
    n: int
    k: int
    input_type: str  # the PTX type of A and B: "tf32", "bf16" or "f16"
    threads: int
    a: Fragment
    b: Fragment | None
    c: Fragment  # C and D (f32)

    @property
    def name(self) -> str:
        """A short name: "mma.sync.m16n8k8 tf32", "wgmma.m64n256k16 bf16", "tcgen05.mma.m128n64k16 f16"."""
        family = {WARP: "mma.sync", WARPGROUP: "wgmma", TCGEN05_ISSUERS: "tcgen05.mma"}[self.threads]
        return f"{family}.m{self.m}n{self.n}k{self.k} {self.input_type}"

    def operand(self, operand: MmaOperand) -> Fragment | None:
        """The fragment of A or B."""
        return self.a if operand is MmaOperand.A else self.b

    @property
    def converts_to_tf32(self) -> bool:
        """Whether the float32 operands are rounded to tf32 (cvt.rna.tf32.f32) before issue:
        PTX leaves the tf32 register format implementation-defined."""
        return self.input_type == "tf32"


PTX_TYPES = {"float32": "tf32", "bfloat16": "bf16", "float16": "f16"}


def _mma_sync(k: int, dtype: str, a, b) -> MmaInstruction:
    t = PTX_TYPES[dtype]
    bits = 32 if t == "tf32" else 16
    name = f"mma.sync.m16n8k{k} {t}"
    return MmaInstruction(
        ptx=f"mma.sync.aligned.m16n8k{k}.row.col.f32.{t}.{t}.f32", m=16, n=8, k=k, input_type=t, threads=WARP,
        a=Fragment(f"A of {name}", 16, k, WARP, 16 * k // WARP, bits, *a),
        b=Fragment(f"B of {name}", k, 8, WARP, 8 * k // WARP, bits, *b),
        c=Fragment(f"C/D of {name}", 16, 8, WARP, 4, 32, mma_c_position, mma_c_holder))


MMA_M16N8K8_TF32 = _mma_sync(8, "float32", (m16n8k8_tf32_a_position, m16n8k8_tf32_a_holder),
                             (m16n8k8_tf32_b_position, m16n8k8_tf32_b_holder))
MMA_M16N8K16 = {d: _mma_sync(16, d, (m16n8k16_a_position, m16n8k16_a_holder), (m16n8k16_b_position, m16n8k16_b_holder))
                for d in ("bfloat16", "float16")}
MMA_M16N8K8 = {d: _mma_sync(8, d, (m16n8k8_16bit_a_position, m16n8k8_16bit_a_holder),
                            (m16n8k8_16bit_b_position, m16n8k8_16bit_b_holder))
               for d in ("bfloat16", "float16")}


def wgmma(n: int, dtype: DataType | str) -> MmaInstruction:
    """wgmma.mma_async m64nNk16 (f16, bf16) or m64nNk8 (tf32, from float32) with f32
    accumulators, N = 8, 16, ..., 256 (PTX ISA 9.7.15.2): its D fragment and the register
    form of A."""
    dtype = as_dtype(dtype)
    if dtype.name not in PTX_TYPES:
        raise ScheduleError(f"wgmma: operands are float32 (tf32), bfloat16 or float16, got {dtype.name}")
    if not (isinstance(n, int) and 8 <= n <= 256 and n % 8 == 0):
        raise ScheduleError(f"wgmma: n must be a multiple of 8 from 8 to 256, got {n!r}")
    t = PTX_TYPES[dtype.name]
    k, bits = (8, 32) if t == "tf32" else (16, 16)
    a_maps = (wgmma_a_tf32_position, wgmma_a_tf32_holder) if t == "tf32" else (wgmma_a16_position, wgmma_a16_holder)
    name = f"wgmma.m64n{n}k{k} {t}"
    return MmaInstruction(
        ptx=f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{t}.{t}", m=64, n=n, k=k, input_type=t,
        threads=WARPGROUP,
        a=Fragment(f"A (registers) of {name}", 64, k, WARPGROUP, 64 * k // WARPGROUP, bits, *a_maps),
        b=None,
        c=Fragment(f"D of {name}", 64, n, WARPGROUP, n // 2, 32, wgmma_d_position, wgmma_d_holder))


TCGEN05_ISSUERS = 1  # tcgen05.mma is issued by one thread


def _tile_position(cols: int) -> Callable[[Index, Index], tuple[Index, Index]]:
    """A whole tile read or written by the instruction, not by threads: element v at row v / cols,
    column v % cols, whichever the thread."""
    return lambda thread, v: (v // cols, v % cols)


def _tile_holder(cols: int) -> Callable[[Index, Index], tuple[Index, Index]]:
    return lambda row, col: (0, row * cols + col)


def tcgen05_mma(n: int, dtype: DataType | str) -> MmaInstruction:
    """tcgen05.mma.cta_group::1.kind::f16 m128nNk16 (f16 / bf16 operands, f32 accumulators), N a
    multiple of 16 from 16 to 256 (PTX ISA 9.7.16.10): one thread issues it, A (128 x 16) and B
    (16 x N) are shared tiles read through descriptors, D (128 x N) lives in tensor memory, row i
    in lane i (hw/tcgen05.py accumulator_cell). Its "fragments" are the whole tiles, element v at
row v / cols, column v % cols, held by no thread."""
    dtype = as_dtype(dtype)
    problems = mma_shape_problems(MMA_M, n if isinstance(n, int) else -1, MMA_K_16BIT, dtype.name)
    if problems:
        raise ScheduleError(f"tcgen05.mma: {'; '.join(problems)}")
    t = PTX_TYPES[dtype.name]
    m, k = MMA_M, MMA_K_16BIT
    name = f"tcgen05.mma.m{m}n{n}k{k} {t}"
    return MmaInstruction(
        ptx=MMA_PTX, m=m, n=n, k=k, input_type=t, threads=TCGEN05_ISSUERS,
        a=Fragment(f"A (shared memory) of {name}", m, k, TCGEN05_ISSUERS, m * k, 16, _tile_position(k), _tile_holder(k)),
        b=Fragment(f"B (shared memory) of {name}", k, n, TCGEN05_ISSUERS, k * n, 16, _tile_position(n), _tile_holder(n)),
        c=Fragment(f"D (tensor memory) of {name}", m, n, TCGEN05_ISSUERS, m * n, 32, _tile_position(n),
                   _tile_holder(n)))


def mma_sync_instructions() -> list[MmaInstruction]:
    """Every mma.sync instruction modelled: m16n8k8 tf32, m16n8k16 and m16n8k8 for bf16 and f16."""
    return [MMA_M16N8K8_TF32, *MMA_M16N8K16.values(), *MMA_M16N8K8.values()]


def macro_instruction(macro: MmaMacro, dtype: DataType | str) -> MmaInstruction:
    """The instruction one tile of this macro issues for operands of `dtype` (`issues`
    times, over N then K)."""
    dtype = as_dtype(dtype)
    if dtype.name not in macro.input_dtypes:
        raise ScheduleError(f"MmaMacro.{macro.name} takes {' or '.join(macro.input_dtypes)} operands, "
                            f"got {dtype.name}")
    if macro.arch is MmaArch.Hopper:
        return wgmma(macro.n, dtype)
    if macro.arch is MmaArch.Blackwell1CTA:
        return tcgen05_mma(macro.n, dtype)
    if macro is MmaMacro.Ampere_16_8_8:
        return MMA_M16N8K8_TF32
    table = MMA_M16N8K16 if macro.arch is MmaArch.Ampere else MMA_M16N8K8
    return table[dtype.name]


def macro_issues(macro: MmaMacro, dtype: DataType | str) -> int:
    """How many instructions one tile of this macro takes (n / instruction n times k /
    instruction k: Ampere_16_16_16 is two m16n8k16, Turing_16_16_16 four m16n8k8)."""
    inst = macro_instruction(macro, dtype)
    return (macro.n // inst.n) * (macro.k // inst.k)
