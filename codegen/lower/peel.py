"""The iterations an online max's loop computes without its mask (TensorView.skip_masked's
`unmasked`: causal attention's key tiles below the diagonal, which FlashAttention peels).

Below the block's unmasked count U the mask keeps every point (ONLINE-SKIP proves it), so there
where(mask, x, -inf) is x and the mask's own statements (execution/skip.py SkippedLoop.mask_only:
the comparison and the iota broadcasts only it reads) compute nothing anyone reads. The pass
`peel_unmasked` puts the run of elementwise nests of the loop's body that ends with the where's
twice into a WholeTile: under the guard t < U (t the loop's counter, U block-uniform: the guard
is the same in every thread) the run with the where a copy of x and the mask's statements in it
gone, else the run as lowered. One switch of straight code: a switch per nest, or the run widened
over the scores' wgmma batch to the key indices computed before it, left ptxas more values live
(spills where there were none). The mask's statements outside the run (the key indices, before
the batch) run in every iteration, as every other statement: the one proved, in both versions.
"""

from __future__ import annotations

from dataclasses import replace

from ...execution.rotation import Rotated
from ...execution.skip import named_loops
from ...execution.statements import Cond
from ...model.expr import const, var
from ...model.types import OpKind
from ..ir import Compute, KernelIR, Loop, LoopKind, WholeTile

WHY = "a key tile the mask keeps whole: no mask"


def peel_unmasked(st) -> None:
    """The run of a skipping loop's body that ends with its where, in two versions."""
    ir: KernelIR = st.kernel
    for s in named_loops(st.fusion).values():
        if s.unmasked is None or s.where is None:
            continue
        names = s.mask_only | {s.where.name}
        counters = {cpp: index for index, cpp in ir.names.items()}  # a loop's C++ counter -> its index variable
        _visit(ir.body, s.group, names, s.where.name, s.unmasked, counters)


def _visit(nodes: list, key: int, names: frozenset[str], where: str, unmasked, counters: dict) -> None:
    for n in nodes:
        if isinstance(n, Loop) and n.key == key:
            _peel(n.body, n.var, names, where, unmasked, counters)
            for r in n.body:  # a rotated loop's: the next iteration's where (its counter declared again)
                if isinstance(r, Rotated):
                    _peel(r.body, n.var, names, where, unmasked, counters)
        elif isinstance(n, Rotated) and n.first and n.loop_key == key:  # the rotated loop's first iteration
            _peel(n.body, n.var, names, where, unmasked, counters)
        elif isinstance(n, Loop) or (hasattr(n, "body") and not isinstance(n, WholeTile)):
            _visit(n.body, key, names, where, unmasked, counters)  # warp roles and their Roles, outer loops


def _peel(body: list, counter: str, names: frozenset[str], where: str, unmasked, counters: dict) -> None:
    """In place: body's run of elementwise nests that ends with the where's, in two versions."""
    # (a rotated loop's next iteration is peeled in its own scope, under its own counter)
    at = next((k for k, c in enumerate(body) if not isinstance(c, Rotated) and _computes(c, frozenset({where}))), None)
    if at is None:
        return
    first = at  # the elementwise nests right before the where's: one straight run to switch
    while first > 0 and _elementwise(body[first - 1]):
        first -= 1
    run = Loop(counter + "_peeled", const(1), LoopKind.SERIAL, "the mask's statements and the where",
               body=body[first:at + 1])
    guard = [Cond(var(counters.get(counter, counter)), "<", unmasked, WHY)]
    body[first:at + 1] = [WholeTile(guard, _peeled(run, names, where), run, why=WHY)]


def _elementwise(n) -> bool:
    """A Compute, or a nest of loops holding only Computes."""
    if isinstance(n, Compute):
        return True
    return isinstance(n, Loop) and all(_elementwise(c) for c in n.body)


def _computes(n, names: frozenset[str]) -> bool:
    if isinstance(n, Compute):
        return n.out.tensor in names
    return hasattr(n, "body") and any(_computes(c, names) for c in n.body)


def _peeled(n, names: frozenset[str], where: str):
    """n without the mask's statements, its where a copy of x (where(mask, x, -inf)'s second input)."""
    if isinstance(n, Compute):
        if n.out.tensor == where:
            return replace(n, kind=OpKind.LOAD_STORE, name="set", ins=[n.ins[1]], scalar=None,
                           comment=f"{n.comment}: the mask keeps this tile whole")
        return n
    if isinstance(n, WholeTile):
        return replace(n, whole=_peeled(n.whole, names, where), lowered=_peeled(n.lowered, names, where))
    if hasattr(n, "body"):
        body = [_peeled(c, names, where) for c in n.body
                if not (isinstance(c, Compute) and c.out.tensor in names - {where})]
        return replace(n, body=body)
    return n


__all__ = ["peel_unmasked"]
