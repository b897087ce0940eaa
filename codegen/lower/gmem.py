"""Global tensors as run() binds them: the layout of model/global_layout.py (strides from
contiguity, run-time strides for discontiguous axes) plus what the launch checks."""

from __future__ import annotations

from ...model.errors import InternalError
from ...model.global_layout import global_strides
from ...model.tensor import TensorView
from ..ir import GlobalTensor


def global_layout(tv: TensorView) -> GlobalTensor:
    layout = global_strides(tv)
    if layout is None:  # LOWERING-SUPPORTED rejects it
        raise InternalError(f"{tv.name}: a global allocation domain that is not a permutation of the logical domain "
                            f"reached the code generator")
    return GlobalTensor(
        name=tv.name,
        dtype=tv.dtype,
        is_input=tv.is_fusion_input,
        extents=tuple(i.extent_expr for i in tv.logical),
        alloc_axes=layout.alloc_axes,
        strides=layout.strides,
        broadcast=tuple(i.is_broadcast for i in tv.logical),
    )
