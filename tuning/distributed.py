"""The sweep on a Ray cluster (`pip install 'tileproof[distributed]'`): Ray schedules, tileproof only
says what each task needs. Verification is pure CPU, one task per candidate (num_cpus=1); timing is
one task per GPU (num_gpus=1), each compiling and timing its share of the proved candidates one
after another, on inputs it makes itself (so `inputs` must be a function); without timing, the
proved candidates are compiled by CPU tasks.

    tp.autotune(build, space, inputs=make_inputs, executor="ray")                  # a local instance
    tp.autotune(build, space, inputs=make_inputs, executor="ray", ray_address="ray://head:10001")

Where Ray is already initialized the sweep uses that instance and leaves it running; otherwise it
connects (ray.init(address=ray_address): None starts a local instance, "auto" joins the cluster this
machine belongs to) and disconnects when done. The builder and the inputs function travel by
cloudpickle: a function Ray's workers can import (a module on the cluster's path) or one defined
inside a function (pickled by value). Ray is imported when a sweep asks for it, never by tileproof
itself. Imports jobs.py.
"""

from __future__ import annotations

from typing import Callable

from ..model.errors import ScheduleError
from ..model.fusion import Fusion
from ..codegen.errors import NoDeviceError
from .jobs import Timing, Verdict, compile_only, probe, time_candidates, verify_candidate
from .space import Config

INSTALL_HINT = "pip install 'tileproof[distributed]' (or pip install ray)"


def _ray():
    try:
        import ray  # an optional extra (tileproof[distributed]): imported only for executor="ray"
    except ImportError as e:
        raise ScheduleError(f"autotune: executor='ray' needs Ray, which is not importable ({e}); {INSTALL_HINT}") \
            from None
    return ray


class RayRunner:
    """tp.autotune(..., executor="ray"): the sweep as Ray tasks on the instance at `address`."""

    name = "ray"

    def __init__(self, address: str | None = None):
        if address is not None and not isinstance(address, str):
            raise ScheduleError(f"autotune: ray_address must be a string such as 'ray://head:10001' or 'auto', "
                                f"got {address!r}")
        self.ray = _ray()
        self.address = address
        self.connected_here = False

    def __enter__(self) -> "RayRunner":
        if not self.ray.is_initialized():
            self.ray.init(address=self.address)
            self.connected_here = True
        return self

    def __exit__(self, *exc) -> None:
        if self.connected_here:
            self.ray.shutdown()

    @property
    def workers(self) -> int:
        return int(self.ray.cluster_resources().get("CPU", 0))

    def gpus(self) -> int:
        return int(self.ray.cluster_resources().get("GPU", 0))

    def verify(self, build: Callable[..., Fusion], configs: list[Config], target: str) -> list[Verdict]:
        task = self.ray.remote(num_cpus=1)(verify_candidate)
        build_ref = self.ray.put(build)
        return self.ray.get([task.remote(build_ref, k, c, target) for k, c in enumerate(configs)])

    def probe(self, inputs) -> tuple[str, list]:
        self._check_inputs(inputs)
        if not self.gpus():
            raise NoDeviceError("the Ray cluster has no GPU (ray.cluster_resources() lists none) to time "
                                "the proved candidates on")
        return self.ray.get(self.ray.remote(num_gpus=1)(probe).remote(inputs))

    def compile_only(self, build: Callable[..., Fusion], proved: list[Verdict], target: str) -> list[Timing]:
        task = self.ray.remote(num_cpus=1)(compile_only)
        build_ref = self.ray.put(build)
        return self.ray.get([task.remote(build_ref, v, target) for v in proved])

    def time(self, build: Callable[..., Fusion], proved: list[Verdict], target: str, inputs, sizes: dict,
             iterations: int, warmup: int) -> list[Timing]:
        """One task per GPU, each timing every gpus-th proved candidate."""
        self._check_inputs(inputs)
        shares = [proved[g::self.gpus()] for g in range(min(self.gpus(), len(proved)))]
        task = self.ray.remote(num_gpus=1)(time_candidates)
        build_ref = self.ray.put(build)
        done = self.ray.get([task.remote(build_ref, share, target, inputs, sizes, iterations, warmup)
                             for share in shares])
        timings = [t for share in done for t in share]
        devices = {t.device for t in timings}
        if len(devices) > 1:
            raise ScheduleError(f"autotune: the Ray cluster's GPUs are of {len(devices)} models "
                                f"({', '.join(sorted(devices))}); their timings do not compare: run the sweep on "
                                f"one model (a cluster of it, or a custom resource per model)")
        return timings

    @staticmethod
    def _check_inputs(inputs) -> None:
        if not callable(inputs):
            raise ScheduleError("autotune: with executor='ray', inputs must be a function returning the input arrays "
                                "(each GPU task makes its own on its GPU), got " + type(inputs).__name__)


__all__ = ["INSTALL_HINT", "RayRunner"]
