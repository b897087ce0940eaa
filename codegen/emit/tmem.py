"""C++ for the tensor-memory nodes of codegen/ir.py (inline PTX, sm_100a).

    tcgen05.alloc / relinquish_alloc_permit / dealloc   by warp 0 (.sync.aligned: all its threads)
    tcgen05.st / tcgen05.ld  + tcgen05.wait::st / ::ld  by every warp that takes part
    tcgen05.fence::before_thread_sync, __syncthreads(), tcgen05.fence::after_thread_sync

A loaded register is read only after tcgen05.wait::ld, and the wait takes the registers as
"+r" operands, so the compiler cannot move a read above it. Index math is rendered by the
emitter it is given (codegen/emit/__init__.py, cuda_expr.py).
"""

from __future__ import annotations

from dataclasses import fields

from ...model.types import Direction
from ..ir import BASE_NAME, Sync, TmemAccess, TmemAlloc, TmemDealloc, TmemFencedSync

SLOT_NAME = "tmem_base_slot"  # the shared-memory word tcgen05.alloc writes the address into
REGS_NAME = "tmem_regs"
# dtype -> (value -> 32-bit register, register -> value)
BITS = {
    "float32": ("__float_as_uint({})", "__uint_as_float({})"),
    "int32": ("static_cast<unsigned>({})", "static_cast<int>({})"),
}
FENCE_BEFORE = 'asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");'
FENCE_AFTER = 'asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");'
OPERANDS_PER_LINE = 4


def fenced_barrier(why: str) -> list[str]:
    return [FENCE_BEFORE, f"__syncthreads();  // {why}", FENCE_AFTER]


def fenced_sync_lines(e, node: TmemFencedSync, depth: int) -> list[str]:
    """The barrier as codegen/emit/__init__.py prints a Sync (with whatever else it orders), between
    the two tcgen05 fences."""
    plain = Sync(**{f.name: getattr(node, f.name) for f in fields(Sync)})
    return ["  " * depth + FENCE_BEFORE] + e.nodes([plain], depth) + ["  " * depth + FENCE_AFTER]


def alloc_lines(e, node: TmemAlloc, depth: int) -> list[str]:
    pad = "  " * depth
    lines = [f"// tensor memory: {node.why}",
             f"__shared__ unsigned {SLOT_NAME};",
             f"if ({e.x(node.linear_thread)} < 32) {{  // warp 0, all 32 threads (.sync.aligned)",
             f'  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], {node.columns};"',
             f'               :: "r"((unsigned)__cvta_generic_to_shared(&{SLOT_NAME})) : "memory");',
             '  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");',
             "}"]
    lines += fenced_barrier("the allocated address is in shared memory")
    lines.append(f"const unsigned {BASE_NAME} = {SLOT_NAME};  // lane 0, first column")
    return [pad + line for line in lines]


def dealloc_lines(e, node: TmemDealloc, depth: int) -> list[str]:
    pad = "  " * depth
    lines = fenced_barrier(node.why)
    lines += [f"if ({e.x(node.linear_thread)} < 32) {{  // warp 0 allocated",
              f'  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, {node.columns};"'
              f' :: "r"({BASE_NAME}) : "memory");',
              "}"]
    return [pad + line for line in lines]


def access_lines(e, a: TmemAccess, depth: int) -> list[str]:
    pad = "  " * depth
    to_bits, from_bits = BITS[a.registers[0].data.out.dtype.name if a.direction is Direction.STORE
                              else a.registers[0].data.ins[a.tmem_input].dtype.name]
    body = [f"const unsigned taddr = {BASE_NAME} + (unsigned){e.x(a.address_offset)};  // warp-uniform"]
    n = len(a.registers)
    split = f", {a.split_offset}" if a.split_offset is not None else ""
    if a.direction is Direction.STORE:
        values = [to_bits.format(e.value(r.data, [e.ref(o) for o in r.data.ins])) for r in a.registers]
        regs = ", ".join(f"%{k + 1}" for k in range(n))
        body.append(f'asm volatile("{a.instruction} [%0]{split}, {{{regs}}};"')
        body += _operands("::", ['"r"(taddr)'] + [f'"r"({v})' for v in values])
        body.append('             : "memory");')
        body.append('asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");')
    else:
        regs = ", ".join(f"%{k}" for k in range(n))
        outs = [f'"=r"({REGS_NAME}[{k}])' for k in range(n)]
        body.append(f"unsigned {REGS_NAME}[{n}];")
        body.append(f'asm volatile("{a.instruction} {{{regs}}}, [%{n}]{split};"')
        body += _operands(":", outs)
        body.append('             : "r"(taddr) : "memory");')
        body.append('asm volatile("tcgen05.wait::ld.sync.aligned;"')
        body += _operands(":", [f'"+r"({REGS_NAME}[{k}])' for k in range(n)])
        body.append('             :: "memory");  // the registers are read below this wait only')
        for r in a.registers:
            args = [from_bits.format(f"{REGS_NAME}[{r.index}]") if k == a.tmem_input else e.ref(o)
                    for k, o in enumerate(r.data.ins)]
            line = f"{e.ref(r.data.out)} = {e.value(r.data, args)};"
            if r.data.conds:
                line = f"if ({' && '.join(e.cond(c) for c in r.data.conds)}) {line}"
            body.append(line)
    lines = [f"{pad}// {a.comment}"]
    if a.conds:
        lines.append(f"{pad}if ({' && '.join(e.cond(c) for c in a.conds)}) {{  // warp-uniform")
    else:
        lines.append(f"{pad}{{")
    lines += [f"{pad}  {b}" for b in body]
    lines.append(f"{pad}}}")
    return lines


def _operands(lead: str, items: list[str]) -> list[str]:
    """Inline-asm operands, a few per line, the first line led by ':' or '::'."""
    rows = [", ".join(items[k:k + OPERANDS_PER_LINE]) for k in range(0, len(items), OPERANDS_PER_LINE)]
    out = []
    for k, row in enumerate(rows):
        head = f"             {lead} " if k == 0 else "               " + " " * len(lead)
        out.append(head + row + ("," if k < len(rows) - 1 else ""))
    return out
