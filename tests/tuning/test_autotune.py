"""tp.autotune without a GPU: candidates verified by parallel worker processes give the verdicts a
serial verify gives; rejected candidates are reported with their rule codes (refused ones with the
builder's error) and never compiled; the proved set is compiled with its workers' reports, into
the CUDA tp.compile emits; the winner is cached on disk and a later sweep returns it without
verifying or timing (the GPU's part replaced by a stand-in that times by a formula); bad spaces
and arguments are one clear ScheduleError; and without a GPU the sweep says it cannot time, after
verifying. tests/gpu/test_autotune.py times the matmul recipe for real."""

from __future__ import annotations

import functools
import json
import os

import pytest

import tileproof as tp
from tileproof.rule_examples import copy_chain
from tileproof.tuning import jobs, local, sweep
from tileproof.tuning.jobs import INVALID, PROVED, REJECTED, Timing

pytestmark = pytest.mark.usefixtures("private_cache")
P = tp.ParallelType

# 9 candidates: 4 proved; rows=64 keeps 256 KiB of shared memory per block (SMEM-CAPACITY),
# threads=2048 is past the block's 1024 threads (LAUNCH-THREADS); rows=0 the split refuses
SPACE = {"rows": [1, 8, 64], "threads": [128, 256, 2048]}
EXPECTED = {(1, 128): (), (1, 256): (), (8, 128): (), (8, 256): (), (1, 2048): ("LAUNCH-THREADS",),
            (8, 2048): ("LAUNCH-THREADS",), (64, 128): ("SMEM-CAPACITY",), (64, 256): ("SMEM-CAPACITY",),
            (64, 2048): ("LAUNCH-THREADS", "SMEM-CAPACITY")}


def tiled_copy(*, rows, threads):
    """A 1024 x 1024 copy through shared memory, `rows` rows a block, `threads` columns at a time."""
    fusion, _, t1, t2 = copy_chain("tiled_copy", [1024, 1024])
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, rows).axis(0).parallelize(P.BIDx)
        t.split(-1, threads).axis(-1).parallelize(P.TIDx)
    return fusion


def by_config(result):
    return {(v.config["rows"], v.config["threads"]): v for v in result.candidates}


@pytest.fixture
def compiles(monkeypatch):
    """The fingerprints of the fusions jobs.py hands to the kernel builder, in order."""
    seen = []
    real = jobs.build_kernel

    def counting(snapshot, report, target):
        seen.append(snapshot)
        return real(snapshot, report, target)

    monkeypatch.setattr(jobs, "build_kernel", counting)
    return seen


def test_workers_verify_in_parallel_with_the_verdicts_of_a_serial_verify():
    result = tp.autotune(tiled_copy, SPACE, time=False, workers=2)
    verdicts = by_config(result)
    assert {k: v.codes for k, v in verdicts.items()} == EXPECTED
    assert {k: v.status for k, v in verdicts.items()} == {k: PROVED if not codes else REJECTED
                                                          for k, codes in EXPECTED.items()}
    workers = {v.worker for v in result.candidates}
    assert len(workers) == 2 and not any(w.endswith(f":{os.getpid()}") for w in workers)
    for (rows, threads), v in verdicts.items():  # each verdict is the one this process would reach
        assert v.codes == tuple(sorted({d.code for d in tp.verify(tiled_copy(rows=rows, threads=threads)).errors}))
    assert result.workers == 2 and result.executor == "processes"


def test_rejected_candidates_are_reported_with_their_codes_and_never_compiled(compiles):
    space = [{"rows": 8, "threads": 128}, {"rows": 64, "threads": 128}, {"rows": 0, "threads": 128},
             {"rows": 1, "threads": 2048}, {"rows": 1, "threads": 256}]
    result = tp.autotune(tiled_copy, space, time=False, workers=2)
    statuses = [v.status for v in result.candidates]
    assert statuses == [PROVED, REJECTED, INVALID, REJECTED, PROVED]
    assert result.proved == [space[0], space[4]]
    assert [v.codes for v in result.rejected] == [("SMEM-CAPACITY",), (), ("LAUNCH-THREADS",)]
    assert "split" in result.rejected[1].message and "factor" in result.rejected[1].message
    # compiled: the proved two, once each, and nothing else
    assert len(compiles) == 2 and sorted(result.timings) == [0, 4]
    assert all(t.compiled and t.seconds is None for t in result.timings.values())
    summary = result.summary()
    assert "rejected  rows=64, threads=128: SMEM-CAPACITY" in summary
    assert "rejected  rows=1, threads=2048: LAUNCH-THREADS" in summary
    assert "5 candidates, 2 proved, 3 rejected before compiling" in summary


def test_a_proved_candidate_compiles_with_its_workers_report_into_what_tp_compile_emits():
    verdict = jobs.verify_candidate(tiled_copy, 0, {"rows": 8, "threads": 256}, "sm_90a")
    kernel = jobs.compile_candidate(tiled_copy, verdict, "sm_90a")
    assert kernel.verified and kernel.cuda_source == tp.compile(tiled_copy(rows=8, threads=256)).cuda_source


def test_compiling_a_rejected_candidate_is_refused_as_a_bug():
    verdict = jobs.verify_candidate(tiled_copy, 0, {"rows": 64, "threads": 128}, "sm_90a")
    with pytest.raises(tp.InternalError, match="rejected, not proved"):
        jobs.compile_candidate(tiled_copy, verdict, "sm_90a")


def test_a_builder_that_changes_its_schedule_between_calls_is_caught():
    calls = []

    def drifting(*, rows):
        calls.append(rows)
        return tiled_copy(rows=rows, threads=128 * len(calls))

    verdict = jobs.verify_candidate(drifting, 0, {"rows": 8}, "sm_90a")
    with pytest.raises(tp.ScheduleError, match="gave another schedule"):
        jobs.compile_candidate(drifting, verdict, "sm_90a")


class StandInGPU:
    """The GPU's part of a sweep (probe and time) on a machine without one: a fixed device name, and
    a time per launch of rows / threads microseconds (the compile before it is real)."""

    def __init__(self, monkeypatch, device="Stand-in H200"):
        self.device, self.timed = device, []
        monkeypatch.setattr(local.ProcessRunner, "probe", lambda runner, inputs: (self.device, [[[1024], [1], "f32"]]))
        monkeypatch.setattr(local.ProcessRunner, "time", lambda runner, *args: self.time(*args))

    def time(self, build, proved, target, inputs, sizes, iterations, warmup):
        out = []
        for v in proved:
            jobs.compile_candidate(build, v, target)
            self.timed.append(v.config)
            out.append(Timing(v.index, compiled=True, seconds=v.config["rows"] / v.config["threads"] * 1e-6,
                              device=self.device))
        return out


def test_the_winner_is_cached_on_disk_and_a_later_sweep_returns_it_without_verifying_or_timing(tmp_path, monkeypatch):
    gpu = StandInGPU(monkeypatch)
    first = tp.autotune(tiled_copy, SPACE, inputs=(), cache_dir=tmp_path / "winners", workers=2)
    assert not first.cached and first.config == {"rows": 1, "threads": 256} and first.seconds == 1 / 256 * 1e-6
    assert len(gpu.timed) == 4 and first.kernel.verified and first.device == "Stand-in H200"
    entry = json.loads(first.cache_path.read_text())
    assert entry["config"] == first.config and entry["key"]["device"] == "Stand-in H200"
    assert entry["key"]["builder"].endswith("test_autotune.tiled_copy") and len(entry["timings"]) == 4

    monkeypatch.setattr(local.ProcessRunner, "verify", lambda *a: pytest.fail("a cached sweep verified"))
    second = tp.autotune(tiled_copy, SPACE, inputs=(), cache_dir=tmp_path / "winners", workers=2)
    assert second.cached and second.config == first.config and second.seconds == first.seconds
    assert len(gpu.timed) == 4 and second.kernel.cuda_source == first.kernel.cuda_source
    assert "cached winner on Stand-in H200: rows=1, threads=256" in second.summary()


def test_another_device_space_or_schedule_misses_the_cache(tmp_path, monkeypatch):
    gpu = StandInGPU(monkeypatch)
    tp.autotune(tiled_copy, SPACE, inputs=(), cache_dir=tmp_path / "winners", workers=2)
    gpu.device = "Stand-in H100"
    assert not tp.autotune(tiled_copy, SPACE, inputs=(), cache_dir=tmp_path / "winners", workers=2).cached
    smaller = {"rows": [1, 8], "threads": [128]}
    assert not tp.autotune(tiled_copy, smaller, inputs=(), cache_dir=tmp_path / "winners", workers=2).cached
    assert tp.autotune(tiled_copy, smaller, inputs=(), cache_dir=tmp_path / "winners", workers=2).cached
    # the stored winner's schedule changed (a recipe edited since): stale, swept again
    path = next(p for p in (tmp_path / "winners").iterdir() if json.loads(p.read_text())["key"]["space"] == [
        '{"rows":1,"threads":128}', '{"rows":8,"threads":128}'])
    entry = json.loads(path.read_text())
    entry["fingerprint"] = "another schedule"
    path.write_text(json.dumps(entry))
    assert not tp.autotune(tiled_copy, smaller, inputs=(), cache_dir=tmp_path / "winners", workers=2).cached


def test_without_a_gpu_the_sweep_verifies_then_says_it_cannot_time(monkeypatch):
    def no_gpu(runner, inputs):
        raise tp.NoDeviceError("the driver reports no GPU")

    monkeypatch.setattr(local.ProcessRunner, "probe", no_gpu)
    with pytest.raises(tp.NoDeviceError, match=r"4 of 9 candidates proved, but they cannot be timed here: the driver "
                                                r"reports no GPU\. Pass time=False"):
        tp.autotune(tiled_copy, SPACE, inputs=(), workers=2)


def test_a_space_with_no_proved_candidate_is_an_error_listing_why(monkeypatch):
    StandInGPU(monkeypatch)
    with pytest.raises(tp.ScheduleError, match=r"no candidate was proved(.|\n)*rows=64, threads=128: SMEM-CAPACITY"):
        tp.autotune(tiled_copy, {"rows": [64], "threads": [128, 256]}, inputs=(), workers=2)


@pytest.mark.parametrize("space,message", [
    ({}, "the space is empty"),
    ([], "the space is empty"),
    ({"rows": 8, "threads": [128]}, r"space\['rows'\] must be a list of values"),
    ({"rows": [], "threads": [128]}, r"space\['rows'\] has no values"),
    ({"rows": [8, 8], "threads": [128]}, "configuration 1 repeats configuration 0"),
    ({"rows": [object()], "threads": [128]}, "cannot be cached on disk"),
    ({"not a name": [1]}, "must be a Python identifier"),
    ([{"rows": 8}, "threads"], "configuration 1 of the space must be a dict"),
    ("rows", "space must be a dict"),
])
def test_a_bad_space_is_one_clear_error(space, message):
    with pytest.raises(tp.ScheduleError, match=message):
        tp.autotune(tiled_copy, space, time=False)


@pytest.mark.parametrize("kwargs,message", [
    ({"executor": "threads"}, "executor must be one of 'processes', 'ray'"),
    ({"executor": "ray", "workers": 2}, "workers is for executor='processes'"),
    ({"ray_address": "auto"}, "ray_address needs executor='ray'"),
    ({"workers": 0, "time": False}, "workers must be a positive int"),
    ({"time": True}, "timing needs inputs"),
    ({"time": False, "iterations": 0}, "iterations must be a positive int"),
    ({"time": False, "sizes": {"M": 1.5}}, "sizes must map extent symbols to ints"),
])
def test_bad_arguments_are_one_clear_error(kwargs, message):
    with pytest.raises(tp.ScheduleError, match=message):
        tp.autotune(tiled_copy, {"rows": [8], "threads": [128]}, **kwargs)


def test_a_builder_that_raises_is_the_callers_bug_with_its_traceback():
    def broken(*, rows):
        return tiled_copy(rows=rows, threads=128, colour="red")

    with pytest.raises(tp.ScheduleError, match=r"build\(rows=8\) raised TypeError(.|\n)*Traceback"):
        tp.autotune(broken, {"rows": [8, 16]}, time=False, workers=2)
    with pytest.raises(tp.ScheduleError, match="must return a tp.Fusion, got int"):
        tp.autotune(lambda *, rows: rows, {"rows": [8, 16]}, time=False, workers=2)


def test_the_cache_names_a_builder_without_addresses():
    class Recipe:
        def __repr__(self):
            return "Recipe(8)"

        def build(self):
            return None

    assert sweep.builder_name(tiled_copy).endswith("test_autotune.tiled_copy")
    assert sweep.builder_name(functools.partial(tiled_copy, rows=8)).startswith("partial(")
    assert "0x" not in sweep.builder_name(functools.partial(tiled_copy, rows=8))
    assert sweep.builder_name(Recipe().build).endswith("Recipe.build of Recipe(8)")
