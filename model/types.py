"""Hardware and scheduling vocabularies as enums, and the data types."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import ScheduleError


class ParallelType(enum.Enum):
    """What a loop axis is bound to (nvFuser's ParallelType), set with `IterDomain.parallelize`.

    Serial: a for loop (the default). BIDx/BIDy/BIDz: blockIdx.x/y/z. TIDx/TIDy/TIDz:
    threadIdx.x/y/z. DIDx/DIDy/DIDz: devices (the allocation rules model them, but
    LOWERING-SUPPORTED rejects them: tileproof emits single-GPU kernels). Vectorize: one 2-,
    4-, 8- or 16-byte access (or one tcgen05 / ldmatrix register run). Unroll: a fully
    unrolled loop. Unswitch: a serial loop (every rule treats it as one) whose nest the kernel
    holds twice (nvFuser's unswitch): under one block-uniform guard that implies every iteration's
    hole predicates, without them, else with them. Bulk: the tile axes of a TMA copy, moved by one
    cp.async.bulk.tensor.
    Mma: the M, N and K axes of one tensor-core instruction tile of an MmaOp's output
    (tp.fused_multiply_sum with a macro): the warp's lanes and registers cover them.
    Group: an iteration axis of constant extent of a reduction's output whose reductions, one
    per index, nvFuser does together (cross-iteration grouping: one grid round for all of
    them); its values are those of a loop of the reductions, and tileproof runs it as a fully
    unrolled loop, one round per index (REDUCTION-GROUP-AXIS says where it is allowed).

        tv.axis(0).parallelize(tp.ParallelType.BIDx)"""

    Serial = "Serial"
    BIDx = "BIDx"
    BIDy = "BIDy"
    BIDz = "BIDz"
    TIDx = "TIDx"
    TIDy = "TIDy"
    TIDz = "TIDz"
    DIDx = "DIDx"
    DIDy = "DIDy"
    DIDz = "DIDz"
    Vectorize = "Vectorize"
    Unroll = "Unroll"
    Unswitch = "Unswitch"
    Bulk = "Bulk"
    Mma = "Mma"
    Group = "Group"

    @property
    def is_thread(self) -> bool:
        """Whether this is a thread index: TIDx, TIDy or TIDz (nvFuser's isParallelTypeThreadDim)."""
        return self in THREAD_TYPES

    @property
    def is_block(self) -> bool:
        """Whether this is a block index: BIDx, BIDy or BIDz (nvFuser's isParallelTypeBlockDim)."""
        return self in BLOCK_TYPES

    @property
    def is_device(self) -> bool:
        """Whether this is a device index: DIDx, DIDy or DIDz (nvFuser's isParallelTypeDeviceDim)."""
        return self in DEVICE_TYPES

    @property
    def cuda_name(self) -> str:
        """The CUDA variable of a thread or block index (`threadIdx.x`, `blockIdx.y`); the
        member's name for the other types."""
        return _CUDA_NAMES.get(self, self.value)

    def __str__(self) -> str:
        return self.value


THREAD_TYPES = (ParallelType.TIDx, ParallelType.TIDy, ParallelType.TIDz)
BLOCK_TYPES = (ParallelType.BIDx, ParallelType.BIDy, ParallelType.BIDz)
DEVICE_TYPES = (ParallelType.DIDx, ParallelType.DIDy, ParallelType.DIDz)
INSTRUCTION_AXES = (ParallelType.Vectorize, ParallelType.Bulk)  # one instruction covers them: never a shared loop
_CUDA_NAMES = {
    ParallelType.TIDx: "threadIdx.x",
    ParallelType.TIDy: "threadIdx.y",
    ParallelType.TIDz: "threadIdx.z",
    ParallelType.BIDx: "blockIdx.x",
    ParallelType.BIDy: "blockIdx.y",
    ParallelType.BIDz: "blockIdx.z",
}


class MemoryType(enum.Enum):
    """Where a tensor lives (nvFuser's MemoryType), set with `TensorView.set_memory_type`.

    Global: device memory (fusion inputs and outputs). Shared: the block's shared memory.
    Local: registers of one thread (the default for intermediates). Tensor: Blackwell tensor
    memory (sm_100a), 128 lanes x 512 32-bit columns per block.

        t1.set_memory_type(tp.MemoryType.Shared)"""

    Global = "Global"
    Shared = "Shared"
    Local = "Local"
    Tensor = "Tensor"

    def __str__(self) -> str:
        return self.value


class IterType(enum.Enum):
    """The kind of an IterDomain (nvFuser's IterType): Iteration, Broadcast for an axis of
    extent 1 that stretches to its partner's extent in a binary op (`IterDomain.is_broadcast`),
    or Reduction for an axis a reduction (tp.sum, tp.max) combines away: it stays in the output's
    logical domain but not in its shape (`IterDomain.is_reduction`)."""

    Iteration = "Iteration"
    Broadcast = "Broadcast"
    Reduction = "Reduction"


class SwizzleType(enum.Enum):
    """The swizzles `TensorView.swizzle` applies (nvFuser's SwizzleType): XOR, (x, y) -> (x, x ^ y)."""

    XOR = "XOR"


class Direction(enum.Enum):
    """Which way an access moves data, relative to the memory it names: a load reads it, a
    store writes it (a TMA load fills shared memory from global; tcgen05.ld reads tensor memory)."""

    LOAD = "load"
    STORE = "store"


class OpKind(str, enum.Enum):
    """What an Op computes. A str enum: equal to its value, so older code and JSON read the same."""

    LOAD_STORE = "load_store"
    UNARY = "unary"
    BINARY = "binary"
    BROADCAST = "broadcast"
    TRANSPOSE = "transpose"
    CAST = "cast"  # a tensor of another dtype (nvFuser's UnaryOp of UnaryOpType::Cast)
    REDUCTION = "reduction"  # sum / max / min over axes (nvFuser's ReductionOp)
    TERNARY = "ternary"  # where(cond, a, b) (nvFuser's TernaryOp)
    IOTA = "iota"  # start + i step along one axis, reading no tensor (nvFuser's IotaOp)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


COPIES = (OpKind.LOAD_STORE, OpKind.BROADCAST, OpKind.TRANSPOSE)  # ops that move values unchanged
ARITHMETIC = (OpKind.UNARY, OpKind.BINARY, OpKind.TERNARY)  # ops computed in a compute type (DataType.compute):
# the output's, or the operands' for a comparison (codegen/emit/scalar_types.py operand_types)
# OpKind.CAST is neither: it converts each value from its input's dtype to its output's;
# OpKind.REDUCTION combines values in the compute type (model/reduction.py)


class LoadStoreOpType(enum.Enum):
    """The instruction a copy (`tp.set(tv, op=...)`, `cache_after`, `cache_before`) becomes
    (nvFuser's LoadStoreOpType).

    Set: plain loads and stores (vectorized where a Vectorize axis says so). TMA:
    cp.async.bulk.tensor between global and shared memory (a load or a store). LdMatrix /
    StMatrix: ldmatrix / stmatrix between shared memory and registers. TMemLoad / TMemStore:
    tcgen05.ld / tcgen05.st between tensor memory and registers (sm_100a). CpAsync: cp.async,
    global -> shared, 4, 8 or 16 bytes per thread (the Vectorize axis, or one element), with
    `.ca` or `.cg` as the copy's tp.CacheOp says (CPASYNC-SIZE); out-of-bounds elements are
    zero-filled (src-size 0), and readers wait (cp.async.wait_group, then __syncthreads).
    CpAsyncBulk: cp.async.bulk, a 1-D bulk copy between global and shared memory with no tensor
    map: the copy's Bulk axes are one contiguous run of a multiple of 16 bytes in both memories,
    both addresses 16-byte aligned, and no element out of bounds (no zero fill: each copy lies
    inside the tensor or is predicated off whole); a load completes on an mbarrier as a TMA's does.
    A shared tensor it fills inside a serial loop may be circular-buffered over that loop
    (TensorView.circular_buffer).

        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA)
        t2 = tp.set(t0, op=tp.LoadStoreOpType.CpAsync, cache_op=tp.CacheOp.Global)   # cp.async.cg"""

    Set = "Set"
    TMA = "TMA"
    CpAsyncBulkTensorTile = "TMA"  # nvFuser's name for TMA (an alias: the same member)
    LdMatrix = "LdMatrix"
    StMatrix = "StMatrix"
    CpAsync = "CpAsync"
    CpAsyncBulk = "CpAsyncBulk"  # cp.async.bulk: a 1-D bulk copy, no tensor map (hw/bulk_copy.py)
    TMemLoad = "TMemLoad"
    TMemStore = "TMemStore"


class CacheOp(enum.Enum):
    """Which caches a copy from global memory goes through (nvFuser's CacheOp), passed as
    `tp.set(tv, cache_op=...)` or `tv.cache_after(op, cache_op)`.

    A cp.async copy (`op=tp.LoadStoreOpType.CpAsync`): AllLevels is `cp.async.ca` (L1 and L2;
    4, 8 or 16 bytes), Global `cp.async.cg` (L2 only, bypassing L1; exactly 16 bytes);
    Unspecified (the default) `.cg` when the copy moves 16 bytes, `.ca` otherwise. CPASYNC-SIZE
    checks the bytes against the choice. A plain load of a fusion input (`op` Set): AllLevels is
    `ld.global.ca`, Global `ld.global.cg`, Streaming `ld.global.cs` (evict first: data read
    once); Unspecified a plain load (the compiler's `ld.global`)."""

    Unspecified = "Unspecified"
    AllLevels = "AllLevels"
    Global = "Global"
    Streaming = "Streaming"


@dataclass(frozen=True)
class DataType:
    """An element type: its `name` ("float32"), size in `bytes` and the `cuda` type that stores it.
    The public ones are tp.float32, float64, float16, bfloat16, int8, int32, int64 and tp.bool
    (what comparisons make and `tp.where` takes; one byte, 0 or 1); functions that take a dtype
    also accept the name as a string."""

    name: str
    bytes: int
    cuda: str

    def __str__(self) -> str:
        return self.name

    @property
    def is_integer(self) -> bool:
        """Whether this is an integer type (int8, int32, int64)."""
        return self.name in INTEGER_NAMES

    @property
    def is_float(self) -> bool:
        """Whether this is a floating-point type (float64, float32, float16, bfloat16)."""
        return self.name in FLOAT_NAMES

    @property
    def is_bool(self) -> bool:
        """Whether this is tp.bool, the dtype of comparisons (nvFuser's DataType::Bool)."""
        return self.name == "bool"

    @property
    def compute(self) -> "DataType":
        """The type arithmetic on this dtype is done in: float32 for the 16-bit floats, int32
        for int8 (C++'s promotion), the dtype itself otherwise. A binary op's number operand is
        converted to it (`tp.mul(t, 0.1)` on a bfloat16 t multiplies by float32 0.1)."""
        return DTYPES[_COMPUTE.get(self.name, self.name)]


float32 = DataType("float32", 4, "float")
float64 = DataType("float64", 8, "double")
float16 = DataType("float16", 2, "__half")
bfloat16 = DataType("bfloat16", 2, "__nv_bfloat16")
int8 = DataType("int8", 1, "int8_t")
int32 = DataType("int32", 4, "int32_t")
int64 = DataType("int64", 8, "int64_t")
bool_ = DataType("bool", 1, "bool")
DTYPES = {d.name: d for d in (float32, float64, float16, bfloat16, int8, int32, int64, bool_)}
INTEGER_NAMES = ("int8", "int32", "int64")
FLOAT_NAMES = ("float64", "float32", "float16", "bfloat16")
_COMPUTE = {"float16": "float32", "bfloat16": "float32", "int8": "int32"}


def as_dtype(d) -> DataType:
    if isinstance(d, DataType):
        return d
    if isinstance(d, str) and d in DTYPES:
        return DTYPES[d]
    raise ScheduleError(f"unknown dtype {d!r}; expected one of {', '.join(DTYPES)}")


def promote_types(a: DataType, b: DataType) -> DataType:
    """The dtype two operands of different dtypes meet in (PyTorch's promote_types, nvFuser's
    promoteType of two tensors): bool below every other; an integer and a float give the float;
    two integers or two floats the wider, except float16 with bfloat16, which give float32."""
    if a == b or b.is_bool:
        return a
    if a.is_bool:
        return b
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if {a.name, b.name} == {"float16", "bfloat16"}:
        return float32
    return a if a.bytes >= b.bytes else b
