"""WS-ROLES's verified fix where a warp-specialized load was inlined into the consumers' loop over
the warp-specialized axis (it takes that loop's type): the inline_at that puts it back just outside
that loop, and the finding pointed at the inlining. Found by benchmarks/report_causes.py (seed 125,
case 278): an inline_most() on persistent_attention_with_q_from_the_producer moved Q's tile inside
the consumers' TIDz loop."""

from __future__ import annotations

import re

import tileproof as tp

from support.examples import example_module

CODE = "WS-ROLES"


def q_from_the_producer():
    """examples/valid/attention.py persistent_attention_with_q_from_the_producer and its Q tile: the
    warp-specialized tensor inlined shallowest (over the row-tile loop, left of the TIDz warpgroups)."""
    fusion = example_module("valid", "attention").persistent_attention_with_q_from_the_producer()
    specialized = [t for t in fusion.tensors
                   if t.circular is not None and isinstance(t.circular.type, tp.WarpSpecialized)]
    return fusion, min(specialized, key=lambda t: t.compute_at)


def test_a_load_inlined_into_the_warpgroup_loop_is_given_the_inline_at_outside_it():
    fusion, q = q_from_the_producer()
    at = q.compute_at
    q.inline_at(at + 1)  # one position too deep: inside the consumers' loop over TIDz
    report = tp.verify(fusion, "sm_90a")
    assert report.codes == [CODE]
    (d,) = report.errors
    found = re.match(r"(\w+)\.inline_at\((\d+)\) \(verified", d.hint)
    assert found, d.hint
    assert found.groups() == (q.name, str(at))
    assert d.location == q.compute_at_origin and d.location.startswith(f"{__file__}:")  # the inlining
    q.inline_at(int(found.group(2)))
    assert CODE not in tp.verify(fusion, "sm_90a").codes


def test_the_example_as_bundled_has_no_finding():
    fusion, _ = q_from_the_producer()
    report = tp.verify(fusion, "sm_90a")
    assert report.ok and CODE not in report.codes, report.codes
