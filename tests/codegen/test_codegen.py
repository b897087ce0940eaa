"""The code generator without a GPU: lowering, emission and NVRTC compilation for sm_90a,
caches, and the errors of tp.compile and kernel.run that need no device."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest

import tileproof as tp
from tileproof.codegen.runtime import nvrtc
from tileproof.codegen.compile import clear_memory_cache
from tileproof.codegen.emit import emit
from tileproof.codegen.ir import Compute, Loop, LoopKind, ParamKind, Sync, format_nodes
from tileproof.codegen.lower import LOWERED_OPS, lower
from tileproof.model.expr import const
from tileproof.model.targets import get_target
from tileproof.model.types import MemoryType
from tileproof.recipes import Cluster, GridOrder, HopperGemmParams, HopperTile, TmaPipeline, hopper_gemm
from tileproof.schedule_files import discover

from support import shared_kernels
from support.codegen_schedules import BUILDERS, big_smem_copy, indivisible_split, partial_threads
from support.codegen_schedules import serial_smem_reuse, smem_transpose, vectorized_copy

ROOT = Path(__file__).resolve().parents[2]
SM90 = get_target("sm_90a")


pytestmark = pytest.mark.usefixtures("private_cache")


def lowerable(fusion) -> bool:
    """No tensor-memory op (tests/codegen/test_codegen_tmem.py compiles those for sm_100a)."""
    if any(t.memory_type is MemoryType.Tensor for t in fusion.tensors):
        return False
    return all(op.kind != "load_store" or op.op_type in LOWERED_OPS for op in fusion.exprs)


def bundled_cases():
    out = []
    for case in discover([str(ROOT / "examples" / "valid")]):
        try:
            fusion = case.build()
        except tp.ScheduleError:
            continue  # a broken example is test_seed_examples' to report, not this file's
        if case.expect.ok and lowerable(fusion):
            out.append(case)
    return out


# -- every valid bundled example that this lowering covers compiles ---------------------------


BUNDLED = bundled_cases()


def test_some_bundled_examples_are_lowerable():
    assert len(BUNDLED) > 0


@pytest.mark.parametrize("case", BUNDLED, ids=lambda c: c.name)
def test_bundled_example_compiles_for_sm90a(case):
    fusion = case.build()
    kernel = shared_kernels.compiled(fusion, "sm_90a")  # test_accepted_compiles.py's, where it compiled it
    assert kernel.cubin[:4] == b"\x7fELF"
    assert "__global__" in kernel.cuda_source
    code = "\n".join(line for line in kernel.cuda_source.splitlines() if "asm" not in line)  # PTX mnemonics
    code = code.replace(kernel.name, "")  # the kernel is named after its fusion, on purpose
    for word in (fusion.name, case.name.split("[")[0]):
        assert word not in code, f"per-example name {word!r} in the generated source"


@pytest.mark.parametrize("case", [c for c in BUNDLED if c.location and "gsg_copy" in c.location], ids=lambda c: c.name)
def test_gsg_copy_launches_the_shared_memory_the_seed_states(case):
    assert tp.compile(case.build()).launch_params.shared_memory_bytes == case.expect.allocations["T1"]["bytes"]


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_codegen_schedules_compile_for_sm90a(name):
    fusion = BUILDERS[name]()
    kernel = tp.compile(fusion, target="sm_90a")
    assert kernel.cubin[:4] == b"\x7fELF"
    assert kernel.name == f"tp_{fusion.name}"
    assert fusion.name not in kernel.cuda_source.replace(kernel.name, "")  # no template per schedule


def test_compiles_for_sm100a_too():
    kernel = tp.compile(smem_transpose(), target="sm_100a")
    assert kernel.cubin[:4] == b"\x7fELF" and kernel.target.name == "sm_100a"


def test_half_types_compile_without_cuda_headers():
    """The PTX prelude stands in for cuda_fp16.h / cuda_bf16.h on machines without them."""
    for name in ("pointwise_add_f16", "pointwise_add_bf16", "vectorized_copy_f16x8", "smem_transpose_bf16"):
        ir = lower(BUILDERS[name]().snapshot(), SM90).kernel
        source = emit(ir, cuda_headers=False)
        assert "#include" not in source and "cvt.rn.f16.f32" in source
        assert nvrtc.compile_to_cubin(source, "sm_90a", None)[:4] == b"\x7fELF"


# -- what the generated code does --------------------------------------------------------------


def nodes(tree, kind):
    out = []
    for n in tree:
        if isinstance(n, kind):
            out.append(n)
        if isinstance(n, Loop):
            out += nodes(n.body, kind)
    return out


def test_gsg_copy_inlined_shares_the_outer_loop_with_two_barriers():
    case = next(c for c in BUNDLED if c.name == "gsg_copy_inline1")
    tree = lower(case.build().snapshot(), SM90).tree
    assert len(tree) == 1 and isinstance(tree[0], Loop) and tree[0].extent == const(2)
    body = tree[0].body
    assert [type(n).__name__ for n in body] == ["Loop", "Sync", "Loop", "Sync"], format_nodes(tree)


def test_barrier_inside_the_loop_that_rewrites_shared_memory():
    tree = lower(serial_smem_reuse().snapshot(), SM90).tree
    loop = tree[0]
    assert isinstance(loop, Loop) and loop.kind is LoopKind.SERIAL
    syncs = [n for n in loop.body if isinstance(n, Sync)]
    assert len(syncs) == 2 and "rewritten" in syncs[1].why


def test_no_write_after_read_barrier_outside_serial_loops():
    tree = lower(smem_transpose().snapshot(), SM90).tree
    assert len(nodes(tree, Sync)) == 1


def test_holes_and_partial_thread_extents_are_predicated():
    src = tp.compile(indivisible_split()).cuda_source
    assert "< 1000U" in src
    src = tp.compile(partial_threads()).cuda_source
    assert "threadIdx.x < 32U" in src  # T1 uses 32 of the 64 threads


def test_divisible_splits_need_no_predicate():
    case = next(c for c in BUNDLED if c.name == "gsg_copy_inline1_tidx_bidx")
    stmts = nodes(lower(case.build().snapshot(), SM90).tree, Compute)
    assert all(not s.conds for s in stmts)


def test_broadcast_axis_is_computed_by_every_block():
    src = tp.compile(BUILDERS["broadcast_add"]()).cuda_source
    assert "blockIdx.y < 1U" not in src


def test_vectorized_accesses_are_single_wide_loads_and_stores():
    src = tp.compile(BUILDERS["merged_vector_copy"]()).cuda_source
    code = "\n".join(line.split("//")[0] for line in src.splitlines())
    assert code.count("reinterpret_cast<uint4*>") == 1
    assert "%" not in code and "/" not in code  # the merge's // and % were folded away
    src = tp.compile(vectorized_copy("float16", 8)).cuda_source
    assert "uint4" in src


def test_symbolic_extents_are_kernel_arguments():
    kernel = tp.compile(vectorized_copy())
    assert [p.name for p in kernel.ir.params if p.kind is ParamKind.EXTENT] == ["s_M", "s_N"]
    lp = kernel.launch_params
    assert lp.block == (128, 1, 1) and str(lp.grid[0]).startswith("ceiling")
    assert kernel.launch_params_for(M=10, N=64).grid == (2, 1, 1)


def test_discontiguous_axis_stride_is_a_kernel_argument():
    kernel = tp.compile(BUILDERS["strided_input"]())
    assert [p.name for p in kernel.ir.params if p.kind is ParamKind.STRIDE] == ["stride_T0_0"]


def test_large_shared_memory_is_in_launch_params():
    kernel = tp.compile(big_smem_copy())
    assert kernel.launch_params.shared_memory_bytes == 128 * 128 * 4


# -- tp.compile: rejection, unsupported features, caches, NVRTC errors -----------------------


def rejected_fusion():
    with tp.Fusion("too_much_smem") as fusion:
        t0 = tp.make_contig_concrete_tensor([1024, 1024])
        fusion.add_input(t0)
        t1 = tp.set(t0)
        t2 = tp.set(t1)
        fusion.add_output(t2)
    t1.set_memory_type(tp.MemoryType.Shared)
    return fusion


def test_rejected_schedule_raises_with_the_report():
    with pytest.raises(tp.ScheduleRejected) as e:
        tp.compile(rejected_fusion(), target="sm_90a")
    report = e.value.report
    assert isinstance(report, tp.Report) and not report.ok and "SMEM-CAPACITY" in report.codes
    assert "SMEM-CAPACITY" in str(e.value)


def test_compile_checks_its_arguments():
    with pytest.raises(tp.ScheduleError, match="expected a tp.Fusion"):
        tp.compile("not a fusion")
    with pytest.raises(tp.ScheduleError, match="unknown target"):
        tp.compile(BUILDERS["pointwise_add"](), target="sm_42")


def test_repeated_compile_is_served_from_memory_under_20ms():
    fusion = BUILDERS["smem_transpose"]()
    first = tp.compile(fusion)
    start = time.process_time()
    again = tp.compile(fusion)
    assert time.process_time() - start < 0.020
    assert again is first
    rebuilt = BUILDERS["smem_transpose"]()
    start = time.process_time()
    assert tp.compile(rebuilt) is first  # the same schedule built again
    assert time.process_time() - start < 0.020


def test_changed_schedule_misses_the_memory_cache():
    fusion = indivisible_split()
    first = tp.compile(fusion)
    other = indivisible_split(factor=64)
    assert tp.compile(other) is not first


def test_disk_cache_skips_nvrtc(tmp_path, monkeypatch):
    fusion = BUILDERS["broadcast_add"]()
    cubin = tp.compile(fusion).cubin
    assert list((tmp_path / "cache").glob("*.cubin"))
    clear_memory_cache()

    def refuse(*args):
        raise AssertionError("NVRTC ran although the cubin was cached")

    monkeypatch.setattr(nvrtc, "_compile", refuse)
    assert tp.compile(fusion).cubin == cubin


def _counting_verify(monkeypatch) -> list:
    """Record each full verification tp.compile runs itself."""
    from tileproof.codegen import compile as compile_module

    calls = []
    real = compile_module.verify

    def counted(*args, **kwargs):
        calls.append(args[0].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(compile_module, "verify", counted)
    return calls


def test_compile_after_verify_takes_its_report(monkeypatch):
    fusion = vectorized_copy()
    report = tp.verify(fusion)
    calls = _counting_verify(monkeypatch)
    kernel = tp.compile(fusion)
    assert calls == [] and kernel.report is report
    rebuilt = vectorized_copy()  # the same schedule, another object: proved again
    clear_memory_cache()
    tp.compile(rebuilt)
    assert calls == ["vectorized_copy"]


def test_a_schedule_changed_after_verify_is_proved_again(monkeypatch):
    fusion = vectorized_copy()
    assert tp.verify(fusion).ok
    calls = _counting_verify(monkeypatch)
    producer = fusion.tensors[1]
    producer.axis(1).parallelize(tp.ParallelType.TIDy)  # its consumer runs it on TIDx: rejected
    with pytest.raises(tp.ScheduleRejected) as e:
        tp.compile(fusion)
    assert calls == ["vectorized_copy"] and not e.value.report.ok


def test_only_a_whole_passing_verify_is_taken(monkeypatch):
    """A verify of some rules, or at bound sizes, proves less than compile needs; a rejection is
    not kept either (no edit of a report can make compile accept)."""
    partial, bound = vectorized_copy(), vectorized_copy()
    assert tp.verify(partial, rules=["SPLIT-DIVISIBILITY"]).ok
    assert tp.verify(bound, bind={"M": 64, "N": 64}).ok
    rejected = vectorized_copy()
    rejected.tensors[1].axis(1).parallelize(tp.ParallelType.TIDy)
    report = tp.verify(rejected)
    assert not report.ok
    report.diagnostics.clear()  # a user "fixing" the report by hand
    calls = _counting_verify(monkeypatch)
    for fusion in (partial, bound):
        tp.compile(fusion)
        clear_memory_cache()
    with pytest.raises(tp.ScheduleRejected):
        tp.compile(rejected)
    assert len(calls) == 3


def test_clusters_that_do_not_fit_at_once_are_named():
    from tileproof.codegen.compile import clusters_wait_note

    # an H200: 132 SMs, one 384-thread block each; 66 clusters of 2 fit at once, 30 of 4
    note = clusters_wait_note(128, 4, 132, 30)
    assert "clusters of 4 only 30 clusters (120 blocks)" in note and "other 8 blocks" in note
    assert "at most 120 blocks runs in one" in note
    assert clusters_wait_note(128, 2, 132, 66) is None  # all fit
    assert clusters_wait_note(2048, 4, 132, 30) is None  # waves by design: more blocks than the GPU holds
    assert clusters_wait_note(120, 4, 132, 30) is None


def test_a_launch_whose_clusters_wait_warns_once(monkeypatch):
    """The launch path asks the driver how many blocks and clusters fit (faked here: no GPU)."""
    from tileproof.codegen import compile as compile_module
    from tileproof.codegen.runtime import driver

    ws = tp.WarpSpecialized(tp.ParallelType.TIDy, num_registers=(40, 232))
    params = HopperGemmParams(tile=HopperTile(m=128, n=256),
                              pipeline=TmaPipeline(stages=4, prefetch=2, warp_specialized=ws),
                              grid=GridOrder(group=8, persistent=128))
    kernel = tp.compile(hopper_gemm(4096, 4096, 256, dataclasses.replace(params, cluster=Cluster(size=4))))
    single = tp.compile(hopper_gemm(4096, 4096, 256, params))
    asked = []
    monkeypatch.setattr(driver, "resident_blocks", lambda *a: asked.append("blocks") or 132)
    monkeypatch.setattr(driver, "resident_clusters", lambda *a: asked.append("clusters") or 30)
    grid, block, smem = kernel._config({})
    assert compile_module.math.prod(grid) == 128 and kernel.ir.cluster == (4, 1, 1)
    with pytest.warns(tp.PerformanceWarning, match="clusters of 4 only 30 clusters"):
        kernel._warn_if_clusters_wait("function", grid, block, smem, 0)
    kernel._warn_if_clusters_wait("function", grid, block, smem, 0)  # the same configuration: asked once
    single._warn_if_clusters_wait("function", grid, block, smem, 0)  # no clusters: nothing to ask
    assert asked == ["blocks", "clusters"]


def test_nvrtc_error_shows_the_failing_line():
    source = 'extern "C" __global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n'
    with pytest.raises(tp.CompileError) as e:
        nvrtc.compile_to_cubin(source, "sm_90a")
    assert "undefined_name" in str(e.value) and "2 |" in str(e.value)
    assert e.value.source == source and "error" in e.value.log


# -- kernel.run: argument errors found without a GPU -----------------------------------------


class FakeDeviceArray:
    """A CUDA-array-interface object that points nowhere (for argument checks only)."""

    def __init__(self, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (1 << 40, False),
                                         "version": 3, "strides": strides}


def copy_kernel():
    return tp.compile(next(c for c in BUNDLED if c.name == "gsg_copy_naive").build())


def test_run_names_the_input_with_the_wrong_count_dtype_shape_or_layout():
    kernel = copy_kernel()
    with pytest.raises(tp.InputError, match="takes 1 inputs"):
        kernel.run()
    with pytest.raises(tp.InputError, match=r"input T0 \(argument 0\): expected dtype float32, got float64"):
        kernel.run(np.zeros((2, 4)))
    with pytest.raises(tp.InputError, match="input T0 .*axis 1 has size 5, expected 4"):
        kernel.run(FakeDeviceArray((2, 5)))
    with pytest.raises(tp.InputError, match="expected 2 dimensions"):
        kernel.run(FakeDeviceArray((8,)))
    with pytest.raises(tp.InputError, match="input T0 .*axis 0 has stride 8, expected 4.*contiguous"):
        kernel.run(FakeDeviceArray((2, 4), strides=(32, 4)))
    with pytest.raises(tp.InputError, match="input T0 .*in cpu memory"):
        kernel.run(np.zeros((2, 4), dtype=np.float32))
    with pytest.raises(tp.InputError, match="input T0 .*DLPack or __cuda_array_interface__"):
        kernel.run([[0.0] * 4] * 2)


def test_run_checks_symbolic_sizes_and_assumptions():
    kernel = tp.compile(vectorized_copy())
    with pytest.raises(tp.InputError, match="violate the assumption"):
        kernel.run(FakeDeviceArray((3, 6)))
    with pytest.raises(tp.InputError, match="violate the assumption"):
        kernel.launch_params_for(M=3, N=6)
    add = tp.compile(BUILDERS["pointwise_add"]())
    with pytest.raises(tp.InputError, match=r"input T1 \(argument 1\): axis 1 has size 7, expected N \(bound to 8"):
        add.run(FakeDeviceArray((4, 8)), FakeDeviceArray((4, 7)))
    with pytest.raises(tp.InputError, match="unknown extent 'K'"):
        add.run(FakeDeviceArray((4, 8)), FakeDeviceArray((4, 8)), K=3)


def gpu_present() -> bool:
    try:
        from tileproof.codegen.runtime import driver as runtime

        runtime.driver()
        return True
    except tp.NoDeviceError:
        return False


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU")
def test_run_without_a_gpu_says_what_still_works():
    kernel = copy_kernel()
    with pytest.raises(tp.NoDeviceError, match=r"tp.verify.*tp.compile"):
        kernel.run(FakeDeviceArray((2, 4)))


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU")
def test_cli_run_without_a_gpu_exits_2(capsys):
    from tileproof.cli import main

    assert main(["run", str(ROOT / "examples" / "valid" / "gsg_copy.py"), "--check"]) == 2
    out = capsys.readouterr()
    assert "COMPILED gsg_copy_naive" in out.out and "still work" in out.err


def test_cli_run_rejects_bad_sizes(capsys):
    from tileproof.cli import main

    assert main(["run", str(ROOT / "examples" / "valid" / "gsg_copy.py"), "--size", "N=-3"]) == 2
    assert "--size expects NAME=POSITIVE_INT" in capsys.readouterr().err


def test_maximum_minimum_relu_emit_nan_propagating_helpers():
    """fmaxf/fminf return the number when one operand is NaN; the reference (numpy) and PyTorch
    return NaN. Found by benchmarks/fuzz.py --run: relu(sqrt(x)) stored 0 for negative x."""
    from support.codegen_schedules import binary_ops

    for dtype in ("float32", "float64", "bfloat16"):
        source = tp.compile(binary_ops(dtype)).cuda_source
        assert "tp_max(" in source and "tp_min(" in source, dtype
        assert "fmax" not in source and "fmin" not in source, dtype


def test_a_launch_refused_for_memory_names_the_register_tensors():
    """Accepted (under LOCAL-MEMORY-SIZE's 508 KiB), but 384 KiB of local memory per thread times
    every thread an H100 holds is more than its 80 GB: cuLaunchKernel says out of memory (measured,
    fuzz.py --run), and run() says why."""
    from tileproof.codegen.runtime.driver import DriverError

    with tp.Fusion("big_registers") as fusion:
        t0 = tp.make_contig_concrete_tensor([96, 1024]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    kernel = tp.compile(fusion)
    refused = DriverError("cuLaunchKernel failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory")
    explained = kernel._explained(refused, {})
    assert "393216 bytes of register tensors (T1 393216)" in str(explained)
    other = DriverError("cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE: invalid argument")
    assert kernel._explained(other, {}) is other
