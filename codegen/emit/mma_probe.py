"""The tensor-core layout probe: the CUDA source of a one-warp kernel that computes one
instruction tile D = A B + C with mma.sync, loading A, B and C from global memory and storing D
through the fragment maps of hw/mma.py. Every index in it is a map's Expr rendered by
cuda_expr.py; none is written by hand, so a kernel that gets the right D on a GPU confirms the
maps the verifier proves schedules against (tests/gpu/test_mma_probe.py, like nvFuser's
MmaTest.SingleTile).

The kernel `tp_mma_probe_<shape>_<type>(a, b, c, d)` takes row-major tiles: A m x k and B k x n
of the operand storage type (float for tf32, rounded in the kernel; the raw 16 bits of each
bf16 / f16 element as unsigned short), C and D m x n of float. Launch it with one block of 32
threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...model.expr import Expr, add, as_expr, mul, var
from ...hw.mma import Fragment, MmaInstruction
from . import mma as emit_mma
from .cuda_expr import to_cuda

LANE = "lane"  # the algebra's name of the thread's lane, also its C++ name
STORAGE = {"tf32": "float", "bf16": "unsigned short", "f16": "unsigned short"}


@dataclass(frozen=True)
class Probe:
    """A probe kernel: its name, CUDA source, and the C++ type of A's and B's elements."""

    instruction: MmaInstruction
    name: str
    source: str
    operand_storage: str


def element_offset(f: Fragment, element: int) -> Expr:
    """Where element `element` of the current lane lives in the fragment's row-major tile."""
    row, col = f.position(var(LANE), element)
    return add(mul(as_expr(row), f.cols), col)


def _index(f: Fragment, element: int) -> str:
    return to_cuda(element_offset(f, element), cast=False, bits=32)


def _load_operand(f: Fragment, array: str, regs: str, input_type: str) -> list[str]:
    """The registers of one operand, read from its tile through the fragment map."""
    lines = []
    for r in range(f.registers):
        if input_type == "tf32":
            lines.append(emit_mma.to_tf32(f"{regs}[{r}]", f"{array}[{_index(f, f.element_of(r))}]"))
        else:
            low, high = (f"{array}[{_index(f, f.element_of(r, h))}]" for h in (0, 1))
            lines.append(emit_mma.pack_16bit(f"{regs}[{r}]", low, high))
    return lines


def probe_kernel(inst: MmaInstruction) -> Probe:
    """The probe kernel of an mma.sync instruction (hw/mma.py's MMA_M16N8K8_TF32, MMA_M16N8K16,
    MMA_M16N8K8)."""
    name = f"tp_mma_probe_m{inst.m}n{inst.n}k{inst.k}_{inst.input_type}"
    storage = STORAGE[inst.input_type]
    a, b, c = inst.a, inst.b, inst.c
    regs = {"a": a.registers, "b": b.registers, "c": c.registers, "d": c.registers}
    body = [f"const unsigned {LANE} = threadIdx.x % 32U;",
            f"unsigned a_reg[{regs['a']}], b_reg[{regs['b']}];",
            f"float c_reg[{regs['c']}], d_reg[{regs['d']}];",
            f"// A ({a.rows} x {a.cols}) and B ({b.rows} x {b.cols}) through the fragment maps"]
    body += _load_operand(a, "a", "a_reg", inst.input_type)
    body += _load_operand(b, "b", "b_reg", inst.input_type)
    body.append("// C through the accumulator map")
    body += [f"c_reg[{v}] = c[{_index(c, v)}];" for v in range(c.elements)]
    body.append(emit_mma.mma_sync(inst, *[[f"{n}_reg[{r}]" for r in range(regs[n])] for n in ("d", "a", "b", "c")]))
    body.append("// D through the accumulator map")
    body += [f"d[{_index(c, v)}] = d_reg[{v}];" for v in range(c.elements)]
    source = "\n".join([
        f"// tileproof tensor-core layout probe: one {inst.ptx}",
        "// every index below is a fragment map of hw/mma.py rendered by codegen/emit/cuda_expr.py",
        f'extern "C" __global__ void __launch_bounds__(32) {name}(',
        f"    const {storage}* __restrict__ a, const {storage}* __restrict__ b,",
        "    const float* __restrict__ c, float* __restrict__ d) {",
        *(f"  {line}" for line in body),
        "}",
    ]) + "\n"
    return Probe(inst, name, source, storage)
