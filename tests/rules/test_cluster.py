"""Clusters and TMA multicast (execution/cluster.py, CLUSTER-MULTICAST): the schedule's cluster and
multicast declarations checked at the door, the rule's structural checks, and its two proofs
(the grid a multiple of the cluster, each multicast box the same for a cluster's blocks) refuted
with the values that break them."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.execution.warp_roles import StageDrain, WarpRoles
from tileproof.recipes import Cluster, GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm, tile_multiples
from tileproof.execution.nest import placed_nest

P = tp.ParallelType
WS = tp.WarpSpecialized(P.TIDy, num_registers=(40, 232))


def _fusion(cluster=(2, 1, 1), multicast=("T5", P.BIDx), specialized=WS, n_multiple=256, group=8):
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=specialized),
                              grid=GridOrder(group=group))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=n_multiple)
    fusion.cluster_dims = cluster
    if multicast:
        name, on = multicast
        next(t for t in fusion.tensors if t.name == name).multicast(on)
    return fusion


def _findings(fusion, code="CLUSTER-MULTICAST"):
    return [d for d in tp.verify(fusion).diagnostics if d.code == code]


@pytest.mark.parametrize("value", [(0, 1, 1), (2, 1, 1, 1), "2", (2.0, 1, 1), (True, 1, 1), ()])
def test_cluster_dims_are_checked_at_the_door(value):
    with tp.Fusion("f") as fusion:
        pass
    with pytest.raises(tp.ScheduleError, match="cluster_dims: expected up to three positive ints"):
        fusion.cluster_dims = value


def test_cluster_dims_pad_to_three_axes():
    with tp.Fusion("f") as fusion:
        pass
    assert fusion.cluster_dims == (1, 1, 1)
    fusion.cluster_dims = [2]
    assert fusion.cluster_dims == (2, 1, 1) and fusion.cluster_origin.endswith(".py:" + fusion.cluster_origin.split(":")[-1])


@pytest.mark.parametrize("on", [P.TIDx, P.Serial, "BIDx", None])
def test_multicast_takes_a_block_axis(on):
    with tp.Fusion("f") as fusion:
        t = tp.make_tensor([8])
        fusion.add_input(t)
        u = tp.set(t)
        fusion.add_output(u)
    with pytest.raises(tp.ScheduleError, match="multicast: `on` must be a block axis"):
        u.multicast(on)


def test_the_bundled_cluster_schedules_are_accepted():
    for fusion in (_fusion(), _fusion(cluster=(1, 2, 1), multicast=("T4", P.BIDy), n_multiple=512)):
        report = tp.verify(fusion)
        assert report.ok, [d.message for d in report.diagnostics if d.is_error]


def test_a_cluster_without_multicast_needs_only_whole_clusters():
    assert not _findings(_fusion(multicast=None))
    (d,) = _findings(_fusion(cluster=(1, 2, 1), multicast=None))
    assert "the grid's extent along BIDy, 1 when" in d.message and "N = 256" in d.message
    assert d.counterexample["grid extent"] == 1 and d.counterexample["remainder"] == 1


def test_more_than_eight_blocks_is_no_portable_cluster():
    (d,) = _findings(_fusion(cluster=(16, 1, 1), multicast=None, group=16))
    assert "groups 16 blocks; a portable cluster holds at most 8" in d.message
    assert d.counterexample == {"blocks": 16, "limit": 8}


def test_the_group_must_hold_whole_clusters():
    """Groups of 6 M tiles along blockIdx.x, clusters of 4: gridDim.x = 6."""
    (d,) = _findings(_fusion(cluster=(4, 1, 1), group=6))
    assert "the grid's extent along BIDx, 6" in d.message and d.counterexample["remainder"] == 2


def test_a_tile_that_depends_on_the_clustered_axis_is_not_multicast():
    (d,) = _findings(_fusion(multicast=("T4", P.BIDx)))
    assert "T4 is multicast along BIDx, but block 0 loads the box at (0, 0) and block 1" in d.message
    assert d.counterexample["origin 1"] != d.counterexample["other origin 1"]


def test_a_tile_of_the_other_operand_is_refuted_along_the_other_axis():
    """Clusters of two N tiles with B's tile multicast: each N tile needs its own."""
    (d,) = _findings(_fusion(cluster=(1, 2, 1), multicast=("T5", P.BIDy), n_multiple=512))
    assert "T5 is multicast along BIDy, but block" in d.message


@pytest.mark.parametrize("multicast, cluster, specialized, message", [
    (("T5", P.BIDy), (2, 1, 1), WS, "T5 is multicast along BIDy, but the cluster has one block along it"),
    (("T5", P.BIDx), (2, 1, 1), None, "T5 is multicast, but not circular-buffered with tp.WarpSpecialized"),
    (("T2", P.BIDx), (2, 1, 1), WS, "T2 is multicast, but it is not a TMA load into shared memory"),
])
def test_structural_problems(multicast, cluster, specialized, message):
    findings = _findings(_fusion(cluster=cluster, multicast=multicast, specialized=specialized))
    assert any(message in d.message for d in findings), [d.message for d in findings]


def test_the_code_generator_refuses_what_the_rule_rejects():
    from tileproof.codegen.lower import lower
    from tileproof.model.errors import InternalError

    with pytest.raises(InternalError, match="CLUSTER-MULTICAST"):
        lower(_fusion(specialized=None).snapshot(), tp.get_target("sm_90a"))


def test_the_producer_drains_every_stage_after_its_loops():
    nest = placed_nest(_fusion().snapshot())
    roles = nest.tree[0]
    assert isinstance(roles, WarpRoles)
    producer = roles.body[0].body
    assert isinstance(producer[-1], StageDrain) and producer[-1].stages == 4
    assert producer[-1].barrier == roles.loops[0][2]


def test_a_persistent_multicast_is_refuted_at_the_smallest_sizes(monkeypatch):
    """persistent_multicast_across_n_tiles: found first at sizes near 2^31 (divisions by the
    symbolic count of N tiles keep z3's model from shrinking in its budget), the counterexample is
    given at the smallest admitted sizes, M = 128, N = 256, K = 64 (one tile: block 1 of the
    cluster skips the box block 0 multicasts into it), by the solver's size probes."""
    from tileproof.verifier import solver

    monkeypatch.setattr(solver, "SIZE_PROBE_MS", 5000)  # the probes' limit, generous for a slow machine
    spec = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=spec),
                              grid=GridOrder(group=1, persistent=132), cluster=Cluster(size=2))
    fusion = tile_multiples(hopper_gemm("M", "N", "K", params), 64, n_multiple=256)
    (d,) = [d for d in tp.verify(fusion, "sm_90a").errors if d.code == "CLUSTER-MULTICAST"]
    assert "when M = 128, K = 64, N = 256: one of them skips it as a hole" in d.message
