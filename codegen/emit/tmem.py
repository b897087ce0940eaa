"""C++ for the tensor-memory nodes of codegen/ir.py (inline PTX, sm_100a).

    tcgen05.alloc / relinquish_alloc_permit / dealloc   by warp 0 (.sync.aligned: all its threads)
    tcgen05.st / tcgen05.ld  + tcgen05.wait::st / ::ld  by every warp that takes part
    tcgen05.fence::before_thread_sync, __syncthreads(), tcgen05.fence::after_thread_sync

At the holes of an indivisible split the instruction runs all the same (warp-collective), its
data predicated: a store's element there is zero (the array value-initialised), a load's is not
written back. A loaded register is read only after tcgen05.wait::ld, and the wait takes the registers as
"+r" operands, so the compiler cannot move a read above it. A thread's elements live in an
array of the tensor's storage type (__nv_bfloat16, signed char, double, ...) whose bytes are
the registers' (memcpy, which compiles to register moves): element slot k at byte k * bytes,
so that two bfloat16 share a register, the lower column bytes in its low half, and a 64-bit
element spans two registers, low word first (hw/tcgen05.py Packing). Index math is rendered
by the emitter it is given (codegen/emit/__init__.py, cuda_expr.py).
"""

from __future__ import annotations

from dataclasses import fields

from ...model.errors import InternalError
from ...hw.tcgen05 import WORD_BYTES
from ...model.types import Direction
from ..ir import BASE_NAME, Sync, TmemAccess, TmemAlloc, TmemDealloc, TmemFencedSync

SLOT_NAME = "tmem_base_slot"  # the shared-memory word tcgen05.alloc writes the address into
REGS_NAME = "tmem_regs"
ELEMENTS_NAME = "tmem_elements"
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
    dtype = a.elements[0].data.out.dtype if a.direction is Direction.STORE else a.elements[0].data.ins[a.tmem_input].dtype
    slots = _slots(a, dtype.bytes)
    n, count = a.registers, len(a.elements)
    body = [f"const unsigned taddr = {BASE_NAME} + (unsigned){e.x(a.address_offset)};  // warp-uniform",
            f"{e.storage(dtype)} {ELEMENTS_NAME}[{count}];",
            f"unsigned {REGS_NAME}[{n}];"]
    packing = f"// {_packing_comment(dtype, count, n)}"
    split = f", {a.split_offset}" if a.split_offset is not None else ""
    if a.direction is Direction.STORE:  # an element at a hole reads no register: zero is stored there
        if any(el.data.conds for el in a.elements):
            body[1] = f"{e.storage(dtype)} {ELEMENTS_NAME}[{count}] = {{}};"
        for k, el in zip(slots, a.elements):
            line = f"{ELEMENTS_NAME}[{k}] = {e.value(el.data, [e.ref(o) for o in el.data.ins])};"
            body.append(f"if ({' && '.join(e.cond(c) for c in el.data.conds)}) {line}" if el.data.conds else line)
        body += [f"memcpy({REGS_NAME}, {ELEMENTS_NAME}, sizeof({REGS_NAME}));  {packing}"]
        regs = ", ".join(f"%{k + 1}" for k in range(n))
        body.append(f'asm volatile("{a.instruction} [%0]{split}, {{{regs}}};"')
        body += _operands("::", ['"r"(taddr)'] + [f'"r"({REGS_NAME}[{k}])' for k in range(n)])
        body.append('             : "memory");')
        body.append('asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");')
    else:
        regs = ", ".join(f"%{k}" for k in range(n))
        outs = [f'"=r"({REGS_NAME}[{k}])' for k in range(n)]
        body.append(f'asm volatile("{a.instruction} {{{regs}}}, [%{n}]{split};"')
        body += _operands(":", outs)
        body.append('             : "r"(taddr) : "memory");')
        body.append('asm volatile("tcgen05.wait::ld.sync.aligned;"')
        body += _operands(":", [f'"+r"({REGS_NAME}[{k}])' for k in range(n)])
        body.append('             :: "memory");  // the registers are read below this wait only')
        body.append(f"memcpy({ELEMENTS_NAME}, {REGS_NAME}, sizeof({REGS_NAME}));  {packing}")
        for k, el in zip(slots, a.elements):
            args = [f"{ELEMENTS_NAME}[{k}]" if j == a.tmem_input else e.ref(o) for j, o in enumerate(el.data.ins)]
            line = f"{e.ref(el.data.out)} = {e.value(el.data, args)};"
            if el.data.conds:
                line = f"if ({' && '.join(e.cond(c) for c in el.data.conds)}) {line}"
            body.append(line)
    return e.guarded_block(a.comment, a.conds, body, depth, "  // warp-uniform")


def _slots(a: TmemAccess, element_bytes: int) -> list[int]:
    """Each element's slot in the element array, from its register and byte: the array's bytes
    are the registers', so slot k starts at byte k * element_bytes."""
    starts = [el.register * WORD_BYTES + el.byte for el in a.elements]
    slots = [s // element_bytes for s in starts]
    if any(s % element_bytes for s in starts) or sorted(slots) != list(range(len(a.elements))) \
            or len(a.elements) * element_bytes != a.registers * WORD_BYTES:
        raise InternalError(f"{a.instruction}: the elements' registers and bytes {starts} do not pack "
                            f"{len(a.elements)} elements of {element_bytes} bytes into {a.registers} registers")
    return slots


def _packing_comment(dtype, elements: int, registers: int) -> str:
    if elements == registers:
        return "element k in register k"
    if elements > registers:
        per = elements // registers
        return (f"{per} {dtype} per register: element k in register k / {per}, bits "
                f"{8 * dtype.bytes} * (k % {per}) and up (the lower column bytes in the lower bits)")
    return f"{dtype} element k in registers {registers // elements} * k (low word) and the next (high word)"


def _operands(lead: str, items: list[str]) -> list[str]:
    """Inline-asm operands, a few per line, the first line led by ':' or '::'."""
    rows = [", ".join(items[k:k + OPERANDS_PER_LINE]) for k in range(0, len(items), OPERANDS_PER_LINE)]
    out = []
    for k, row in enumerate(rows):
        head = f"             {lead} " if k == 0 else "               " + " " * len(lead)
        out.append(head + row + ("," if k < len(rows) - 1 else ""))
    return out
