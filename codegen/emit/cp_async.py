"""C++ for cp.async: the copy, with its src-size, and the commit / wait of its groups.

PTX ISA 9.7.9.25.3: `cp.async.ca.shared.global [dst], [src], cp-size, src-size` (cp-size 4, 8
or 16) and `cp.async.cg.shared.global [dst], [src], 16, src-size`; src-size 0 reads no byte of
src and fills dst with zeros (so a hole's source address is never formed: the tensor's base is
passed instead). `cp.async.commit_group` closes the thread's group of copies issued so far,
`cp.async.wait_group N` waits until at most N of its groups are in flight (both checked with
ptxas for sm_90a). A circular buffer's prologue runs the loop's first copies ahead of it, in a
loop of its own over the same index variable; its prefetched copies are guarded by the loop's
extent (a register circular buffer's the same, without groups).
"""

from __future__ import annotations

from ...model.expr import add, const, var
from ..ir import CpAsyncCommit, CpAsyncCopy, CpAsyncWait, Prefetched, Prologue
from .cuda_expr import INDEX_TYPES

PRELUDE = """\
// cp.async: global -> shared; src_bytes 0 reads nothing and writes zeros
template <int BYTES> __device__ __forceinline__ void tp_cp_async_ca(unsigned dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;"
               :: "r"(dst), "l"(__cvta_generic_to_global(src)), "n"(BYTES), "r"(src_bytes) : "memory"); }
__device__ __forceinline__ void tp_cp_async_cg(unsigned dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"(dst), "l"(__cvta_generic_to_global(src)), "r"(src_bytes) : "memory"); }
__device__ __forceinline__ void tp_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING> __device__ __forceinline__ void tp_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" :: "n"(PENDING) : "memory"); }"""


def prelude(copies: list[CpAsyncCopy]) -> list[str]:
    return PRELUDE.splitlines() if copies else []


def copy_lines(emitter, n: CpAsyncCopy, depth: int) -> list[str]:
    """The copy, for the threads meeting n.conds; src-size 0 where a zero-fill cond fails."""
    pad = "  " * depth
    dst = f"tp_smem(&{emitter.ref(n.out)})"
    src, size = f"&{emitter.ref(n.ins[0])}", f"{n.nbytes}u"
    body = []
    if n.zero_fill:  # a hole: src-size 0, and the tensor's base for an address that is never read
        body.append(f"const bool tp_in = {' && '.join(emitter.cond(c) for c in n.zero_fill)};")
        src, size = f"tp_in ? (const void*){src} : (const void*){emitter.pointer(n.ins[0].tensor)}", f"tp_in ? {n.nbytes}u : 0u"
    body.append(f"tp_cp_async_cg({dst}, {src}, {size});" if n.cache == "cg"
                else f"tp_cp_async_ca<{n.nbytes}>({dst}, {src}, {size});")
    lines = [f"{pad}// {n.comment}"]
    if n.conds:
        return lines + [f"{pad}if ({' && '.join(emitter.cond(c) for c in n.conds)}) {{"] + \
            [f"{pad}  {b}" for b in body] + [f"{pad}}}"]
    if len(body) == 1:
        return lines + [f"{pad}{body[0]}"]
    return lines + [f"{pad}{{"] + [f"{pad}  {b}" for b in body] + [f"{pad}}}"]


def prologue_lines(emitter, n: Prologue, depth: int) -> list[str]:
    """The circular loop's first `prefetch` copies, ahead of it: for cp.async one commit per
    iteration, so every thread's groups count the same however short the loop is."""
    pad = "  " * depth
    i, extent = emitter.x(var(n.index)), emitter.x(n.extent)
    count = max(n.prefetch, 0)  # a negative prefetch (rejected, built by compile_unverified) has none
    commit = [f"{pad}  tp_cp_async_commit();"] if n.asynchronous and not n.tma else []  # registers, TMA: no groups
    return ([f"{pad}// prologue: the copies of iterations 0..{count - 1} of the loop over {i} "
             f"({n.stages} stages{_kind(n)}{', TMA' if n.tma else ''})",
             f"{pad}#pragma unroll",
             f"{pad}for ({INDEX_TYPES[emitter.ir.index_bits]} {i} = 0; {i} < {count}; ++{i}) {{",
             f"{pad}  if ({i} < {extent}) {{"]
            + emitter.nodes(n.body, depth + 2)
            + [f"{pad}  }}"] + commit + [f"{pad}}}"])


def _kind(n: Prologue) -> str:
    """What the prologue's stages hold, where not cp.async or TMA copies."""
    return " of shared memory, plain copies" if n.shared else "" if n.asynchronous else " of registers"


def prefetched_lines(emitter, n: Prefetched, depth: int) -> list[str]:
    """The copies of iteration i + prefetch (their indices are shifted already), where it exists."""
    pad = "  " * depth
    ahead = add(var(n.index), const(n.prefetch))
    return ([f"{pad}if ({emitter.x(ahead)} < {emitter.x(n.extent)}) {{  // the copies of iteration "
             f"{emitter.x(ahead)}, into stage ({emitter.x(ahead)}) % {n.stages}"]
            + emitter.nodes(n.body, depth + 1) + [f"{pad}}}"])


def wait_lines(emitter, n: CpAsyncWait, depth: int) -> list[str]:
    pad = "  " * depth
    commit = [f"{pad}tp_cp_async_commit();"] if n.commit else []
    return commit + [f"{pad}tp_cp_async_wait<{n.pending}>();  // {n.why}"]


def commit_lines(emitter, n: CpAsyncCommit, depth: int) -> list[str]:
    return [f"{'  ' * depth}tp_cp_async_commit();  // {n.why}"]


__all__ = ["PRELUDE", "commit_lines", "copy_lines", "prefetched_lines", "prelude", "prologue_lines", "wait_lines"]
