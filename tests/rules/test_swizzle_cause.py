"""Root cause first (issue 11 item 1): an XOR swizzle of a TMA tile on the wrong loop axes is
reported as TMA-SWIZZLE-LAYOUT, first, with the call that fixes it in the user's own axis
numbers; what follows from it (TMA-SWIZZLE-WIDTH, SWIZZLE-BIJECTIVITY, TMA-WHOLE-TILES) comes
right after it, marked as following from it, in the terminal and in JSON."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.reports import report_to_dict, report_to_text
from tileproof.schedule_files import discover

P = tp.ParallelType
XOR = tp.SwizzleType.XOR
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "invalid" / "tma_smem.py"
FIX = re.compile(r"t1\.swizzle\(tp\.SwizzleType\.XOR, (\d+), (\d+)\) in place of")


def swizzled_tile(x: int, y: int, *, swizzle_bytes: int = 64, rows: int = 16, vectorized_output: int = 0):
    """fp16 rows of `swizzle_bytes`, viewed [.., -1, s, 8/s, s, 16B] (the 64-byte recipe is
    swizzle(3, 5)), XOR-swizzled on loop axes x and y. `vectorized_output` > 0 also vectorizes
    T2 by that width over its 32 columns of 2 bytes (an unrelated error when it does not divide)."""
    s = swizzle_bytes // 16
    with tp.Fusion("tile") as fusion:
        t0 = tp.make_contig_concrete_tensor([256, 256], dtype=tp.float16)
        fusion.add_input(t0)
        t1 = tp.set(t0, op=tp.LoadStoreOpType.TMA)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(1, swizzle_bytes // 2).split(0, rows).reorder({1: 2})
        t.axis(0).parallelize(P.BIDy)
        t.axis(1).parallelize(P.BIDx)
    t1.split(3, 8)
    t1.split(2, 8 // s).split(2, s)
    t1.swizzle(XOR, x, y)
    t1.set_allocation_domain(t1.get_loop_domain(), True)  # laid out as swizzled (default: logical order)
    for a in range(2, t1.ndim):
        t1.axis(a).parallelize(P.Bulk)
    if vectorized_output:
        t2.split(3, vectorized_output)
        t2.axis(4).parallelize(P.Vectorize)
    return fusion


def test_the_bundled_example_reports_the_wrong_axes_first_and_the_width_as_its_consequence():
    (case,) = [c for c in discover([str(EXAMPLE)]) if c.name == "swizzle_64b_wrong_axes"]
    report = tp.verify(case.build(), case.target)
    cause, width = report.diagnostics
    assert cause.code == "TMA-SWIZZLE-LAYOUT" and cause.id
    assert width.code == "TMA-SWIZZLE-WIDTH" and width.follows_from == cause.id
    # the user's own call and numbers: the line says t1.swizzle(XOR, 2, 4), the fix is (3, 5)
    assert "t1.swizzle(XOR, 2, 4)" in cause.message
    assert "t1.swizzle(tp.SwizzleType.XOR, 3, 5) in place of t1.swizzle(XOR, 2, 4)" in cause.hint
    assert cause.location.endswith(f"tma_smem.py:{_line_of(EXAMPLE, 't1.swizzle(XOR, 2, 4)')}")
    assert any("TMA-SWIZZLE-WIDTH" in n and "go" in n for n in cause.notes)
    # no hint points at a knob that does not exist (there is no "swizzle width" setting)
    assert all("wider swizzle" not in (d.hint or "") for d in report.diagnostics)


def test_terminal_and_json_list_the_cause_first():
    report = tp.verify(swizzled_tile(2, 4))
    text = report_to_text(report)
    assert text.index("error[TMA-SWIZZLE-LAYOUT]") < text.index("error[TMA-SWIZZLE-WIDTH]")
    assert "= follows from: error[TMA-SWIZZLE-LAYOUT] above" in text
    data = report_to_dict(report)["diagnostics"]
    assert [d["code"] for d in data] == ["TMA-SWIZZLE-LAYOUT", "TMA-SWIZZLE-WIDTH"]
    assert data[0]["follows_from"] is None and data[1]["follows_from"] == data[0]["id"] is not None


@pytest.mark.parametrize("x, y, consequences", [
    (2, 4, {"TMA-SWIZZLE-WIDTH"}),                          # XORs into 2 chunks: a 32-byte mode
    (3, 2, {"TMA-SWIZZLE-WIDTH", "SWIZZLE-BIJECTIVITY"}),   # 4 into 2: not a bijection either
    (2, 6, {"TMA-SWIZZLE-WIDTH", "TMA-WHOLE-TILES"}),       # into the 16-byte axis: a 128-byte mode
    (5, 3, set()),                                          # swapped: the layout alone is wrong
    (4, 5, set()),
])
def test_the_fix_is_in_the_users_axis_numbers_and_pastes_back(x, y, consequences):
    report = tp.verify(swizzled_tile(x, y))
    cause = report.diagnostics[0]
    assert cause.code == "TMA-SWIZZLE-LAYOUT"
    assert f"t1.swizzle(tp.SwizzleType.XOR, {x}, {y})" in cause.hint  # the user's call, as called
    followers = {d.code for d in report.diagnostics if d.follows_from == cause.id}
    assert followers == consequences
    assert {d.code for d in report.diagnostics} == consequences | {"TMA-SWIZZLE-LAYOUT"}
    fx, fy = map(int, FIX.search(cause.hint).groups())
    assert tp.verify(swizzled_tile(fx, fy)).ok  # the hint's call, pasted back, is accepted


def test_a_128_byte_tile_gets_its_own_numbers():
    report = tp.verify(swizzled_tile(5, 3, swizzle_bytes=128, rows=32))
    fx, fy = map(int, FIX.search(report.diagnostics[0].hint).groups())
    assert (fx, fy) == (3, 5) and tp.verify(swizzled_tile(fx, fy, swizzle_bytes=128, rows=32)).ok


def test_an_unrelated_error_does_not_follow_from_the_swizzle():
    """Only what goes away with the fix (re-verified on the fixed fusion) follows from it: an
    indivisible vector of T2 stays a finding of its own, after the cause's group."""
    report = tp.verify(swizzled_tile(2, 4, vectorized_output=3))
    codes = [(d.code, d.follows_from is not None) for d in report.diagnostics]
    assert codes[:2] == [("TMA-SWIZZLE-LAYOUT", False), ("TMA-SWIZZLE-WIDTH", True)]
    assert ("SPLIT-DIVISIBILITY", False) in codes[2:]


def test_a_correct_swizzle_has_no_cause():
    report = tp.verify(swizzled_tile(3, 5))
    assert report.ok and all(d.id is None and d.follows_from is None for d in report.diagnostics)


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip() == text)


def test_an_element_xor_gets_the_chunk_split_and_swizzle_in_the_users_numbers():
    """swizzle_element_xor XORs float32 elements (split(3, 8), swizzle(2, 4)); the help gives the
    16-byte-chunk recipe in its numbers, and that schedule is accepted."""
    (case,) = [c for c in discover([str(EXAMPLE)]) if c.name == "swizzle_element_xor"]
    (d,) = tp.verify(case.build(), case.target).diagnostics
    assert d.code == "TMA-SWIZZLE-LAYOUT"
    assert "t1.split(3, 4) then t1.swizzle(tp.SwizzleType.XOR, 2, 3)" in d.hint
    source = EXAMPLE.read_text().replace("t1.split(3, 8)  # [.., R{8}, 4, 8]\n    t1.swizzle(XOR, 2, 4)",
                                         "t1.split(3, 4)\n    t1.swizzle(XOR, 2, 3)")
    assert source != EXAMPLE.read_text()
    namespace: dict = {"__name__": "fixed_example"}
    exec(compile(source, str(EXAMPLE), "exec"), namespace)
    fixed = namespace["swizzle_element_xor"]
    assert tp.verify(getattr(fixed, "build", fixed)(), case.target).ok
