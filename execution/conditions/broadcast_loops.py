"""What makes running a loop over broadcast axes once exact (LOWERING-SUPPORTED, through
lowering.py): the loop's index reaches no index a statement uses.

A loop all of whose members are broadcasts runs once, with index 0 (model/loop_map.py runs_once,
execution/promotion.py broadcast_loops: nvFuser's trivial loops). Its iterations would write one
element again and again only where its index contributes nothing: here that is proved of each
statement in the loop, on the indices the execution model derives (execution/indexing.py), with the
loop's index a free variable. The index of a broadcast ID is no address (a broadcast is allocated
as nothing, its logical index reads element 0 and bounds none of the statement's points), so the
loop's index may reach broadcast IDs only: no concrete ID of the tensor (its allocation's, its
holes', a promoted loop's reference IDs) and no logical index of an operand read. A merge of the
broadcast with a concrete axis in an allocation domain, for one, would put each iteration at
another address: running it once would leave those unwritten, so the schedule is rejected.
"""

from __future__ import annotations

from ...model.expr import try_int
from ..indexing import indices_from_loop, loop_var, producer_logical
from ..problems import Problem
from ..promotion import broadcast_loops, promotion


def broadcast_loop_problems(fusion, order) -> list[Problem]:
    """A statement inside a loop over broadcasts that runs once (promotion.broadcast_loops) whose
    index reaches a concrete ID of the tensor or an operand's logical index."""
    once = broadcast_loops(fusion)
    out = []
    for tv in order:
        positions = [k for k, i in enumerate(tv.loop) if (tv.name, k) in once and try_int(i.extent_expr) != 1]
        if not positions:
            continue
        indices = indices_from_loop(tv)  # every loop index a free variable
        promo = promotion(tv)
        ids = {i.uid: i for i in tv.all_ids() + (list(promo.holes) if promo else [])}
        reads = [(inp, producer_logical(tv.definition, j, indices)) for j, inp in enumerate(tv.definition.inputs)]
        for k in positions:
            axis = tv.loop[k]
            name = loop_var(tv, axis).value
            reached = [ids[u].label() for u, e in indices.items()
                       if u in ids and not ids[u].is_broadcast and name in e.free_vars()]
            reached += [f"{inp.name}'s logical {inp.logical[n].label()}" for inp, logical in reads
                        for n, e in enumerate(logical) if name in e.free_vars()]
            if reached:
                out.append(_reaches(tv, k, reached))
    return out


def _reaches(tv, k: int, reached: list[str]) -> Problem:
    axis = tv.loop[k]
    return Problem(
        f"{tv.name}'s loop axis {k} ({axis.label()}) is a loop over broadcast axes that runs once, as nvFuser's "
        f"loops over broadcasts no concrete loop shares, but its index reaches {', '.join(reached)}: its "
        f"iterations would touch other elements, and running it once would skip them",
        hint=f"merge {axis.label()} only with broadcast axes (keep it out of {tv.name}'s allocation domain's merges "
             f"with concrete axes), or inline {tv.name} so that a concrete loop of its consumer shares the axis",
        tensor=tv.name, ids=(axis.name,), values={"axis": k, "extent": try_int(axis.extent_expr) or 0},
        notes=(("a loop all of whose members are broadcasts is not materialized (nvFuser's kir::ForLoop::isTrivial): "
                "its index is 0, and the statement runs once"),),
        location=axis.origin or tv.origin)
