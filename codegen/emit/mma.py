"""C++ for tensor-core instructions, given the C++ names of the registers: one mma.sync as
inline PTX, the tf32 rounding of a float32 operand (cvt.rna.tf32.f32, unless truncation is
declared), and the packing of two
16-bit elements into a 32-bit register in the order of hw/mma.py's fragments (the even
element in the low half). Which element goes in which register is the fragment map's business,
not this module's: callers render its Exprs with cuda_expr.py."""

from __future__ import annotations

from collections.abc import Sequence

from ...model.errors import InternalError
from ...hw.mma import WARP, MmaInstruction
from ...model.options import Tf32Rounding
from ...model.expr import Expr, add, const, mod, mul
from ...model.simplify import simplify
from ...model.types import MemoryType
from ...hw.tcgen05 import COMMIT_PTX, MMA_PTX, SM100_DESCRIPTOR_VERSION
from ..ir import BASE_NAME


def mma_sync(inst: MmaInstruction, d: Sequence[str], a: Sequence[str], b: Sequence[str], c: Sequence[str]) -> str:
    """One `asm volatile` of inst (an mma.sync): D = A B + C with d and c float lvalues (f32
    accumulators, d may name c's registers), a and b unsigned 32-bit registers, each list in
    register order."""
    if inst.threads != WARP or inst.b is None:
        raise InternalError(f"emit/mma.py: {inst.name} is not an mma.sync")
    want = {"d": (d, inst.c.registers), "a": (a, inst.a.registers), "b": (b, inst.b.registers),
            "c": (c, inst.c.registers)}
    for name, (regs, n) in want.items():
        if len(regs) != n:
            raise InternalError(f"emit/mma.py: {inst.name} takes {n} {name} registers, got {len(regs)}")
    groups, k = [], 0
    for regs in (d, a, b, c):  # PTX numbers the operands in this order
        groups.append("{" + ", ".join(f"%{k + i}" for i in range(len(regs))) + "}")
        k += len(regs)
    outs = ", ".join(f'"=f"({r})' for r in d)
    ins = ", ".join([f'"r"({r})' for r in (*a, *b)] + [f'"f"({r})' for r in c])
    return f'asm volatile("{inst.ptx} {", ".join(groups)};" : {outs} : {ins});'


def to_tf32(dst: str, src: str) -> str:
    """dst (an unsigned register) = the float src rounded to tf32, to nearest with ties away
    from zero: PTX leaves the bits an mma reads from an unrounded float32 implementation-defined."""
    return f'asm("cvt.rna.tf32.f32 %0, %1;" : "=r"({dst}) : "f"({src}));'


def rounds_to_tf32(n) -> bool:
    """Whether an MmaIssue converts its float32 operands with cvt.rna.tf32.f32: tf32 operands,
    unless the op declares tp.Tf32Rounding.Truncate (the bits go as they are)."""
    return n.frag.inst.converts_to_tf32 and n.tf32_rounding is not Tf32Rounding.Truncate


def pack_16bit(dst: str, low: str, high: str) -> str:
    """dst (an unsigned register) = two 16-bit bit patterns: `low` (the even element) in bits
    0-15, `high` in bits 16-31."""
    return f"{dst} = (unsigned)({low}) | ((unsigned)({high}) << 16);"


def bits16(ref: str) -> str:
    """The 16-bit pattern of a float16 / bfloat16 lvalue."""
    return f"(*reinterpret_cast<const unsigned short*>(&{ref}))"


def _word(low, high) -> bool:
    """Whether two 16-bit register operands are the halves of one 32-bit word of one register
    array: `high` right after `low`, at an even element offset (register arrays are 16-byte
    aligned). Read as that word, the pair needs no repacking (little-endian: `low` in bits 0-15,
    as pack_16bit puts it), which ptxas otherwise pays for in moves."""
    return (low.tensor == high.tensor and low.memory is MemoryType.Local and high.memory is MemoryType.Local
            and simplify(high.offset, {}) == simplify(add(low.offset, const(1)), {})
            and simplify(mod(low.offset, const(2)), {}) == const(0))


WGMMA_PRELUDE = """\
// wgmma (PTX ISA 9.7.15): a shared-memory matrix descriptor from its fields (bytes; 9.7.15.5.1.2.2)
__device__ __forceinline__ unsigned long long tp_wgmma_desc(unsigned start, unsigned lbo, unsigned sbo, unsigned layout) {
  return (unsigned long long)((start & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16)
       | ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | ((unsigned long long)layout << 62); }
// a shared address in 16-byte units, its 14 bits (a CTA's shared memory: below 2^14 of them); a cluster's
// blocks see their shared addresses with bits above 2^18 set, which unmasked would carry into the LBO field
__device__ __forceinline__ unsigned tp_smem16(const void* p) { return (tp_smem(p) >> 4) & 0x3FFFu; }
// a descriptor from the start address in 16-byte units (tp_smem16 of the base plus the offset's units), so
// that the unrolled copies of a batch add constants to one value
__device__ __forceinline__ unsigned long long tp_wgmma_desc16(unsigned start16, unsigned lbo, unsigned sbo, unsigned layout) {
  return (unsigned long long)(start16 + (((lbo & 0x3FFFF) >> 4) << 16))
       | ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | ((unsigned long long)layout << 62); }
__device__ __forceinline__ void tp_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void tp_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int PENDING> __device__ __forceinline__ void tp_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(PENDING) : "memory"); }"""


def uses_wgmma(issues) -> bool:
    return any(n.descriptors and not n.frag.is_tcgen05 for n in issues)


def uses_tcgen05(issues) -> bool:
    return any(n.frag.is_tcgen05 for n in issues)


TCGEN05_ISSUER = "threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0"  # the thread issuing and committing
TCGEN05_PRELUDE = f"""\
// tcgen05.mma (PTX ISA 9.7.16.10): a shared-memory matrix descriptor from its fields (bytes; 9.7.16.4.1):
// wgmma's, with version {SM100_DESCRIPTOR_VERSION} at bits 46-47 and the 3-bit swizzle mode at bits 61-63
__device__ __forceinline__ unsigned long long tp_umma_desc(unsigned start, unsigned lbo, unsigned sbo, unsigned mode) {{
  return (unsigned long long)((start & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16)
       | ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | ((unsigned long long){SM100_DESCRIPTOR_VERSION} << 46)
       | ((unsigned long long)mode << 61); }}
// D (tensor memory) = A B, or D += A B where accumulate != 0 (enable-input-d)
__device__ __forceinline__ void tp_umma_f16(unsigned d_tmem, unsigned long long a_desc, unsigned long long b_desc,
                                            unsigned idesc, unsigned accumulate) {{
  asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %4, 0;\\n{MMA_PTX} [%0], %1, %2, %3, p;\\n}}\\n"
               :: "r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory"); }}
// the mbarrier completes a phase once every tcgen05.mma this thread issued before has completed
__device__ __forceinline__ void tp_umma_commit(unsigned long long* bar) {{
  asm volatile("{COMMIT_PTX} [%0];" :: "r"(tp_smem(bar)) : "memory"); }}"""


def wgmma(inst: MmaInstruction, d: Sequence[str], a_desc: str, b_desc: str, transpose: tuple[int, int] = (0, 0)) -> str:
    """One `asm volatile` of inst (a wgmma with both operands in shared memory): D = A B + D,
    d the float accumulator lvalues in register order, scale-d 1 (D is zeroed before the first);
    `transpose`: imm-trans-a and imm-trans-b, 1 for an MN-major operand (16-bit types only)."""
    if any(transpose) and inst.input_type not in ("bf16", "f16"):
        raise InternalError(f"emit/mma.py: {inst.name} has no transpose (an MN-major operand needs 16-bit types)")
    if inst.threads == WARP or len(d) != inst.c.registers:
        raise InternalError(f"emit/mma.py: {inst.name} takes {inst.c.registers} d registers, got {len(d)}")
    regs = ", ".join(f"%{i}" for i in range(len(d)))
    outs = ", ".join(f'"+f"({r})' for r in d)
    n = len(d)
    return (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{n + 2}, 0;\\n'
            f'{inst.ptx} {{{regs}}}, %{n}, %{n + 1}, p, 1, 1, {transpose[0]}, {transpose[1]};\\n}}\\n" : {outs} : "l"({a_desc}), '
            f'"l"({b_desc}), "n"(1) : "memory");')


def wgmma_rs(inst: MmaInstruction, d: Sequence[str], a: Sequence[str], b_desc: str, transpose_b: int = 0) -> str:
    """One `asm volatile` of inst with A from registers (RS): D = A B + D, d the float
    accumulator lvalues in register order, a the thread's unsigned A registers (its fragment,
    hw/mma.py wgmma_a16_position), B through its descriptor; scale-d 1. PTX ISA 9.7.15.5.2:
    `d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-b` (no imm-trans-a: A in
    registers is always the K-major fragment)."""
    if inst.threads == WARP or len(d) != inst.c.registers or len(a) != inst.a.registers:
        raise InternalError(f"emit/mma.py: {inst.name} takes {inst.c.registers} d and {inst.a.registers} a registers, "
                            f"got {len(d)} and {len(a)}")
    if transpose_b and inst.input_type not in ("bf16", "f16"):
        raise InternalError(f"emit/mma.py: {inst.name} has no transpose (an MN-major operand needs 16-bit types)")
    n, na = len(d), len(a)
    d_regs = ", ".join(f"%{i}" for i in range(n))
    a_regs = ", ".join(f"%{n + i}" for i in range(na))
    outs = ", ".join(f'"+f"({r})' for r in d)
    ins = ", ".join([f'"r"({r})' for r in a] + [f'"l"({b_desc})', '"n"(1)'])
    return (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{n + na + 1}, 0;\\n'
            f'{inst.ptx} {{{d_regs}}}, {{{a_regs}}}, %{n + na}, p, 1, 1, {transpose_b};\\n}}\\n" : {outs} : {ins} '
            f': "memory");')


def fence_lines(e, n, depth: int) -> list[str]:
    return [f"{'  ' * depth}tp_wgmma_fence();  // {n.why}"]


def commit_group_lines(e, n, depth: int) -> list[str]:
    return [f"{'  ' * depth}tp_wgmma_commit();  // {n.why}"]


def wait_lines(e, n, depth: int) -> list[str]:
    pad = "  " * depth
    return ([f"{pad}tp_wgmma_commit();"] if n.commit else []) + [f"{pad}tp_wgmma_wait<{n.pending}>();  // {n.why}"]


def _wgmma_lines(e, n, depth: int) -> list[str]:
    """A wgmma MmaIssue: each shared operand's descriptor, A's registers where A is a register
    fragment (RS), and the instruction; the fence before its batch and the commit and wait after
    it are nodes of their own (execution/wgmma_order.py)."""
    inst = n.frag.inst
    body = []
    names = ("tp_db",) if n.frag.a_in_registers else ("tp_da", "tp_db")
    for name, desc in zip(names, n.descriptors):
        units = exact_quotient(desc.start, DESCRIPTOR_UNIT)
        if units is None:
            body.append(f"const unsigned long long {name} = tp_wgmma_desc(tp_smem({desc.tensor}) + (unsigned)"
                        f"({e.x(desc.start)}), {desc.lbo}u, {desc.sbo}u, {desc.layout}u);")
        else:  # base and offset 16-byte aligned (a descriptor's start is): (base + offset) / 16 = base / 16 + offset / 16
            body.append(f"const unsigned long long {name} = tp_wgmma_desc16(tp_smem16({desc.tensor}) + (unsigned)"
                        f"({e.x(units)}), {desc.lbo}u, {desc.sbo}u, {desc.layout}u);")
    acc = [f"{n.out.tensor}[{e.x(n.out.offset)} + {v}]" for v in range(inst.c.elements)]
    transpose = tuple(int(desc.major == "MN") for desc in n.descriptors)
    if n.frag.a_in_registers:
        body += _register_lines(e, n, "a", n.a, inst.a)
        body.append(wgmma_rs(inst, acc, [f"tp_a{r}" for r in range(inst.a.registers)], "tp_db", transpose[0]))
    else:
        body.append(wgmma(inst, acc, "tp_da", "tp_db", transpose))
    return e.guarded_block(n.comment, n.conds, body, depth)


DESCRIPTOR_UNIT = 16  # a descriptor's address fields count 16-byte units


def exact_quotient(e: Expr, d: int) -> Expr | None:
    """e / d where every term of the sum e is visibly a multiple of d (a constant, or a product
    with a constant factor that is one), else None."""
    if e.op == "const":
        return const(e.value // d) if e.value % d == 0 else None
    if e.op == "add":
        terms = [exact_quotient(t, d) for t in e.args]
        return None if any(t is None for t in terms) else add(*terms)
    if e.op == "mul":
        for k, f in enumerate(e.args):
            q = exact_quotient(f, d) if f.op in ("const", "add", "mul") else None
            if q is not None:
                return mul(*e.args[:k], q, *e.args[k + 1:])
    return None


def _register_lines(e, n, role: str, elems, f) -> list[str]:
    """The unsigned registers tp_<role>0.. of one operand's fragment elements `elems` (fragment
    `f`): a 32-bit element rounded to tf32 (unless truncation is declared) or taken as it is,
    two 16-bit elements packed, the even one low (one aligned word of a register array read
    as it is)."""
    per = f.per_register
    body = []
    for r in range(len(elems) // per):
        name = f"tp_{role}{r}"
        body.append(f"unsigned {name};")
        if per == 1:  # a 32-bit element: tf32 rounds it unless truncation is declared
            body.append(to_tf32(name, e.ref(elems[r])) if rounds_to_tf32(n) else
                        f"{name} = *reinterpret_cast<const unsigned*>(&{e.ref(elems[r])});")
        elif _word(elems[per * r], elems[per * r + 1]):  # one aligned 32-bit word: no repacking
            body.append(f"{name} = *reinterpret_cast<const unsigned*>(&{e.ref(elems[per * r])});")
        else:
            body.append(pack_16bit(name, bits16(e.ref(elems[per * r])), bits16(e.ref(elems[per * r + 1]))))
    return body


def _tcgen05_lines(e, n, depth: int) -> list[str]:
    """A tcgen05.mma MmaIssue: by the issuing thread, each operand's descriptor and the instruction,
    D at tmem_base + its column (lane 0), adding to D unless every K loop is at its first step."""
    body = []
    for name, desc in zip(("tp_da", "tp_db"), n.descriptors):
        body.append(f"const unsigned long long {name} = tp_umma_desc(tp_smem({desc.tensor}) + (unsigned)"
                    f"({e.x(desc.start)}), {desc.lbo}u, {desc.sbo}u, {desc.mode}u);")
    accumulate = " || ".join(f"({e.x(k)}) != 0" for k in n.k_indices) or "0"
    body.append(f"tp_umma_f16({BASE_NAME} + (unsigned)({e.x(add(n.out.offset, const(n.tmem_offset)))}), tp_da, tp_db, "
                f"{n.idesc:#x}u, (unsigned)({accumulate}));  // instruction descriptor: M, N, types, transposes")
    conds = " && ".join([e.cond(c) for c in n.conds] + [TCGEN05_ISSUER])
    pad = "  " * depth
    return ([f"{pad}// {n.comment}", f"{pad}if ({conds}) {{  // one thread issues it"]
            + [f"{pad}  {b}" for b in body] + [f"{pad}}}"])


def commit_lines(e, n, depth: int) -> list[str]:
    """tcgen05.commit by the thread that issued the batch (execution/barriers.py Tcgen05Commit)."""
    return [f"{'  ' * depth}if ({TCGEN05_ISSUER}) tp_umma_commit(&{n.barrier});  // {n.why}"]


def commit_wait_lines(e, n, depth: int) -> list[str]:
    """Every thread waits for the commit's phase, flips its phase bit, and fences its later tcgen05
    operations after the wait (execution/barriers.py Tcgen05Wait)."""
    pad = "  " * depth
    lines = [f"{pad}tp_mbar_wait(&{n.barrier}, {n.barrier}_phase);  // {n.why}", f"{pad}{n.barrier}_phase ^= 1u;"]
    if n.fence:
        lines.append(f'{pad}asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");  // tcgen05.ld below the wait')
    return lines


def issue_lines(e, n, depth: int) -> list[str]:
    """An MmaIssue (codegen/ir.py): the lane's A and B registers from its fragment elements, then
    the macro tile's instructions over N then K, accumulating into acc[acc_base + element]; a
    wgmma's shared operands are its descriptors instead; a tcgen05.mma is one thread's."""
    if n.frag.is_tcgen05:
        return _tcgen05_lines(e, n, depth)
    if n.descriptors:
        return _wgmma_lines(e, n, depth)
    frag = n.frag
    inst = frag.inst
    body = []
    for role, elems, f in (("a", n.a, inst.a), ("b", n.b, inst.b)):
        body += _register_lines(e, n, role, elems, f)

    def registers(role: str, f, sk: int, sn: int) -> list[str]:
        first = frag.element(role, sk, sn, 0)
        return [f"tp_{role.lower()}{(first // f.per_register) + r}" for r in range(f.registers)]

    for sk in range(frag.k_steps):
        for sn in range(frag.n_steps):
            acc = [f"{n.out.tensor}[{e.x(simplify(add(n.out.offset, const(frag.element('C', sk, sn, v))), {}))}]"
                   for v in range(inst.c.elements)]
            body.append(mma_sync(inst, acc, registers("A", inst.a, sk, sn), registers("B", inst.b, sk, sn), acc))
    return e.guarded_block(n.comment, n.conds, body, depth)
