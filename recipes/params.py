"""What the GEMM recipes share of their parameters: the block order of the grid (GridOrder), the
output's path (Epilogue) and the elementwise ops fused into it (EpilogueOps), and the checks every
parameter dataclass runs at construction.

Each parameter group is a frozen, keyword-only dataclass that checks its own fields and raises
tp.ScheduleError naming the class and the field ("HopperTile: n must be ..., got 200"); its
repr lists only the fields that differ from their defaults, so that a schedule prints as the
call that builds it. Imports only the public `tileproof` API.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass

import tileproof as tp


class Params:
    """The base of the recipes' parameter groups: the checks their __post_init__ call, and a
    repr of the fields that differ from their defaults."""

    def __repr__(self) -> str:
        shown = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if value != default:
                shown.append(f"{f.name}={_shown(value)}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _fail(self, field: str, must: str, value) -> None:
        raise tp.ScheduleError(f"{type(self).__name__}: {field} must be {must}, got {_shown(value)}")

    def _check_int(self, field: str, low: int = 1, multiple_of: int = 1) -> None:
        """The field an int >= low (and a multiple of `multiple_of`), not a bool."""
        value = getattr(self, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or value % multiple_of:
            must = (f"an int >= {low}" if multiple_of == 1 else f"a positive multiple of {multiple_of}"
                    if low <= multiple_of else f"a multiple of {multiple_of}, at least {low}")
            self._fail(field, must, value)

    def _check_bool(self, field: str) -> None:
        if not isinstance(getattr(self, field), bool):
            self._fail(field, "True or False", getattr(self, field))

    def _check_choice(self, field: str, choices: tuple) -> None:
        value = getattr(self, field)
        if isinstance(value, bool) or value not in choices:
            self._fail(field, "one of " + ", ".join(_shown(c) for c in choices), value)

    def _check_type(self, field: str, kind: type, none_ok: bool = False) -> None:
        value = getattr(self, field)
        if not (isinstance(value, kind) or (none_ok and value is None)):
            self._fail(field, f"a {kind.__name__}" + (" or None" if none_ok else ""), value)


def _shown(value) -> str:
    """A value as the call that builds it would spell it: tp.bfloat16, a function's name."""
    if isinstance(value, tp.DataType):
        return f"tp.{value.name}"
    if isinstance(value, enum.Enum):  # tp.Tf32Rounding.Truncate, tp.LoadStoreOpType.CpAsync
        return f"tp.{type(value).__name__}.{value.name}"
    if callable(value) and hasattr(value, "__qualname__") and not isinstance(value, type):
        return value.__qualname__
    return repr(value)


@dataclass(frozen=True, kw_only=True, repr=False)
class GridOrder(Params):
    """Which block computes which output tile (nvFuser's cta_order, grid_traversal_factor and
    tiling_strategy).

    group: the M tiles in groups of `group` ([Mo / group, group, No]: blockIdx.z the group,
        blockIdx.x the tile in it, blockIdx.y the N tile), so that the blocks running at once
        share `group` tiles of A in L2; 1: blockIdx.x the M tile, blockIdx.y the N tile.
    persistent: a persistent grid of this many blocks over the grouped tile order, block b
        computing tiles b, b + persistent, ... (None: one tile a block).
    patch: (pm, pn): each block computes pm x pn tiles one after another ([Mo / pm, No / pn]
        blocks; group is then unused): with about one block an SM the grid is one wave.
    """

    group: int = 1
    persistent: int | None = None
    patch: tuple[int, int] | None = None

    def __post_init__(self):
        self._check_int("group")
        if self.persistent is not None:
            self._check_int("persistent")
        if self.patch is not None:
            if not (isinstance(self.patch, tuple) and len(self.patch) == 2
                    and all(isinstance(p, int) and not isinstance(p, bool) and p >= 1 for p in self.patch)):
                self._fail("patch", "None or a pair of ints >= 1 (M tiles, N tiles)", self.patch)
            if self.persistent is not None:
                self._fail("patch", "None on a persistent grid (persistent and patch both order the tiles)",
                           self.patch)
            if self.group != 1:
                self._fail("group", "1 with a patch (a patch orders the blocks itself)", self.group)


ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
BIASES = ("row", "column")


@dataclass(frozen=True, kw_only=True, repr=False)
class EpilogueOps(Params):
    """Elementwise ops fused between the float32 accumulators D and the output, in this order
    (cuBLASLt's epilogue, with beta = 1 for the residual):

        out[m, n] = cast(activation(scale * D[m, n] + bias + residual[m, n]))

    computed in float32 in each thread's registers, on D's fragment, before the output's cast.

    scale: a number multiplying D (alpha), or None.
    bias: "column": a vector of N values, bias[n] added to every row (PyTorch's addmm and
        F.linear bias, an input [1, N]); "row": M values, bias[m] added to every column (an
        input [M, 1]); None: no bias. In float32, read by the add straight from global memory.
    residual: an input [M, N] in the output's dtype added (C of cuBLASLt's D = alpha AB + C).

    Each fused op's tensor is laid out as D's fragment and inlined, so each thread runs the chain
    on its own accumulators; the bias and residual inputs follow the fusion's A and B, in that
    order. The scale is a constant of the kernel (another value is another kernel).
    activation: "relu", "gelu" (the erf form), "gelu_tanh" (PyTorch's approximate="tanh"),
        "silu" (x sigmoid(x)), or None.
    """

    scale: float | None = None
    bias: str | None = None
    residual: bool = False
    activation: str | None = None

    def __post_init__(self):
        if self.scale is not None and (isinstance(self.scale, bool) or not isinstance(self.scale, (int, float))
                                       or not math.isfinite(self.scale)):
            self._fail("scale", "a finite number or None", self.scale)
        if self.bias is not None:
            self._check_choice("bias", BIASES)
        self._check_bool("residual")
        if self.activation is not None:
            self._check_choice("activation", ACTIVATIONS)

    @property
    def any(self) -> bool:
        """Whether any op is fused (EpilogueOps() fuses none: the output is D, cast)."""
        return self != EpilogueOps()


@dataclass(frozen=True, kw_only=True, repr=False)
class Epilogue(Params):
    """How the float32 accumulators reach the output (nvFuser's use_smem_epilogue).

    dtype: the output's dtype; another than float32 is a cast of the accumulators.
    stmatrix: the (16-bit) output cast in the accumulators' fragment layout, written by
        stmatrix.x4 into a shared tile laid out as the TMA store's swizzled boxes, and stored by
        TMA; False: each thread stores its accumulators from its registers.
    by_box: (with stmatrix) the shared tile holds one TMA box of the output at a time, written and
        stored box by box (16 KiB instead of 64 for a 128 x 256 tile: room for another stage).
    swizzle: the output boxes' swizzle in bytes (with stmatrix): a box is one swizzle span of
        columns, 64 bfloat16 at 128, 32 at 64.
    ops: the elementwise ops fused before the cast (EpilogueOps: scale, bias, residual,
        activation), in either path.
    """

    dtype: tp.DataType = tp.float32
    stmatrix: bool = False
    by_box: bool = False
    swizzle: int = 128
    ops: EpilogueOps = EpilogueOps()

    def __post_init__(self):
        self._check_type("dtype", tp.DataType)
        self._check_bool("stmatrix")
        self._check_bool("by_box")
        self._check_choice("swizzle", (128, 64, 32))
        self._check_type("ops", EpilogueOps)
        if self.stmatrix and self.dtype.bytes != 2:
            self._fail("dtype", "a 16-bit type with stmatrix (stmatrix stores 16-bit elements)", self.dtype)
        if self.by_box and not self.stmatrix:
            self._fail("by_box", "False without stmatrix (it stages the stmatrix tile one box at a time)",
                       self.by_box)


__all__ = ["ACTIVATIONS", "BIASES", "Epilogue", "EpilogueOps", "GridOrder", "Params"]
