"""Thread-block clusters and TMA multicast (execution/cluster.py): one block of a cluster loads a
tile for every block of it. CLUSTER-MULTICAST proves the grid a multiple of the cluster and each
multicast load's box the one every receiver would have loaded itself."""

from __future__ import annotations

from collections.abc import Iterator

import z3

from ...execution.cluster import cluster_dims, cluster_extent, multicast_tensors
from ...execution.conditions.cluster import cluster_problems
from ...model.expr import Expr, const, floordiv, mod, substitute, var
from ...model.types import BLOCK_TYPES
from ..analysis.tma_issues import tma_issues
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import report_problems, report_values
from ..registry import rule
from ..solver import Verdict

PEER = "peer."  # the other block of the cluster: its block index variables


@rule("CLUSTER-MULTICAST", family="cluster")
def cluster_multicast(ctx: VerifyContext) -> Iterator[Diagnostic]:
    """A multicast TMA load brings each block of the cluster the tile it would have loaded itself.

    What it checks:
        With fusion.cluster_dims = (cx, cy, cz): at most 8 blocks a cluster, and the grid's
        extent along each clustered axis a multiple of the cluster's, for every admitted size.
        For each tensor multicast along a block axis (tv.multicast(on)): it is a TMA load into
        shared memory, circular-buffered with tp.WarpSpecialized, the cluster has more than
        one block along `on`, and for any two blocks of one cluster that differ along `on`,
        at every point of the load's loops, the box origin (each coordinate) is the same and
        each hole test (the copy skipped past an extent) has the same outcome.
    Why the hardware needs it:
        The first block along `on` issues one cp.async.bulk.tensor with .multicast::cluster,
        which writes the box into every receiver's shared memory at the same offset and
        completes each receiver's mbarrier there: a receiver that needed another box reads
        the wrong tile, and one that skips its copy (a hole) while the issuer does not
        receives bytes its mbarrier does not expect. A cluster is launched only where the grid
        is a multiple of it. The issuer refills a stage in every receiver, so it waits on an
        empty mbarrier that counts every block's consumer warpgroups (the warp-specialized
        pipeline's).
    Example:
        fusion, sa, sb, d, out = hopper_gemm_tile("multicast_of_a", 256, 64, block_m=128)  # 2 M tiles on BIDx
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy))
        fusion.cluster_dims = (2, 1, 1)
        sa.multicast(tp.ParallelType.BIDx)
    Fix:
        fusion, sa, sb, d, out = hopper_gemm_tile("multicast_of_b", 256, 64, block_m=128)
        for t in (sa, sb):
            t.circular_buffer(2, 0, tp.WarpSpecialized(tp.ParallelType.TIDy))
        fusion.cluster_dims = (2, 1, 1)
        sb.multicast(tp.ParallelType.BIDx)  # B's tile is the same for both M tiles of a cluster
    References:
        PTX ISA 9.7.9.25 (cp.async.bulk.tensor .multicast::cluster, ctaMask), 9.7.13.15
        (mbarrier, remote arrive through mapa), CUDA programming guide "Thread Block Clusters";
        CUTLASS include/cutlass/pipeline/sm90_pipeline.hpp (PipelineTmaAsync: consumers release
        every multicasting block's stage); docs/hardware.md#clusters-and-tma-multicast
    """
    # Formal statement: size(cluster) <= 8; for each block axis p with cluster extent c > 1: for all
    #   admitted sizes s: gridDim.p(s) % c == 0; for each multicast tensor T along p (structurally a
    #   warp-specialized TMA load, c > 1): for all admitted sizes, loop points and block indices b, b' with
    #   b.p // c == b'.p // c (the rest equal): origin_k(b) == origin_k(b') for each box coordinate k and
    #   (v_j(b) < e_j) == (v_j(b') < e_j) for each hole test j of the issue
    fusion = ctx.fusion
    problems = cluster_problems(fusion)
    yield from report_problems("CLUSTER-MULTICAST", problems)
    dims = cluster_dims(fusion)
    for p, c in zip(BLOCK_TYPES, dims):
        if c == 1:
            continue
        extent = ctx.block_dims.get(p, const(1))
        exprs = {"grid extent": extent, "cluster extent": const(c), "remainder": mod(extent, const(c))}
        q = ctx.query(list(exprs.values()))
        out = q.prove(q.eq(exprs["remainder"], const(0)), values=exprs)
        yield from report_values(
            ctx, "CLUSTER-MULTICAST", out, f"that the grid is a multiple of the cluster along {p.value}",
            lambda v, when: (f"the grid's extent along {p.value}, {v['grid extent']}{when}, is not a multiple of the "
                             f"cluster's {c}: a cluster launch needs whole clusters"),
            ("grid extent", "cluster extent", "remainder"),
            hint=f"make the blocks along {p.value} a multiple of {c} (fusion.assume on the size, a constant split), "
                 f"or cluster another axis", location=fusion.cluster_origin or fusion.origin)
    refused = {p.tensor for p in problems}
    issues = {i.info.consumer.name: i for i in tma_issues(ctx)}
    for tv in multicast_tensors(fusion):
        issue = issues.get(tv.name)
        if tv.name in refused or issue is None:
            continue
        yield from _same_box(ctx, tv, issue)


def _congruent(e: Expr, b: str, same) -> bool | None:
    """e(b) == e(b') by congruence: a subterm without b is itself; one whose arguments are equal
    is equal; otherwise `same` proves the subterm's two copies equal on its own. A persistent
    grid's box, 256 * ((132 t + b) // 8 % ceil(N / 256)), is then the one small claim
    (132 t + b) // 8 == (132 t + b') // 8, where z3 seldom decides the whole (it divides by a symbol).
    True: proved; False: not proved; None: refuted (a counterexample), which carries up through
    the injective terms above it (x + k, c * x with k, c the same in both blocks and c != 0)
    without another proof: the whole claim, asked next, decides and shows the values."""
    if b not in e.free_vars():
        return True
    if e.op == "var":
        return False
    parts = [_congruent(a, b, same) for a in e.args]
    if all(p is True for p in parts):
        return True
    if None in parts and _injective(e, b):
        return None
    return same(e)


def _injective(e: Expr, b: str) -> bool:
    """Whether e is x + k or c * x (c a nonzero constant), k and c free of b: then e(b) == e(b')
    exactly where x(b) == x(b')."""
    dependent = [a for a in e.args if b in a.free_vars()]
    if len(dependent) != 1:
        return False
    if e.op == "add":
        return True
    return e.op == "mul" and all(a.op == "const" and a.value != 0 for a in e.args if a is not dependent[0])


def _same_box(ctx: VerifyContext, tv, issue) -> Iterator[Diagnostic]:
    """Every receiver of tv's multicast would load the issuer's box, and skip it where it does."""
    on = tv.multicast_on.on
    c = cluster_extent(ctx.fusion, on)
    b = on.cuda_name
    peer = {b: var(PEER + b)}
    t = issue.t
    origin = list(t.box_origin)
    holes = [(x.value, x.extent) for x in t.issue_bounds]
    values = {"block": var(b), "other block": var(PEER + b)}
    values.update({f"origin {k}": e for k, e in enumerate(origin)})
    values.update({f"other origin {k}": substitute(e, peer) for k, e in enumerate(origin)})
    ranges = {**issue.m.ranges, PEER + b: issue.m.ranges.get(b, const(1))}
    hint = list(values.values()) + [e for h in holes for e in h] + [substitute(v, peer) for v, _ in holes]

    def query(extra):
        q = ctx.query(hint + extra + [const(c), floordiv(var(b), const(c))], ranges)
        q.add(q.eq(floordiv(var(b), const(c)), floordiv(var(PEER + b), const(c))))
        return q

    def same(e) -> bool | None:  # e(b) == e(b') for two blocks of a cluster, e alone (None: a counterexample)
        q = query([e, substitute(e, peer)])
        out = q.prove(q.eq(e, substitute(e, peer)), shrink_units=0)
        return None if out.status is Verdict.COUNTEREXAMPLE else out.proved

    def same_hole(v, e) -> bool:
        if _congruent(v, b, same):
            return True
        q = query([])
        return q.prove(q.lt(v, e) == q.lt(substitute(v, peer), e), shrink_units=0).proved

    if all(_congruent(e, b, same) is True for e in origin) and all(same_hole(v, e) for v, e in holes):
        return
    q = query([])
    claim = z3.And(*[q.eq(e, substitute(e, peer)) for e in origin],
                   *[q.lt(v, e) == q.lt(substitute(v, peer), e) for v, e in holes])
    out = q.prove(claim, values=values)
    yield from report_values(
        ctx, "CLUSTER-MULTICAST", out, f"that {tv.name}'s multicast box is the same for the blocks of a cluster",
        lambda v, when: (f"{tv.name} is multicast along {on.value}, but block {v['block']} loads the box at "
                         f"({', '.join(str(v[f'origin {k}']) for k in range(len(origin)))}) and block "
                         f"{v['other block']} of its cluster the box at "
                         f"({', '.join(str(v[f'other origin {k}']) for k in range(len(origin)))}){when}"
                         + ("" if any(v[f"origin {k}"] != v[f"other origin {k}"] for k in range(len(origin))) else
                            ": one of them skips it as a hole")),
        list(values),
        hint=f"multicast a tensor whose tile does not depend on {b} within a cluster (the operand broadcast along "
             f"the clustered axis), or cluster along an axis {tv.name} is broadcast on",
        notes=(f"box coordinates, innermost first: {', '.join(str(e) for e in origin)}",),
        tensor=tv.name, location=tv.multicast_on.origin or tv.origin)
