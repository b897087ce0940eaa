"""Vector statements with a strided register operand (no GPU): the register side is read or
written element by element (Operand.per_element, a loop over ELEMENT_VAR) while the shared
and global sides keep one 16-byte access. Checked on the emitted source, on the kernel IR,
and by running the IR on the CPU (threads of a block in lockstep, shared memory included)."""

from __future__ import annotations

import importlib.util
import itertools
import re
from pathlib import Path

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.ir import ELEMENT_VAR, Compute, Loop, LoopKind, Operand, Sync
from tileproof.codegen.lower import lower
from tileproof.model.expr import add, evaluate, mul, var
from tileproof.model.targets import get_target
from tileproof.model.types import MemoryType, float32 as FLOAT32
from tileproof.model.vectorize import VectorOperand, per_element, vector_findings

ROOT = Path(__file__).resolve().parents[2]
SM90 = get_target("sm_90a")
P = tp.ParallelType

pytestmark = pytest.mark.usefixtures("private_cache")


def _schedules():
    spec = importlib.util.spec_from_file_location("bench_schedules_gather", ROOT / "benchmarks/schedules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


S = _schedules()


def register_block_transpose(m: int = 64, n: int = 64):
    """out[N, M] = a[M, N] without shared memory: a thread loads a 4 x 4 block with four
    16-byte loads along the input rows into T1 (registers, [Mb, Nb]), and stores four
    16-byte vectors along the output rows, each a column of T1 (stride 4)."""
    with tp.Fusion("register_block_transpose") as fusion:
        t0 = tp.make_contig_concrete_tensor([m, n])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.transpose(t1, 0, 1)
        fusion.add_output(t2)
    t1.split(1, 4).split(0, 4).reorder({1: 2, 2: 1})  # [Mo, No, Mb, Nb]
    t2.split(1, 4).split(0, 4).reorder({0: 1, 1: 2, 2: 0})  # [Mo, No, Nb, Mb]
    for t in (t1, t2):
        t.axis(0).parallelize(P.TIDy)
        t.axis(1).parallelize(P.TIDx)
        t.axis(2).parallelize(P.Unroll)
        t.axis(3).parallelize(P.Vectorize)
    t1.inline_at(2)
    return fusion


def computes(nodes) -> list[Compute]:
    out = []
    for n in nodes:
        if isinstance(n, Loop):
            out += computes(n.body)
        elif isinstance(n, Compute):
            out.append(n)
    return out


def test_strided_register_operand_vectorizes():
    fusion = register_block_transpose()
    report = tp.verify(fusion, target="sm_90a")
    assert report.ok and not report.diagnostics, report
    src = tp.compile(fusion, target="sm_90a").cuda_source
    assert len(re.findall(r"reinterpret_cast<uint4\*>\(&T2\[", src)) == 1, src  # one 16-byte global store
    assert len(re.findall(r"reinterpret_cast<const uint4\*>\(&T0\[", src)) == 1, src  # one 16-byte global load
    assert f"for (int {ELEMENT_VAR} = 0; {ELEMENT_VAR} < 4; ++{ELEMENT_VAR}) result[{ELEMENT_VAR}] = T1[" in src, src
    assert "Vectorize axis is not a contiguous access" not in src

    load, store = computes(lower(fusion.snapshot(), SM90).kernel.body)
    assert load.vector == 4 and not load.out.per_element and not load.ins[0].per_element  # T1 contiguous
    assert store.vector == 4 and not store.out.per_element
    (gather,) = store.ins
    assert gather.per_element and gather.tensor == "T1"
    assert [evaluate(gather.offset, {**_zeros(gather.offset), ELEMENT_VAR: e}) for e in range(4)] == [0, 4, 8, 12]


def _zeros(e) -> dict[str, int]:
    return {name: 0 for name in e.free_vars() if name != ELEMENT_VAR}


def _operand(memory: MemoryType, offset) -> Operand:
    return Operand("T", memory, tp.float32, offset)


CONTIGUOUS = add(mul(var("r"), 16), var("v"))  # offset r * 16 + v: unit stride along v
STRIDED = add(var("r"), mul(var("v"), 4))  # r + 4 * v


@pytest.mark.parametrize("memory,offset,element_by_element", [
    (MemoryType.Local, STRIDED, True),  # the register gather / scatter
    (MemoryType.Local, CONTIGUOUS, False),
    (MemoryType.Shared, STRIDED, False),  # shared and global move whole vectors (VECTORIZE-CONTIGUOUS proves them)
    (MemoryType.Global, CONTIGUOUS, False),
])
def test_only_register_operands_go_element_by_element(memory, offset, element_by_element):
    assert per_element(VectorOperand("T", memory, FLOAT32, offset), "v", 4) is element_by_element


def test_a_vector_wider_than_16_bytes_is_no_single_access():
    operands = [VectorOperand("T", MemoryType.Global, FLOAT32, CONTIGUOUS)]
    assert vector_findings(operands, 4) == [] and [f.bytes for f in vector_findings(operands, 8)] == [32]


def test_register_block_transpose_schedule_verifies_conflict_free():
    """benchmarks/schedules.py's transpose(regs=vec): 16-byte shared reads into a vec x vec
    register block, 16-byte global stores gathering its columns, no bank conflict."""
    for dtype, vec in (("float32", 4), ("bfloat16", 8)):
        fusion = S.transpose(dtype, tile_m=16 * vec, tile_n=16 * vec, warps=4, regs=vec)
        report = tp.verify(fusion, target="sm_90a")
        assert report.ok and not report.diagnostics, report
        src = tp.compile(fusion, target="sm_90a").cuda_source
        assert len(re.findall(r"reinterpret_cast<uint4\*>\(&T3\[", src)) == 1  # 16-byte shared read
        assert len(re.findall(r"reinterpret_cast<uint4\*>\(&T2\[", src)) == 1  # 16-byte global store
        assert f"result[{ELEMENT_VAR}] = T3[" in src


@pytest.mark.parametrize("m,n,build", [
    (64, 64, lambda: register_block_transpose(64, 64)),
    (128, 128, lambda: S.transpose("float32", 128, 128, tile_m=64, tile_n=64, warps=8, regs=4)),
    (128, 256, lambda: S.transpose("float32", 128, 256, tile_m=64, tile_n=128, warps=4, lanes_m=16, regs=4)),
], ids=["registers-only", "smem-64x64", "smem-64x128-l16"])
def test_lowered_kernel_transposes_on_cpu(m, n, build):
    fusion = build()
    assert tp.verify(fusion, target="sm_90a").ok
    ir = lower(fusion.snapshot(), SM90).kernel
    a = np.arange(m * n, dtype=np.float64)
    out = np.full(m * n, np.nan)
    LockstepSimulator(ir).run({"T0": a, "T2": out})
    np.testing.assert_array_equal(out.reshape(n, m), a.reshape(m, n).T)


class LockstepSimulator:
    """Runs a kernel IR of copies block by block, the threads of a block in lockstep,
    statement by statement (a Sync needs nothing more), on flat numpy arrays: global
    tensors by name, shared buffers per block, registers per thread."""

    THREADS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
    BLOCKS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")

    def __init__(self, ir):
        self.ir = ir
        self.algebra = {cpp: alg for alg, cpp in ir.names.items()}
        self.block = [evaluate(e, {}) for e in ir.block]
        self.grid = [evaluate(e, {}) for e in ir.grid]

    def run(self, buffers: dict[str, np.ndarray]) -> None:
        threads = [dict(zip(self.THREADS, (x, y, z))) for z in range(self.block[2])
                   for y in range(self.block[1]) for x in range(self.block[0])]
        for b in itertools.product(*(range(g) for g in self.grid)):
            shared = {buf.tensor: np.full(evaluate(buf.elements, {}), np.nan)
                      for buf in self.ir.buffers if buf.memory is MemoryType.Shared}
            local = [{buf.tensor: np.full(evaluate(buf.elements, {}), np.nan)
                      for buf in self.ir.buffers if buf.memory is MemoryType.Local} for _ in threads]
            self.arrays = [{**buffers, **shared, **regs} for regs in local]
            self.envs = [{**dict(zip(self.BLOCKS, b)), **t} for t in threads]
            self.nodes(self.ir.body, {})

    def nodes(self, nodes, loops) -> None:
        for node in nodes:
            if isinstance(node, Loop):
                if node.kind in (LoopKind.THREAD, LoopKind.BLOCK):
                    self.nodes(node.body, loops)
                else:
                    name = self.algebra.get(node.var, node.var)
                    for i in range(evaluate(node.extent, {})):
                        self.nodes(node.body, {**loops, name: i})
            elif isinstance(node, Compute):
                assert node.kind in ("load_store", "transpose") and len(node.ins) == 1, node
                for env, arrays in zip(self.envs, self.arrays):
                    env = {**env, **loops}
                    if all(_holds(c, env) for c in node.conds):
                        src, dst = node.ins[0], node.out
                        for e in range(node.vector):
                            arrays[dst.tensor][_element(dst, env, e)] = arrays[src.tensor][_element(src, env, e)]
            else:
                assert isinstance(node, Sync), node


def _element(o: Operand, env: dict, e: int) -> int:
    if o.per_element:
        return evaluate(o.offset, {**env, ELEMENT_VAR: e})
    return evaluate(o.offset, env) + e


def _holds(c, env) -> bool:
    a, b = evaluate(c.lhs, env), evaluate(c.rhs, env)
    return a < b if c.op == "<" else a == b
