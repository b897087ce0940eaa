"""A circular buffer's TMA loads in a loop of symbolic extent inside its circular loop (nvFuser's
TmaCircularBufferingTest.InnerReduction: the row's boxes, ceil(N / 256) of them per stage): the
stage mbarrier counts one arrival per issuing thread, each copy announces its bytes alone and the
issuer arrives at its last copy of the phase. Where the count is a constant, each copy still
arrives with its bytes. Checked by walking the lowered copies over every point of the loops."""

from __future__ import annotations

import itertools

import pytest

import tileproof as tp
from tileproof.codegen.emit.tma import copy as emit_copy
from tileproof.codegen.ir import Loop, TmaCopy
from tileproof.model.expr import evaluate
from support.lowering import lowered

P = tp.ParallelType
pytestmark = pytest.mark.usefixtures("private_cache")


def row_sum(*, rows: int | None = None, stages: int = 4, prefetch: int = -1):
    """A row sum whose rows are TMA-loaded box by box (256 wide) into a circular buffer over 4
    rows per block; `rows` None: a row of symbolic width (at most 8192), else of that width."""
    with tp.Fusion("tma_row_sum") as fusion:
        tv0 = tp.make_contig_tensor(2) if rows is None else tp.make_contig_concrete_tensor([64, rows])
        fusion.add_input(tv0)
        if rows is None:
            fusion.assume("T0_1 % 4 == 0")
            fusion.assume("T0_1 <= 8192")
        tv1 = tp.sum(tv0, [-1])
        fusion.add_output(tv1)
    tv2 = tv0.cache_after(tp.LoadStoreOpType.TMA)
    tv2.set_memory_type(tp.MemoryType.Shared)
    tv1.split(0, 4).split(-1, 256)
    tp.propagate_transforms(tv1)
    tv1.merge(-2, -1).split(-1, 256)
    tv1.axis(0).parallelize(P.BIDx)
    tv1.axis(-1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    tv2.axis(0).parallelize(P.BIDx)
    tv2.axis(-1).parallelize(P.Bulk)
    tv2.circular_buffer(stages, prefetch, tp.Pipelined())
    return fusion


def loads(nodes, loops=()):
    """(the TmaCopy, the loops around it, outermost first) for every load of the kernel IR."""
    for n in nodes:
        if isinstance(n, Loop):
            yield from loads(n.body, (*loops, n))
        elif isinstance(n, TmaCopy):
            yield n, loops
        elif hasattr(n, "body"):
            yield from loads(n.body, loops)


def the_load(fusion):
    """The kernel's load in the circular loop's body (not the prologue's), with its loops, the mbarrier."""
    ir = lowered(fusion).kernel
    found = [(c, loops) for c, loops in loads(ir.body) if c.direction is tp.Direction.LOAD]
    copy, loops = found[-1]
    (barrier,) = [b for b in ir.mbarriers if b.name == copy.barrier]
    return copy, loops, barrier


@pytest.mark.parametrize("width", [4, 256, 1028, 8192])
def test_one_arrival_per_phase_after_every_copy_announced_its_bytes(width):
    fusion = row_sum()
    assert tp.verify(fusion, "sm_90a").ok
    copy, loops, barrier = the_load(fusion)
    assert barrier.count == 1 and copy.arrive_when
    inner = loops[-1]  # the boxes of a row: the loop inside the circular loop
    env = {"T0_1": width, "T0_0": 64}
    trips = evaluate(inner.extent, env)
    arrivals = [all(evaluate(c.lhs, {**env, f"loop.{inner.var}": k}) == evaluate(c.rhs, {**env, f"loop.{inner.var}": k})
                    for c in copy.arrive_when) for k in range(trips)]
    assert arrivals == [False] * (trips - 1) + [True]  # once, at the last copy
    assert trips * evaluate(copy.nbytes, env) == -(-width // 256) * 256 * 4  # the stage's boxes, all announced


def test_emitted_copy_announces_alone_and_arrives_once_holes_or_not():
    copy, _, _ = the_load(row_sum())
    lines = emit_copy(copy, str, "smem")
    text = "\n".join(lines)
    assert "tp_mbar_expect_tx_only(" in text and "tp_mbar_expect_tx(" not in text
    arrive = [line for line in lines if "tp_mbar_arrive(" in line]
    assert len(arrive) == 1 and arrive[0].lstrip().startswith("if (")  # no arrival in a hole's else branch
    assert text.index("tp_bulk_load_") < text.index("tp_mbar_arrive(")


@pytest.mark.parametrize("rows", [1024, 512])
def test_constant_box_count_keeps_one_arrival_per_copy(rows):
    fusion = row_sum(rows=rows)
    assert tp.verify(fusion, "sm_90a").ok
    copy, _, barrier = the_load(fusion)
    assert copy.arrive_when is None and barrier.count == rows // 256
    assert "tp_mbar_expect_tx(" in "\n".join(emit_copy(copy, str, "smem"))


def test_kernel_compiles_with_the_symbolic_count():
    fusion = row_sum()
    kernel = tp.compile(fusion, "sm_90a")
    assert "mbarrier.expect_tx.relaxed.cta.shared::cta.b64" in kernel.cuda_source
    assert all(n in kernel.cuda_source for n in ("tp_mbar_init(&tp_bar_T2[s], 1u)",))
    for p in itertools.product([2, 3], [-1, 0]):
        assert tp.verify(row_sum(stages=p[0], prefetch=p[1]), "sm_90a").ok
