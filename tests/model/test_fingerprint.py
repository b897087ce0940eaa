"""The compile cache's fingerprint (model/fingerprint.py) covers the whole schedule:
two schedules that differ only in their cluster dims or a multicast once got one fingerprint, and
tp.compile returned the first one's kernel for the second."""

from __future__ import annotations

import dataclasses

import tileproof as tp
from tileproof.model.fingerprint import NOT_SCHEDULE, SCHEDULE_STATE, fingerprint
from tileproof.recipes import (Cluster, Epilogue, GridOrder, HopperGemmParams, HopperTile, Operand, TmaPipeline,
                               hopper_gemm)

WS = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))


def _attributes(obj) -> set[str]:
    slots = {s for c in type(obj).__mro__ for s in getattr(c, "__slots__", ())}
    return set(getattr(obj, "__dict__", {})) | slots


def test_every_attribute_of_a_schedule_is_fingerprinted_or_named_as_no_part_of_it():
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=3, prefetch=1, warp_specialized=WS), grid=GridOrder(group=8),
                              cluster=Cluster(size=2), epilogue=Epilogue(dtype=tp.bfloat16, stmatrix=True),
                              a=Operand(major="MN"))
    fusion = hopper_gemm(1024, 1024, 512, params)
    objects = {"Fusion": [fusion], "TensorView": fusion.tensors, "Op": fusion.exprs,
               "IterDomain": [i for t in fusion.tensors for i in t.loop + t.logical]}
    for kind, objs in objects.items():
        known = SCHEDULE_STATE[kind] | NOT_SCHEDULE[kind]
        for obj in objs:
            assert _attributes(obj) == known, (kind, _attributes(obj) ^ known)


def test_cluster_dims_and_multicast_change_the_fingerprint_and_the_kernel():
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=WS), grid=GridOrder(group=8))
    plain = hopper_gemm(1024, 1024, 512, params)
    clustered = hopper_gemm(1024, 1024, 512, dataclasses.replace(params, cluster=Cluster(size=2)))
    assert fingerprint(plain, "sm_90a") != fingerprint(clustered, "sm_90a")
    only_dims = hopper_gemm(1024, 1024, 512, params)
    only_dims.cluster_dims = (2, 1, 1)
    assert fingerprint(only_dims, "sm_90a") not in {fingerprint(plain, "sm_90a"), fingerprint(clustered, "sm_90a")}
    first, second = tp.compile(plain, "sm_90a"), tp.compile(clustered, "sm_90a")
    assert first is not second and "multicast" in second.cuda_source and "multicast" not in first.cuda_source
