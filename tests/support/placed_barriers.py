"""Failing cases of the rules that no schedule fails: tileproof places every barrier, mbarrier
wait and wgmma fence itself (execution/nest.py place_syncs), so SMEM-RACE, PIPELINE-PHASE
and WGMMA-ASYNC-ORDER reject only a placement it got wrong. Each case here is a schedule (one of
the rule's tests, or a bundled one) verified with its nest changed after the barriers are
placed, as the rule's tests change it
(tests/rules/test_races.py, test_pipeline_phase.py, test_wgmma_async_order.py): the reports
they show are the golden reports of those codes (tests/verifier/test_golden_reports.py).

A case is a snippet, run like a rule docstring's Example (support/rule_docs.py): it builds
`fusion` and defines `mutate(tree)`, which changes the placed nest (a list of loops and nodes)
in place.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import tileproof as tp
from tileproof.execution.barriers import Sync, TmaWait
from tileproof.execution.barriers import WgmmaFence
from tileproof.schedule_files import discover
from tileproof.execution import nest as barrier_nest_module  # where verify places the barriers

CASE_FILE = "<failing case>"  # the file name that `-->` locations into a case carry
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "valid"

CASES = {
    "SMEM-RACE": '''\
# tests/rules/test_races.py handed_over(transposed=True): T1's tile, written on (TIDy, TIDx), is
# read transposed; the __syncthreads between the writes and the reads is taken away
with tp.Fusion("handed_over") as fusion:
    t0 = tp.make_contig_concrete_tensor([1, 8, 8]); fusion.add_input(t0)
    t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
t1.set_memory_type(tp.MemoryType.Shared)
t1.axis(1).parallelize(tp.ParallelType.TIDy)
t1.axis(2).parallelize(tp.ParallelType.TIDx)
t2.axis(1).parallelize(tp.ParallelType.TIDx)
t2.axis(2).parallelize(tp.ParallelType.TIDy)

def mutate(tree):
    remove(tree, lambda n: isinstance(n, Sync))
''',
    "PIPELINE-PHASE": '''\
# tests/rules/test_pipeline_phase.py: a Hopper GEMM with four TMA stages, each full wait
# indexing the stages and counting their phases by 2 (tilelang PR 3087: a parity from the
# wrong stage count)
fusion = bundled("hopper_matmul_pipelined[block=128x128,prefetch=2]")

def mutate(tree):
    for n in every_node(tree):
        if isinstance(n, TmaWait) and n.stages:
            n.stages = 2
''',
    "WGMMA-ASYNC-ORDER": '''\
# tests/rules/test_wgmma_async_order.py: the smallest Hopper GEMM, the wgmma.fence between
# the accumulators' zeroing and the first wgmma taken away
fusion = bundled("hopper_matmul")

def mutate(tree):
    remove(tree, lambda n: isinstance(n, WgmmaFence))
''',
}


def scopes(tree: list):
    """Every list of the nest that holds nodes, outermost first."""
    yield tree
    for n in tree:
        if hasattr(n, "body"):
            yield from scopes(n.body)


def every_node(tree: list):
    return (n for scope in list(scopes(tree)) for n in scope)


def remove(tree: list, test) -> None:
    for scope in list(scopes(tree)):
        scope[:] = [n for n in scope if not test(n)]


@contextlib.contextmanager
def placed_then(mutate):
    """While inside: verify places the barriers, then `mutate` changes the nest it placed."""
    place = barrier_nest_module.place_syncs

    def placed(tree, on_chip, hazards, **rotations):
        place(tree, on_chip, hazards, **rotations)
        mutate(tree)

    barrier_nest_module.place_syncs = placed
    try:
        yield
    finally:
        barrier_nest_module.place_syncs = place


def bundled(name: str) -> tp.Fusion:
    """The bundled schedule of that name (examples/valid/wgmma.py), built."""
    (case,) = [c for c in discover([str(EXAMPLES / "wgmma.py")]) if c.name == name]
    return case.build()


def build_case(code: str):
    """(the fusion of CASES[code], its mutate)."""
    scope = {"tp": tp, "bundled": bundled, "Sync": Sync, "TmaWait": TmaWait, "WgmmaFence": WgmmaFence,
             "remove": remove, "every_node": every_node}
    exec(compile(CASES[code], CASE_FILE, "exec"), scope)
    return scope["fusion"], scope["mutate"]


def run_case(code: str) -> tp.Report:
    """The report of CASES[code]: its fusion verified on sm_90a with its nest mutated."""
    fusion, mutate = build_case(code)
    with placed_then(mutate):
        return tp.verify(fusion, "sm_90a")
