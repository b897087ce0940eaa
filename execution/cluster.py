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


from ..model.types import BLOCK_TYPES, ParallelType
from ..model.options import MAX_CLUSTER, NO_CLUSTER



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


__all__ = ["MAX_CLUSTER", "NO_CLUSTER", "cluster_dims", "cluster_extent", "cluster_size", "multicast_tensors"]
