"""Ping-pong on the placed nest (the verifier's and the code generator's): the consumer warpgroups
of a warp-specialized kernel with WarpSpecialized(on, ping_pong=True) take turns issuing each
iteration's first wgmma batch of the circular loop, as FlashAttention-3's warp scheduler barriers
order its two consumer warpgroups: while one computes its softmax, the other's products run.

The consumers are the W indices w of `on`, each of G threads (whole warps). Named barrier
TURN_BARRIER + w is warpgroup w's turn, counting 2 G threads: its own G at a TurnWait
(bar.sync) and the previous warpgroup's (w - 1 mod W) G at a TurnPass (bar.arrive). In
iteration i of the circular loop, warpgroup w runs

    TurnWait   bar.sync TURN_BARRIER + w, 2 G        (not warpgroup 0 in iteration 0: it goes first)
    WgmmaFence, the batch                            (issued, not waited for)
    TurnPass   bar.arrive TURN_BARRIER + (w + 1) % W, 2 G
                                                     (not warpgroup W - 1 in the last iteration: no
                                                      one waits for it, and a barrier left half
                                                      arrived would hang the next run of the loop)
    WgmmaWait  ...

Each run of the loop leaves every turn barrier where it found it: warpgroup w syncs T - [w == 0]
times and its predecessor arrives T - [w - 1 == W - 1] times, and the k-th sync meets the k-th
arrival. No warpgroup waits on itself: warpgroup 0's sync in iteration i waits for warpgroup
W - 1's pass of iteration i - 1, every other warpgroup's for its predecessor's pass of the same
iteration, so the waits around the ring go back one iteration. WS-PING-PONG proves both with z3
from these nodes (execution/conditions/ping_pong.py) and that nothing between a TurnWait and its
TurnPass waits for another warpgroup. Pure data: no z3 here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .barriers import WgmmaFence, WgmmaWait
from .warp_roles import WarpRoles


@dataclass
class Turn:
    """What a turn's barrier instruction needs: `index`, `extent`: the loop's; `axis` (the
    warpgroup's index), `groups` (W) and `threads` (2 G): the code generator's
    (codegen/lower/warp_roles.py)."""

    why: str
    index: str | None = None
    extent: object = None
    axis: str = ""
    groups: int = 0
    threads: int = 0


@dataclass
class TurnWait(Turn):
    """Warpgroup w waits for its turn: `bar.sync TURN_BARRIER + w, 2 G`, except warpgroup
    `first` (None: every warpgroup) in iteration 0."""

    first: int | None = None


@dataclass
class TurnPass(Turn):
    """Warpgroup w passes the turn on: `bar.arrive TURN_BARRIER + (w + 1) % W, 2 G`, except
    warpgroup `last` (None: every warpgroup) in the loop's last iteration."""

    last: int | None = None


def first_batch(body: list) -> int | None:
    """The position of the first wgmma batch placed in `body` (a WgmmaFence, the batch, its
    WgmmaWait), or None."""
    for k in range(len(body) - 2):
        if isinstance(body[k], WgmmaFence) and isinstance(body[k + 2], WgmmaWait):
            return k
    return None


def insert_turns(tree: list, groups: int | None) -> None:
    """In place: around the first wgmma batch of each consumer circular loop of a ping-pong
    WarpRoles, its TurnWait and TurnPass (module docstring); `groups`: the consumer warpgroups
    (W), None where unknown (WS-ROLES refuses the block). A loop without a batch gets none
    (WS-PING-PONG refuses it)."""
    roles = next((n for n in tree if isinstance(n, WarpRoles)), None)
    if roles is None or not roles.spec.ping_pong or not groups:
        return
    for _made, loop, _empty, _lag in roles.loops:
        k = first_batch(loop.body)
        if k is None:
            continue
        loop.body.insert(k + 2, TurnPass("the next warpgroup's turn to issue its wgmma batch", last=groups - 1))
        loop.body.insert(k, TurnWait("this warpgroup's turn to issue its wgmma batch (ping-pong)", first=0))


__all__ = ["Turn", "TurnPass", "TurnWait", "first_batch", "insert_turns"]
