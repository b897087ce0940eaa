"""The thread that issues a warp-specialized load, as the verifier proves it and as the kernel runs
it: one source, the load's execution model (execution/statements.py: on the WarpSpecialized axis
the single writer is the producer's first index, indexing.producer_start). The verifier's access
model of each TMA load (verifier/analysis/tma_issues.py) and the compiled kernel's producer
branch with its issue predicate must name the same threads of the launched block: the producer's
first thread, never a consumer. Also the blocks nvFuser's padding newly admits (TIDy over a TIDx
of 64, 32 or 16: the producer is 2, 4 or 8 more TIDy indices) verify, compile and count alike."""

from __future__ import annotations

import itertools
import re

import pytest

import tileproof as tp
from tileproof.execution import statements
from tileproof.model.errors import InternalError
from tileproof.model.expr import const, evaluate
from tileproof.testing import compile_unverified
from tileproof.verifier.analysis.tma_issues import tma_issues
from tileproof.verifier.context import VerifyContext

from support.tma_exp_tiles import exp_tiles
from support.ws_rows import exp_rows

P = tp.ParallelType
THREADS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def _ws(on, num_registers=None):
    return lambda s: s.circular_buffer(4, 2, tp.WarpSpecialized(on, num_registers))


SCHEDULES = {
    "TIDx 256 (+128)": lambda: exp_tiles(_ws(P.TIDx)),
    "TIDx 128 (+128)": lambda: exp_tiles(_ws(P.TIDx), tile=128),
    "TIDy over TIDx 256 (+1)": lambda: exp_tiles(_ws(P.TIDy)),
    "TIDy over TIDx 128 (+1)": lambda: exp_tiles(_ws(P.TIDy), tile=128),
    "TIDy over TIDx 64 (+2)": lambda: exp_rows(64, 4),
    "TIDy over TIDx 32 (+4)": lambda: exp_rows(32, 8),
    "TIDy over TIDx 16 (+8)": lambda: exp_rows(16, 8),
}


def _block(report) -> tuple[int, int, int]:
    return tuple(int(report.launch.get(p, "1")) for p in ("TIDx", "TIDy", "TIDz"))


def _threads(block):
    return [dict(zip(THREADS, t)) for t in itertools.product(*(range(n) for n in block))]


def _c_holds(cond: str, env: dict) -> bool:
    """A C predicate over threadIdx (`threadIdx.x >= 256U && threadIdx.y == 0U`) at one thread."""
    text = re.sub(r"(\d+)U?L*L*\b", r"\1", cond).replace("&&", " and ")
    for name, value in env.items():
        text = text.replace(name, str(value))
    return bool(eval(text, {}))  # noqa: S307 - the kernel's own predicate over integers


def kernel_issuers(source: str, block) -> set[tuple]:
    """The threads of the compiled kernel that issue its loads: in the producer branch, where the
    elected thread's predicate (or each copy's own) holds."""
    lines = source.splitlines()
    at = next(k for k, line in enumerate(lines) if "// the producer warpgroup" in line)
    role = re.match(r"\s*if \((.*)\) \{", lines[at]).group(1)
    guards = []
    for line in lines[at + 1:]:
        if "tp_bulk_load" in line:
            break
        found = re.match(r"\s*if \((.*)\) \{", line)
        if found and "threadIdx" in found.group(1):
            guards.append(found.group(1))
    return {tuple(t.values()) for t in _threads(block)
            if _c_holds(role, t) and all(_c_holds(g, t) for g in guards)}


def verifier_issuers(fusion, block) -> set[tuple]:
    """The threads the verifier's model of each TMA load says issue it (its access model's active
    threads: thread extents and single writers)."""
    ctx = VerifyContext(fusion.snapshot(), tp.get_target("sm_90a"))
    (issue,) = [i for i in tma_issues(ctx) if i.info.smem.circular is not None]
    return {tuple(t.values()) for t in _threads(block)
            if all(evaluate(i, t) < evaluate(e, t) for i, e in issue.m.active)}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_the_verifier_and_the_kernel_name_the_same_issuing_thread(name):
    fusion = SCHEDULES[name]()
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [d.message for d in report.errors]
    block = _block(report)
    kernel = tp.compile(fusion, "sm_90a")
    proved, runs = verifier_issuers(fusion, block), kernel_issuers(kernel.cuda_source, block)
    assert proved == runs and len(runs) == 1, (proved, runs)
    (thread,) = runs
    roles = kernel.ir.body[next(k for k, n in enumerate(kernel.ir.body) if type(n).__name__ == "WarpRoles")]
    axis = "xyz".index(roles.spec.on.cuda_name[-1])
    assert thread[axis] == roles.consumer_indices  # the producer's first index: no consumer issues
    assert all(v == 0 for k, v in enumerate(thread) if k != axis)


def test_a_lowering_that_disagrees_with_the_execution_model_is_a_tileproof_bug(monkeypatch):
    """Were the loads' single writer on the WarpSpecialized axis a consumer's index (thread 0, as
    before), the code generator refuses to lower rather than emit a kernel other than the proved one."""
    monkeypatch.setattr(statements, "producer_start", lambda dims, on: const(0))
    with pytest.raises(InternalError, match="issuer on threadIdx.x .* not the producer's first index 256"):
        compile_unverified(exp_tiles(_ws(P.TIDx)), "sm_90a")


@pytest.mark.parametrize("width, rows, padding", [(64, 4, 2), (64, 2, 2), (32, 4, 4), (32, 8, 4), (16, 8, 8)])
def test_tidy_over_a_narrow_tidx_pads_by_128_over_its_threads(width, rows, padding):
    """nvFuser's adjustMappingsForWarpSpecialization: TIDy over TIDx = `width` gets 128 / width
    more indices, one warpgroup after the consumers (threadIdx.y >= rows); its first thread
    (threadIdx.y == rows, threadIdx.x == 0) issues; every consumer thread releases each stage."""
    fusion = exp_rows(width, rows)
    report = tp.verify(fusion, "sm_90a")
    assert report.ok, [d.message for d in report.errors]
    assert report.launch == {"TIDx": str(width), "TIDy": str(rows + padding)}
    kernel = tp.compile(fusion, "sm_90a")
    src = kernel.cuda_source
    assert f"__launch_bounds__({width * (rows + padding)})" in src
    assert f"if (threadIdx.y >= {rows}U) {{  // the producer warpgroup" in src
    assert f"if (threadIdx.y == {rows}U && threadIdx.x == 0U) {{" in src
    assert next(m for m in kernel.ir.mbarriers if m.empty).count == width * rows
    assert next(m for m in kernel.ir.mbarriers if not m.empty).count == 1


def test_tidy_over_tidx_64_shares_registers_out():
    """Two consumer warpgroups (TIDy 4 x TIDx 64) and the producer's (TIDy 4..5): 384 threads start
    with 168 registers; 40 x 128 + 232 x 256 fits in 168 x 384."""
    assert tp.verify(exp_rows(64, 4, num_registers=(40, 232)), "sm_90a").ok
    src = tp.compile(exp_rows(64, 4, num_registers=(40, 232)), "sm_90a").cuda_source
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in src and "setmaxnreg.inc.sync.aligned.u32 232;" in src


@pytest.mark.parametrize("width, rows, message", [
    (64, 3, "its consumers are 3 indices of 64 threads, 192 threads, not whole warpgroups of 128"),
    (96, 2, "whose every index holds 96 threads"),
])
def test_tidy_over_tidx_whose_consumers_are_no_whole_warpgroups_is_refused(width, rows, message):
    report = tp.verify(exp_rows(width, rows), "sm_90a")
    assert report.codes == ["WS-ROLES"] and message in report.errors[0].message, [d.message for d in report.errors]
    assert report.errors[0].counterexample
