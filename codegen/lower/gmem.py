"""Global tensors as run() binds them: the layout of model/global_layout.py (strides from
contiguity, run-time strides for discontiguous axes) plus what the launch checks, over the
axes of the tensor's shape (a reduction's output has no array axis for a reduced axis)."""

from __future__ import annotations

from ...model.errors import InternalError
from ...model.global_layout import global_strides
from ...model.producer_aliases import view_source
from ...model.reduction import element_axes
from ...model.tensor import TensorView
from ..ir import GlobalTensor


def global_layout(tv: TensorView) -> GlobalTensor:
    layout = global_strides(tv)
    if layout is None:  # LOWERING-SUPPORTED rejects it
        raise InternalError(f"{tv.name}: a global allocation domain that is not a permutation of the logical domain "
                            f"reached the code generator")
    shape = element_axes(tv)  # a reduction's output array drops its reduced axes (stride 0, never indexed)
    at = {axis: k for k, axis in enumerate(shape)}
    kept = [k for k, axis in enumerate(layout.alloc_axes) if axis in at]
    return GlobalTensor(
        name=tv.name,
        dtype=tv.dtype,
        is_input=tv.is_fusion_input,
        extents=tuple(tv.logical[axis].extent_expr for axis in shape),
        alloc_axes=tuple(at[layout.alloc_axes[k]] for k in kept),
        strides=tuple(layout.strides[k] for k in kept),
        broadcast=tuple(tv.logical[axis].is_broadcast for axis in shape),
        user_name=tv.user_name,
        view_of=view_source(tv).name if tv.name in tv.fusion.views else None,
    )
