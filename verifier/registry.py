"""The one rule registry: `@rule("TMEM-LANES", family="tmem")` on a function
`(ctx) -> Iterable[Diagnostic]`. Codes are stable: never renumber or delete one.

The rules register themselves when verifier/rules/ is imported, which verify.py does (and the
package root imports verify.py, so every use of tileproof has them); this module imports no rule.
May import model/errors.py and verifier/diagnostics.py only."""

from __future__ import annotations

import difflib
import inspect
import re
from dataclasses import dataclass
from typing import Callable, Iterable

from ..model.errors import InternalError
from .diagnostics import Diagnostic, Severity

SECTIONS = ("What it checks", "Why the hardware needs it", "Example", "Fix", "References")
# Optional: codes that the Example necessarily also triggers (a rule implied by another).
OPTIONAL_SECTIONS = ("Reported with",)


@dataclass(frozen=True)
class Rule:
    code: str
    family: str
    severity: Severity
    func: Callable[..., Iterable[Diagnostic]]
    premises: tuple[str, ...] = ()  # codes whose error (or skip) leaves this rule nothing to check (verify skips it)

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.func.__doc__ or "")

    def section(self, name: str) -> str:
        """One docstring section's text (code blocks keep their indentation)."""
        pattern = rf"^{re.escape(name)}:\s*$\n(.*?)(?=^(?:{'|'.join(map(re.escape, SECTIONS + OPTIONAL_SECTIONS))}):\s*$|\Z)"
        m = re.search(pattern, self.doc, re.S | re.M)
        return inspect.cleandoc(m.group(1)) if m else ""

    @property
    def reported_with(self) -> list[str]:
        return self.section("Reported with").split()

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else ""


RULES: dict[str, Rule] = {}
# names of conditions that have no code of their own because another rule proves them (the
# wgmma descriptor's fields are proved with the addresses they produce)
PROVED_BY = {"WGMMA-DESCRIPTOR": "WGMMA-SMEM-LAYOUT"}


def rule(code: str, *, family: str, severity: Severity = Severity.ERROR, premises: tuple[str, ...] = ()):
    """Register func as the rule `code`. `premises`: codes of rules registered before it whose
    error makes its question moot (a bank-conflict analysis of a block that cannot launch), so
    verify does not run it then, nor where a premise was not run for its own premises."""
    def register(func):
        if code in RULES:
            raise InternalError(f"rule code {code} registered twice")
        unknown = [p for p in premises if p not in RULES]
        if unknown:
            raise InternalError(f"rule {code}: premises {unknown} are not registered before it")
        RULES[code] = Rule(code, family, severity, func, tuple(premises))
        return func

    return register


def get_rule(code: str) -> Rule:
    _check_loaded()
    try:
        return RULES[code.upper()]
    except KeyError:
        close = difflib.get_close_matches(code.upper(), sorted(RULES), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise KeyError(f"unknown rule {code!r}; {hint}known: {', '.join(sorted(RULES))}") from None


def all_rules() -> list[Rule]:
    """Every registered rule, in registration order (the order verify runs and reports them)."""
    _check_loaded()
    return list(RULES.values())


def _check_loaded() -> None:
    """An empty registry would let verify accept everything: that is a tileproof bug, said so."""
    if not RULES:
        raise InternalError("no rule is registered: verifier/rules/ was not imported "
                            "(tileproof.verifier.verify imports it)")
