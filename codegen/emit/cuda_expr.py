"""The C++ renderer of the index algebra: the same Expr trees the verifier proved,
printed as CUDA C++ (unsigned arithmetic, 64-bit or where proved enough 32-bit: every index
is non-negative)."""

from __future__ import annotations

from typing import Callable, Mapping

from collections import Counter

from ...model.expr import Expr, add

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


def to_cuda(e: Expr, names: Mapping[str, str] | None = None, *, cast: bool = True, bits: int = 64) -> str:
    """C++ text of e; `names` maps algebra variables (threadIdx.x, T2.i7, N) to C++ identifiers.
    cast=False leaves variables bare, for callers whose variables are already unsigned of the
    width `bits` (or small builtins such as threadIdx.x, which the constants promote). bits=32
    only where codegen/lower/index_width.py proved every value below 2^32."""
    if e.op == "const":
        return f"{e.value}{'U' if bits == 32 else 'ULL'}"
    if e.op == "var":
        name = e.value if names is None else names.get(e.value, e.value)  # type: ignore[arg-type]
        return f"({INDEX_TYPES[bits]})({name})" if cast else name
    low = _min_of(e)
    if low is not None:  # the same value, read as what it is
        return f"min({to_cuda(low[0], names, cast=cast, bits=bits)}, {to_cuda(low[1], names, cast=cast, bits=bits)})"
    return CUDA[e.op](*(to_cuda(a, names, cast=cast, bits=bits) for a in e.args))


def _min_of(e: Expr) -> tuple[Expr, Expr] | None:
    """(a, b) where e is a + b - max(a, b), the index algebra's min(a, b) (it has max only: a
    skipped loop's trip count min(extent, count), execution/skip.py); unsigned, the sum and the
    difference wrap to min(a, b) exactly, so the two print the same value. Else None."""
    if e.op != "add":
        return None
    for k, term in enumerate(e.args):
        if term.op != "mul" or len(term.args) != 2:
            continue
        factors = {f.op: f for f in term.args}
        top, minus = factors.get("max"), factors.get("const")
        if top is None or minus is None or minus.value != -1 or len(top.args) != 2:
            continue
        rest = add(*(e.args[:k] + e.args[k + 1:]))
        if Counter(_terms(rest)) == Counter(_terms(add(*top.args))):
            return top.args
    return None


def _terms(e: Expr) -> tuple[Expr, ...]:
    return e.args if e.op == "add" else (e,)


INDEX_TYPES = {32: "unsigned", 64: "unsigned long long"}
SIGNED = {"add", "mul", "max"}  # the ops of an extent an op takes as a value (model/ops.py EXTENT_VALUE_OPS)


def to_signed_cuda(e: Expr, names: Mapping[str, str] | None = None) -> str:
    """C++ text of e in signed 64-bit arithmetic (long long), for an extent an op takes as a
    value (`max(N - 1, 0)` of var_mean goes below 0 on the way, where unsigned would wrap)."""
    if e.op == "const":
        return f"({e.value}LL)" if e.value < 0 else f"{e.value}LL"  # type: ignore[operator]
    if e.op == "var":
        name = e.value if names is None else names.get(e.value, e.value)  # type: ignore[arg-type]
        return f"(long long)({name})"
    if e.op not in SIGNED:
        raise ValueError(f"{e.op} is not an op of an extent value")
    args = [to_signed_cuda(a, names) for a in e.args]
    return CUDA[e.op](*args)
