"""Grouped reductions in one loop nest (execution/loops.py): the members of a tp.group_reductions
group share their loops as siblings, as nvFuser's one GroupedReductionOp does, so a producer
inlined into two of them is computed once, in the loop where both accumulate; every init sits
before that loop and every combine and store after it. Without the group the two reductions'
loops would have to close and reopen (LOOP-NEST-ORDER); the verifier and the kernel read the same
placed nest."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import nvrtc
from tileproof.execution.loops import Nest
from tileproof.execution.nest import placed_nest
from tileproof.execution.reduction import Phase
from tileproof.model.targets import get_target

from support.grouped_schedules import shared_producer_sum_and_max


def _leaves(nodes: list, out: list | None = None) -> list:
    out = [] if out is None else out
    for n in nodes:
        if isinstance(n, Nest):
            _leaves(n.body, out)
        else:
            out.append(n)
    return out


def _name(leaf) -> tuple[str, Phase]:
    return (leaf[0].name, leaf[1]) if isinstance(leaf, tuple) else (leaf.name, Phase.STATEMENT)


def _loop_holding(nodes: list, wanted: tuple[str, Phase]) -> Nest | None:
    """The innermost loop of the nest whose own body holds the leaf `wanted`."""
    for n in nodes:
        if isinstance(n, Nest):
            if any(not isinstance(c, Nest) and _name(c) == wanted for c in n.body):
                return n
            found = _loop_holding(n.body, wanted)
            if found is not None:
                return found
    return None


def test_a_producer_inlined_into_two_grouped_reductions_is_computed_once_where_both_accumulate():
    fusion = shared_producer_sum_and_max()
    assert tp.verify(fusion, "sm_90a").ok
    nest = placed_nest(fusion.snapshot())
    names = [_name(leaf) for leaf in _leaves(nest.tree)]
    assert names.count(("T1", Phase.STATEMENT)) == 1
    loop = _loop_holding(nest.tree, ("T1", Phase.STATEMENT))
    inside = [_name(c) for c in loop.body]
    assert inside == [("T1", Phase.STATEMENT), ("T5", Phase.ACCUMULATE), ("T6", Phase.ACCUMULATE)]
    # both inits before the shared loop, both stores after it, in the scope around it
    around = _loop_holding(nest.tree, ("T5", Phase.INIT))
    assert around is not None and loop in around.body
    steps = [_name(c) if not isinstance(c, Nest) else "loop" for c in around.body]
    at = around.body.index(loop)
    assert {("T5", Phase.INIT), ("T6", Phase.INIT)} <= set(steps[:at])
    assert {("T5", Phase.STORE), ("T6", Phase.STORE)} <= set(steps[at + 1:])


def test_the_kernel_computes_the_shared_producer_once_in_one_loop():
    """The CUDA has one T1 statement and one serial loop, holding T1 and both accumulations."""
    fusion = shared_producer_sum_and_max()
    source = tp.compile(fusion, "sm_90a").cuda_source
    kernel = source[source.index("__global__ void"):]
    assert kernel.count("// T1 = add(T0, 1.0)") == 1
    loops = [line for line in kernel.splitlines() if line.lstrip().startswith("for (")]
    assert len(loops) == 2, loops  # the rows, and the row's steps shared by T1, T5 and T6
    assert loops[1].endswith("// T1 axis 2, T5 axis 2, T6 axis 2")
    body = kernel.split(loops[1])[1].split("\n    }\n")[0]
    assert "T1 = add(T0, 1.0)" in body and "T5 = sum(T1)" in body and "T6 = max(T1)" in body



@pytest.mark.parametrize("tile", [8, 128])
def test_the_grouped_kernel_compiles_with_nvrtc(tile):
    """NVRTC compiles the one-nest kernel (both inits, the shared loop, both block combines and
    stores) for sm_90a, at a small thread tile and at nvFuser's 128."""
    fusion = shared_producer_sum_and_max(tile=tile)
    assert tp.verify(fusion, "sm_90a").ok
    ir = lower(fusion.snapshot(), get_target("sm_90a")).kernel
    include = nvrtc.cuda_include_dir()
    source = emit(ir, cuda_headers=include is not None)
    assert nvrtc.compile_to_cubin(source, "sm_90a", include)[:4] == b"\x7fELF"
