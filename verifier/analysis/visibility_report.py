"""The reports of the visibility claims (verifier/analysis/visibility.py proves them): a reader that
sees an element its own block or thread did not write, at the address it wrote, with who wrote it
and the schedule change that gives each reader its own elements; for a tensor-core fragment, the
instruction, the lane and where the fragment map wants each lane's elements."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Iterator

import sympy

from ...execution.mma import fragments
from ...execution.mma_execution import split_lanes
from ...execution.statements import bound_types
from ...model.fusion import Op
from ...model.mma_op import ELEMENT_VARS
from ...model.types import BLOCK_TYPES, MemoryType, ParallelType
from ..causes import propose_change, propose_retype
from ..context import VerifyContext
from ..diagnostics import Diagnostic
from ..findings import finding, report_outcome, when_clause

if TYPE_CHECKING:  # visibility.py imports this module: its types for annotations only
    from .visibility import Claim, Proof

ALIKE_TRIES = 2  # consumer axes of the producer's block axis's extent tried for it (a verify of a copy each)
WRITER = "writer "  # prefix of the producer's thread/block variables (renamed apart from the reader's)


def misread_findings(ctx: VerifyContext, op: Op, k: int, claim: Claim, proof: Proof) -> Iterator[Diagnostic]:
    """The findings of one claim's proof (verifier/analysis/visibility.py): none where it holds, else
    the element a reader sees that its own block or thread did not write (or an undecided proof)."""
    producer, consumer = op.inputs[k], op.output
    bound_ids = [i for i in producer.loop if i.parallel_type in claim.compare + claim.premise and not i.is_broadcast]
    memory = f"{producer.memory_type.value.lower()} memory"
    where = dict(tensor=consumer.name, ids=[i.name for i in bound_ids], location=op.origin,
                 labels=[f"{producer.name} ({memory}) " +
                         (f"parallelized on {', '.join(i.label() for i in bound_ids)}" if bound_ids else
                          "held by the lanes of its fragment") + f", created at {producer.origin}"])
    what = f"that {consumer.name} reads only the elements of {producer.name} its own {_owner(claim)} wrote"
    yield from report_outcome(claim.code, proof.outcome, what,
                              lambda out: _misread(ctx, op, k, claim, proof, where), **where)


def _owner(claim: Claim) -> str:
    return "block" if claim.code == "SMEM-BLOCK-VISIBILITY" or claim.block_hand_off else "thread"


def _misread(ctx: VerifyContext, op: Op, k: int, claim: Claim, proof: Proof, where: dict) -> Diagnostic:
    """A reader sees an element its own block or thread did not write: which one, who wrote it."""
    producer, consumer = op.inputs[k], op.output
    out = proof.outcome
    types = claim.compare
    memory = f"{producer.memory_type.value.lower()} memory"
    owner = _owner(claim)
    v = out.values
    sizes = ctx.symbols_of(out.model)
    element = ", ".join(str(v[f"{producer.name} logical {j}"]) for j in proof.element)
    reader = ", ".join(f"{p.cuda_name} = {v[f'reader {p.cuda_name}']}" for p in types + claim.premise)
    writer = ", ".join(f"{p.cuda_name} = {v[f'writer {p.cuda_name}']}" for p in types + claim.premise
                       if f"writer {p.cuda_name}" in v)
    point = {name: out.model[name] for name in out.model if name not in ctx.fusion.symbols and not name.startswith(WRITER)}
    moved = (proof.address and "writer address" in v and "reader address" in v
             and v["writer address"] != v["reader address"]
             and all(v.get(f"writer {p.cuda_name}") == v[f"reader {p.cuda_name}"] for p in types))
    if moved:
        problem = (f"that {owner} stored the element at offset {v['writer address']} of {producer.name}, and "
                   f"{consumer.name} reads offset {v['reader address']}")
    elif not proof.repeated:
        problem = f"only the {owner} with {writer} writes that element of {memory}"
    else:
        problem = f"that {owner} does not write that element of {memory} (the {owner} with {writer or '?'} does)"
    private = (("the block waits for its TMA stores to complete and syncs before reading them back, but no "
                "grid-wide barrier orders them with other blocks' loads" if claim.block_hand_off
                else "no grid-wide barrier orders a kernel's global stores with other threads' loads")
               if claim.code == "GLOBAL-VISIBILITY" else "a register belongs to one thread" if owner == "thread"
               else f"{memory} is private to a thread block")
    notes = [f"{private}: the {owner} that reads an element must be the {owner} that wrote it, at the address it wrote"]
    unbound = [p for p in types if p not in bound_types(consumer)]
    if unbound:
        single = consumer.memory_type is MemoryType.Global or (owner == "thread" and consumer.memory_type is MemoryType.Shared)
        only = "block 0 only" if owner == "block" else "thread 0 only"
        notes.append(f"{consumer.name} does not parallelize {', '.join(str(p) for p in unbound)}: "
                     + (f"its store runs in {only} (single-writer predicate)" if single
                        else f"every {owner} runs its whole loop nest"))
    if proof.repeated:
        notes.append(f"{producer.name} repeats elements along a split broadcast; {consumer.name} reads "
                     f"each element at the address of its first copy")
    if owner == "block":
        hint = (f"parallelize the axes of {consumer.name} that map to {producer.name}'s "
                f"{', '.join(str(p) for p in types)} axes on the same block index (schedule it like "
                f"{producer.name}: tp.propagate_transforms({producer.name}) and "
                f"tp.parallelize_all_like({producer.name})), or do not parallelize {producer.name} across blocks")
    elif claim.code == "GLOBAL-VISIBILITY":
        hint = (f"schedule {consumer.name} like {producer.name} (tp.propagate_transforms({producer.name}) and "
                f"tp.parallelize_all_like({producer.name})) so each thread reads what it stored, or read "
                f"{producer.name}'s inputs instead of {producer.name}")
    else:
        hint = (f"put {producer.name} in shared memory ({producer.name}.set_memory_type(tp.MemoryType.Shared)) "
                f"to hand elements between threads, or parallelize {consumer.name}'s axes like "
                f"{producer.name}'s (tp.parallelize_all_like({producer.name}))")
    if claim.code in ("MMA-OPERAND-LAYOUT", "MMA-ACCUM-LAYOUT"):
        return _fragment_misread(ctx, op, k, claim, proof, where, element, problem, notes, sizes, point)
    d = finding(
        claim.code,
        f"{consumer.name} reads {producer.name}[{element}] in the {owner} with {reader}{when_clause(sizes)}, "
        f"but {problem}",
        notes=notes, counterexample={**sizes, **point, **v}, hint=hint, **where,
    )
    call = None
    if owner == "block" and unbound:
        call = _block_indices_back(ctx, d, producer, consumer, unbound) or _writer_unbound(ctx, d, producer, unbound)
    if call is not None:
        d.hint = f"{call} (verified: with it, {claim.code} holds); otherwise: {d.hint}"
    return d


def _block_indices_back(ctx: VerifyContext, d: Diagnostic, producer, consumer, unbound: list) -> str | None:
    """The parallelize calls binding, for each block index in `unbound`, the consumer's axis for
    the producer's axis on that index, proposed on d where a copy of the schedule as written with
    them has no finding of d's rule: the calls, or None. The consumer's axis is the one that maps
    (exactly) to the producer's, else, where none does (the two scheduled by different
    transforms), one of the same extent that no block index binds (the first such whose copy
    holds)."""
    if ctx.source is None:  # a fix's copy
        return None
    choices = []
    for p in unbound:
        theirs = [i for i in producer.loop if i.parallel_type is p and not i.is_broadcast]
        if len(theirs) != 1:
            return None
        mine = [j for j, i in enumerate(consumer.loop) if ctx.idmap.same(i, theirs[0])]
        if not mine:
            mine = [j for j, i in enumerate(consumer.loop) if not i.is_broadcast and i.parallel_type not in BLOCK_TYPES
                    and sympy.expand(i.extent - theirs[0].extent) == 0][:ALIKE_TRIES]
        elif len(mine) > 1:
            return None
        if not mine:
            return None
        choices.append([(j, p) for j in mine])
    for moves in itertools.product(*choices):
        def change(fusion, moves=moves) -> None:
            for j, p in moves:
                fusion.tensor(consumer.name).axis(j).parallelize(p)

        if propose_change(ctx, d, change, [d.code]):
            return "; ".join(f"{consumer.name}.axis({j}).parallelize(tp.ParallelType.{p.name})" for j, p in moves)
    return None


def _writer_unbound(ctx: VerifyContext, d: Diagnostic, producer, unbound: list) -> str | None:
    """Where no consumer axis can take the producer's block index: the producer's axis on it
    given back its loop's type (or serial), verified as propose_retype verifies: the call, or None."""
    if ctx.source is None:
        return None
    axes = [(producer.name, k, ParallelType.Serial) for k, i in enumerate(producer.loop)
            if i.parallel_type in unbound and not i.is_broadcast]
    return propose_retype(ctx, d, axes, [d.code, "LOWERING-SUPPORTED", "PARALLEL-TYPE-UNIQUE"], [d.code]) if axes else None


def _fragment_misread(ctx, op: Op, k: int, claim: Claim, proof: Proof, where: dict, element: str, problem: str,
                      notes: list, sizes: dict, point: dict) -> Diagnostic:
    """A lane supplies (or reads) a tensor-core fragment element another thread holds: name the
    instruction, the lane, the element and where the fragment map wants each lane's elements."""
    v = proof.outcome.values
    mma = op.output if claim.code == "MMA-OPERAND-LAYOUT" else op.inputs[k]
    role = "AB"[k] if claim.code == "MMA-OPERAND-LAYOUT" else "C"
    frag = fragments(mma)
    tile = {"A": "A (M x K)", "B": "B (K x N)", "C": "C (M x N)"}[role]
    lane = v.get("reader threadIdx.x", point.get("threadIdx.x"))
    bdx = split_lanes(ctx.block_dims, frag.inst.threads)
    y = v.get("reader threadIdx.y", point.get("threadIdx.y"))
    if bdx is not None and isinstance(lane, int) and isinstance(y, int):  # the lane spans TIDx and TIDy
        lane = f"{(lane + bdx * y) % frag.inst.threads} (threadIdx.x = {lane}, threadIdx.y = {y})"
    held = point.get(ELEMENT_VARS[role])
    wanted = "; ".join(f"lane {t} holds " + ", ".join(str(frag.position(role, t, e)) for e in range(frag.elements(role)))
                       for t in (0, 1, 4))
    if claim.code == "MMA-OPERAND-LAYOUT":
        what = (f"{mma.name}'s {frag.inst.name} takes {op.inputs[k].name}[{element}] as lane {lane}'s {role} element "
                f"{held if held is not None else '?'}")
        fix = op.inputs[k].name
    else:
        what = f"{op.output.name} reads {mma.name}[{element}] in lane {lane}, where the accumulators are spread by the C fragment"
        fix = op.output.name
    notes = notes[:1] + [f"the {tile} fragment of {frag.inst.name} (row, col) of each element: {wanted}, ...",
                     "docs/hardware.md#tensor-core-fragment-layouts has the maps as formulas"]
    return finding(
        claim.code, f"{what}{when_clause(sizes)}, but {problem}", notes=notes,
        counterexample={**sizes, **point, **v},
        hint=f"schedule {fix}'s tile as the fragment: split its rows and columns into the fragment's parts, merge "
             f"the lane parts into the axis bound to TIDx (lane = 4 * row part + column part) and the element parts, "
             f"in element order, into the register axis",
        **where)


__all__ = ["WRITER", "misread_findings"]
