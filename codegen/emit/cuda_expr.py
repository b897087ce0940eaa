"""The C++ renderer of the index algebra: the same Expr trees the verifier proved,
printed as CUDA C++ (64-bit unsigned arithmetic: every index is non-negative)."""

from __future__ import annotations

from typing import Callable, Mapping

from ...model.expr import Expr

CUDA: dict[str, Callable[..., str]] = {
    "add": lambda *a: "(" + " + ".join(a) + ")",
    "mul": lambda *a: "(" + " * ".join(a) + ")",
    "floordiv": lambda a, b: f"({a} / {b})",
    "ceildiv": lambda a, b: f"(({a} + {b} - 1) / {b})",
    "mod": lambda a, b: f"({a} % {b})",
    "xor": lambda a, b: f"({a} ^ {b})",
    "max": lambda *a: _max(list(a)),
}


def _max(args: list[str]) -> str:
    out = args[0]
    for a in args[1:]:
        out = f"max({out}, {a})"
    return out


def to_cuda(e: Expr, names: Mapping[str, str] | None = None, *, cast: bool = True) -> str:
    """C++ text of e; `names` maps algebra variables (threadIdx.x, T2.i7, N) to C++ identifiers.
    cast=False leaves variables bare, for callers whose variables are already 64-bit unsigned
    (or small builtins such as threadIdx.x, which the 64-bit constants promote)."""
    if e.op == "const":
        return f"{e.value}ULL"
    if e.op == "var":
        name = e.value if names is None else names.get(e.value, e.value)  # type: ignore[arg-type]
        return f"(unsigned long long)({name})" if cast else name
    return CUDA[e.op](*(to_cuda(a, names, cast=cast) for a in e.args))
