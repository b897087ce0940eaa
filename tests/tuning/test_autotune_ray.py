"""tp.autotune(executor="ray") on a local Ray instance that this module starts (2 CPUs, no
dashboard) and stops: verify tasks reach the verdicts the process pool reaches, the proved
candidates (and only they) are compiled by Ray tasks, and a sweep that needs a GPU the instance
lacks says so after verifying. Skipped where Ray is not installed (`pip install
'tileproof[distributed]'`)."""

from __future__ import annotations

import os
import sys

import pytest

import tileproof as tp
from tileproof.rule_examples import copy_chain
from tileproof.tuning.jobs import PROVED, REJECTED

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.usefixtures("private_cache")
P = tp.ParallelType
SPACE = {"rows": [1, 8, 64], "threads": [128, 256, 2048]}  # 4 proved, 5 rejected (test_autotune.py)


def tiled_copy(*, rows, threads):
    """A 1024 x 1024 copy through shared memory, `rows` rows a block, `threads` columns at a time."""
    fusion, _, t1, t2 = copy_chain("tiled_copy", [1024, 1024])
    t1.set_memory_type(tp.MemoryType.Shared)
    for t in (t1, t2):
        t.split(0, rows).axis(0).parallelize(P.BIDx)
        t.split(-1, threads).axis(-1).parallelize(P.TIDx)
    return fusion


@pytest.fixture(scope="module")
def local_ray():
    """A Ray instance of this machine for the module, stopped after it; the test module's functions
    travel to its workers by value (the workers need not import this file)."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_ray_tasks_prove_what_the_process_pool_proves_and_compile_only_those(local_ray):
    on_ray = tp.autotune(tiled_copy, SPACE, time=False, executor="ray")
    here = tp.autotune(tiled_copy, SPACE, time=False, workers=2)
    assert on_ray.executor == "ray" and on_ray.workers == 2
    assert on_ray.proved == here.proved and len(on_ray.proved) == 4
    assert [(v.status, v.codes) for v in on_ray.candidates] == [(v.status, v.codes) for v in here.candidates]
    assert {v.status for v in on_ray.candidates} == {PROVED, REJECTED}
    assert not any(v.worker.endswith(f":{os.getpid()}") for v in on_ray.candidates)  # verified by Ray's workers
    proved = {v.index for v in on_ray.candidates if v.proved}
    assert set(on_ray.timings) == proved and all(t.compiled and not t.error for t in on_ray.timings.values())
    assert ray.is_initialized()  # a sweep leaves an instance it did not start running


def test_a_ray_sweep_needing_a_gpu_the_instance_lacks_says_so(local_ray):
    with pytest.raises(tp.NoDeviceError, match="the Ray cluster has no GPU"):
        tp.autotune(tiled_copy, SPACE, inputs=lambda: (), executor="ray")


def test_a_ray_sweep_takes_its_inputs_as_a_function(local_ray):
    with pytest.raises(tp.ScheduleError, match="inputs must be a function"):
        tp.autotune(tiled_copy, SPACE, inputs=(), executor="ray")
