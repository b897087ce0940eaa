"""What ping-pong needs (WS-PING-PONG, structurally): consumer warpgroups that are indices of the
warp-specialized axis, each whole warpgroups, at least two and few enough for the named barriers,
and a turn around a wgmma batch in every consumer circular loop holding nothing that waits for
another warpgroup. The turns themselves are execution/ping_pong.py; the rule proves their counts
and their order with z3 (verifier/rules/warp_specialization.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ...hw.threads import NAMED_BARRIERS, TURN_BARRIER, WARPGROUP
from ...model.types import ParallelType
from ...model.tensor import TensorView
from ..barriers import WgmmaCommit, WgmmaFence
from ..reduction import Phase
from ..circular import specialization
from ..nest import placed_nest
from ..ping_pong import TurnPass, TurnWait
from ..problems import Problem
from ..warp_roles import WarpRoles, role_threads, specialized_tensors


@dataclass
class Turns:
    """One consumer circular loop's turn: its TurnWait and TurnPass, the consumer warpgroups (W)
    and the loop's label."""

    wait: TurnWait
    passed: TurnPass
    groups: int
    loop: str


def ping_pong_spec(fusion):
    """The kernel's WarpSpecialized where it asks for ping-pong, else None."""
    tvs = specialized_tensors(fusion)
    spec = specialization(tvs[0]) if tvs else None
    return spec if spec is not None and spec.ping_pong else None


def turn_problems(fusion) -> tuple[list[Problem], list[Turns]]:
    """WS-PING-PONG's structural part: the problems, and the turns placed (for the proof)."""
    spec = ping_pong_spec(fusion)
    if spec is None:
        return [], []
    tvs = specialized_tensors(fusion)
    where = dict(tensor=tvs[0].name, location=spec.origin or tvs[0].circular.origin or tvs[0].origin)
    inner, consumers = role_threads(fusion)
    if inner is None or consumers is None:
        return [], []  # WS-ROLES reports the block
    most = NAMED_BARRIERS - TURN_BARRIER
    if spec.on is ParallelType.TIDx:
        return [Problem(
            f"ping_pong takes turns among the consumer warpgroups, the indices of the warp-specialized axis; on TIDx "
            f"the consumers are one range of threadIdx.x, not indices of their own",
            hint="warp-specialize on TIDy (over TIDx = 128) or TIDz, one consumer warpgroup an index", **where)], []
    if consumers < 2:
        return [Problem(
            f"ping_pong with {consumers} consumer index on {spec.on.value}: no other warpgroup to take turns with",
            hint=f"bind two or more indices of {spec.on.value} to the consumers (each its own rows or tiles), or drop "
                 f"ping_pong", values={"consumer warpgroups": consumers}, **where)], []
    if inner % WARPGROUP:
        return [Problem(
            f"ping_pong: each index of {spec.on.value} holds {inner} threads, not whole warpgroups of {WARPGROUP}: "
            f"a turn is one index's wgmma batch, which whole warpgroups issue",
            hint=f"give each index of {spec.on.value} a multiple of {WARPGROUP} threads",
            values={"threads per index": inner}, **where)], []
    if consumers > most:
        return [Problem(
            f"ping_pong with {consumers} consumer indices needs {consumers} named barriers; a block has "
            f"{NAMED_BARRIERS}, of which {most} are free for turns",
            hint=f"at most {most} consumer indices", values={"consumer warpgroups": consumers}, **where)], []
    placed = placed_nest(fusion)
    roles = next((n for n in placed.tree if isinstance(n, WarpRoles)), None) if placed is not None else None
    if roles is None:
        return [], []  # no nest (LOOP-NEST-ORDER and friends say why)
    out, turns = [], []
    for _made, loop, _empty, _lag in roles.innermost:
        label = placed.label(loop)
        waits = [k for k, n in enumerate(loop.body) if isinstance(n, TurnWait)]
        passes = [k for k, n in enumerate(loop.body) if isinstance(n, TurnPass)]
        if not waits or not passes:
            out.append(Problem(
                f"ping_pong, but {label} (the warp-specialized circular loop) issues no wgmma batch of its own: there "
                f"is nothing for the consumer warpgroups to take turns at",
                hint="read the stages with a wgmma (an MmaOp on a Hopper macro) inside the circular loop, or drop "
                     "ping_pong", **where))
            continue
        inside = loop.body[waits[0] + 1:passes[0]]
        blocking = [n for n in inside if _waits(n)]
        if len(waits) != 1 or len(passes) != 1 or blocking or not any(isinstance(n, WgmmaFence) for n in inside):
            out.append(Problem(
                f"ping_pong: {label}'s turn holds {', '.join(_named(n) for n in blocking or inside)} between its "
                f"bar.sync and its bar.arrive, not wgmma batches and statements that wait for no one: a barrier or "
                f"wait there can wait for a warpgroup that is itself waiting for its turn",
                hint="report this schedule: the turns are placed around the batches", **where))
            continue
        turns.append(Turns(loop.body[waits[0]], loop.body[passes[0]], consumers, label))
    return out, turns


def _waits(n) -> bool:
    """Whether n can wait for another thread: a barrier, a wait, or a reduction's combine across
    threads (shuffles, a block's bar.sync); fences, commits and statements within a thread cannot."""
    if isinstance(n, (WgmmaFence, WgmmaCommit)):
        return False
    if hasattr(n, "body"):
        return any(_waits(c) for c in n.body)
    if isinstance(n, tuple):  # a reduction's phase
        return n[1] is Phase.COMBINE
    return not isinstance(n, TensorView)


def _named(n) -> str:
    return f"{n[0].name}'s {n[1].value}" if isinstance(n, tuple) else getattr(n, "name", type(n).__name__)


__all__ = ["Turns", "ping_pong_spec", "turn_problems"]
