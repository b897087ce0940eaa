"""The verifier's decisions as the lowering reads them (verifier/diagnostics.py Decisions): the
code generator renders what verify proved and asks no solver itself.

A claim (execution/predicates.py) the Report holds is answered as decided; one it does not hold
is not proved, and is listed in `undecided` (none for a schedule verify accepted: every claim
the lowering asks is one `claims` lists, which tests check on the bundled examples). So a
predicate without a decision stays in the kernel, and a warp-collective instruction without one
is refused.
"""

from __future__ import annotations

from ...execution.predicates import Claim
from ...hw.tcgen05 import TmemPattern
from ...verifier.diagnostics import AccessKey, Decisions


class Answers:
    def __init__(self, decisions: Decisions):
        self.decisions = decisions
        self.undecided: list[Claim] = []

    def decided(self, claim: Claim) -> bool | None:
        """Whether verify proved `claim`; None where it did not decide it."""
        out = self.decisions.verdicts.get(claim)
        if out is None:
            self.undecided.append(claim)
        return out

    def proved(self, claim: Claim) -> bool:
        return self.decided(claim) is True

    def pattern(self, key: AccessKey) -> tuple[bool, TmemPattern | None]:
        """(whether verify decided the tensor-memory access `key`, the tcgen05 pattern it proved)."""
        patterns = self.decisions.patterns
        return key in patterns, patterns.get(key)
