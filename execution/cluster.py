"""Thread-block clusters and TMA multicast (sm_90a): the blocks of a cluster run on neighbouring
SMs at once and may write each other's shared memory.

    fusion.cluster_dims = (2, 1, 1)          # blocks (2j, 2j + 1) along x form a cluster
    sb.multicast(tp.ParallelType.BIDx)       # sb's TMA load: once per cluster, into every block

A multicast tensor's load is issued by the block of the cluster whose index along `on` is 0,
with `.multicast::cluster` and a mask of the blocks that differ from it only along `on`; each
of them completes its own full mbarrier (same shared offset) with the bytes, so each block's
producer still expects them. That is sound where every receiver would have loaded the same box:
CLUSTER-MULTICAST proves the box's origin and its hole tests equal for the blocks of a cluster,
and the grid a multiple of the cluster.

The issuer overwrites a stage in every receiver, so it must wait until all of them have read it.
The loads are warp-specialized (execution/warp_roles.py): each consumer warpgroup releases a stage on
the empty mbarrier of every block of its cluster (a remote arrive for the others), the empty
mbarriers count the consumer warpgroups of the whole cluster, and a producer's wait for a stage
therefore covers every block's reads of it. PIPELINE-WAR proves each block's releases follow its
reads; the cluster-wide count carries that to the issuer. Before its block exits, the producer
waits for the last release of every stage (a drain), so no remote arrive lands in a block that
has left; the blocks sync as a cluster after initializing their mbarriers, before any remote
write. Pure data: no z3.
"""

from __future__ import annotations


from ..model.types import BLOCK_TYPES, MemoryType, ParallelType
from ..model.options import MAX_CLUSTER, NO_CLUSTER
from ..hw.tma import is_tma_op
from .problems import Problem
from .circular import specialization



def cluster_dims(fusion) -> tuple[int, int, int]:
    return getattr(fusion, "cluster_dims", NO_CLUSTER)


def cluster_size(fusion) -> int:
    x, y, z = cluster_dims(fusion)
    return x * y * z


def cluster_extent(fusion, on: ParallelType) -> int:
    """Blocks of a cluster along the block axis `on`."""
    return cluster_dims(fusion)[BLOCK_TYPES.index(on)]


def multicast_tensors(fusion) -> list:
    return [t for t in fusion.tensors if getattr(t, "multicast_on", None) is not None]


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


__all__ = ["MAX_CLUSTER", "NO_CLUSTER", "Multicast", "checked_cluster_dims", "checked_multicast", "cluster_dims",
           "cluster_extent", "cluster_problems", "cluster_size", "multicast_tensors"]
