"""What warp specialization needs (WS-ROLES, WS-REGISTERS): a producer of whole warpgroups that
only issues its circular buffers' loads, and setmaxnreg counts that fit the registers the block
is launched with. The roles themselves are execution/warp_roles.py."""

from __future__ import annotations


from ...hw.threads import WARPGROUP
from ...model.expr import try_int
from ...model.types import THREAD_TYPES
from ...model.mma_op import is_wgmma_op
from ..loops import execution_order, loop_groups
from ..circular import circular_axis, specialization
from ..indexing import block_dims
from ..problems import Problem
from ..warp_roles import (MAX_REGISTERS, MIN_REGISTERS, REGISTER_STEP, register_pool, role_padding, role_threads,
                          specialized_tensors)


def role_problems(fusion) -> list:
    """WS-ROLES: what the producer/consumer rewrite needs of the schedule (model docstring)."""
    order = execution_order(fusion)
    tvs = specialized_tensors(fusion, order)
    if not tvs:
        return []
    out = []
    first = tvs[0]
    spec = specialization(first)
    where = dict(location=first.circular.origin or first.origin)
    at = THREAD_TYPES.index(spec.on)
    outer = _outer_axes(fusion, spec.on)
    if outer:
        pad = role_padding(fusion)
        last = f"the last {pad} {spec.on.value} indices" if pad > 1 else f"the last {spec.on.value} index"
        out.append(Problem(
            f"{first.name} is warp-specialized on {spec.on.value}, but the block also has threads on "
            f"{', '.join(p.value for p in outer)}, above it: the producer ({last} of each of its rows) would be "
            f"spread over the block instead of being the last warpgroups",
            hint=f"warp-specialize on the outermost thread axis the block uses ({outer[-1].value})",
            tensor=first.name, values={"axis": at}, **where))
    inner, consumers = role_threads(fusion)
    if outer:
        pass  # the threads per index below count a row, not the block's: the problem above is the block's shape
    elif inner is None or consumers is None:
        out.append(Problem(
            f"{first.name} is warp-specialized, but the block's thread extents are symbolic: the producer's index and "
            f"its warpgroups must be known when the kernel is compiled",
            hint="give the thread axes constant extents (split by constants)", tensor=first.name, **where))
    elif inner % WARPGROUP and WARPGROUP % inner:
        out.append(Problem(
            f"{first.name} is warp-specialized on {spec.on.value}, whose every index holds {inner} threads: the "
            f"producer's indices would not make whole warpgroups of {WARPGROUP} threads (setmaxnreg and wgmma are "
            f"warpgroup-wide)",
            hint=f"give each index of {spec.on.value} a divisor or a multiple of {WARPGROUP} threads (TIDy over "
                 f"TIDx = {WARPGROUP}: the producer is one more index; TIDx alone: {WARPGROUP} more threads)",
            tensor=first.name, values={"threads per index": inner, "warpgroup": WARPGROUP}, **where))
    elif inner * consumers % WARPGROUP or not consumers:
        pad = role_padding(fusion)
        out.append(Problem(
            f"{first.name} is warp-specialized on {spec.on.value}: its consumers are {consumers} indices of {inner} "
            f"thread{'s' if inner > 1 else ''}, {inner * consumers} threads, not whole warpgroups of {WARPGROUP}, "
            f"so the producer's {pad} ind{'ices' if pad > 1 else 'ex'} after them would share a warpgroup with "
            f"consumers (setmaxnreg, wgmma and the consumers' named barriers are warpgroup- or warp-wide)",
            hint=f"bind {spec.on.value} to an extent that makes the consumers a multiple of {WARPGROUP} threads "
                 f"(nvFuser requires it too: \"Illegal register sharing on {spec.on.value}\")",
            tensor=first.name, values={"consumer threads": inner * consumers, "warpgroup": WARPGROUP}, **where))
    groups = loop_groups(fusion, order)
    loops = {groups.of.get((t.name, circular_axis(t))) for t in tvs if circular_axis(t) is not None}
    # loops nested in one another (Q's over the tile loop, K's and V's over the key loop inside it): the
    # producer runs the same nest, loading each loop's data in its turn; one chain counts as one
    loops = _unnested(loops, tvs, groups)
    for tv in tvs:
        other = specialization(tv)
        if other != spec:
            out.append(Problem(
                f"{tv.name} is warp-specialized as {other!r} and {first.name} as {spec!r}: a kernel has one producer "
                f"warpgroup", hint=f"give {tv.name} the WarpSpecialized of {first.name}", tensor=tv.name,
                location=tv.circular.origin or tv.origin))
        # a broadcast axis holds no index of the load (nvFuser's checkWarpSpecializedAxis skips it too)
        bound = [i for i in tv.loop if i.parallel_type is spec.on and not i.is_broadcast]
        if bound:
            out.append(_bound_problem(tv, spec.on, bound[0]))
        readers = fusion.consumers(tv)
        by_wgmma = [c for c in readers if c.definition is not None and is_wgmma_op(c.definition)]
        if by_wgmma and len(by_wgmma) < len(readers):
            thread_reader = next(c for c in readers if c not in by_wgmma)
            out.append(Problem(
                f"{tv.name} is warp-specialized, but {by_wgmma[0].name} reads it with a wgmma and {thread_reader.name} "
                f"with threads (`{thread_reader.definition}`): a consumer warpgroup releases a stage after its "
                f"wgmma.wait_group, or each consumer thread after its reads, not both",
                hint=f"read {tv.name} one way: by wgmma, or by threads", tensor=tv.name,
                location=tv.circular.origin or tv.origin))
    if len(loops) > 1:
        out.append(Problem(
            f"the warp-specialized buffers {', '.join(t.name for t in tvs)} are circular over {len(loops)} different "
            f"loops, none inside another; one producer warpgroup serves one circular loop, or loops nested in one "
            f"another", tensor=first.name, hint="inline them at one loop (the K loop)", **where))
    return out


def _bound_problem(tv, on, axis) -> Problem:
    """WS-ROLES's problem with `tv` (warp-specialized on `on`) whose loop axis `axis` runs on `on`.
    An axis left of its compute-at position is a loop it shares with its consumers: inlined into
    their loop over `on`, it takes that loop's type, and its inlining is the knob (knobs: a fix
    may move it out of that loop)."""
    k = next(k for k, i in enumerate(tv.loop) if i is axis)
    inlined = k < tv.compute_at
    return Problem(
        f"{tv.name} is warp-specialized on {on.value} and also parallelized on it ({axis.label()}): its "
        f"loads are the producer's alone, issued by one thread", tensor=tv.name, ids=(axis.name,),
        hint=(f"inline {tv.name} left of the consumers' loop over {on.value} (its axis {k})" if inlined else
              f"do not bind {tv.name}'s axes to {on.value}; the consumers' tensors use it"),
        notes=(f"{tv.name} is inlined at position {tv.compute_at}, inside the consumers' loop over {on.value} "
               f"(its axis {k}): it runs on that loop's index",) if inlined else (),
        knobs=(tv.name,) if inlined else (), location=tv.circular.origin or tv.origin)


def _unnested(loops: set, tvs: list, groups) -> set:
    """The circular loops that are not around another's: one where they form a chain, each
    enclosing the next (the loops left of a buffer's circular axis hold the outer ones)."""
    enclosing = {}
    for t in tvs:
        k = circular_axis(t)
        if k is not None:
            enclosing.setdefault(groups.of.get((t.name, k)), set()).update(groups.of.get((t.name, i)) for i in range(k))
    inner = [g for g in loops if all(o is g or o in enclosing.get(g, ()) for o in loops)]
    return {inner[0]} if inner else loops


def _outer_axes(fusion, on) -> list:
    """The thread axes above the warp-specialized axis `on` the block has more than one index of."""
    dims = block_dims(fusion)
    return [p for p in THREAD_TYPES[THREAD_TYPES.index(on) + 1:] if p in dims and try_int(dims[p]) != 1]


def register_problems(fusion) -> list:
    """WS-REGISTERS: setmaxnreg's counts (model docstring of register_pool)."""
    tvs = specialized_tensors(fusion)
    spec = specialization(tvs[0]) if tvs else None
    if spec is None or spec.num_registers is None:
        return []
    producer, consumer = spec.num_registers
    # the num_registers argument: where the WarpSpecialized was written
    where = dict(tensor=tvs[0].name, location=spec.origin or tvs[0].circular.origin or tvs[0].origin)
    out = []
    for name, n in (("producer", producer), ("consumer", consumer)):
        if not MIN_REGISTERS <= n <= MAX_REGISTERS or n % REGISTER_STEP:
            out.append(Problem(
                f"num_registers gives the {name} warpgroups {n} registers a thread; setmaxnreg takes a multiple of "
                f"{REGISTER_STEP} from {MIN_REGISTERS} to {MAX_REGISTERS}",
                hint=f"use {max(MIN_REGISTERS, min(MAX_REGISTERS, n // REGISTER_STEP * REGISTER_STEP))}",
                values={name: n}, **where))
    inner, consumers = role_threads(fusion)
    if out or inner is None or consumers is None or (inner % WARPGROUP and WARPGROUP % inner) \
            or inner * consumers % WARPGROUP or not consumers or _outer_axes(fusion, spec.on):
        return out  # WS-ROLES reports the block
    pool = register_pool(inner, consumers, role_padding(fusion))
    entry, total, held = pool["entry"], pool["threads"], pool["producer"]
    if producer > consumer:
        out.append(Problem(
            f"num_registers=({producer}, {consumer}) gives the producer more registers than the consumers: the "
            f"producer only issues loads, the consumers hold the accumulators",
            hint=f"num_registers=({consumer}, {producer})", values={"producer": producer, "consumer": consumer},
            **where))
    if not producer <= entry <= consumer:
        out.append(Problem(
            f"the kernel starts with {entry} registers a thread ({total} threads, one block an SM), so the producer's "
            f"setmaxnreg.dec to {producer} and the consumers' setmaxnreg.inc to {consumer} must lie on either side "
            f"of {entry}",
            hint=f"choose producer <= {entry} <= consumer", values={"entry": entry, "producer": producer,
                                                                    "consumer": consumer}, **where))
    need = producer * held + consumer * inner * consumers
    if need > entry * total:
        out.append(Problem(
            f"after setmaxnreg the block would hold {producer} x {held} + {consumer} x {inner * consumers} = {need} "
            f"registers, more than the {entry} x {total} = {entry * total} it was launched with: the consumers' "
            f"setmaxnreg.inc waits for registers that never come free, and the kernel hangs",
            hint=f"lower the counts, e.g. num_registers=({producer}, "
                 f"{(entry * total - producer * held) // (inner * consumers) // REGISTER_STEP * REGISTER_STEP})",
            values={"registers needed": need, "registers launched": entry * total, "producer": producer,
                    "consumer": consumer}, notes=("CUTLASS issue #2007: a kernel hangs where 232 x 2 + 24 warpgroups "
                                                  "of registers exceed 168 x 3",), **where))
    return out
