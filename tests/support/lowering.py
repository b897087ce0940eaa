"""lower() as tp.compile runs it: with the decisions tp.verify records on its Report (which
predicates the assumptions make redundant, an ldmatrix's registers, each tcgen05 pattern),
decided here alone (verifier/analysis/decisions.py) without running every rule."""

from __future__ import annotations

from tileproof.codegen.lower import Lowering, lower
from tileproof.model.fusion import Fusion
from tileproof.model.targets import Target, get_target
from tileproof.verifier.analysis.decisions import decide
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.diagnostics import Decisions


def decisions_for(snapshot: Fusion, target: Target | str = "sm_90a") -> Decisions:
    """The decisions tp.verify would record for a snapshot (the code generator's input)."""
    return decide(VerifyContext(snapshot, get_target(target) if isinstance(target, str) else target))


def lowered(fusion: Fusion, target: Target | str = "sm_90a", *, until: str | None = None) -> Lowering:
    """The lowering of a snapshot of `fusion` with verify's decisions."""
    tgt = get_target(target) if isinstance(target, str) else target
    snapshot = fusion.snapshot()
    return lower(snapshot, tgt, decisions_for(snapshot, tgt), until=until)
