"""What thread-block clusters and TMA multicast need (CLUSTER-MULTICAST's structural part): a
grid that is a multiple of the cluster, at most 8 blocks, multicast loads in warp-specialized
circular buffers. Clusters themselves are execution/cluster.py."""

from __future__ import annotations


from ...model.types import MemoryType
from ...model.options import MAX_CLUSTER
from ...hw.tma import is_tma_op
from ..problems import Problem
from ..circular import specialization
from ..cluster import cluster_dims, cluster_extent, cluster_size, multicast_tensors


def cluster_problems(fusion) -> list:
    """CLUSTER-MULTICAST's structural part: what the cluster launch and each multicast load need
    of the schedule (module docstring); the proofs are the rule's."""
    out = []
    dims = cluster_dims(fusion)
    size = cluster_size(fusion)
    if size > MAX_CLUSTER:
        out.append(Problem(
            f"cluster_dims {dims} groups {size} blocks; a portable cluster holds at most {MAX_CLUSTER}",
            hint=f"use at most {MAX_CLUSTER} blocks a cluster, e.g. cluster_dims = (2, 1, 1)",
            values={"blocks": size, "limit": MAX_CLUSTER}, location=fusion.cluster_origin or fusion.origin))
    for tv in multicast_tensors(fusion):
        on = tv.multicast_on.on
        where = dict(tensor=tv.name, location=tv.multicast_on.origin or tv.origin)
        if tv.definition is None or not is_tma_op(tv.definition) or tv.memory_type is not MemoryType.Shared:
            out.append(Problem(
                f"{tv.name} is multicast, but it is not a TMA load into shared memory: only cp.async.bulk.tensor "
                f"writes other blocks' shared memory", hint=f"load {tv.name} with tp.LoadStoreOpType.TMA into "
                                                            f"shared memory, or drop multicast", **where))
            continue
        if cluster_extent(fusion, on) == 1:
            out.append(Problem(
                f"{tv.name} is multicast along {on.value}, but the cluster has one block along it "
                f"(cluster_dims {dims}): there is no other block to receive it",
                hint=f"set fusion.cluster_dims with 2 blocks along {on.value}, or drop multicast", **where))
        if specialization(tv) is None:
            out.append(Problem(
                f"{tv.name} is multicast, but not circular-buffered with tp.WarpSpecialized: the issuing block "
                f"overwrites its stages in every block of the cluster, and only the warp-specialized pipeline's "
                f"empty mbarriers tell it that all of them have read a stage",
                hint=f"circular-buffer {tv.name} with tp.WarpSpecialized(...)", **where))
    return out
