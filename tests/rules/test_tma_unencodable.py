"""Where the tile of a TMA no size can give a descriptor lies (verifier/analysis/tma.py
unencodable) is left unchecked: the placement rules of tma_smem.py skip the TMA, and the
descriptor rule that rejects it says so in a note. The gate only fires where that rule reports
the TMA."""

from __future__ import annotations

from pathlib import Path

import pytest

import tileproof as tp
from tileproof.hw.tma import is_tma_op
from tileproof.schedule_files import build_fusion, discover
from tileproof.model.targets import get_target
from tileproof.verifier.analysis.tma import PLACEMENT_RULES, inferred_tmas, unencodable
from tileproof.verifier.context import VerifyContext
from tileproof.verifier.registry import RULES, all_rules

all_rules()  # every family registered

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
P = tp.ParallelType
ALL = frozenset(RULES)


def one_column_tiles():
    """A TMA box of one float per row (4 bytes, no multiple of 16 at any size) whose tiles also
    sit 4 bytes apart in shared memory: misaligned, overlapping copies (fuzz seed 21 case 3665)."""
    with tp.Fusion("one_column_tiles") as fusion:
        t0 = tp.make_tensor(["M", "N"]); fusion.add_input(t0)
        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA); t2 = tp.set(t1); fusion.add_output(t2)
    fusion.assume("M % 16 == 0")
    t1.set_memory_type(tp.MemoryType.Shared)
    t2.split(1, 3).merge(1).reorder([0, 1])
    tp.propagate_transforms(t2)
    t2.axis(0).parallelize(P.Bulk)
    tp.parallelize_all_like(t2)
    return fusion


def test_the_placement_rules_skip_a_tma_no_size_can_encode():
    """Their proofs about a box that cannot exist took 1.9 s of the fuzz case's verify."""
    report = tp.verify(one_column_tiles())
    assert {"TMA-INNER-BYTES", "SMEM-ALIGNMENT", "TMA-COORD-ALIGN"} <= set(report.codes)
    assert not set(report.codes) & set(PLACEMENT_RULES)
    inner = next(d for d in report.errors if d.code == "TMA-INNER-BYTES")
    assert any("no size gives this TMA a descriptor" in n and "TMA-WHOLE-TILES" in n for n in inner.notes)


def test_a_concrete_box_past_256_is_unencodable_and_a_symbolic_one_is_not():
    def box(extent):
        with tp.Fusion("box") as fusion:
            t0 = tp.make_tensor([64, extent]); fusion.add_input(t0)
            t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA); t2 = tp.set(t1); fusion.add_output(t2)
        t1.set_memory_type(tp.MemoryType.Shared)
        t1.axis(0).parallelize(P.BIDx); t1.axis(1).parallelize(P.Bulk)
        tp.propagate_transforms(t1); tp.parallelize_all_like(t1, [P.BIDx])
        return fusion

    def gate(fusion, bind=None, running=ALL):
        ctx = VerifyContext(fusion.snapshot(), get_target("sm_90a"), bind)
        ctx.running = running
        return [unencodable(ctx, t.info) for t in inferred_tmas(ctx)]

    assert [g.code for g in gate(box(512))] == ["TMA-BOX-SIZE"]
    assert gate(box(128)) == [None]
    assert gate(box("N")) == [None]  # N <= 256 passes: the placement rules still run
    assert [g.code for g in gate(box("N"), {"N": 512})] == ["TMA-BOX-SIZE"]  # as bound, every size fails
    # nothing is left to a rule that does not run: verify(rules=...) without it, or a copy of the fusion
    assert gate(box(512), running=ALL - {"TMA-BOX-SIZE"}) == [None]
    assert gate(box(512), running=None) == [None]


def test_verify_with_a_subset_of_the_rules_checks_the_placement_itself():
    report = tp.verify(one_column_tiles(), rules=["TMA-TILE-CONTIGUITY", "TMA-WHOLE-TILES"])
    assert report.codes == ["TMA-TILE-CONTIGUITY", "TMA-WHOLE-TILES"]


def tma_cases():
    files = [str(p) for d in ("valid", "invalid") for p in sorted((EXAMPLES / d).glob("*.py"))]
    cases = [c for c in discover(files) if any(is_tma_op(op) for op in build_fusion(c).exprs)]
    return cases + [one_column_tiles]


@pytest.mark.parametrize("case", tma_cases(), ids=lambda c: getattr(c, "name", getattr(c, "__name__", "")))
def test_the_gate_fires_only_where_its_rule_reports_the_tma(case):
    fusion = build_fusion(case) if not callable(case) else case()
    target = getattr(case, "target", None) or "sm_90a"
    ctx = VerifyContext(fusion.snapshot(), get_target(target))
    ctx.running = ALL
    gated = [(t, g) for t in inferred_tmas(ctx) if t.info.ok and (g := unencodable(ctx, t.info)) is not None]
    report = tp.verify(fusion, target)
    for tma, why in gated:
        assert any(d.code == why.code and d.tensor == tma.info.consumer.name for d in report.errors), why
        assert any(d.code == why.code and why.note() in d.notes for d in report.errors)
