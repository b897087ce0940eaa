"""Binding run() arguments to a kernel: every mismatch is an InputError naming the input.

Extent symbols are bound from the input shapes (and from `out=` arrays and keyword
sizes); discontiguous strides from the arrays; then the fusion's assumptions must hold,
because the proof only covers sizes that satisfy them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sympy

from ...model.expr import Expr, evaluate
from ...model.notation import user_str
from ...model.fusion import symbol_range
from .arrays import ArrayInfo, describe
from ..errors import InputError
from ..ir import GlobalTensor


@dataclass
class Bound:
    """The checked arguments of one launch."""

    env: dict[str, int]  # extent symbols and stride variables
    inputs: list[ArrayInfo]
    outputs: list[ArrayInfo | None]  # None: run() allocates it
    device_id: int | None


def argument_label(g: GlobalTensor, position: int) -> str:
    role = "input" if g.is_input else "output"
    return f"{role} {g.shown} (argument {position})" if g.is_input else f"{role} {g.shown} (out[{position}])"


def read(g: GlobalTensor, obj, position: int, stream: int | None) -> ArrayInfo:
    try:
        info = describe(obj, stream)
    except TypeError as e:
        raise InputError(f"{argument_label(g, position)}: {e}") from None
    except (BufferError, RuntimeError, ValueError) as e:  # the exporter refused (e.g. requires_grad)
        raise InputError(f"{argument_label(g, position)}: cannot read the array ({e})") from None
    if info.dtype != g.dtype.name:
        raise InputError(f"{argument_label(g, position)}: expected dtype {g.dtype}, got {info.dtype}")
    if len(info.shape) != len(g.extents):
        raise InputError(f"{argument_label(g, position)}: expected {len(g.extents)} dimensions, got shape {list(info.shape)}")
    return info


def bind_shape(g: GlobalTensor, info: ArrayInfo, position: int, env: dict[str, int], origin: dict[str, str]) -> None:
    """Bind or check each logical extent against the array's shape."""
    for axis, (extent, size) in enumerate(zip(g.extents, info.shape)):
        if extent.op == "var" and extent.value not in env:
            env[extent.value] = int(size)  # type: ignore[index]
            origin[extent.value] = f"{argument_label(g, position)} axis {axis}"  # type: ignore[index]
            continue
        want = _value(extent, env)
        if want is not None and want != size:
            source = f" (bound to {want} by {origin[extent.value]})" if extent.op == "var" else ""
            raise InputError(f"{argument_label(g, position)}: axis {axis} has size {size}, expected {extent}{source}"
                             f"{_one_extent(extent, origin)}")


def _one_extent(extent: Expr, origin: dict[str, str]) -> str:
    """Why an axis bound by another array must match it: the ops map both axes to one extent
    (model/extent_unification.py), or the shapes name one symbol."""
    if extent.op != "var" or extent.value not in origin or origin[extent.value].startswith("the keyword"):
        return ""
    return (f"; both axes have the one extent {extent} (the fusion's ops map them onto one another, as "
            f"nvFuser's exact map does, or its shapes name one symbol), so their sizes must be equal")


def bind_strides(g: GlobalTensor, info: ArrayInfo, position: int, env: dict[str, int]) -> None:
    """Bind discontiguous strides; contiguous axes must have the stride the kernel assumes.
    Inner axes first: a contiguous axis's stride is built from the next inner one's. A size-1
    axis is only indexed at 0, so its own stride says nothing (PyTorch gives such an axis any
    stride): a discontiguous one's stride variable is bound from the next outer axis built from it
    (that axis's stride is the variable times the size-1 extents between), or where no axis is,
    to the stride a dense array would have there (never used in addressing; a TMA map checks it)."""
    pending: list[tuple[str, int]] = []  # size-1 axes' unbound stride variables, each with its dense stride
    span = 1  # the elements the axes inside this one span
    for k, axis in reversed(list(enumerate(g.alloc_axes))):
        if g.broadcast[axis]:
            continue  # never indexed with anything but 0
        stride = g.strides[k]
        actual = info.strides[axis]
        unbound = stride.op == "var" and stride.value not in env
        if info.shape[axis] == 1:
            if unbound:
                pending.append((stride.value, span))
            continue  # never indexed with anything but 0
        if unbound:
            _bind_stride(g, position, axis, stride.value, actual, env)
        else:
            want = _value(stride, env)
            if want is None and pending:  # built from the last size-1 axis's stride: this axis's stride binds it
                name, _ = pending.pop()
                per_unit = _value(stride, {**env, name: 1})
                if per_unit and actual % per_unit == 0:
                    _bind_stride(g, position, axis, name, actual // per_unit, env)
                    want = actual
            if want != actual:
                raise InputError(
                    f"{argument_label(g, position)}: axis {axis} has stride {actual}, expected {want}: the fusion "
                    f"declares it contiguous; pass a contiguous array (e.g. .contiguous()) or declare the axis "
                    f"discontiguous")
        span = actual * info.shape[axis]
    for name, dense in pending:
        env[name] = dense


def _bind_stride(g: GlobalTensor, position: int, axis: int, name: str, actual: int, env: dict[str, int]) -> None:
    """Bind a discontiguous stride variable to `actual`, the stride of array axis `axis`."""
    if actual <= 0:
        raise InputError(f"{argument_label(g, position)}: axis {axis} has stride {actual}; tileproof needs positive strides")
    env[name] = actual
    if g.vector_elements > 1 and actual % g.vector_elements:
        raise InputError(f"{argument_label(g, position)}: axis {axis} has stride {actual}, not a multiple of "
                         f"{g.vector_elements} elements, which the kernel's vector accesses need")


def check_alignment(g: GlobalTensor, info: ArrayInfo, position: int) -> None:
    need = g.dtype.bytes * g.vector_elements
    if info.ptr % need:
        raise InputError(f"{argument_label(g, position)}: its address is not {need}-byte aligned, which the kernel's "
                         f"{g.vector_elements}-element vector accesses need (pass a fresh or .clone()d array)")


def check_device(g: GlobalTensor, info: ArrayInfo, position: int, device_id: int | None) -> int | None:
    if info.device != "cuda":
        raise InputError(f"{argument_label(g, position)}: the array is in {info.device} memory; move it to the GPU "
                         f"(e.g. tensor.cuda())")
    if device_id is not None and info.device_id is not None and info.device_id != device_id:
        raise InputError(f"{argument_label(g, position)}: on GPU {info.device_id}, but earlier arguments are on GPU {device_id}")
    return device_id if info.device_id is None else info.device_id


def check_assumptions(assumptions: list[sympy.Basic], env: dict[str, int], symbols: list[str] = ()) -> None:
    """The sizes are ones the proof covers: every extent symbol within the admitted range
    (symbol_range) and every assumption true."""
    for name in symbols:
        lo, hi = symbol_range()
        if name in env and not lo <= env[name] <= hi:
            raise InputError(f"extent {name} = {env[name]} is outside {lo} .. {hi}, the sizes the schedule was "
                             f"proved for (32-bit indexing); split the problem or use smaller sizes")
    for a in assumptions:
        subs = {s: env[s.name] for s in a.free_symbols if s.name in env}
        if sympy.simplify(a.subs(subs)) is not sympy.true:
            sizes = ", ".join(f"{s.name} = {env[s.name]}" for s in a.free_symbols if s.name in env)
            raise InputError(f"sizes {sizes} violate the assumption {user_str(a)} under which the schedule was proved; "
                             f"use sizes that satisfy it")


def check_no_alias(inputs: list, outputs: list) -> None:
    """No output at an input's address (each has .ptr: an ArrayInfo)."""
    for k, o in enumerate(outputs):
        for j, i in enumerate(inputs):
            if o.ptr == i.ptr:
                raise InputError(f"out[{k}] is the same memory as input argument {j}; the kernel reads inputs "
                                 f"while writing outputs, so they must not overlap")


def _value(e: Expr, env: dict[str, int]) -> int | None:
    try:
        return evaluate(e, env)
    except KeyError:
        return None


def bind(globals_: list[GlobalTensor], inputs, out, sizes: dict[str, int], symbols: list[str],
         stream: int | None, views: list[GlobalTensor] = ()) -> Bound:
    """Check the arguments and bind the sizes (the assumptions are checked by the caller,
    once per distinct size). `views`: tensors read as views of inputs (KernelIR.views), given
    their input's pointer, which must be aligned for their vector accesses too."""
    ins = [g for g in globals_ if g.is_input]
    outs = [g for g in globals_ if not g.is_input]
    if len(inputs) != len(ins):
        raise InputError(f"the fusion takes {len(ins)} inputs ({', '.join(g.shown for g in ins)}), got {len(inputs)}")
    if out is not None and len(out) != len(outs):
        raise InputError(f"the fusion has {len(outs)} outputs ({', '.join(g.shown for g in outs)}), out= has {len(out)}")
    env, origin = _sizes(sizes, symbols)
    infos = [read(g, obj, k, stream) for k, (g, obj) in enumerate(zip(ins, inputs))]
    out_infos = [read(g, obj, k, stream) for k, (g, obj) in enumerate(zip(outs, out))] if out is not None else []
    for k, (g, info) in enumerate(zip(ins, infos)):
        bind_shape(g, info, k, env, origin)
    for k, (g, info) in enumerate(zip(outs, out_infos)):
        bind_shape(g, info, k, env, origin)
    missing = [s for s in symbols if s not in env]
    if missing:
        raise InputError(f"extent(s) {', '.join(missing)} are not set by any input shape; pass them, "
                         f"e.g. kernel.run(..., {missing[0]}=...)")
    for group, infos_ in ((ins, infos), (outs, out_infos)):
        for k, (g, info) in enumerate(zip(group, infos_)):
            bind_strides(g, info, k, env)
    device_id = None
    for group, infos_ in ((ins, infos), (outs, out_infos)):
        for k, (g, info) in enumerate(zip(group, infos_)):
            device_id = check_device(g, info, k, device_id)
            check_alignment(g, info, k)
    for v in views:
        k = next(k for k, g in enumerate(ins) if g.name == v.view_of)
        check_alignment(replace(ins[k], vector_elements=v.vector_elements), infos[k], k)
    return Bound(env, infos, out_infos or [None] * len(outs), device_id)


def _sizes(sizes: dict[str, int], symbols: list[str]) -> tuple[dict[str, int], dict[str, str]]:
    env, origin = {}, {}
    for name, value in sizes.items():
        if name not in symbols:
            raise InputError(f"unknown extent {name!r}; the fusion's extents are: {', '.join(symbols) or 'none'}")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"extent {name} must be a positive int, got {value!r}")
        env[name], origin[name] = value, f"the keyword {name}={value}"
    return env, origin
