"""execution/clipped_holes.py unread_holes: register arithmetic whose hole values only other holes
read runs at its holes unpredicated; memory reads and writes, reductions, zero selects, integer
arithmetic and iotas that would overflow at a hole keep their predicates."""

from __future__ import annotations

import numpy as np

import tileproof as tp
from tileproof.execution.clipped_holes import reduced_at_holes, unread_holes
from tileproof.execution.indexing import block_dims
from tileproof.execution.statements import CondKind, tensor_execution
from tileproof.execution.zero_padding import zero_filled
from tileproof.model.mma_op import is_mma
from tileproof.model.reduction import is_reduction_tensor
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime.reference import reference
from tileproof.model.targets import get_target
from tileproof.recipes.attention import AttentionTile, attention
from tileproof.rule_examples import masked_logsumexp

from support import reduction_sim
from support.examples import example_module

P = tp.ParallelType
casts = example_module("valid", "casts")


def _holes(fusion, name: str) -> list:
    tv = next(t for t in fusion.tensors if t.name == name)
    return tensor_execution(tv, block_dims(fusion)).conds_of(CondKind.HOLE)


def test_a_cast_chain_computes_its_intermediates_at_the_tail_and_loads_and_stores_there_not():
    """x[N] split by 128: the load (cast of a global input) and both outputs stay predicated; the
    multiply, subtract and divide between them in registers do not."""
    fusion = casts.cast_chain_with_scalars()
    assert unread_holes(fusion) == {"T2", "T3", "T4"}
    assert all(_holes(fusion, name) == [] for name in ("T2", "T3", "T4"))
    assert all(_holes(fusion, t.name) for t in [fusion.tensors[1], *fusion.outputs])
    assert tp.verify(fusion, "sm_90a").ok


def _integer_chain(start: int, dtype=tp.float32):
    with tp.Fusion(f"iota_from_{start}") as fusion:
        x = tp.make_tensor([1000], dtype=dtype)
        fusion.add_input(x)
        index = tp.iota(1000, start=start, dtype=tp.int32)
        doubled = tp.mul(tp.cast(x, tp.int32), 2) if dtype is tp.int32 else tp.cast(index, tp.float32)
        fusion.add_output(tp.add(x, tp.cast(doubled, dtype)) if dtype is tp.int32 else tp.add(x, doubled))
    for tv in fusion.tensors[1:]:
        tv.split(0, 128)
        tv.axis(0).parallelize(P.BIDx)
        tv.axis(1).parallelize(P.TIDx)
    tp.inline_most(fusion)
    return fusion


def test_an_iota_runs_at_its_holes_only_where_its_values_fit_there():
    """iota(1000) split by 128 reaches index 1023 at its holes: from 0 it fits int32, from
    2^31 - 1000 it would overflow there, so that one keeps its predicate."""
    fits, overflows = _integer_chain(0), _integer_chain(2**31 - 1000)
    assert "T1" in unread_holes(fits) and _holes(fits, "T1") == []
    assert "T1" not in unread_holes(overflows) and _holes(overflows, "T1")
    assert tp.verify(fits, "sm_90a").ok and tp.verify(overflows, "sm_90a").ok


def test_integer_arithmetic_keeps_its_predicates():
    """x * 2 in int32 on a hole's garbage could overflow (undefined in C++): predicated."""
    fusion = _integer_chain(0, tp.int32)
    product = next(t for t in fusion.tensors if t.definition is not None and t.definition.name == "mul")
    assert product.name not in unread_holes(fusion) and _holes(fusion, product.name)


def test_attention_at_a_tail_keeps_the_predicates_that_decide_its_values():
    """300 rows and keys, causal: the row max and sums keep the hole predicates of their keys (those
    must not contribute) and run at the rows past M (reduced_at_holes); the probabilities' copy into
    the wgmma's A operand keeps its zero select past the keys (zero_padding) and runs at the rows;
    the output store keeps its predicates; the score arithmetic between them runs at its holes."""
    tile = AttentionTile(rows=300, keys=300, key_tile=128, head_dim=128, value_dim=128, causal=True)
    fusion = attention(tile, warpgroups=2, stages=2, producer=True, registers=(24, 240), in_place=True)
    unread, reduced = unread_holes(fusion), reduced_at_holes(fusion)
    kinds = {next(t for t in fusion.tensors if t.name == name).definition.name for name in unread}
    assert {"iota", "le", "where", "sub", "exp2", "cast", "broadcast"} <= kinds and zero_filled(fusion) <= unread
    keyed = [t for t in fusion.tensors if is_reduction_tensor(t) and not is_mma(t) and _holes(fusion, t.name)]
    assert len(keyed) == 2  # the row max and sum within a key tile: their keys past N
    for t in fusion.tensors:
        if is_reduction_tensor(t) and not is_mma(t):
            assert t.name in reduced and all(c.why.startswith("hole of r") for c in _holes(fusion, t.name)), t
        if t in fusion.outputs:
            assert t.name not in unread | reduced and _holes(fusion, t.name), t
    assert all(_holes(fusion, name) == [] for name in unread)
    assert tp.verify(fusion, "sm_90a").ok


def test_the_simulated_kernel_computes_holes_that_reach_no_element(monkeypatch):
    """The masked log-sum-exp at 70 x 200 in tiles of 32: the CPU simulator gives the statements of
    unread_holes a HOLE where they read what no statement wrote, fails any other statement reading
    one, and the outputs are the float64 reference's."""
    fusion, x, keep, m, l, lse = masked_logsumexp("holes_70_200", 70, 200, 32)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok and unread_holes(fusion)
    kernel = lower(fusion.snapshot(), get_target("sm_90a"), report.decisions).kernel
    holes = []
    element = reduction_sim.Simulator.element

    def counted(self, s, k, env, v):
        out = element(self, s, k, env, v)
        holes.extend(s.out.tensor for _, _, value in out if value is reduction_sim.HOLE)
        return out

    monkeypatch.setattr(reduction_sim.Simulator, "element", counted)
    values = np.random.default_rng(7).standard_normal((70, 200))
    (got,) = reduction_sim.run_kernel(kernel, fusion, [values], {})
    (want,) = reference(fusion, [values])
    assert set(holes) and set(holes) <= reduction_sim.computed_at_holes(fusion)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-5, atol=1e-5)
