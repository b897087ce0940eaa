"""A structural fingerprint of a scheduled fusion: the key of the in-memory compile cache, and
what tells tp.compile that a fusion tp.verify accepted is unchanged since.

Two fusions with equal fingerprints verify alike and lower to the same kernel: it
covers every tensor (dtype, memory, contiguity, compute-at, allocation and loop
domains with parallel types, transform history, circular buffering, multicast), every op,
the symbols, the assumptions and the cluster dims. SCHEDULE_STATE lists the attributes it
reads and NOT_SCHEDULE those it leaves out (source locations, back references, counters):
tests/model/test_fingerprint.py fails on an attribute in neither. IterDomain uids are renumbered in order of appearance, so rebuilding
the same schedule gives the same fingerprint.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from .expr import Expr
from .fusion import Fusion
from .iterdomain import IterDomain, Merge, Split, Swizzle


class _Ids:
    def __init__(self):
        self.n: dict[int, int] = {}

    def __call__(self, i: IterDomain) -> str:
        k = self.n.setdefault(i.uid, len(self.n))
        return f"{k}:{_tree(i.extent_expr)}:{i.iter_type.value}:{i.parallel_type.value}"


@lru_cache(maxsize=4096)
def _tree(e: Expr) -> str:
    """The Expr's own tree, not str(e): that simplifies through sympy, which costs a cache hit
    milliseconds, and structurally different but equal extents only miss the cache."""
    if e.op in ("const", "var"):
        return str(e.value)
    return f"{e.op}({','.join(map(_tree, e.args))})"


def _transform(t, ids: _Ids) -> str:
    if isinstance(t, Split):
        return f"split({ids(t.in_)}->{ids(t.outer)},{ids(t.inner)};{_tree(t.factor)};{t.inner_split})"
    if isinstance(t, Merge):
        return f"merge({ids(t.outer)},{ids(t.inner)}->{ids(t.out)})"
    if isinstance(t, Swizzle):
        return f"swizzle({ids(t.x_in)},{ids(t.y_in)}->{ids(t.x_out)},{ids(t.y_out)})"
    return repr(t)


# what each object of a schedule holds: read by fingerprint() / not part of the schedule
SCHEDULE_STATE = {
    "Fusion": {"name", "symbols", "assumptions", "inputs", "outputs", "tensors", "exprs", "_cluster_dims",
               "reduction_groups", "tmem_regions", "loop_rotation", "_fast_math",
               "_dependent_launch", "_reversed_blocks"},
    "TensorView": {"name", "user_name", "dtype", "memory_type", "compute_at", "tmem_dim_sep", "contiguity", "circular", "root",
                   "logical", "history", "loop", "allocation", "multicast_on", "online", "skip", "definition"},
    "Op": {"kind", "name", "op_type", "inputs", "output", "logical_map", "scalar", "cache_op", "macro",
           "tf32_rounding", "rescale_max", "rescale_map", "iota"},
    "IterDomain": {"uid", "extent_expr", "iter_type", "parallel_type", "definition"},
}
NOT_SCHEDULE = {
    "Fusion": {"origin", "assumption_origins", "cluster_origin", "tmem_regions_origin", "loop_rotation_origins", "_iterdomain_count", "_tensor_count",
               "frozen",  # frozen: a snapshot of a schedule has the schedule's fingerprint
               "extent_aliases",  # names resolved when read; the extents they unified are in the IterDomains
               "views"},  # a snapshot's, derived from the schedule (model/producer_aliases.py)
    "TensorView": {"origin", "memory_origin", "allocation_origin", "compute_at_origin", "online_origin", "skip_origin",
                   "fusion"},
    "Op": {"origin", "macro_origin"},
    "IterDomain": {"origin", "parallel_origin", "number"},
}


def fingerprint(fusion: Fusion, target: str) -> str:
    ids = _Ids()
    parts = [f"target={target}", f"name={fusion.name}", f"cluster={fusion.cluster_dims}",
             "symbols=" + ",".join(fusion.symbols), "assume=" + ";".join(map(str, fusion.assumptions)),
             "inputs=" + ",".join(t.name for t in fusion.inputs),
             "outputs=" + ",".join(t.name for t in fusion.outputs)]
    if fusion.reduction_groups:  # only where there are: the fingerprints of other fusions stay as they were
        parts.append("groups=" + ";".join(",".join(t.name for t in g) for g in fusion.reduction_groups))
    if fusion.fast_math:  # likewise
        parts.append("fast_math")
    if fusion.dependent_launch:  # likewise
        parts.append("dependent_launch")
    if fusion.reversed_blocks:  # likewise
        parts.append("reversed=" + ",".join(p.name for p in fusion.reversed_blocks))
    if fusion.loop_rotation:  # likewise
        parts.append("rotation=" + ";".join(f"{tv.name}@{axis}:" + ",".join(t.name for t in chosen)
                                              for tv, axis, chosen in fusion.loop_rotation))
    if fusion.tmem_regions:  # likewise
        parts.append("tmem_regions=" + ";".join(",".join(t.name for t in r) for r in fusion.tmem_regions))
    for tv in fusion.tensors:
        parts.append("|".join([
            tv.name + (f"={tv.user_name}" if tv.user_name else ""), tv.dtype.name, tv.memory_type.value, f"ca={tv.compute_at}", f"sep={tv.tmem_dim_sep}",
            "contig=" + ",".join(map(str, tv.contiguity)),
            f"circular={tv.circular.stages},{tv.circular.prefetch},{tv.circular.type}" if tv.circular else "circular=-",
            "root=" + ",".join(ids(i) for i in tv.root),  # an rfactor's partial reduction: not its logical domain
            "logical=" + ",".join(ids(i) for i in tv.logical),
            "history=" + ",".join(_transform(t, ids) for t in tv.history),
            "loop=" + ",".join(ids(i) for i in tv.loop),
            "alloc=" + (",".join(ids(i) for i in tv.allocation) if tv.allocation is not None else "-"),
            f"multicast={tv.multicast_on.on.name if tv.multicast_on is not None else '-'}",
        ] + ([f"online={','.join(t.name for t in tv.online)}"] if tv.online is not None else [])
          + ([f"skip={tv.skip[0].name},{_tree(tv.skip[1])}"
               + (f",unmasked={_tree(tv.skip[2])}" if tv.skip[2] is not None else "")] if tv.skip is not None else [])))
    for op in fusion.exprs:
        parts.append(f"{op.kind}:{op.name}:{op.op_type.value}:{[t.name for t in op.inputs]}->{op.output.name}"
                     f":{op.logical_map}:{op.scalar!r}:{op.cache_op.value}:{op.macro}:{op.tf32_rounding}"
                     + (f":rescale={op.rescale_max.name}{op.rescale_map}" if op.rescale_max is not None else "")
                     + (f":iota={op.iota!r}" if op.iota is not None else ""))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
