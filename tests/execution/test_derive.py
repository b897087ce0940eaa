"""execution/derive.py: a frozen fusion's execution facts are derived once and shared; a live
fusion (still being scheduled) is derived afresh on every call, so a changed schedule gets a new
answer."""

from __future__ import annotations

import tileproof as tp
from tileproof.execution import derive as derive_module
from tileproof.execution.derive import derive, per_fusion
from tileproof.execution.loops import execution_order, loop_groups
from tileproof.execution.statements import tensor_execution
from tileproof.execution.indexing import block_dims


def _copy():
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_contig_tensor(2)
        fusion.add_input(t0)
        t1 = tp.set(t0)
        fusion.add_output(t1)
    t1.split(1, 128)
    t1.axis(2).parallelize(tp.ParallelType.TIDx)
    return fusion, t1


def test_a_snapshot_derives_each_fact_once():
    fusion, _ = _copy()
    snap = fusion.snapshot()
    assert snap.frozen and not fusion.frozen and derive(fusion) is None
    t1 = snap.tensors[1]
    launch = block_dims(snap)
    assert tensor_execution(t1, launch) is tensor_execution(t1, launch)
    assert loop_groups(snap) is loop_groups(snap)
    assert execution_order(snap) == execution_order(snap) and execution_order(snap) is not execution_order(snap)
    assert derive(snap) is derive(snap)


def test_a_live_fusion_sees_its_schedule_change():
    fusion, t1 = _copy()
    before = tensor_execution(t1, block_dims(fusion))
    t1.axis(1).parallelize(tp.ParallelType.BIDx)
    after = tensor_execution(t1, block_dims(fusion))
    assert before is not after and before.env != after.env


def test_per_fusion_counts_its_computations(monkeypatch):
    calls = []

    @per_fusion
    def facts(fusion):
        calls.append(fusion)
        return len(fusion.tensors)

    fusion, _ = _copy()
    snap = fusion.snapshot()
    assert facts(snap) == facts(snap) == 2 and len(calls) == 1
    assert facts(fusion) == facts(fusion) == 2 and len(calls) == 3
    assert derive_module.derive(snap).fusion is snap
