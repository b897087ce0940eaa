"""cp.async in the code generator (no GPU): the copy's instruction, cp-size and src-size (zeros
for holes), the commit / wait and the barrier before the readers, each as verified; NVRTC
compiles every form for sm_90a (ptxas checks the PTX), with and without the CUDA headers.
tests/gpu/test_cp_async.py runs the kernels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.codegen.emit import emit
from tileproof.codegen.ir import Compute, CpAsyncCopy, CpAsyncWait, IndexNames, Loop, WholeTile
from tileproof.codegen.lower import lower
from tileproof.codegen.runtime import nvrtc
from tileproof.model.targets import get_target
from tileproof.schedule_files import discover

ROOT = Path(__file__).resolve().parents[2]
VALID = {c.name: c for c in discover([str(ROOT / "examples" / "valid" / "cp_async.py")])}

pytestmark = pytest.mark.usefixtures("private_cache")


def lowered(name: str):
    return lower(VALID[name].build().snapshot(), get_target("sm_90a"))


def flat(nodes: list) -> list:
    out = []
    for n in nodes:
        out.append(n)
        if isinstance(n, Loop):
            out += flat(n.body)
    return out


@pytest.mark.parametrize("name,cache,nbytes", [("k_loop_sum_cg_16_bytes", "cg", 16), ("k_loop_sum_ca_8_bytes", "ca", 8),
                                               ("k_loop_sum_ca_4_bytes_any_k", "ca", 4), ("cache_after_copy", "cg", 16)])
def test_the_copy_is_one_cp_async_of_the_verified_size(name, cache, nbytes):
    st = lowered(name)
    copies = [n for n in flat(st.tree) if isinstance(n, CpAsyncCopy)]
    assert copies and all((c.cache, c.nbytes, c.vector * c.out.dtype.bytes) == (cache, nbytes, nbytes) for c in copies)
    source = tp.compile(VALID[name].build()).cuda_source
    call = "tp_cp_async_cg(tp_smem(" if cache == "cg" else f"tp_cp_async_ca<{nbytes}>(tp_smem("
    assert source.count(call) == len(copies)
    assert f"cp.async.{cache}.shared.global" in source


def test_holes_become_src_size_zero_and_the_issue_keeps_its_thread_predicate():
    """k_loop_sum_ca_4_bytes_any_k: K and M need not divide the tile; a copy past either end
    reads nothing (the tensor's base is passed) and writes zeros. The loop's thread count equals the
    copy's, so no issue predicate is left."""
    st = lowered("k_loop_sum_ca_4_bytes_any_k")
    [a, _] = [n for n in flat(st.tree) if isinstance(n, CpAsyncCopy)]
    assert not a.conds and sorted(c.rhs.value for c in a.zero_fill) == ["K", "M"]
    source = tp.compile(VALID["k_loop_sum_ca_4_bytes_any_k"].build()).cuda_source
    assert re.search(r"const bool tp_in = .*< s_M && .*< s_K;", source)
    assert "tp_in ? (const void*)&T0[" in source and ": (const void*)T0, tp_in ? 4u : 0u);" in source


def test_a_cache_after_copy_keeps_its_issue_predicate():
    """cache_after_copy: T1 runs on 16 of the 64 launched TIDx: the copy is issued by threadIdx.x < 16."""
    st = lowered("cache_after_copy")
    [c] = [n for n in flat(st.tree) if isinstance(n, CpAsyncCopy)]
    assert [(str(x.lhs), x.op, str(x.rhs)) for x in c.conds] == [("threadIdx.x", "<", "16")] and not c.zero_fill


def test_the_readers_wait_then_synchronize():
    """In each iteration of the K loop: both copies, one commit + wait_group 0, the barrier, the add,
    and the barrier before the next iteration's copies overwrite the tiles."""
    st = lowered("k_loop_sum_cg_16_bytes")
    [k_loop] = [n for n in flat(st.tree) if isinstance(n, Loop) and n.label.startswith("T2 axis 1")]

    def kinds(nodes):
        out = []
        for n in nodes:
            if isinstance(n, Loop):
                out += kinds(n.body)
            elif isinstance(n, WholeTile):  # the add's nest in two versions (whole tile or not): one read
                out += kinds([n.lowered])
            elif not isinstance(n, IndexNames):
                out.append(type(n).__name__ if not isinstance(n, Compute) or isinstance(n, CpAsyncCopy) else "read")
        return out

    assert kinds(k_loop.body) == ["CpAsyncCopy", "CpAsyncCopy", "CpAsyncWait", "Sync", "read", "Sync"]
    [w] = [n for n in flat(k_loop.body) if isinstance(n, CpAsyncWait)]
    assert (w.pending, w.commit) == (0, True)
    source = tp.compile(VALID["k_loop_sum_cg_16_bytes"].build()).cuda_source
    lines = [ln.strip() for ln in source.splitlines()]
    at = lines.index("tp_cp_async_commit();")
    assert lines[at + 1].startswith("tp_cp_async_wait<0>();") and lines[at + 2].startswith("__syncthreads();")


@pytest.mark.parametrize("name", sorted(VALID))
@pytest.mark.parametrize("headers", [False, True])
def test_nvrtc_compiles_every_form_for_sm_90a(name, headers):
    st = lowered(name)
    include = nvrtc.cuda_include_dir() if headers else None
    if headers and include is None:
        pytest.skip("no CUDA headers here")
    assert nvrtc.compile_to_cubin(emit(st.kernel, cuda_headers=headers), "sm_90a", include)


def test_ptxas_refuses_an_eight_byte_cp_async_cg():
    """The hardware fact behind CPASYNC-SIZE (docs/hardware.md): .cg takes exactly 16 bytes."""
    source = ('extern "C" __global__ void k(const float* g) { __shared__ float s[4];\n'
              '  asm volatile("cp.async.cg.shared.global [%0], [%1], {n};" :: "r"((unsigned)__cvta_generic_to_shared(s)),'
              ' "l"(__cvta_generic_to_global(g)) : "memory"); }')
    assert nvrtc.compile_to_cubin(source.replace("{n}", "16"), "sm_90a")
    with pytest.raises(tp.CompileError) as e:
        nvrtc.compile_to_cubin(source.replace("{n}", "8"), "sm_90a")
    assert "expected to be 16" in e.value.log
    assert nvrtc.compile_to_cubin(source.replace("cg", "ca").replace("{n}", "8"), "sm_90a")


def test_the_fingerprint_tells_cache_ops_apart():
    from tileproof.model.fingerprint import fingerprint

    def build(cache_op):
        with tp.Fusion("fp") as fusion:
            t0 = tp.make_contig_concrete_tensor([8, 32])
            fusion.add_input(t0)
            t1 = tp.set(t0, op=tp.LoadStoreOpType.CpAsync, cache_op=cache_op)
            fusion.add_output(tp.set(t1))
        return fusion

    assert fingerprint(build(tp.CacheOp.Global), "sm_90a") != fingerprint(build(tp.CacheOp.AllLevels), "sm_90a")


# -- circular buffering --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,stages,prefetch", [("k_loop_sum_double_buffered", 2, 1),
                                                  ("k_loop_sum_three_stages_prefetch_one", 3, 1),
                                                  ("k_loop_sum_four_stages_bf16", 4, 3),
                                                  ("k_loop_sum_pipelined_any_k", 2, 1)])
def test_the_pipelined_k_loop(name, stages, prefetch):
    """The prologue copies iterations 0..P-1 (each below the loop's extent, each then committed);
    the loop waits until at most P - 1 groups are in flight (iteration i's data is complete),
    synchronizes once, copies iteration i + P into stage (i + P) % S (read in iteration i + P - S,
    before that barrier), commits, and reads stage i % S: one barrier per iteration."""
    source = tp.compile(VALID[name].build()).cuda_source
    body = source[source.index("extern"):]
    # (a whole tile's invariant names, declared at the loop's top, are not part of the order asserted here)
    lines = [ln.strip() for ln in body.splitlines() if not ln.strip().startswith("const unsigned long long tp_inv")]
    pro = lines.index(f"for (unsigned long long i1 = 0; i1 < {prefetch}; ++i1) {{") if "unsigned long long" in body \
        else lines.index(f"for (unsigned i1 = 0; i1 < {prefetch}; ++i1) {{")
    assert lines[pro - 1] == "#pragma unroll" and lines[pro + 1].startswith("if (i1 < ")
    loop = next(k for k, ln in enumerate(lines) if k > pro and ln.startswith("for (") and "i1 <" in ln)
    assert lines[loop + 1].startswith(f"tp_cp_async_wait<{prefetch - 1}>();")
    assert lines[loop + 2].startswith("__syncthreads();")
    assert lines[loop + 3].startswith(f"if ((i1 + {prefetch}") and f"% {stages}" in lines[loop + 3]
    assert f"% {stages}" in body and f"((i1 + {prefetch}" in body  # the shifted copies' stage and data
    end = lines.index("}", loop + 3)  # the prefetched copies' block
    inner = lines[loop + 4:]
    close = next(k for k, ln in enumerate(inner) if ln.startswith("tp_cp_async_commit();"))
    assert all(not ln.startswith("__syncthreads") for ln in inner[:close]), end
    loop_body = body[body.index(lines[loop]):]
    assert loop_body.count("__syncthreads();") >= 1 and "refilled at the top of the next iteration" not in body


def test_a_prologue_copy_is_the_loops_statement_at_an_earlier_iteration():
    """The prefetched copies are the loop's own statement with its index shifted by the prefetch:
    substituting i1 + P back gives the prologue's copy."""
    from tileproof.codegen.ir import CpAsyncCopy
    from tileproof.model.expr import add, const, substitute, var
    from tileproof.execution.pipeline import Prefetched, Prologue

    st = lowered("k_loop_sum_double_buffered")
    pro = next(n for n in flat_all(st.tree) if isinstance(n, Prologue))
    pre = next(n for n in flat_all(st.tree) if isinstance(n, Prefetched))
    assert pro.index == pre.index == "loop.i1" and str(pro.extent) == str(pre.extent) == "ceil(ceil(K / 4) / 8)"
    early = [n for n in flat_all(pro.body) if isinstance(n, CpAsyncCopy)]
    ahead = [n for n in flat_all(pre.body) if isinstance(n, CpAsyncCopy)]
    shift = {"loop.i1": add(var("loop.i1"), const(1))}
    assert [substitute(c.out.offset, shift) for c in early] == [c.out.offset for c in ahead]
    assert [substitute(c.ins[0].offset, shift) for c in early] == [c.ins[0].offset for c in ahead]


def flat_all(nodes: list) -> list:
    out = []
    for n in nodes:
        out.append(n)
        out += flat_all(getattr(n, "body", []))
    return out


def test_the_fingerprint_tells_circular_buffers_apart():
    from tileproof.model.fingerprint import fingerprint

    a, b = VALID["k_loop_sum_cg_16_bytes"].build(), VALID["k_loop_sum_double_buffered"].build()
    b.name = a.name
    assert fingerprint(a, "sm_90a") != fingerprint(b, "sm_90a")
