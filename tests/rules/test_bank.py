"""SMEM-BANK-CONFLICT against an enumeration of the phase model (32 banks of 4 bytes; a warp's 16-byte accesses in 4 phases of 8 lanes)."""

from __future__ import annotations

import itertools

import pytest

import tileproof as tp
from tileproof.verifier.rules.bank import phase_lanes

P = tp.ParallelType


def row_reader(rows: int, cols: int, vector: int, swizzle: bool, dtype=tp.float32):
    """T1 (shared) is written row-major; T2 reads it with TIDx over rows and a vector along a row."""
    with tp.Fusion("rows") as fusion:
        t0 = tp.make_contig_concrete_tensor([rows, cols], dtype=dtype); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    if swizzle:
        t1.swizzle(tp.SwizzleType.XOR, 0, 1)
    t2.split(1, vector)
    t2.axis(0).parallelize(P.TIDx)
    if vector > 1:
        t2.axis(2).parallelize(P.Vectorize)
    return fusion


def brute_force_conflict(rows: int, cols: int, vector: int, swizzle: bool, elem: int = 4) -> bool:
    """Enumerate lanes and iterations of T2's read with the phase model."""
    width = vector * elem
    lanes = phase_lanes(width)
    for it in range(cols // vector):
        words = {}
        for lane in range(min(rows, 32)):
            col = it * vector
            stored = (lane ^ col) if swizzle else col
            addr = (lane * cols + stored) * elem
            words[lane] = {addr // 4 + k for k in range(max(width // 4, 1))}
        for a, b in itertools.combinations(range(min(rows, 32)), 2):
            if a // lanes != b // lanes:
                continue
            for wa in words[a]:
                for wb in words[b]:
                    if wa != wb and wa % 32 == wb % 32:
                        return True
    return False


@pytest.mark.parametrize("rows, cols, vector, swizzle", [
    (32, 32, 1, False), (32, 32, 1, True), (32, 4, 4, False), (32, 8, 4, False),
    (32, 8, 2, False), (32, 2, 2, False), (16, 16, 4, False), (32, 64, 1, False),
])
def test_bank_rule_agrees_with_enumeration(rows, cols, vector, swizzle):
    report = tp.verify(row_reader(rows, cols, vector, swizzle), rules=["SMEM-BANK-CONFLICT"])
    loads = [d for d in report.warnings if "load" in d.message]
    assert bool(loads) == brute_force_conflict(rows, cols, vector, swizzle)


def test_conflict_witness_names_two_lanes_in_one_bank():
    report = tp.verify(row_reader(32, 32, 1, False), rules=["SMEM-BANK-CONFLICT"])
    (d,) = [d for d in report.warnings if "load" in d.message]
    c = d.counterexample
    assert c["lane"] != c["other lane"]
    assert (c["byte address"] // 4) % 32 == (c["other byte address"] // 4) % 32 == c["bank"]
    assert report.ok  # a warning never rejects


def test_an_undecided_bank_proof_is_a_warning_within_the_budget(monkeypatch):
    """z3 without an answer in time: "not analysed", a warning (the schedule stays accepted),
    not the 20 s timeout and rejection of a correctness rule."""
    from tileproof.verifier.rules import bank

    monkeypatch.setattr(bank, "BANK_TIMEOUT_MS", 1)
    monkeypatch.setattr(bank, "BANK_BUDGET_S", 0.0)
    with tp.Fusion("symbolic_transpose") as fusion:
        t0 = tp.make_contig_tensor(2); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.transpose(t1, 0, 1); fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, 32).split(2, 32)
        t.axis(0).parallelize(tp.ParallelType.BIDy); t.axis(2).parallelize(tp.ParallelType.BIDx)
        t.axis(3).parallelize(tp.ParallelType.TIDx)
    fusion.assume("T0_0 % 32 == 0")
    fusion.assume("T0_1 % 32 == 0")
    report = tp.verify(fusion, "sm_90a", rules=["SMEM-BANK-CONFLICT"])
    skipped = [d for d in report.diagnostics if "not analysed" in d.message]
    assert skipped and all(not d.is_error for d in skipped)
    assert report.ok


def test_a_lane_beyond_the_block_is_no_conflict():
    """swizzle_64b_padded_5_rows launches 20 threads: the rule blamed lane 22, which does not exist."""
    from pathlib import Path

    from tileproof.schedule_files import discover

    examples = Path(__file__).resolve().parents[2] / "examples" / "valid" / "tma_smem.py"
    case = next(c for c in discover([str(examples)]) if c.name == "swizzle_64b_padded_5_rows")
    report = tp.verify(case.build(), case.target, rules=["SMEM-BANK-CONFLICT"])
    assert not report.diagnostics, [d.message for d in report.diagnostics]
