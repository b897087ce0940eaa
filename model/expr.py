"""The one index algebra: a small op-tagged expression tree.

Extents and indices are both `Expr`. The verifier renders them to z3, the code
generator to C++, reports to sympy; this module owns the op table and the
Python evaluator that the brute-force tests use. Division and modulo are
Euclidean (floor) on non-negative operands, which is what every index is.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Mapping, Union

import random

import sympy

from .notation import user_str

# op name -> arity (None: variadic). Every renderer must cover every op (tested).
OPS: dict[str, int | None] = {
    "const": 0,
    "var": 0,
    "add": None,
    "mul": None,
    "floordiv": 2,
    "ceildiv": 2,
    "mod": 2,
    "xor": 2,
    "max": None,
}


@dataclass(frozen=True)
class Expr:
    """An immutable node. `value` holds the int of a const or the name of a var."""

    op: str
    args: tuple["Expr", ...] = ()
    value: Union[int, str, None] = None
    _hash: int | None = field(default=None, compare=False, repr=False)
    def __hash__(self) -> int:  # cached: trees are hashed often as dict keys
        h = self._hash
        if h is None:
            h = hash((self.op, self.args, self.value))
            object.__setattr__(self, "_hash", h)
        return h

    def __deepcopy__(self, memo) -> "Expr":  # immutable: a snapshot (Fusion.snapshot) shares it
        return self

    # -- construction -------------------------------------------------------
    def __add__(self, other: "ExprLike") -> "Expr":
        return add(self, other)

    __radd__ = __add__

    def __sub__(self, other: "ExprLike") -> "Expr":
        return add(self, mul(as_expr(other), -1))

    def __mul__(self, other: "ExprLike") -> "Expr":
        return mul(self, other)

    __rmul__ = __mul__

    def __floordiv__(self, other: "ExprLike") -> "Expr":
        return floordiv(self, other)

    def __mod__(self, other: "ExprLike") -> "Expr":
        return mod(self, other)

    def __xor__(self, other: "ExprLike") -> "Expr":
        return xor(self, other)

    # -- inspection ----------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return self.op == "const"

    def const_value(self) -> int | None:
        return self.value if self.op == "const" else None  # type: ignore[return-value]

    def free_vars(self) -> frozenset[str]:
        if self.op == "var":
            return frozenset([self.value])  # type: ignore[list-item]
        out: frozenset[str] = frozenset()
        for a in self.args:
            out |= a.free_vars()
        return out

    def has_op(self, op: str) -> bool:
        return self.op == op or any(a.has_op(op) for a in self.args)

    def __str__(self) -> str:
        return expr_str(self)

    def __repr__(self) -> str:
        return f"Expr({self})"


ExprLike = Union[Expr, int]


def const(v: int) -> Expr:
    return Expr("const", (), int(v))


def var(name: str) -> Expr:
    return Expr("var", (), name)


def as_expr(x: ExprLike) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"expected an int or Expr, got {type(x).__name__} {x!r}")
    return const(x)


def add(*xs: ExprLike) -> Expr:
    terms: list[Expr] = []
    total = 0
    for x in xs:  # (the builders are the hottest code of a verify: op tests inline)
        if not isinstance(x, Expr):
            x = as_expr(x)
        for p in (x.args if x.op == "add" else (x,)):
            if p.op == "const":
                total += p.value  # type: ignore[operator]
            else:
                terms.append(p)
    if total:
        terms.append(const(total))
    if not terms:
        return const(0)
    return terms[0] if len(terms) == 1 else Expr("add", tuple(terms))


def mul(*xs: ExprLike) -> Expr:
    factors: list[Expr] = []
    coeff = 1
    for x in xs:
        if not isinstance(x, Expr):
            x = as_expr(x)
        for p in (x.args if x.op == "mul" else (x,)):
            if p.op == "const":
                coeff *= p.value  # type: ignore[operator]
            else:
                factors.append(p)
    if coeff == 0:
        return const(0)
    if coeff != 1:
        factors.append(const(coeff))
    if not factors:
        return const(1)
    return factors[0] if len(factors) == 1 else Expr("mul", tuple(factors))


def floordiv(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if b.is_const and b.value == 1:
        return a
    if a.is_const and b.is_const and b.value:
        return const(a.value // b.value)  # type: ignore[operator]
    if a.is_const and a.value == 0:
        return a
    return Expr("floordiv", (a, b))


def ceildiv(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if b.is_const and b.value == 1:
        return a
    if a.is_const and b.is_const and b.value:
        return const(-(-a.value // b.value))  # type: ignore[operator]
    return Expr("ceildiv", (a, b))


def mod(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if b.is_const and b.value == 1:
        return const(0)
    if a.is_const and b.is_const and b.value:
        return const(a.value % b.value)  # type: ignore[operator]
    if a.is_const and a.value == 0:
        return a
    return Expr("mod", (a, b))


def xor(a: ExprLike, b: ExprLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    if a.is_const and b.is_const:
        return const(a.value ^ b.value)  # type: ignore[operator]
    if a.is_const and a.value == 0:
        return b
    if b.is_const and b.value == 0:
        return a
    return Expr("xor", (a, b))


def maximum(*xs: ExprLike) -> Expr:
    items: list[Expr] = []
    for x in map(as_expr, xs):
        if x not in items:
            items.append(x)
    consts = [x.value for x in items if x.is_const]
    rest = [x for x in items if not x.is_const]
    if consts:
        rest.append(const(max(consts)))  # type: ignore[type-var]
    return rest[0] if len(rest) == 1 else Expr("max", tuple(rest))


def product(xs) -> Expr:
    return mul(*xs) if xs else const(1)


def substitute(e: Expr, env: Mapping[str, Expr]) -> Expr:
    """Replace vars by expressions, re-simplifying on the way up."""
    if e.op == "var":
        return env.get(e.value, e)  # type: ignore[arg-type]
    if e.op == "const":
        return e
    args = [substitute(a, env) for a in e.args]
    return BUILDERS[e.op](*args)


# op -> its builder: the node over given arguments, constants folded (simplify.py rebuilds with it)
BUILDERS: dict[str, Callable[..., Expr]] = {
    "add": add,
    "mul": mul,
    "floordiv": floordiv,
    "ceildiv": ceildiv,
    "mod": mod,
    "xor": xor,
    "max": maximum,
}

# -- renderer: Python ints (the brute-force oracle and concrete evaluation) --

PY_EVAL: dict[str, Callable[..., int]] = {
    "add": lambda *a: sum(a),
    "mul": lambda *a: _prod(a),
    "floordiv": lambda a, b: a // b,
    "ceildiv": lambda a, b: -(-a // b),
    "mod": lambda a, b: a % b,
    "xor": lambda a, b: a ^ b,
    "max": lambda *a: max(a),
}


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def evaluate(e: Expr, env: Mapping[str, int]) -> int:
    if e.op == "const":
        return e.value  # type: ignore[return-value]
    if e.op == "var":
        try:
            return env[e.value]  # type: ignore[index]
        except KeyError:
            raise KeyError(f"no value for variable {e.value!r}") from None
    return PY_EVAL[e.op](*(evaluate(a, env) for a in e.args))


# -- renderer: Python source (evaluate, compiled once per expression, for enumerations) --------

PY_SOURCE: dict[str, Callable[..., str]] = {
    "add": lambda *a: "(" + " + ".join(a) + ")",
    "mul": lambda *a: "(" + " * ".join(a) + ")",
    "floordiv": lambda a, b: f"({a} // {b})",
    "ceildiv": lambda a, b: f"(-(-{a} // {b}))",
    "mod": lambda a, b: f"({a} % {b})",
    "xor": lambda a, b: f"({a} ^ {b})",
    "max": lambda *a: f"max({', '.join(a)})",
}
_MAX_COMPILED_DEPTH = 60  # Python's parser takes about 200 nested parentheses


def _py_source(e: Expr) -> str:
    if e.op == "const":
        return f"({e.value})"
    if e.op == "var":
        return f"env[{e.value!r}]"
    return PY_SOURCE[e.op](*(_py_source(a) for a in e.args))


def _depth(e: Expr) -> int:
    return 1 + max((_depth(a) for a in e.args), default=0)


@functools.lru_cache(maxsize=4096)
def compiled(e: Expr) -> Callable[[Mapping[str, int]], int]:
    """`evaluate(e, env)` as one Python function made once per expression (a loop over lanes
    evaluates the same indices thousands of times): the same value, the same operands evaluated
    in the same order, the same errors."""
    if _depth(e) > _MAX_COMPILED_DEPTH:
        return lambda env: evaluate(e, env)
    fast = eval(f"lambda env: {_py_source(e)}", {"max": max})  # noqa: S307 - source built from an Expr alone

    def run(env: Mapping[str, int]) -> int:
        try:
            return fast(env)
        except KeyError as missing:
            raise KeyError(f"no value for variable {missing.args[0]!r}") from None

    return run


def try_int(e: Expr) -> int | None:
    """The value of an expression without free variables, else None."""
    return evaluate(e, {}) if not e.free_vars() else None


# -- renderer: sympy (printing and simple algebra in reports) -----------------


def _sym(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


SYMPY: dict[str, Callable[..., sympy.Expr]] = {
    "add": lambda *a: sympy.Add(*a),
    "mul": lambda *a: sympy.Mul(*a),
    "floordiv": lambda a, b: sympy.floor(a / b),
    "ceildiv": lambda a, b: sympy.ceiling(a / b),
    "mod": lambda a, b: sympy.Mod(a, b),
    "xor": lambda a, b: sympy.Function("xor")(a, b),
    "max": lambda *a: sympy.Max(*a),
}


def to_sympy(e: Expr) -> sympy.Expr:
    if e.op == "const":
        return sympy.Integer(e.value)
    if e.op == "var":
        return _sym(e.value)  # type: ignore[arg-type]
    return SYMPY[e.op](*(to_sympy(a) for a in e.args))


def from_sympy(s) -> Expr:
    """Convert a sympy extent (symbols, ints, +, *, floor/ceiling of a quotient, Mod)."""
    s = sympy.sympify(s)
    if s.is_Integer:
        return const(int(s))
    if s.is_Symbol:
        return var(s.name)
    if s.is_Add:
        return add(*(from_sympy(a) for a in s.args))
    if s.is_Mul:
        num, den = s.as_numer_denom()
        if den != 1:
            raise ValueError(f"extent {s} is not an integer expression")
        return mul(*(from_sympy(a) for a in s.args))
    if isinstance(s, sympy.Mod):
        return mod(from_sympy(s.args[0]), from_sympy(s.args[1]))
    if isinstance(s, (sympy.floor, sympy.ceiling)):
        num, den = s.args[0].as_numer_denom()
        build = floordiv if isinstance(s, sympy.floor) else ceildiv
        return build(from_sympy(num), from_sympy(den))
    if isinstance(s, sympy.Max):
        return maximum(*(from_sympy(a) for a in s.args))
    if isinstance(s, sympy.Pow) and s.exp.is_Integer and s.exp > 0:
        return mul(*([from_sympy(s.base)] * int(s.exp)))
    raise ValueError(f"unsupported expression {s} (allowed: ints, symbols, + * // % ceiling max)")


# Python's binding strength of what an Expr op prints as (higher binds tighter)
_LEVEL = {"add": 40, "mul": 50, "floordiv": 50, "mod": 50, "xor": 20}


_INFIX = {"mul": "*", "floordiv": " // ", "mod": " % ", "xor": " ^ "}


@functools.lru_cache(maxsize=8192)
def expr_str(e) -> str:
    """An index-algebra Expr as Python: sympy's simplified form where it keeps the value, else
    printed from the Expr's own tree (sympy rewrites some nested Mod/floor terms wrongly).
    Remembered: an Expr never changes, and its text is asked for again (IterDomain labels, the
    keys of the ID map, messages)."""
    simple = to_sympy(e)
    names = sorted(e.free_vars())
    rng = random.Random(len(names))
    for _ in range(4):
        env = {n: rng.randrange(1, 1000) for n in names}
        try:
            same = simple.subs({x: env[x.name] for x in simple.free_symbols}) == evaluate(e, env)
        except (ZeroDivisionError, TypeError):
            same = False
        if not same:
            return _expr(e)[0]
    return user_str(simple)


def _expr(e) -> tuple[str, int]:
    op = e.op
    if op == "const":
        return str(e.value), (100 if e.value >= 0 else 45)
    if op == "var":
        return str(e.value), 100
    if op == "ceildiv":
        return f"ceil({_side(e.args[0], 50)} / {_side(e.args[1], 51)})", 100
    if op == "max":
        return f"max({', '.join(_expr(a)[0] for a in e.args)})", 100
    level = _LEVEL[op]
    if op == "add":
        parts = [_side(e.args[0], level)]
        for a in e.args[1:]:
            if a.op == "const" and a.value < 0:
                parts.append(f" - {-a.value}")
            else:
                parts.append(f" + {_side(a, level)}")
        return "".join(parts), level
    sep = _INFIX[op]
    if op == "mul":  # a product reads (c % 128)*6, not c % 128*6 (the same to Python)
        return sep.join(_side(a, level + 1 if a.op in ("mod", "floordiv") else level) for a in e.args), level
    return sep.join([_side(e.args[0], level)] + [_side(a, level + 1) for a in e.args[1:]]), level


def _side(e, level: int) -> str:
    text, own = _expr(e)
    return f"({text})" if own < level else text
