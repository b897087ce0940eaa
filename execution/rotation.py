"""Loop rotation (tp.rotate_loop, model/loop_rotation.py) placed on the loop nest, for the
verifier and the code generator alike:

    for i: A(i); B(i)          ->       Rotated(first): A(0)            (if 0 < n)
                                         for i: B(i); Rotated: A(i + 1)  (if i + 1 < n)

A is the selected tensors' statements in the rotated loop's body; they must be its first
statements (nvFuser's rule: loop_rotation.cpp rotates the leading expressions), so the kernel
runs the same statements in the same order as without the rotation. The rotation is placed after
the barriers and pipelines (execution/nest.py place_syncs) and before wgmma's waits, which are
placed on the rotated body. A TMA stage's wait moves with its first reader. Where the rotation
cannot be placed the nest stays as it was and `problems` says why (rule LOOP-ROTATION):
    - a statement of the body that is not selected runs before a selected one;
    - a loop nested in the body holds selected and unselected statements;
    - a selected statement writes shared or tensor memory, or reads what the loop's body writes
      there (ordered per iteration by barriers), or the loop is not serial. A warp-specialized
      circular buffer (its loads in the producer's loop) is read one iteration ahead, its stage
      waits moved with the readers: PIPELINE-* prove those reads (execution/pipeline.py Timeline's
      `ahead`).
Pure data: no z3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.expr import Expr, try_int
from .barriers import Hazards, TmaWait
from .loops import copied_nest, statement_tensor, statements_in
from .problems import Problem
from .reduction import Phase


@dataclass
class Rotated:
    """Statements of the rotated loop's next iteration: in its body (`first` False), run for
    iteration i + 1 where i + 1 < extent, at the end of iteration i; before the loop (`first`),
    for iteration 0 where 0 < extent. `index`, `extent`, `var` (its C++ counter, which the rotated
    scope declares again): the loop's (filled in by the code generator)."""

    body: list
    first: bool = False
    label: str = ""
    index: str | None = None
    extent: Expr | None = None
    var: str | None = None
    loop_key: int | None = None  # the rotated loop's group
    repeats_itself = False


@dataclass
class RotationPlan:
    """One tp.rotate_loop call: the rotated loop's group key, the selected tensors' names."""

    key: int
    selected: frozenset[str]
    label: str
    location: str | None = None
    problems: list[Problem] = field(default_factory=list)


def _statements(n) -> bool:
    return any(True for _ in statements_in(n))


def _selected(n, selected: frozenset[str]) -> bool | None:
    """True where every statement of n is selected, False where none is, None where both."""
    names = {statement_tensor(x).name for x in statements_in(n)}
    if not names:
        return False
    inside = names & selected
    return True if inside == names else False if not inside else None


def _waits_at_readers(body: list, hazards: Hazards) -> list:
    """body with each TMA wait moved to just before the first node reading its tensor and that
    node's accumulator init (a later wait still precedes every read; each barrier's waits keep
    their order)."""
    waits = [n for n in body if isinstance(n, TmaWait)]
    rest = [n for n in body if not isinstance(n, TmaWait)]

    def reads(n, tensor: str) -> bool:
        return any(a is not None and tensor in a.reads for a in (hazards.access(x) for x in statements_in(n)))

    out = list(rest)
    for w in reversed(waits):
        tensor = w.barrier.removeprefix("tp_bar_")
        at = next((k for k, n in enumerate(out) if reads(n, tensor)), len(out))
        while at > 0 and isinstance(out[at - 1], tuple) and out[at - 1][1] is Phase.INIT:
            at -= 1  # before the reader's accumulators are zeroed, as before: the zeros next to the products
        out.insert(at, w)
    return out


def _unrotatable(prefix: list, body: list, hazards: Hazards, on_chip: set[str]) -> str | None:
    """What keeps `prefix` from rotating: a statement writing shared or tensor memory, or reading
    an on-chip tensor that the loop's body writes (ordered per iteration by its barriers); a wait
    other than a TMA stage's, or a barrier. A tensor no statement of the loop writes reads the same
    in every iteration: a tile loaded before the loop, or a warp-specialized circular buffer whose
    producer loads it elsewhere (its stage waits move with the readers; PIPELINE-* prove the reads
    one iteration ahead)."""
    accesses = [hazards.access(x) for n in body for x in statements_in(n)]
    written = {a.writes for a in accesses if a is not None}
    for n in prefix:
        if isinstance(n, TmaWait):
            if not n.stages:
                return f"the wait on {n.barrier}"
            continue
        if not _statements(n) and not hasattr(n, "key"):
            return f"the {type(n).__name__}"
        for x in statements_in(n):
            a = hazards.access(x)
            if a is None:
                continue
            if a.writes in on_chip or (a.reads & on_chip & written):
                return statement_tensor(x).name
    return None


def rotate(tree: list, plan: RotationPlan, hazards: Hazards, on_chip: set[str], serial) -> bool:
    """Place `plan` on `tree` in place (module docstring); False, with plan.problems, where it
    cannot be."""
    found = []

    def find(nodes: list) -> None:
        for k, n in enumerate(nodes):
            if getattr(n, "key", None) == plan.key and hasattr(n, "body") and \
                    any(_selected(c, plan.selected) is not False for c in n.body):
                found.append((nodes, k))
            elif hasattr(n, "body"):
                find(n.body)

    find(tree)
    where = f"{plan.label}"
    if not found:
        plan.problems.append(Problem(
            f"none of the rotated statements runs in {where}",
            "select tensors computed inside that loop (inlined into it), or rotate the loop they run in",
            location=plan.location))
        return False
    for scope, k in reversed(found):  # the later first: an insertion keeps the earlier ones' places
        loop = scope[k]
        if try_int(hazards.extent(loop)) == 1:
            continue  # no next iteration: the statements run as they are
        if not serial(loop):
            plan.problems.append(Problem(f"{where} is not a serial loop: a thread or block index has no next iteration",
                                         "rotate a serial loop", location=plan.location))
            return False
        body = _waits_at_readers(loop.body, hazards)
        # a statement or loop: selected or not (None: both); a placed node (a wait, a barrier): neither
        marks = [_selected(n, plan.selected) if _statements(n) else "placed" for n in body]
        mixed = next((n for n, m in zip(body, marks) if m is None), None)
        if mixed is not None:
            names = sorted({statement_tensor(x).name for x in statements_in(mixed)})
            plan.problems.append(Problem(
                f"a loop nested in {where} holds rotated and unrotated statements ({', '.join(names)})",
                "select all of that inner loop's tensors, or none", location=plan.location))
            return False
        last = max((i for i, m in enumerate(marks) if m is True), default=-1)
        early = next((n for n, m in zip(body[:last], marks[:last]) if m is False), None)
        if early is not None:
            first = next(statements_in(early))
            at = body.index(early)
            later = next(x for n, m in zip(body[at:], marks[at:]) if m is True for x in statements_in(n))
            plan.problems.append(Problem(
                f"{statement_tensor(first).name} is not rotated but runs in {where} before "
                f"{statement_tensor(later).name}, which is: only the first statements of a loop's body rotate",
                f"add {statement_tensor(first).name} to the selection, or select only statements before it",
                tensor=statement_tensor(first).name, location=plan.location,
                values={f"{statement_tensor(first).name}'s place in the body": body.index(early),
                        "the last rotated statement's place": last}))
            return False
        prefix, rest = body[:last + 1], body[last + 1:]
        touched = _unrotatable(prefix, body, hazards, on_chip)
        if touched is not None:
            plan.problems.append(Problem(
                f"{touched} is rotated in {where} and touches shared or tensor memory that the loop's body writes, "
                f"or orders it: rotated statements write registers and global memory only, and read shared memory "
                f"only where the loop does not write it (a tile loaded before the loop, a warp-specialized "
                f"circular buffer)",
                "rotate the register statements (the loads of registers from global memory and what they feed)",
                tensor=touched if touched.startswith("T") else None, location=plan.location))
            return False
        loop.body[:] = rest + [Rotated(prefix, label=plan.label, loop_key=plan.key)]
        scope.insert(k, Rotated(copied_nest(prefix), first=True, label=plan.label, loop_key=plan.key))
    return True


__all__ = ["Rotated", "RotationPlan", "rotate"]
