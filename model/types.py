"""Hardware and scheduling vocabularies as enums, and the data types."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import ScheduleError


class ParallelType(enum.Enum):
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
    Bulk = "Bulk"

    @property
    def is_thread(self) -> bool:
        return self in THREAD_TYPES

    @property
    def is_block(self) -> bool:
        return self in BLOCK_TYPES

    @property
    def is_device(self) -> bool:
        return self in DEVICE_TYPES

    @property
    def cuda_name(self) -> str:
        return _CUDA_NAMES.get(self, self.value)

    def __str__(self) -> str:
        return self.value


THREAD_TYPES = (ParallelType.TIDx, ParallelType.TIDy, ParallelType.TIDz)
BLOCK_TYPES = (ParallelType.BIDx, ParallelType.BIDy, ParallelType.BIDz)
DEVICE_TYPES = (ParallelType.DIDx, ParallelType.DIDy, ParallelType.DIDz)
_CUDA_NAMES = {
    ParallelType.TIDx: "threadIdx.x",
    ParallelType.TIDy: "threadIdx.y",
    ParallelType.TIDz: "threadIdx.z",
    ParallelType.BIDx: "blockIdx.x",
    ParallelType.BIDy: "blockIdx.y",
    ParallelType.BIDz: "blockIdx.z",
}


class MemoryType(enum.Enum):
    Global = "Global"
    Shared = "Shared"
    Local = "Local"
    Tensor = "Tensor"

    def __str__(self) -> str:
        return self.value


class IterType(enum.Enum):
    Iteration = "Iteration"
    Broadcast = "Broadcast"


class SwizzleType(enum.Enum):
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

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


COPIES = (OpKind.LOAD_STORE, OpKind.BROADCAST, OpKind.TRANSPOSE)  # ops that move values unchanged
ARITHMETIC = (OpKind.UNARY, OpKind.BINARY)


class LoadStoreOpType(enum.Enum):
    Set = "Set"
    TMA = "TMA"
    LdMatrix = "LdMatrix"
    StMatrix = "StMatrix"
    CpAsync = "CpAsync"
    TMemLoad = "TMemLoad"
    TMemStore = "TMemStore"


@dataclass(frozen=True)
class DataType:
    name: str
    bytes: int
    cuda: str

    def __str__(self) -> str:
        return self.name


float32 = DataType("float32", 4, "float")
float64 = DataType("float64", 8, "double")
float16 = DataType("float16", 2, "__half")
bfloat16 = DataType("bfloat16", 2, "__nv_bfloat16")
int8 = DataType("int8", 1, "int8_t")
int32 = DataType("int32", 4, "int32_t")
int64 = DataType("int64", 8, "int64_t")
DTYPES = {d.name: d for d in (float32, float64, float16, bfloat16, int8, int32, int64)}


def as_dtype(d) -> DataType:
    if isinstance(d, DataType):
        return d
    if isinstance(d, str) and d in DTYPES:
        return DTYPES[d]
    raise ScheduleError(f"unknown dtype {d!r}; expected one of {', '.join(DTYPES)}")
