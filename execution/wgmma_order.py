"""wgmma's asynchrony placed on the loop nest (the verifier's and the code generator's):
PTX ISA 9.7.15.7 asks for a wgmma.fence before the first wgmma and after register writes to its
accumulators, and a wgmma.commit_group + wgmma.wait_group before the accumulators are read or
its shared tiles reused.

A batch is a maximal subtree holding nothing but wgmma statements and loops (the K slices of a
tile): a WgmmaFence before it, a WgmmaWait after it. The wait leaves `pending` = 1 batch in
flight where the batch reads TMA circular buffers refilled at least two iterations after it
(stages - prefetch >= 2 for each): the next iteration's batch is issued while this one runs, and
the barrier before a refill follows the wait that completes the batch that read the stage
(PIPELINE-WAR proves it with the batch's reads completing at that wait), unless the scope reads
or writes the accumulators elsewhere (after the batch, or before it: an online max's rescale of
them in the next iteration), or touches the A registers an RS wgmma of the batch reads
anywhere in it (the next iteration's load of A: PTX forbids accessing them before a wait
covering the wgmma), then nothing stays in flight. The circular loop is
then followed by a WgmmaWait(0): the accumulators are complete before anything reads them.
Elsewhere the wait leaves none in flight.

A rotated loop's body (execution/rotation.py) whose rotated statements hold a batch is placed
otherwise (_overlapped): the next iteration's batch first, every batch committed alone
(WgmmaCommit) and waited for where its registers are next touched (FlashAttention-3's
intra-warpgroup overlap; docs/attention.md#intra-warpgroup-overlap).
"""

from __future__ import annotations


from ..model.mma_op import is_wgmma_op
from ..model.types import MemoryType
from .barriers import Async, Hazards, WgmmaCommit, WgmmaFence, WgmmaWait
from .pipeline import Prefetched
from .loops import statements_in
from .rotation import Rotated
from .warp_roles import StageRelease

CONVERSIONS = ("set", "broadcast", "cast")  # ops that copy their input (rounded, or to more axes)


def _only_wgmma(n, hazards: Hazards) -> bool:
    if hasattr(n, "body"):
        return bool(n.body) and all(_only_wgmma(c, hazards) for c in n.body)
    acc = hazards.access(n)
    return acc is not None and acc.kind is Async.WGMMA


def _in_flight(scope: list) -> int:
    """1 where the batch's scope (a circular loop's body) refills its TMA stages at least two
    iterations after reading them, else 0; a warp-specialized loop's consumers: the iterations
    they keep a datum before releasing it."""
    releases = [n for n in scope if isinstance(n, StageRelease) and not n.tail]
    if releases:
        return releases[0].lag
    fills = [n for n in scope if isinstance(n, Prefetched) and n.tma]
    return 1 if fills and all(n.stages - n.prefetch >= 2 for n in fills) else 0


def insert_wgmma_waits(nodes: list, hazards: Hazards) -> None:
    """In place: every batch between a fence and a wait (module docstring)."""
    out = []
    for n in nodes:
        if _only_wgmma(n, hazards):
            out.append(n)
            continue
        overlapped = _overlapped(n.body, hazards) if hasattr(n, "body") else None
        if overlapped is not None:  # a rotated loop's: the next iteration's batch issued first
            n.body[:] = overlapped
            out += [n, WgmmaWait(0, "the batches still in flight: the accumulators complete", commit=False)]
            continue
        if hasattr(n, "body"):
            insert_wgmma_waits(n.body, hazards)
            if any(isinstance(c, WgmmaWait) and c.pending for c in n.body):
                out += [n, WgmmaWait(0, "the batches still in flight: the accumulators complete", commit=False)]
                continue
        out.append(n)
    nodes[:] = _wrapped(out, hazards)


def _leaves(n, hazards: Hazards):
    if hasattr(n, "body"):
        for c in n.body:
            yield from _leaves(c, hazards)
    elif hazards.access(n) is not None:
        yield hazards.access(n)


def _touched_later(batch, later: list, hazards: Hazards) -> bool:
    """Whether a statement of `later` (the batch's scope but the batch) reads or writes the batch's
    accumulators."""
    accumulators = {a.writes for a in _leaves(batch, hazards)} - {None}
    return any(a.kind is not Async.WGMMA and (a.writes in accumulators or a.reads & accumulators)
               for n in later for a in _leaves(n, hazards))


def _a_registers(n) -> set[str]:
    """The register tensors an RS wgmma of the batch reads as its A fragment."""
    if hasattr(n, "body"):
        return set().union(*(_a_registers(c) for c in n.body)) if n.body else set()
    tv = n[0] if isinstance(n, tuple) else n
    op = getattr(tv, "definition", None)
    return {t.name for t in op.inputs if t.memory_type is MemoryType.Local} if is_wgmma_op(op) else set()


def _a_touched(batch, scope: list, hazards: Hazards) -> bool:
    """Whether another statement of the batch's scope reads or writes its A registers (RS): before
    it in the scope too, which a later iteration of a loop runs while the batch may still read them."""
    registers = _a_registers(batch)
    return bool(registers) and any(a.kind is not Async.WGMMA and (a.writes in registers or a.reads & registers)
                                   for n in scope if n is not batch for a in _leaves(n, hazards))


def _touched_after_a_full_wait(k: int, nodes: list, emptied: int | None, hazards: Hazards) -> bool:
    """Whether the batch nodes[k]'s accumulators and A registers are touched only by statements
    between batch nodes[emptied] (whose wait leaves nothing in flight) and it: in the next
    iteration that wait completes this batch before any of them runs (attention's P V, in flight
    while the next key tile's Q K^T is issued, whose wait precedes the rescale and the next P)."""
    if emptied is None:
        return False
    batch = nodes[k]
    outside = nodes[:emptied] + nodes[k + 1:]
    return not _touched_later(batch, outside, hazards) and not _a_touched(batch, outside + [batch], hazards)


def _wrapped(nodes: list, hazards: Hazards) -> list:
    pending = _in_flight(nodes)
    out = []
    emptied = None  # the first batch of the scope whose wait leaves none in flight
    for k, n in enumerate(nodes):
        if _only_wgmma(n, hazards):
            # its accumulators touched elsewhere in the scope (below it, or above it: in the next iteration,
            # an online rescale), or its A registers (RS): none in flight, unless an earlier batch's full
            # wait precedes every such touch in the next iteration
            touched = _touched_later(n, nodes[:k] + nodes[k + 1:], hazards) or _a_touched(n, nodes, hazards)
            left = pending if not touched or _touched_after_a_full_wait(k, nodes, emptied, hazards) else 0
            if left == 0 and emptied is None:
                emptied = k
            out += [WgmmaFence("the accumulators' earlier register writes, before the asynchronous wgmma"), n,
                    WgmmaWait(left, "this batch's accumulators written and its shared tiles read" if not left
                              else "the previous iteration's batch complete: its stage may be refilled")]
        else:
            out.append(n)
    return out


def _registers(n, hazards: Hazards) -> tuple[set, set]:
    """(reads, writes) of n's statements: register tensors and on-chip tensors alike."""
    reads, writes = set(), set()
    for x in statements_in(n):
        tv = x[0] if isinstance(x, tuple) else x
        op = getattr(tv, "definition", None)
        if op is None:
            continue
        reads |= {t.name for t in op.inputs}
        writes.add(tv.name)
        acc = hazards.access(x)
        if acc is not None:
            reads |= set(acc.reads)
            if acc.kind is Async.WGMMA:  # its accumulators: read and written
                reads.add(tv.name)
    return reads, writes


def _independent(first: list, then: list, hazards: Hazards) -> bool:
    """Whether running `first` before `then` (which ran before it) changes no value: neither
    writes what the other reads or writes."""
    def union(nodes) -> tuple[set, set]:
        reads, writes = set(), set()
        for n in nodes:
            r, w = _registers(n, hazards)
            reads |= r
            writes |= w
        return reads, writes

    (r1, w1), (r2, w2) = union(first), union(then)
    return not (w1 & (r2 | w2)) and not (w2 & r1)


def _overlapped(body: list, hazards: Hazards) -> list | None:
    """A rotated loop's body [B(i)..., Rotated: A(i + 1)...] whose rotated statements hold a wgmma
    batch (execution/rotation.py), with wgmma's asynchrony placed for overlap, as FlashAttention-3
    runs its next Q K^T; None for any other body:
      - A's statements up to its first batch (its stage waits, the accumulators' init, the batch)
        are issued first in the iteration, where B touches nothing they touch (they would run
        after B otherwise);
      - each batch is fenced, then committed alone; its wait is placed just before the first
        statement after it that touches its accumulators or A registers (at the body's end where
        only the next iteration's statements do), leaving in flight the batches committed after
        it; a stage's release follows the wait of the unrotated batches that read its tiles.
    The waits are the body's own (a run of rotated statements is split around them), so every
    iteration, the last one too (whose rotated statements do not run), waits alike."""
    if not body or not isinstance(body[-1], Rotated) or body[-1].first:
        return None
    rest, rotated = body[:-1], body[-1].body
    b = next((k for k, n in enumerate(rotated) if _only_wgmma(n, hazards)), None)
    if b is None or any(_only_wgmma(n, hazards) is False and hasattr(n, "body") and
                        any(_only_wgmma(c, hazards) for c in _nested(n)) for n in rest + rotated):
        return None  # a batch nested in a loop of the body: not placed here
    issue, later = rotated[:b + 1], rotated[b + 1:]
    hoisted = _independent(issue, rest, hazards)
    seq = ([(n, True) for n in issue] + [(n, False) for n in rest] + [(n, True) for n in later]) if hoisted else \
        ([(n, False) for n in rest] + [(n, True) for n in rotated])
    batches = [k for k, (n, _) in enumerate(seq) if _only_wgmma(n, hazards)]
    need: dict[int, int] = {}  # batch position -> the position its wait precedes
    for k in batches:
        accumulators = {a.writes for a in _leaves(seq[k][0], hazards)} - {None}
        registers = _a_registers(seq[k][0]) | accumulators

        def touches(n) -> bool:
            return any(a.kind is not Async.WGMMA and (a.writes in registers or a.reads & registers)
                       for a in _leaves(n, hazards))
        later_touch = next((q for q in range(k + 1, len(seq)) if touches(seq[q][0])), None)
        if later_touch is None and any(touches(seq[q][0]) for q in range(k)):
            later_touch = len(seq)  # the next iteration's statements: wait at the body's end
        if later_touch is not None:
            need[k] = _before_conversions(seq, k, later_touch)
    releases = [q for q, (n, _) in enumerate(seq) if isinstance(n, StageRelease) and not n.tail]
    readers = [k for k in batches if not seq[k][1] and _tiles(seq[k][0], hazards)]  # this iteration's datum
    if releases:
        for k in readers:  # waited for in the iteration that releases its stage
            need.setdefault(k, len(seq))
    moved = []
    for q in releases:  # after the waits of the batches that read its stage
        done = max((need.get(k, len(seq)) for k in readers if k < q), default=None)
        if done is not None and done > q:
            moved.append((q, done))
    out: list = []
    run: list = []  # rotated nodes not yet closed into a Rotated block

    def flush():
        if run:
            out.append(Rotated(list(run), label=body[-1].label, loop_key=body[-1].loop_key))
            run.clear()

    def place(node, rotated_node: bool):
        if rotated_node:
            run.append(node)
        else:
            flush()
            out.append(node)

    def waits_at(q: int):
        waiting = [k for k, p in need.items() if p == q]
        if waiting:
            # left in flight: the batches committed after them that every iteration issues (a rotated
            # one is not issued in the last iteration: counted, it would leave theirs in flight there)
            pending = min(sum(1 for j in batches if k < j < q and not seq[j][1]) for k in waiting)
            flush()
            out.append(WgmmaWait(pending, "the batches read here (their accumulators or A registers) complete"
                                 + (f", the {pending} issued after them in flight" if pending else ""), commit=False))
        for r, done in moved:
            if done == q:
                flush()
                out.append(seq[r][0])

    moved_from = {r for r, _ in moved}
    for q, (n, rot) in enumerate(seq):
        waits_at(q)
        if q in moved_from:
            continue
        if q in batches:
            place(WgmmaFence("the accumulators' and A registers' earlier writes, before the asynchronous wgmma"), rot)
            place(n, rot)
            place(WgmmaCommit("this batch one group: waited for where its results are read"), rot)
        else:
            place(n, rot)
    waits_at(len(seq))
    flush()
    return out


def _before_conversions(seq: list, k: int, q: int) -> int:
    """The position before seq[q] (the first to touch batch k's registers) and the copies, casts and
    broadcasts between k and q that only feed it (the bfloat16 conversion of P for the next P V):
    after the wait they run next to the statement they feed, whose registers the compiler then writes
    directly (computed before the wait, a cast's values wait in registers of their own)."""
    if q >= len(seq):
        return q
    needed = {t.name for x in statements_in(seq[q][0]) for t in _inputs(x)}
    at = q
    for j in range(q - 1, k, -1):
        leaves = list(statements_in(seq[j][0]))
        made = {(x[0] if isinstance(x, tuple) else x).name for x in leaves}
        if not made & needed:
            continue
        ops = [(x[0] if isinstance(x, tuple) else x).definition for x in leaves]
        if leaves and all(op is not None and op.name in CONVERSIONS for op in ops):
            needed |= {t.name for x in leaves for t in _inputs(x)}
            at = j
        else:
            break
    return at


def _inputs(leaf) -> list:
    tv = leaf[0] if isinstance(leaf, tuple) else leaf
    return list(tv.definition.inputs) if getattr(tv, "definition", None) is not None else []


def _nested(n):
    for c in getattr(n, "body", ()):
        yield c
        yield from _nested(c)


def _tiles(n, hazards: Hazards) -> set:
    """The shared tiles n's wgmma statements read."""
    return {t for a in _leaves(n, hazards) if a.kind is Async.WGMMA for t in a.reads}


__all__ = ["WgmmaCommit", "WgmmaFence", "WgmmaWait", "insert_wgmma_waits"]
