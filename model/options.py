"""The options a user passes to the schedule, as checked values: circular-buffer types
(Pipelined, WarpSpecialized), cluster dims and TMA multicast, and the tensor-core vocabulary
(MmaMacro with nvFuser's packed encoding, MmaOperand, MmaLayout, MmaInputSmemSwizzle,
Tf32Rounding). What they make the hardware do is derived in hw/ and execution/; this module
imports nothing above model/.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .errors import ScheduleError, user_location
from .types import BLOCK_TYPES, THREAD_TYPES, ParallelType


@dataclass(frozen=True)
class Pipelined:
    """The Pipelined circular-buffer type (nvFuser's Pipelined): one group of threads both copies
    and reads, and a stage is refilled after a __syncthreads that follows its reads; with
    `uses_mbarrier_for_war=True` (TMA loads read by wgmma), after each warpgroup released it on
    the stage's empty mbarrier once its wgmma.wait_group covers the reads, the issuing thread
    waiting for that (no barrier in the loop).

        t1.circular_buffer(3, 2, tp.Pipelined())"""

    uses_mbarrier_for_war: bool = False

    def __post_init__(self):
        if not isinstance(self.uses_mbarrier_for_war, bool):
            raise ScheduleError(f"Pipelined: uses_mbarrier_for_war must be True or False, got "
                                f"{self.uses_mbarrier_for_war!r}")


@dataclass(frozen=True)
class WarpSpecialized:
    """The WarpSpecialized circular-buffer type (nvFuser's WarpSpecialized): one more index of
    the thread axis `on` (the last, threadIdx.y == the consumers' extent for TIDy) is a producer
    warpgroup that only issues the TMA loads, each after an mbarrier says the stage is free; the
    other warpgroups, the consumers, wait for each stage's data and release it once their wgmma
    reads are done (execution/warp_roles.py). `num_registers=(producer, consumer)`: setmaxnreg
    moves registers from the producer to the consumers (WS-REGISTERS checks the counts).
    `ping_pong`: the consumer warpgroups (the indices of `on`) issue each iteration's first wgmma
    batch in turn, through named barriers, so that one's softmax or epilogue math overlaps the
    others' tensor-core work (FlashAttention-3's warp scheduler barriers; execution/ping_pong.py,
    WS-PING-PONG proves the barriers balanced and free of deadlock).

        t1.circular_buffer(4, 2, tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232)))"""

    on: ParallelType
    num_registers: tuple[int, int] | None = None
    ping_pong: bool = False
    # the user's file:line that made it (WS-REGISTERS points at its num_registers); not compared
    origin: str | None = field(default_factory=user_location, compare=False, repr=False)

    def __repr__(self) -> str:
        regs = f", num_registers={self.num_registers}" if self.num_registers else ""
        turns = ", ping_pong=True" if self.ping_pong else ""
        return f"tp.WarpSpecialized(tp.ParallelType.{self.on.name}{regs}{turns})"

    def __post_init__(self):
        if not isinstance(self.on, ParallelType) or self.on not in THREAD_TYPES:
            raise ScheduleError(f"WarpSpecialized: `on` must be a thread axis (tp.ParallelType.TIDx, TIDy or TIDz), "
                                f"got {self.on!r}")
        regs = self.num_registers
        if regs is not None:
            if (not isinstance(regs, tuple) or len(regs) != 2
                    or any(isinstance(r, bool) or not isinstance(r, int) for r in regs)):
                raise ScheduleError(f"WarpSpecialized: num_registers must be a tuple of two ints (producer, consumer), "
                                    f"e.g. (40, 232); got {regs!r}")
        if not isinstance(self.ping_pong, bool):
            raise ScheduleError(f"WarpSpecialized: ping_pong must be True or False, got {self.ping_pong!r}")


@dataclass(frozen=True)
class CircularBuffer:
    """A tensor's circular buffering as scheduled: `stages` tiles, `prefetch` copies ahead (a
    negative prefetch_distance already taken as stages + prefetch_distance), the `type`, and
    the user's file:line."""

    stages: int
    prefetch: int
    type: Pipelined | WarpSpecialized = field(default_factory=Pipelined)
    origin: str | None = None


def make_circular_buffer(number_of_stages, prefetch_distance, type_) -> CircularBuffer:
    """The arguments of TensorView.circular_buffer, checked at the door (their values are the
    verifier's: PIPELINE-STAGES)."""
    for name, value in (("number_of_stages", number_of_stages), ("prefetch_distance", prefetch_distance)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScheduleError(f"circular_buffer: {name} must be an int, got {type(value).__name__} {value!r}")
    if number_of_stages < 1:
        raise ScheduleError(f"circular_buffer: number_of_stages must be positive, got {number_of_stages}")
    if type_ is None:
        type_ = Pipelined()
    if not isinstance(type_, (Pipelined, WarpSpecialized)):
        raise ScheduleError(f"circular_buffer: type must be a tp.Pipelined(...) or tp.WarpSpecialized(...), got "
                            f"{type(type_).__name__} {type_!r}")
    prefetch = prefetch_distance + number_of_stages if prefetch_distance < 0 else prefetch_distance
    return CircularBuffer(number_of_stages, prefetch, type_, user_location())


MAX_CLUSTER = 8  # blocks in a portable cluster (CUDA programming guide, thread block clusters)


NO_CLUSTER = (1, 1, 1)


@dataclass(frozen=True)
class Multicast:
    """A TMA load multicast to the blocks of its cluster along `on` (TensorView.multicast)."""

    on: ParallelType
    origin: str | None = None

    def __repr__(self) -> str:
        return f"tp.ParallelType.{self.on.name}"


def checked_cluster_dims(value) -> tuple[int, int, int]:
    """fusion.cluster_dims's value: three positive ints (x, y, z); fewer are padded with 1."""
    dims = tuple(value) if isinstance(value, (tuple, list)) else None
    if (dims is None or not 1 <= len(dims) <= 3
            or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims)):
        raise ScheduleError(f"cluster_dims: expected up to three positive ints (x, y, z), e.g. (2, 1, 1); "
                            f"got {value!r}")
    return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]


def checked_multicast(tv, on) -> Multicast:
    if not isinstance(on, ParallelType) or on not in BLOCK_TYPES:
        raise ScheduleError(f"multicast: `on` must be a block axis (tp.ParallelType.BIDx, BIDy or BIDz), got {on!r}")
    return Multicast(on, user_location())


class MmaArch(enum.IntEnum):
    """The architecture field of an MmaMacro's encoding, numbered as nvFuser's
    MmaMacroEncode::Arch."""

    NoMma = 0
    Volta = 1
    Turing = 2
    Ampere = 3
    Hopper = 4
    Blackwell1CTA = 5
    Blackwell2CTA = 6


def encode_macro(arch: MmaArch, m: int, n: int, k: int) -> int:
    """nvFuser's MmaMacroEncode: arch << 48 | m << 32 | n << 16 | k."""
    return int(arch) << 48 | m << 32 | n << 16 | k


class Tf32Rounding(enum.Enum):
    """How a tf32 MmaOp (Ampere_16_8_8) turns its float32 operands into tf32 (tileproof's
    extension, set with `set_macro(..., tf32_rounding=)`).

    RNA (the default): cvt.rna.tf32.f32, to nearest with ties away from zero; PTX leaves the
    bits an mma reads from an unrounded float32 implementation-defined. Truncate: the float32
    bits are passed as they are, and the tensor cores read their upper 19 (round toward zero,
    measured on an H100): twice the rounding error, no conversion instruction. Triton's tf32
    `tl.dot` does this.

        d.definition.set_macro(tp.MmaMacro.Ampere_16_8_8, tf32_rounding=tp.Tf32Rounding.Truncate)"""

    RNA = "rna"
    Truncate = "truncate"


class MmaMacro(enum.Enum):
    """The tensor-core operation an MmaOp computes per instruction tile (nvFuser's MmaMacro,
    same names and packed values: arch << 48 | m << 32 | n << 16 | k).

    Turing_16_8_8, Turing_16_8_16, Turing_16_16_16: mma.sync m16n8k8 (f16 / bf16), issued
    1, 2 or 4 times. Ampere_16_8_16, Ampere_16_16_16: mma.sync m16n8k16 (f16 / bf16), issued 1
    or 2 times. Hopper_64_N_16, N = 8, 16, ..., 256: one wgmma m64nNk16 (f16 / bf16).
    Blackwell1CTA_128_N_16, N = 16, 32, ..., 256: one tcgen05.mma.cta_group::1.kind::f16 m128nNk16
    (f16 / bf16, sm_100a), D in tensor memory (nvFuser's Blackwell1CTA macros at M = 128; its
    M = 64 and Blackwell2CTA macros are not modelled).
    Ampere_16_8_8 is tileproof's own extension: mma.sync m16n8k8 with tf32 operands (float32
    tensors, rounded by cvt.rna.tf32.f32). Current nvFuser has no tf32 macro; early versions
    reserved this name as a "place holder for tf32" and never lowered it.

        macro = tp.MmaMacro.Ampere_16_8_8; (macro.m, macro.n, macro.k) == (16, 8, 8)"""

    _ignore_ = ["_width"]  # noqa: RUF012 - the loop variable below, not a member
    Turing_16_8_8 = encode_macro(MmaArch.Turing, 16, 8, 8)
    Turing_16_8_16 = encode_macro(MmaArch.Turing, 16, 8, 16)
    Turing_16_16_16 = encode_macro(MmaArch.Turing, 16, 16, 16)
    Ampere_16_8_16 = encode_macro(MmaArch.Ampere, 16, 8, 16)
    Ampere_16_16_16 = encode_macro(MmaArch.Ampere, 16, 16, 16)
    Ampere_16_8_8 = encode_macro(MmaArch.Ampere, 16, 8, 8)  # tileproof's tf32 extension
    for _width in range(8, 257, 8):  # wgmma's N: multiples of 8 up to 256
        vars()[f"Hopper_64_{_width}_16"] = encode_macro(MmaArch.Hopper, 64, _width, 16)
    for _width in range(16, 257, 16):  # tcgen05.mma cta_group::1 at M = 128: N multiples of 16 up to 256
        vars()[f"Blackwell1CTA_128_{_width}_16"] = encode_macro(MmaArch.Blackwell1CTA, 128, _width, 16)

    @property
    def arch(self) -> MmaArch:
        """The architecture field of the encoding."""
        return MmaArch(self.value >> 48)

    @property
    def m(self) -> int:
        """Rows of the macro's tile (M)."""
        return (self.value >> 32) & 0xFFFF

    @property
    def n(self) -> int:
        """Columns of the macro's tile (N)."""
        return (self.value >> 16) & 0xFFFF

    @property
    def k(self) -> int:
        """The reduction extent of the macro's tile (K)."""
        return self.value & 0xFFFF

    @property
    def input_dtypes(self) -> tuple[str, ...]:
        """The operand dtypes the macro takes: ("float32",) for the tf32 extension, else
        ("float16", "bfloat16")."""
        return ("float32",) if self is MmaMacro.Ampere_16_8_8 else ("float16", "bfloat16")


class MmaOperand(enum.Enum):
    """An operand of an MMA (nvFuser's MmaOperand): A (M x K) or B (K x N)."""

    A = "A"
    B = "B"


class MmaLayout(enum.Enum):
    """How A and B are laid out, named by the position of K (nvFuser's MmaLayout, T = row
    major, N = column major): NT = [K, M] x [K, N], TT = [M, K] x [K, N], TN = [M, K] x [N, K],
    NN = [K, M] x [N, K]. mma.sync itself only exists as .row.col (TN at the fragment level):
    the layout in memory is a matter of the copy that fills the registers."""

    NT = 0
    TT = 1
    TN = 2
    NN = 3

    def k_major(self, operand: MmaOperand) -> bool:
        """Whether `operand`'s K is its innermost (contiguous) axis in this layout."""
        if operand is MmaOperand.A:
            return self in (MmaLayout.TT, MmaLayout.TN)
        return self in (MmaLayout.TN, MmaLayout.NN)


class MmaInputSmemSwizzle(enum.Enum):
    """The swizzle of an operand in shared memory (nvFuser's MmaInputSmemSwizzle). The values
    equal the layout field (bits 62-63) of the wgmma matrix descriptor, PTX ISA
    9.7.15.5.1.2.2: None = 0 (no swizzle), B128 = 1, B64 = 2, B32 = 3. `None` is not an
    identifier Python accepts after a dot: write MmaInputSmemSwizzle["None"], or its alias
    MmaInputSmemSwizzle.NoSwizzle."""

    locals()["None"] = 0  # nvFuser's name; the class namespace takes it as a member
    NoSwizzle = 0  # noqa: PIE796 - an alias of None that can be spelled
    B128 = 1
    B64 = 2
    B32 = 3

    @property
    def swizzle_bytes(self) -> int:
        """The swizzle span (nvFuser's getBytesFromSwizzle): 16 bytes (one core-matrix row)
        without swizzle, else 32, 64 or 128."""
        return {0: 16, 1: 128, 2: 64, 3: 32}[self.value]

    @property
    def smem_alignment(self) -> int:
        """Bytes a buffer of this swizzle is aligned to, so the pattern starts where the
        descriptor's base offset 0 says (nvFuser's getSharedMemoryByteAlignment): 128 without
        swizzle, else 8 rows of the span (256, 512, 1024)."""
        return 128 if self.value == 0 else 8 * self.swizzle_bytes

    @classmethod
    def from_bytes(cls, nbytes: int) -> MmaInputSmemSwizzle:
        """The swizzle of a span (nvFuser's getSwizzleFromBytes): 16 -> None, 32 -> B32, ..."""
        for s in cls:
            if s.swizzle_bytes == nbytes:
                return s
        raise ScheduleError(f"MmaInputSmemSwizzle.from_bytes: no swizzle spans {nbytes} bytes; 16, 32, 64 or 128")
