"""Ping-pong on the placed nest (the verifier's and the code generator's): the consumer warpgroups
of a warp-specialized kernel with WarpSpecialized(on, ping_pong=True) take turns issuing each
iteration's wgmma batches of the circular loop (its first batch; in a rotated loop's overlap
every batch issued before the first wait: tile i + 1's Q K^T, the rescale of O, tile i's P V),
as FlashAttention-3's warp scheduler barriers order its two consumer warpgroups: while one
computes its softmax, the other's products run.

The consumers are the W indices w of `on`, each of G threads (whole warps). Named barrier
TURN_BARRIER + w is warpgroup w's turn, counting 2 G threads: its own G at a TurnWait
(bar.sync) and the previous warpgroup's (w - 1 mod W) G at a TurnPass (bar.arrive). In
iteration i of the circular loop, warpgroup w runs

    TurnWait   bar.sync TURN_BARRIER + w, 2 G        (not warpgroup 0 in iteration 0: it goes first)
    WgmmaFence, the batches                          (issued, not waited for; the stage waits
                                                      among them moved before the TurnWait)
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

import dataclasses
from dataclasses import dataclass

from .barriers import TmaWait, WgmmaFence, WgmmaWait
from .rotation import Rotated
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


def insert_turns(tree: list, groups: int | None) -> None:
    """In place: the turn of each consumer circular loop of a ping-pong WarpRoles (module
    docstring); `groups`: the consumer warpgroups (W), None where unknown (WS-ROLES refuses the
    block). A loop without a batch gets none (WS-PING-PONG refuses it)."""
    roles = next((n for n in tree if isinstance(n, WarpRoles)), None)
    if roles is None or not roles.spec.ping_pong or not groups:
        return
    for _made, loop, _empty, _lag in roles.innermost:
        turned = _turned(loop.body, groups)
        if turned is not None:
            loop.body[:] = turned


def _turned(body: list, groups: int) -> list | None:
    """`body` with its turn: from the first WgmmaFence to the first WgmmaWait after it, the batches
    issued before any of them is waited for (one batch; with a rotated loop's overlap, the next
    tile's Q K^T, the rescale of O and this tile's P V, as FlashAttention-3's warp scheduler
    barriers hold them). The stage waits among them move before the TurnWait: a warpgroup takes
    its turn with its tiles loaded, so that nothing in the turn waits for the producer. A rotated
    scope (execution/rotation.py) is split around the turn's barriers: they run in iteration i,
    with the loop's counter. None where the body issues no batch."""
    flat = [(c, n) for n in body for c in (n.body if isinstance(n, Rotated) else [n])]
    start = next((k for k, (c, _) in enumerate(flat) if isinstance(c, WgmmaFence)), None)
    if start is None:
        return None
    end = next((k for k in range(start, len(flat)) if isinstance(flat[k][0], WgmmaWait)), len(flat))
    turn = flat[start:end]
    waits = [x for x in turn if isinstance(x[0], TmaWait)]
    seq = (flat[:start] + waits + [(TurnWait("this warpgroup's turn to issue its wgmma batches (ping-pong)",
                                             first=0), None)]
           + [x for x in turn if not isinstance(x[0], TmaWait)]
           + [(TurnPass("the next warpgroup's turn to issue its wgmma batches", last=groups - 1), None)] + flat[end:])
    out: list = []
    previous = None
    for c, parent in seq:  # runs of one rotated scope's statements: that scope again
        if not isinstance(parent, Rotated):
            out.append(c)
        elif parent is previous:
            out[-1].body.append(c)
        else:
            out.append(dataclasses.replace(parent, body=[c]))
        previous = parent
    return out


__all__ = ["Turn", "TurnPass", "TurnWait", "insert_turns"]
