"""ALLOCATION-DISTINCT against brute force: for small concrete schedules, every point the kernel
runs a shared or register tensor's statement at (tests/support/brute_force.kernel_points) is
grouped by allocation instance (block; thread for registers; the loops left of the compute-at
position); the rule must reject exactly when two different logical elements of one instance
land at one offset."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tileproof as tp
from tileproof.execution.allocation import compute_allocation
from tileproof.model.expr import evaluate
from tileproof.execution.indexing import block_dims, loop_var
from tileproof.model.types import BLOCK_TYPES, DEVICE_TYPES, THREAD_TYPES, MemoryType

from support.brute_force import kernel_points
from support.schedule_gen import swizzle_cases, visibility_cases

P = tp.ParallelType
CODE = "ALLOCATION-DISTINCT"
TALLY: dict[str, int] = defaultdict(int)
TYPES = [P.Serial, P.Serial, P.BIDx, P.TIDx, P.TIDy, P.Unroll, P.Vectorize]


def collides(fusion) -> set[str]:
    """The on-chip tensors with two live elements at one offset, by enumeration."""
    launch = {p: evaluate(e, {}) for p, e in block_dims(fusion).items()}
    out = set()
    for x in fusion.tensors:
        if x.definition is None or x.memory_type not in (MemoryType.Shared, MemoryType.Local):
            continue
        strides = {u: evaluate(s, {}) for u, s in compute_allocation(x).strides().items()}
        launched = BLOCK_TYPES + (THREAD_TYPES if x.memory_type is MemoryType.Local else ())
        outer = [loop_var(x, i).value for k, i in enumerate(x.loop) if i.parallel_type in DEVICE_TYPES
                 or (k < x.compute_at and i.parallel_type not in THREAD_TYPES + BLOCK_TYPES)]
        held: dict = defaultdict(set)
        for where, env, idx in kernel_points(x, launch):
            instance = (tuple(where.get(p, 0) for p in launched), tuple(env[v] for v in outer))
            offset = sum(evaluate(idx[u], env) * s for u, s in strides.items())
            held[instance, offset].add(tuple(evaluate(idx[i.uid], env) for i in x.logical if not i.is_broadcast))
            if len(held[instance, offset]) > 1:
                out.add(x.name)
                break
    return out


@st.composite
def allocation_cases(draw):
    """T0 [R, C] -> T1 (shared or registers) -> T2: T1 split and parallelized at random, its
    allocation domain sometimes missing a loop axis, sometimes inlined."""
    rows, cols = draw(st.sampled_from([4, 6, 8])), draw(st.sampled_from([4, 8]))
    with tp.Fusion("alloc") as fusion:
        t0 = tp.make_contig_concrete_tensor([rows, cols]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    t1.set_memory_type(draw(st.sampled_from([tp.MemoryType.Shared, tp.MemoryType.Local])))
    factor = draw(st.sampled_from([2, 4]))
    for t in (t1, t2):
        t.split(0, factor)  # [R/f, f, C]
    for t in (t1, t2):
        for k in range(3):
            p = draw(st.sampled_from(TYPES), label=f"{t.name} axis {k}") if t is t1 else t1.axis(k).parallel_type
            if p is P.Vectorize and k != 2:
                p = P.Serial
            t.axis(k).parallelize(p)
    if draw(st.booleans()):
        keep = draw(st.lists(st.sampled_from([0, 1, 2]), min_size=1, max_size=3, unique=True))
        t1.set_allocation_domain([t1.axis(k) for k in sorted(keep)])
    if draw(st.booleans()):
        try:
            t1.inline_at(draw(st.integers(1, 2)))
        except tp.ScheduleError:
            pass
    return fusion


def check(fusion):
    report = tp.verify(fusion, "sm_90a", rules=[CODE])
    flagged = {d.tensor for d in report.diagnostics if d.code == CODE}
    assert not [d for d in report.diagnostics if d.internal]
    expected = collides(fusion.snapshot())
    assert flagged == expected, (flagged, expected)
    TALLY["collide" if expected else "distinct"] += 1
    for d in report.diagnostics:
        first = tuple(d.counterexample[f"element axis {k}"] for k in range(2) if f"element axis {k}" in d.counterexample)
        other = tuple(d.counterexample[f"other element axis {k}"] for k in range(2)
                      if f"other element axis {k}" in d.counterexample)
        assert first != other  # two different elements at the offset shown


CONFIG = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck), print_blob=False)


@CONFIG
@given(allocation_cases())
def test_allocation_distinct_against_brute_force(fusion):
    check(fusion)


def test_the_brute_force_saw_both_verdicts():
    """Not vacuous: the generated schedules include collisions and distinct layouts."""
    test_allocation_distinct_against_brute_force()
    assert TALLY["collide"] >= 10 and TALLY["distinct"] >= 10, dict(TALLY)


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck), print_blob=False)
@given(st.one_of(visibility_cases(), swizzle_cases()))
def test_allocation_distinct_on_the_visibility_and_swizzle_families(case):
    try:
        check(case.fusion)
    except tp.ScheduleError:
        pass
