"""Sizes and assumptions printed the way a user writes them in Python.

sympy's str() shows `Eq(Mod(M*N, 4), 0)` and `ceiling(ceiling(M*N/4)/128)`; reports, JSON and
run-time errors show `M*N % 4 == 0` and `ceil(ceil(M*N / 4) / 128)` instead. One printer for
every place a symbolic size reaches a user.
"""

from __future__ import annotations

import functools

import sympy
from sympy.printing.precedence import PRECEDENCE, precedence
from sympy.printing.str import StrPrinter


class _UserPrinter(StrPrinter):
    def _operand(self, e, level: int) -> str:
        text = self._print(e)
        return f"({text})" if precedence(e) < level else text

    def _print_Mod(self, e) -> str:
        level = PRECEDENCE["Mul"]
        return f"{self._operand(e.args[0], level)} % {self._operand(e.args[1], level + 1)}"

    def _print_Equality(self, e) -> str:
        return f"{self._print(e.lhs)} == {self._print(e.rhs)}"

    def _print_Unequality(self, e) -> str:
        return f"{self._print(e.lhs)} != {self._print(e.rhs)}"

    def _print_Function(self, e) -> str:
        if str(e.func) == "xor" and len(e.args) == 2:  # model/expr.py's XOR swizzle, as Python writes it
            level = PRECEDENCE["Add"] - 1
            return f"({self._operand(e.args[0], level)} ^ {self._operand(e.args[1], level)})"
        return super()._print_Function(e)

    def _print_Max(self, e) -> str:
        return f"max({', '.join(self._print(a) for a in e.args)})"

    def _quotient(self, arg) -> tuple[str, str] | None:
        """(numerator, denominator) of a division, as the user wrote it, or None."""
        num, den = sympy.fraction(sympy.together(arg))
        if den == 1:
            return None
        level = PRECEDENCE["Mul"]
        return self._operand(num, level), self._operand(den, level + 1)

    def _print_ceiling(self, e) -> str:
        q = self._quotient(e.args[0])
        return f"ceil({q[0]} / {q[1]})" if q else f"ceil({self._print(e.args[0])})"

    def _print_floor(self, e) -> str:
        q = self._quotient(e.args[0])  # parenthesized: sympy ranks floor as a function, above *
        return f"({q[0]} // {q[1]})" if q else f"floor({self._print(e.args[0])})"


_PRINTER = _UserPrinter()



def user_str(e) -> str:
    """`e` (sympy, int or anything sympify takes) as Python source a user would write."""
    try:
        return _remembered(e)
    except TypeError:  # not hashable: printed each time
        return _user_str(e)


@functools.lru_cache(maxsize=8192, typed=True)
def _remembered(e) -> str:
    """user_str of a hashable value, printed once (every IterDomain label prints its extent;
    equal sympy expressions print alike, and `typed` keeps 2 and 2.0 apart)."""
    return _user_str(e)


def _user_str(e) -> str:
    text = _PRINTER.doprint(sympy.sympify(e))
    return text[1:-1] if _wrapped(text) else text


def _wrapped(text: str) -> bool:
    """Whether the first '(' closes at the last character."""
    if not text.startswith("("):
        return False
    depth = 0
    for k, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth == 0:
            return k == len(text) - 1
    return False


__all__ = ["user_str"]
