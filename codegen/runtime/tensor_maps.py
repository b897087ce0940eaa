"""Encoding a kernel's tensor maps at launch (CUDA driver API cuTensorMapEncodeTiled).

The encode call reports any violated rule as CUDA_ERROR_INVALID_VALUE without saying which;
the verifier proved the schedule's side, so what can still go wrong is the array (its
address) or the sizes bound at launch, and those are checked here first with a message.
"""

from __future__ import annotations

import re

from ...model.errors import InternalError
from ...model.expr import evaluate
from ..errors import InputError
from ..ir import TensorMap
from .driver import DriverError, driver

DATA_TYPES = {"uint8": 0, "int8": 0, "bool": 0, "float16": 6, "bfloat16": 9, "int32": 3, "int64": 5, "float32": 7,
              "float64": 8}
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
L2_PROMOTION_256B = 3
GLOBAL_ALIGN = 16
MAX_DIM = 2 ** 32
MAX_STRIDE = 2 ** 40


def values(m: TensorMap, env: dict[str, int]) -> dict[str, list[int]]:
    """The map's integers at concrete sizes (and launch-time strides)."""
    try:
        return {name: [evaluate(e, env) for e in exprs] for name, exprs in
                (("sizes", m.sizes), ("strides", m.strides_bytes), ("box", m.box), ("element_strides", m.element_strides))}
    except KeyError as e:
        raise InputError(f"the tensor map of {m.shown} needs {_missing(m, e.args[0])}; pass it as a keyword") from None


def _missing(m: TensorMap, error: str) -> str:
    """The value `evaluate`'s KeyError ("no value for variable 'N'") says the map's sizes read, as
    the user knows it: a launch-time stride `stride.T0.1` of the map's tensor is `x.stride(1)`
    (model/global_layout.py stride_var), an extent its symbol."""
    quoted = re.search(r"'([^']+)'", error)
    name = quoted.group(1) if quoted else error
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "stride":
        return f"{m.shown if parts[1] == m.tensor else parts[1]}.stride({parts[2]})"
    return name


def check(m: TensorMap, address: int, v: dict[str, list[int]]) -> None:
    if address % GLOBAL_ALIGN:
        raise InputError(f"{m.shown} is loaded or stored by TMA, which needs a {GLOBAL_ALIGN}-byte aligned address; "
                         f"this array starts at {address:#x} ({address % GLOBAL_ALIGN} bytes past a boundary): "
                         f"pass a contiguous copy")
    for k, size in enumerate(v["sizes"]):
        if not 1 <= size <= MAX_DIM:
            raise InputError(f"{m.shown}: TMA dimension {k} has {size} elements; the hardware takes 1..2^32")
    for k, stride in enumerate(v["strides"], start=1):
        if stride % 16 or not 0 < stride < MAX_STRIDE:
            raise InputError(f"{m.shown}: TMA dimension {k} has a stride of {stride} bytes; the hardware needs a "
                             f"positive multiple of 16 below 2^40 (the array's strides do not fit this TMA)")


def encode(m: TensorMap, address: int, env: dict[str, int], unverified: str = ""):
    """A CUtensorMap for the array at `address`, to pass by value (launch type None).
    `unverified`: the rejection's codes of a kernel built by compile_unverified (a refused map is
    then a DriverError, not a tileproof bug)."""
    v = values(m, env)
    check(m, address, v)
    cu = driver()
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    err, tmap = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType(DATA_TYPES[m.dtype.name]), len(v["sizes"]), address,
        # rank 1 has no strides, but the driver refuses a null stride array: a placeholder it ignores
        [u64(x) for x in v["sizes"]], [u64(x) for x in v["strides"] or [-(-v["sizes"][0] * m.dtype.bytes // 16) * 16]],
        [u32(x) for x in v["box"]], [u32(x) for x in v["element_strides"]],
        cu.CUtensorMapInterleave(0), cu.CUtensorMapSwizzle(SWIZZLES[m.swizzle_bytes]),
        cu.CUtensorMapL2promotion(L2_PROMOTION_256B), cu.CUtensorMapFloatOOBfill(0))
    if err != cu.CUresult.CUDA_SUCCESS:  # the array and the launch sizes were checked above: the schedule's side
        refused = (f"cuTensorMapEncodeTiled for {m.shown} refused sizes {v['sizes']}, strides {v['strides']} B, box "
                   f"{v['box']}, element strides {v['element_strides']}, swizzle {m.swizzle_bytes} B ({err.name})")
        if unverified:  # tileproof.testing.compile_unverified: the failure the rejection predicts
            raise DriverError(f"{refused}; the kernel is unverified ({unverified})")
        raise InternalError(f"{refused}, which the verifier accepted")
    return tmap
