"""tp.as_torch_op: a compiled Kernel (or a recipe entry) as a PyTorch operator (torch.library),
with a fake implementation that gives the outputs' shapes, dtypes and strides from the inputs'
without running anything, so that torch.compile(fullgraph=True) traces through it and CUDA
graphs capture it.

    op = tp.as_torch_op(kernel, name="mylib::add")   # op(a, b) -> out; torch.ops.mylib.add too
    torch.compile(lambda a, b: op(a, b) * 2, fullgraph=True)

The operator is defined with torch.library.Library (define, impl for CUDA and CPU, register_fake),
the route with the least Python between the call and Kernel.run; CPU tensors reach Kernel.run and
get its InputError. The fake implementation maps each extent symbol to the input axis that binds
it, as run()'s binding does (codegen/runtime/binding.py), so under dynamic shapes the outputs'
extents are the inputs' symbolic sizes; it checks dtypes, dimensions and equal extents with
run()'s messages. PyTorch is imported only when an operator is made: the package imports without it.

A recipe entry is any object with `input_names` (the operator's tensor arguments), `output_count`,
`__call__(*tensors)` returning the outputs (a tensor or a tuple) and `fake(*tensors)` returning new
tensors of their shapes (tileproof.recipes.Matmul). Imports model/ and codegen/ (the Kernel, its IR, the binding's
labels).
"""

from __future__ import annotations

import hashlib
import keyword
import re

from ..model.expr import PY_EVAL, Expr
from .compile import Kernel
from .errors import InputError
from .ir import GlobalTensor
from .runtime.binding import argument_label

NAMESPACE = "tileproof"
_libraries: dict[str, object] = {}  # namespace -> its torch.library.Library (kept alive: it owns the ops)
_ops: dict[str, tuple[object, object]] = {}  # qualified name -> (source, the operator)


def _torch():
    try:
        import torch  # an optional extra: imported only when an operator is made
    except ImportError as e:
        raise ImportError(f"tp.as_torch_op needs PyTorch ({e}); tileproof itself runs without it") from None
    return torch


class KernelOp:
    """A Kernel as the parts of an operator: its inputs, run() for the real call, and the fake
    implementation from its IR's global tensors."""

    def __init__(self, kernel: Kernel, sizes: dict[str, int]):
        self.kernel = kernel
        self.sizes = dict(sizes)
        self.inputs = [g for g in kernel.ir.globals if g.is_input]
        self.outputs = [g for g in kernel.ir.globals if not g.is_input]
        self.input_names = schema_names(self.inputs)
        self.output_count = len(self.outputs)
        bound = set(self.sizes) | {e.value for g in self.inputs for e in g.extents if e.op == "var"}
        unknown = sorted({s for g in self.outputs for e in g.extents for s in _symbols(e)} - bound)
        if unknown:
            raise InputError(f"as_torch_op: the outputs' extent(s) {', '.join(unknown)} are not set by any input "
                             f"shape; pass them, e.g. tp.as_torch_op(kernel, {unknown[0]}=...)")

    def __call__(self, *tensors):
        tensors = [t.detach() if t.requires_grad else t for t in tensors]
        return self.kernel.run(*tensors, **self.sizes)

    def fake(self, *tensors):
        torch = _torch()
        env: dict[str, object] = dict(self.sizes)
        origin: dict[str, str] = {}
        for k, (g, t) in enumerate(zip(self.inputs, tensors)):
            _check_fake_input(torch, g, t, k, env, origin)
        result = []
        for g in self.outputs:
            shape = [_evaluate(torch, e, env) for e in g.extents]
            result.append(torch.empty_strided(shape, _dense_strides(torch, g, shape), dtype=getattr(torch, g.dtype.name),
                                              device=tensors[0].device if tensors else "cuda"))
        return tuple(result)


def schema_names(inputs: list[GlobalTensor]) -> tuple[str, ...]:
    """The operator's argument names: an input's make_tensor(name=) where it is a Python
    identifier that is no keyword (so op(x=...) works) and no other input takes it, else T<n>."""
    wanted = [g.user_name if g.user_name and g.user_name.isidentifier() and not keyword.iskeyword(g.user_name)
              else None for g in inputs]
    taken = {g.name for g in inputs}
    out = []
    for g, name in zip(inputs, wanted):
        ok = name is not None and wanted.count(name) == 1 and name not in taken - {g.name}
        out.append(name if ok else g.name)
    return tuple(out)


def _symbols(e: Expr) -> set[str]:
    if e.op == "var":
        return {e.value}
    return set().union(*(_symbols(a) for a in e.args)) if e.op != "const" else set()


def _evaluate(torch, e: Expr, env: dict):
    """An extent at the inputs' sizes, which may be symbolic (SymInt): max as torch.sym_max, so
    that no comparison becomes a guard."""
    if e.op == "const":
        return e.value
    if e.op == "var":
        return env[e.value]
    args = [_evaluate(torch, a, env) for a in e.args]
    if e.op == "max":
        out = args[0]
        for a in args[1:]:
            out = torch.sym_max(out, a)
        return out
    return PY_EVAL[e.op](*args)


def _dense_strides(torch, g: GlobalTensor, shape) -> list:
    """Element strides of a dense array in g's allocation order (what run() allocates)."""
    strides = [0] * len(shape)
    running = 1
    for axis in reversed(g.alloc_axes):
        strides[axis] = running
        running = running * torch.sym_max(shape[axis], 1)
    return strides


def _check_fake_input(torch, g: GlobalTensor, t, position: int, env: dict, origin: dict) -> None:
    """run()'s checks that need no data: dtype, dimensions, and each extent bound or equal (under
    torch._check where a size is symbolic)."""
    label = argument_label(g, position)
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype != g.dtype.name:
        raise InputError(f"{label}: expected dtype {g.dtype}, got {dtype}")
    if t.dim() != len(g.extents):
        raise InputError(f"{label}: expected {len(g.extents)} dimensions, got shape {list(t.shape)}")
    for axis, (extent, size) in enumerate(zip(g.extents, t.shape)):
        if extent.op == "var" and extent.value not in env:
            env[extent.value], origin[extent.value] = size, f"{label} axis {axis}"
            continue
        if any(s not in env for s in _symbols(extent)):
            continue
        want = _evaluate(torch, extent, env)
        source = f" (bound to {want} by {origin[extent.value]})" if extent.op == "var" and extent.value in origin else ""
        message = f"{label}: axis {axis} has size {size}, expected {extent}{source}"
        if isinstance(size, int) and isinstance(want, int):
            if size != want:
                raise InputError(message)
        else:
            torch._check(size == want, lambda: message)


def _source(kernel_or_recipe, sizes: dict[str, int]):
    if isinstance(kernel_or_recipe, Kernel):
        return KernelOp(kernel_or_recipe, sizes)
    parts = ("input_names", "output_count", "fake")
    if all(hasattr(kernel_or_recipe, p) for p in parts) and callable(kernel_or_recipe):
        if sizes:
            raise InputError("as_torch_op: sizes are given to a recipe entry when it is made, not here")
        return kernel_or_recipe
    raise InputError(f"as_torch_op: expected a tp.Kernel (tp.compile's result) or a recipe entry (such as "
                     f"tileproof.recipes.Matmul), got {type(kernel_or_recipe).__name__}")


def _qualified(name: str | None, source) -> tuple[str, str]:
    if name is None:
        kernel = getattr(source, "kernel", None)
        base = kernel.name if kernel is not None else type(source).__name__.lower()
        digest = hashlib.sha1(kernel.cubin if kernel is not None else repr(source).encode()).hexdigest()[:8]
        name = f"{base}_{digest}"
    namespace, _, op = name.rpartition("::")
    namespace = namespace or NAMESPACE
    for part, what in ((namespace, "namespace"), (op, "name")):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            raise InputError(f"as_torch_op: the operator's {what} must be an identifier, got {part!r} "
                             f"(name='namespace::op' or 'op')")
    return namespace, op


def as_torch_op(kernel_or_recipe, name: str | None = None, **sizes: int):
    """A PyTorch operator running `kernel_or_recipe` (a compiled tp.Kernel, or a recipe entry such as
    tileproof.recipes.Matmul) on CUDA tensors, returning new output tensors (one Tensor, or a tuple
    for several outputs). `name`: "namespace::op" or "op" (namespace "tileproof"; default: the
    kernel's name and a hash of its cubin); the operator is also torch.ops.<namespace>.<op>.
    `sizes`: extents that no input shape sets, fixed for the operator. Making the same name again
    for the same kernel returns the same operator."""
    torch = _torch()
    source = _source(kernel_or_recipe, sizes)
    namespace, op = _qualified(name, source)
    qualified = f"{namespace}::{op}"
    known = _ops.get(qualified)
    if known is not None:
        same = known[0] is kernel_or_recipe or (isinstance(known[0], KernelOp) and known[0].kernel is kernel_or_recipe
                                                and known[0].sizes == sizes)
        if not same:
            raise InputError(f"as_torch_op: {qualified} already names an operator of another kernel; choose "
                             f"another name")
        return known[1]
    library = _libraries.get(namespace)
    if library is None:
        library = _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
    returns = "Tensor" if source.output_count == 1 else "(" + ", ".join(["Tensor"] * source.output_count) + ")"
    library.define(f"{op}(" + ", ".join(f"Tensor {n}" for n in source.input_names) + f") -> {returns}")

    one = source.output_count == 1

    def impl(*tensors):
        result = source(*tensors)
        if isinstance(result, torch.Tensor):
            return result
        return result[0] if one else tuple(result)

    def fake(*tensors):
        result = source.fake(*tensors)
        if isinstance(result, torch.Tensor):
            return result
        return result[0] if one else tuple(result)

    for key in ("CUDA", "CPU"):  # CPU: run()'s InputError, not the dispatcher's "no kernel"
        library.impl(op, impl, key)
    torch.library.register_fake(qualified, fake, lib=library)
    operator = getattr(getattr(torch.ops, namespace), op).default
    _ops[qualified] = (source, operator)
    return operator


__all__ = ["KernelOp", "as_torch_op", "schema_names"]
