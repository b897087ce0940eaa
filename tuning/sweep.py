"""tp.autotune: the sweep. Expand the space, look the winner up on disk, verify every candidate in
parallel, compile and time the proved ones only, keep the fastest.

    result = tp.autotune(build, {"tile": [(128, 128), (128, 256)], "stages": [3, 4]}, inputs=(a, b))
    result.kernel, result.config, result.seconds       # the winner, compiled
    print(result.summary())                            # every candidate: proved and its time, or why not

The order of work is the guarantee: a candidate is compiled only after its verify passed (jobs.py's
compile_candidate refuses any other), and compiled with that verify's report. Imports the runners
(local.py, distributed.py), the cache and the jobs.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..codegen.compile import Kernel, compile as compile_fusion
from ..codegen.errors import NoDeviceError
from ..model.errors import ScheduleError
from ..model.fingerprint import fingerprint
from ..model.targets import get_target
from . import cache
from .distributed import RayRunner
from .jobs import Timing, Verdict, build_fusion, compile_candidate
from .local import ProcessRunner
from .space import Config, config_key, expand, shown

EXECUTORS = ("processes", "ray")
CACHE_FORMAT = 1


@dataclass
class AutotuneResult:
    """What tp.autotune returns: the winner (`config`, its compiled `kernel`, `seconds` per launch,
    on `device`), whether it came from the disk cache (`cached`: then nothing was verified or timed
    and `candidates` is empty), every candidate's Verdict (`candidates`) and Timing (`timings`, by
    candidate index), and the sweep's cost (`verify_seconds` of wall time with `workers`)."""

    config: Config | None = None
    kernel: Kernel | None = None
    seconds: float | None = None
    device: str | None = None
    cached: bool = False
    candidates: list[Verdict] = field(default_factory=list)
    timings: dict[int, Timing] = field(default_factory=dict)
    verify_seconds: float = 0.0
    workers: int = 1
    executor: str = "processes"
    cache_path: Path | None = None

    @property
    def proved(self) -> list[Config]:
        """The configurations the verifier proved, in the space's order."""
        return [v.config for v in self.candidates if v.proved]

    @property
    def rejected(self) -> list[Verdict]:
        """The candidates not proved: rejected by rules (their codes) or refused by the builder."""
        return [v for v in self.candidates if not v.proved]

    def summary(self) -> str:
        """One line per candidate (its verdict, its time or why it has none), then the totals."""
        if self.cached:
            return f"cached winner on {self.device}: {shown(self.config)} at {self.seconds * 1e6:.1f} us ({self.cache_path})"
        lines = []
        for v in self.candidates:
            t = self.timings.get(v.index)
            extra = "" if t is None else f": {t.seconds * 1e6:.1f} us" if t.seconds is not None else \
                f": {t.error}" if t.error else ": compiled" if t.compiled else ""
            lines.append(v.line() + extra)
        n, proved = len(self.candidates), len(self.proved)
        rate = n / self.verify_seconds if self.verify_seconds else float("inf")
        by = f"{self.workers} worker processes" if self.executor == "processes" else f"Ray on {self.workers} CPUs"
        lines.append(f"{n} candidates, {proved} proved, {n - proved} rejected before compiling; verified in "
                     f"{self.verify_seconds:.1f} s by {by} ({rate:.1f} per second)")
        if self.config is not None:
            lines.append(f"winner on {self.device}: {shown(self.config)} at {self.seconds * 1e6:.1f} us")
        return "\n".join(lines)


def autotune(build, space=None, *, inputs=None, sizes: dict[str, int] | None = None, target="sm_90a",
             time: bool = True, executor: str = "processes", workers: int | None = None,
             ray_address: str | None = None, cache_dir=None, iterations: int = 100,
             warmup: int = 10) -> AutotuneResult:
    """The fastest proved candidate of `space` for `build` (see the module's text and docs/autotune.md).

    build: build(**config) -> tp.Fusion; or a recipe, an object with `build` and `space` (and
        optionally `inputs`), such as tileproof.recipes.HopperGemmTuning(m, n, k).
    space: dict of parameter -> list of values (every combination) or a list of configurations;
        None: the recipe's.
    inputs: the arrays to time on (on the GPU), or a function returning them (required with Ray).
    sizes: extent symbols the inputs do not give (passed to Kernel.benchmark).
    time: False: verify, compile the proved candidates (no GPU needed) and return them, untimed.
    executor: "processes" (this machine, `workers` processes verify) or "ray" (`ray_address`).
    cache_dir: where winners are kept (default $TILEPROOF_CACHE_DIR/autotune)."""
    build, space, inputs = _resolve_recipe(build, space, inputs)
    configs = expand(space)
    tgt = get_target(target).name
    sizes = _checked_arguments(sizes, time, inputs, executor, workers, ray_address, iterations, warmup)
    directory = Path(cache_dir) if cache_dir is not None else cache.default_dir()
    runner = ProcessRunner(workers) if executor == "processes" else RayRunner(ray_address)
    with runner:
        device = no_device = key = None
        if time:
            try:
                device, signature = runner.probe(inputs)
            except NoDeviceError as e:
                no_device = e
            else:
                key = _cache_key(build, configs, tgt, device, signature, sizes)
                hit = _cached(build, configs, tgt, directory, key)
                if hit is not None:
                    return hit
        start = _now()
        verdicts = runner.verify(build, configs, tgt)
        result = AutotuneResult(candidates=verdicts, verify_seconds=_now() - start, workers=runner.workers,
                                executor=runner.name, device=device)
        _raise_builder_errors(verdicts)
        proved = [v for v in verdicts if v.proved]
        if time and no_device is not None:
            raise NoDeviceError(f"autotune: {len(proved)} of {len(verdicts)} candidates proved, but they cannot be "
                                f"timed here: {no_device}. Pass time=False for the proved set (compiled, untimed)")
        if not time:
            result.timings = {t.index: t for t in runner.compile_only(build, proved, tgt)}
            return result
        if not proved:
            raise ScheduleError("autotune: no candidate was proved, so none was compiled or timed:\n" +
                                _listing(verdicts))
        timings = runner.time(build, proved, tgt, inputs, sizes, iterations, warmup)
    result.timings = {t.index: t for t in timings}
    timed = [t for t in timings if t.seconds is not None]
    if not timed:
        raise ScheduleError("autotune: no proved candidate could be timed:\n" +
                            "\n".join(f"{shown(verdicts[t.index].config)}: {t.error}" for t in timings))
    best = min(timed, key=lambda t: t.seconds)
    winner = verdicts[best.index]
    result.config, result.seconds = winner.config, best.seconds
    result.kernel = compile_candidate(build, winner, tgt)
    result.cache_path = cache.store(directory, key, {
        "format": CACHE_FORMAT, "config": winner.config, "seconds": best.seconds, "fingerprint": winner.fingerprint,
        "timings": [{"config": verdicts[t.index].config, "seconds": t.seconds, "error": t.error} for t in timings],
        "proved": len(proved), "candidates": len(verdicts)})
    return result


def _now() -> float:
    return time.perf_counter()


def _resolve_recipe(build, space, inputs):
    """(build function, space, inputs): a recipe object supplies what was not passed."""
    if callable(getattr(build, "build", None)) and hasattr(build, "space"):
        recipe = build
        space = recipe.space if space is None else space
        inputs = getattr(recipe, "inputs", None) if inputs is None else inputs
        return recipe.build, space, inputs
    if not callable(build):
        raise ScheduleError(f"autotune: build must be a function build(**config) -> tp.Fusion or a recipe (an object "
                            f"with build and space), got {type(build).__name__} {build!r:.60}")
    if space is None:
        raise ScheduleError("autotune: give the space to search (a dict of parameter -> list of values); only a "
                            "recipe brings its own")
    return build, space, inputs


def _checked_arguments(sizes, time, inputs, executor, workers, ray_address, iterations, warmup) -> dict[str, int]:
    if executor not in EXECUTORS:
        raise ScheduleError(f"autotune: executor must be one of {', '.join(map(repr, EXECUTORS))}, got {executor!r}")
    if executor == "ray" and workers is not None:
        raise ScheduleError("autotune: workers is for executor='processes'; Ray runs a verify task per candidate on "
                            "the cluster's CPUs")
    if executor == "processes" and ray_address is not None:
        raise ScheduleError("autotune: ray_address needs executor='ray'")
    if not isinstance(time, bool):
        raise ScheduleError(f"autotune: time must be True or False, got {time!r}")
    if time and inputs is None:
        raise ScheduleError("autotune: timing needs inputs (the arrays, or a function returning them); pass "
                            "time=False to verify and compile only")
    for name, value in (("iterations", iterations), ("warmup", warmup)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "iterations" else 0):
            raise ScheduleError(f"autotune: {name} must be a {'positive' if name == 'iterations' else 'non-negative'} "
                                f"int, got {value!r}")
    sizes = {} if sizes is None else dict(sizes)
    for name, value in sizes.items():
        if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, int):
            raise ScheduleError(f"autotune: sizes must map extent symbols to ints, got {name!r}: {value!r}")
    return sizes


def _raise_builder_errors(verdicts: list[Verdict]) -> None:
    """A builder that raised something other than a ScheduleError, or returned no Fusion, is broken:
    its candidates are not rejected, they were never built."""
    for v in verdicts:
        if v.builder_error:
            raise ScheduleError(f"autotune: {v.builder_error}")


def _listing(verdicts: list[Verdict], most: int = 20) -> str:
    lines = [v.line() for v in verdicts[:most]]
    if len(verdicts) > most:
        lines.append(f"... and {len(verdicts) - most} more")
    return "\n".join(lines)


def builder_name(build: Callable) -> str:
    """The builder as the cache names it: module.qualname, with its object for a method and its
    arguments for a functools.partial (never an address, which changes from run to run)."""
    if isinstance(build, functools.partial):
        return f"partial({builder_name(build.func)}, {build.args!r}, {build.keywords!r})"
    owner = getattr(build, "__self__", None)
    function = getattr(build, "__func__", build)
    name = f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', type(function).__name__)}"
    return name if owner is None else f"{name} of {owner!r}"


def _cache_key(build, configs: list[Config], target: str, device: str, signature: list, sizes: dict) -> dict:
    key = {"builder": builder_name(build), "space": [config_key(c) for c in configs], "target": target,
           "device": device, "inputs": signature, "sizes": sizes, "tileproof": _version()}
    return json.loads(json.dumps(key))  # as it reads back from disk: tuples as lists


def _version() -> str:
    try:
        return importlib.metadata.version("tileproof")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


def _cached(build, configs: list[Config], target: str, directory: Path, key: dict) -> AutotuneResult | None:
    """The winner stored for `key`, compiled, if its schedule is still the one timed (a changed
    builder gives another fingerprint: the entry is stale and the sweep runs again)."""
    entry = cache.load(directory, key)
    if entry is None or entry.get("format") != CACHE_FORMAT:
        return None
    stored = config_key(entry.get("config", {}))
    config = next((c for c in configs if config_key(c) == stored), None)
    if config is None:
        return None
    fusion = build_fusion(build, config)
    if fingerprint(fusion, target) != entry.get("fingerprint"):
        return None
    return AutotuneResult(config=config, kernel=compile_fusion(fusion, target), seconds=entry["seconds"],
                          device=key["device"], cached=True, cache_path=directory / f"{cache.key_digest(key)}.json")


__all__ = ["AutotuneResult", "autotune", "builder_name"]
