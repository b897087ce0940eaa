"""tp.compile: verify, lower, emit, compile with NVRTC; the Kernel it returns runs the result.

    kernel = tp.compile(fusion, target="sm_90a")   # ScheduleRejected if verification fails
    kernel.cuda_source, kernel.cubin, kernel.launch_params, kernel.resources
    (out,) = kernel.run(a)                          # arrays with DLPack / __cuda_array_interface__

Compiling needs no GPU. A repeated compile of an unchanged schedule is answered from
memory (keyed by the schedule's fingerprint); the cubin is also cached on disk. A kernel
that ptxas compiled with register spills, or with its wgmma.mma_async serialized, gets a
PerformanceWarning when it is built.
"""

from __future__ import annotations

import ctypes
import functools
import math
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from ..model.expr import Expr, evaluate, to_sympy, try_int
from ..model.fingerprint import fingerprint
from ..model.fusion import Fusion
from ..model.errors import ScheduleError
from ..model.targets import Target, get_target
from ..model.types import MemoryType
from ..execution.smem_plan import BASE_ALIGN
from ..execution.warp_roles import WarpRoles
from ..verifier.diagnostics import Report
from ..verifier.verify import accepted_before, verify
from .runtime import driver, tensor_maps
from .runtime.arrays import (ArrayInfo, default_stream, dense_strides, describe, order_after_current_stream,
                             output_allocator, signature)
from .runtime.binding import Bound, bind, check_assumptions, check_no_alias
from .emit import emit, uses_half_types
from .errors import InputError, NoDeviceError, PerformanceWarning, ScheduleRejected
from .ir import KernelIR, ParamKind
from .lower import lower
from .runtime.nvrtc import compile_kernel, cuda_include_dir
from .runtime.ptxas import Resources, serialized_note, spill_note
from .runtime.prepared import OutputSlot, PreparedLaunch
from .runtime.rebase import LaunchTemplate, addresses, rebase, unaddressed
from .runtime.workspace import Workspaces

MEMORY_CACHE_SIZE = 256
TENSOR_MAP_CACHE_SIZE = 64
LAUNCH_CACHE_SIZE = 256  # prepared launches per kernel (argument signatures), checked sizes, launch configurations
LOCAL_NOTE_BYTES = 4096  # register tensors this large explain a launch refused for memory
_memory: "OrderedDict[str, Kernel]" = OrderedDict()


@dataclass(frozen=True)
class LaunchParams:
    """grid, block (x, y, z) and dynamic shared-memory bytes: ints, or sympy expressions
    of the extent symbols when they depend on sizes (see Kernel.launch_params_for)."""

    grid: tuple
    block: tuple
    shared_memory_bytes: Any


def _shown(e: Expr):
    v = try_int(e)
    return v if v is not None else to_sympy(e)


class Kernel:
    """A compiled kernel for one verified schedule and target (what tp.compile returns):
    `cuda_source`, `cubin`, `name`, `launch_params`, `resources` (ptxas's registers, spills and
    stack frame per thread, or None where its log did not give them), the `report` that accepted
    it, `verified` (False only for tileproof.testing.compile_unverified), and `run` / `benchmark`
    to launch it.

        kernel = tp.compile(fusion, target="sm_90a"); (out,) = kernel.run(x)"""

    def __init__(self, fusion: Fusion, report: Report, target: Target, ir: KernelIR, source: str, cubin: bytes,
                 resources: Resources | None = None):
        self.fusion = fusion
        self.report = report
        self.target = target
        self.ir = ir
        self.cuda_source = source
        self.cubin = cubin
        self.resources = resources
        self.name = ir.name
        self.verified = report.ok  # False only for tileproof.testing.compile_unverified
        self._functions: dict[int, Any] = {}
        self._checked: dict[tuple, tuple] = {}
        self._tensor_maps: dict[tuple, Any] = {}
        self._clusters_checked: set[tuple] = set()
        self._launches: dict[tuple, PreparedLaunch] = {}  # by _launch_key
        self._templates: dict[tuple, LaunchTemplate] = {}  # by _launch_key without the addresses (runtime/rebase.py)
        self._workspaces = Workspaces(ir.params)  # a grid reduction's partials and semaphores

    def __repr__(self) -> str:
        return f"<tileproof Kernel {self.fusion.name} for {self.target.name}: grid {self.launch_params.grid}, " \
               f"block {self.launch_params.block}>"

    @property
    def launch_params(self) -> LaunchParams:
        """Grid, block and dynamic shared-memory bytes, as sympy expressions of the extent
        symbols where they depend on sizes (launch_params_for gives them at concrete sizes)."""
        ir = self.ir
        return LaunchParams(tuple(map(_shown, ir.grid)), tuple(map(_shown, ir.block)), _shown(ir.smem_bytes))

    def launch_params_for(self, **sizes: int) -> LaunchParams:
        """The launch parameters at concrete sizes (extent symbol -> int)."""
        grid, block, smem = self._config(dict(sizes))
        return LaunchParams(grid, block, smem)

    # -- running ---------------------------------------------------------------------
    def run(self, *inputs, out: Sequence | None = None, stream: int | None = None, **sizes: int) -> tuple:
        """Launch on the inputs' GPU; returns the outputs (new arrays of the inputs' kind,
        or `out`). Asynchronous on `stream` (default: PyTorch's current stream for PyTorch
        inputs, else the legacy default stream). Every check is made once per argument
        signature (each array's address, shape, strides, dtype, device; the sizes; the stream):
        a repeated call with the same signature reuses the packed launch."""
        explicit = stream is not None
        if not explicit:
            stream = default_stream(inputs)
        key = _launch_key(inputs, out, stream, sizes)
        if explicit:
            order_after_current_stream(inputs, stream)
        prepared = self._lookup(key)
        if prepared is not None:
            if out is None:
                return prepared.launch_new_outputs()
            prepared.launch()
            return tuple(out)
        prepared, outputs = self._prepare_cached(key, inputs, out, stream, sizes)
        prepared.launch()
        return outputs

    def prepared(self, *inputs, out: Sequence | None = None, stream: int | None = None,
                 **sizes: int) -> PreparedLaunch:
        """The packed launch run() makes for these arguments, without launching it (the one run()
        keeps, or made and kept now): for a caller that launches one argument signature many times
        itself (recipes.Matmul), calling launch(), or launch_new_outputs() where `out` is None. It
        stays valid while current(it) holds."""
        stream = default_stream(inputs) if stream is None else stream
        key = _launch_key(inputs, out, stream, sizes)
        return self._lookup(key) or self._prepare_cached(key, inputs, out, stream, sizes)[0]

    @staticmethod
    def default_stream(*inputs) -> int:
        """The stream run() launches on when given none: PyTorch's current stream on the first
        CUDA tensor's device, else the legacy default stream (0)."""
        return default_stream(inputs)

    def current(self, prepared: PreparedLaunch) -> bool:
        """Whether a launch from prepared() still holds this kernel's workspaces (their
        reallocation for larger sizes frees the ones it was packed with)."""
        return prepared.generation == self._workspaces.generation

    def _lookup(self, key: tuple | None) -> PreparedLaunch | None:
        """The launch packed for `key` (_launch_key), or rebased from its signature's template
        where only addresses differ; None where neither is kept or current."""
        if key is None:
            return None
        prepared = self._launches.get(key)
        generation = self._workspaces.generation
        if prepared is None or prepared.generation != generation:
            template = self._templates.get(unaddressed(key))  # the signature's, at other addresses
            if template is None or template.generation != generation:
                return None
            prepared = self._cached(key, rebase(self.ir, template, *addresses(key), self._tensor_map))
        return prepared

    def _prepare_cached(self, key: tuple | None, inputs, out, stream: int, sizes) -> tuple[PreparedLaunch, tuple]:
        """_prepare_launch, keeping the launch under `key` and its template under the key's
        signature (None: an argument that is no array, kept nowhere)."""
        prepared, outputs, template = self._prepare_launch(inputs, out, stream, sizes)
        if key is not None:
            self._cached(key, prepared)
            if len(self._templates) >= LAUNCH_CACHE_SIZE:
                self._templates.clear()
            self._templates[unaddressed(key)] = template
        return prepared, outputs

    def _cached(self, key: tuple, prepared: PreparedLaunch) -> PreparedLaunch:
        if len(self._launches) >= LAUNCH_CACHE_SIZE:
            self._launches.clear()
        self._launches[key] = prepared
        return prepared

    def benchmark(self, *inputs, out: Sequence | None = None, iterations: int = 100, warmup: int = 10,
                  stream: int | None = None, **sizes: int) -> float:
        """Seconds per launch (CUDA events over `iterations` launches after `warmup`)."""
        prepared, stream, launch = self._prepare(inputs, out, stream, sizes)
        for _ in range(warmup):
            launch()
        return driver.time_launches(prepared.device_id, stream, launch, iterations)

    def _prepare(self, inputs, out, stream, sizes):
        """(a PreparedLaunch of its own, the stream, a closure launching it into the same outputs
        every time): for benchmarks, which time the launch alone."""
        stream = default_stream(inputs) if stream is None else stream
        prepared, outputs, _ = self._prepare_launch(inputs, out, stream, sizes)

        def launch():
            prepared.launch()
            return outputs  # held by the closure: the launches write into them

        return prepared, stream, launch

    def _prepare_launch(self, inputs, out, stream: int, sizes) -> tuple[PreparedLaunch, tuple, LaunchTemplate]:
        """Bind and check the arguments, allocate the outputs run() makes, pack the arguments:
        the PreparedLaunch, the outputs of this first launch, and the template other addresses of
        the same signature are rebased from (runtime/rebase.py)."""
        bound = bind(self.ir.globals, list(inputs), list(out) if out is not None else None, dict(sizes),
                     list(self.fusion.symbols), stream, self.ir.views)
        grid, block, smem = self._config(bound.env)
        device_id = self._device(bound)
        allocators = self._allocators(bound, device_id)
        outputs = self._outputs(bound, allocators)
        function = self._function(device_id, smem)
        self._warn_if_clusters_wait(function, grid, block, smem, device_id)
        if self.ir.cooperative:
            problem = co_residency_problem(self.name, grid, *driver.resident_limit(function, block, smem, device_id))
            if problem:
                raise InputError(problem)
        args = self._arguments(bound, outputs, self._workspaces.pointers(bound.env, device_id, stream))
        env = bound.env
        slots = self._output_slots(allocators, env) if out is None else None
        template = LaunchTemplate(function, grid, block, smem, stream, device_id, args, slots,
                                  env, lambda e: self._explained(e, env), self._workspaces.generation,
                                  self.ir.cooperative, self.ir.dependent_launch)
        prepared = PreparedLaunch(function, grid, block, smem, stream, device_id, args, slots, template.explain,
                                  template.generation, template.cooperative, template.dependent)
        return prepared, tuple(o.obj for o in outputs), template

    def _warn_if_clusters_wait(self, function, grid, block, smem: int, device_id: int) -> None:
        """PerformanceWarning, once per launch configuration, for a grid whose blocks the GPU
        holds at once but whose clusters it does not (clusters_wait_note)."""
        cluster = math.prod(self.ir.cluster)
        key = (device_id, grid, block, smem)
        if cluster == 1 or key in self._clusters_checked:
            return
        if len(self._clusters_checked) >= LAUNCH_CACHE_SIZE:
            self._clusters_checked.clear()
        self._clusters_checked.add(key)
        note = clusters_wait_note(math.prod(grid), cluster, driver.resident_blocks(function, block, smem, device_id),
                                  driver.resident_clusters(function, grid, block, smem))
        if note:
            warnings.warn(f"{self.name}: {note}", PerformanceWarning, stacklevel=4)

    def _explained(self, error: Exception, env: dict[str, int]) -> Exception:
        """A launch refused for memory, with what the kernel's register tensors ask for: the
        driver reserves their local memory for every thread the GPU can hold at once. A cooperative
        launch too large for the GPU (which _prepare_launch checks first): an InputError."""
        if "COOPERATIVE_LAUNCH_TOO_LARGE" in str(error):
            return InputError(f"{self.name}: {error}: its allreduce's grid-wide barrier needs every block resident "
                              f"at once; use smaller sizes or fewer blocks")
        local = [(b.tensor, evaluate(b.elements, env) * b.dtype.bytes) for b in self.ir.buffers
                 if b.memory is MemoryType.Local]
        per_thread = sum(n for _, n in local)
        if "OUT_OF_MEMORY" not in str(error) or per_thread < LOCAL_NOTE_BYTES:
            return error
        return driver.DriverError(
            f"{error}: each thread of this kernel holds {per_thread} bytes of register tensors "
            f"({', '.join(f'{t} {n}' for t, n in local)}), placed in local memory, and the driver reserves "
            f"that for every thread the GPU can hold at once (2048 per SM); inline or parallelize those "
            f"tensors so that a thread holds a tile of them")

    def _device(self, bound: Bound) -> int:
        driver.driver()  # NoDeviceError before anything else needs the GPU
        device_id = bound.device_id
        if device_id is None:
            device_id = driver.pointer_device(bound.inputs[0].ptr) if bound.inputs else 0
        have = driver.capability(device_id)
        want = self.target.compute_capability
        if have != want:
            raise NoDeviceError(
                f"this kernel was compiled for {self.target.name} (compute capability {want[0]}.{want[1]}), but GPU "
                f"{device_id} ({driver.device_name(device_id)}) is {have[0]}.{have[1]}; compile for its target")
        return device_id

    def _config(self, env: dict[str, int]) -> tuple:
        key = tuple(sorted(env.items()))
        hit = self._checked.get(key)
        if hit is None:
            check_assumptions(list(self.fusion.assumptions), env, list(self.fusion.symbols))
            try:
                grid = tuple(evaluate(e, env) for e in self.ir.grid)
                block = tuple(evaluate(e, env) for e in self.ir.block)
                smem = evaluate(self.ir.smem_bytes, env)
            except KeyError as e:
                raise InputError(f"extent {e.args[0]} is needed for the launch; pass it as a keyword") from None
            self._check_limits(grid, block, smem)
            if len(self._checked) >= LAUNCH_CACHE_SIZE:  # a symbolic kernel meets a new size at every shape
                self._checked.clear()
            hit = self._checked[key] = (grid, block, smem)
        return hit

    def _check_limits(self, grid, block, smem) -> None:
        t = self.target
        if block[0] * block[1] * block[2] > t.max_threads_per_block:
            raise InputError(f"these sizes need {block[0] * block[1] * block[2]} threads per block; "
                             f"{t.name} allows {t.max_threads_per_block}")
        for axis, n, most in zip("xyz", block, t.max_block_dims):
            if n > most:
                raise InputError(f"these sizes need blockDim.{axis} = {n}; {t.name} allows {most}")
        static = -(-self.ir.static_smem_bytes // BASE_ALIGN) * BASE_ALIGN  # the dynamic base follows, 1024-aligned
        if smem + static > t.smem_bytes_per_block:
            raise InputError(f"these sizes need {smem} bytes of shared memory beside {self.ir.static_smem_bytes} of "
                             f"mbarriers; {t.name} has {t.smem_bytes_per_block}")
        for axis, n, most in zip("xyz", grid, t.max_grid_dims):
            if n > most:
                raise InputError(f"these sizes need gridDim.{axis} = {n}; {t.name} allows {most}")

    def _allocators(self, bound: Bound, device_id: int) -> list:
        """For each output run() allocates (None where out= gives it): a function returning a new
        dense array of it, of the first input's kind."""
        like = bound.inputs[0] if bound.inputs else None
        result = []
        for g, given in zip([g for g in self.ir.globals if not g.is_input], bound.outputs):
            if given is not None:
                result.append(None)
                continue
            shape = [evaluate(e, bound.env) for e in g.extents]
            result.append(output_allocator(like is not None and like.is_torch, shape,
                                           dense_strides(shape, g.alloc_axes), g.dtype, device_id))
        return result

    def _outputs(self, bound: Bound, allocators: list) -> list[ArrayInfo]:
        result = [given if allocate is None else describe(allocate())
                  for given, allocate in zip(bound.outputs, allocators)]
        check_no_alias(bound.inputs, result)
        return result

    def _output_slots(self, allocators: list, env: dict[str, int]) -> list[OutputSlot]:
        """Where each allocated output's address goes in the arguments (run() allocates them anew
        at every call)."""
        maps = {m.param: m for m in self.ir.tensor_maps}
        unverified = "" if self.verified else ", ".join(self.report.codes)
        slots = []
        for g, allocate in zip([g for g in self.ir.globals if not g.is_input], allocators):
            pointers = [k for k, p in enumerate(self.ir.params) if p.kind is ParamKind.TENSOR and p.tensor == g.name]
            tmaps = [(k, functools.partial(tensor_maps.encode, maps[p.name], env=env, unverified=unverified))
                     for k, p in enumerate(self.ir.params) if p.kind is ParamKind.TENSOR_MAP and p.tensor == g.name]
            slots.append(OutputSlot(allocate, pointers, tmaps))
        return slots

    def _function(self, device_id: int, smem: int):
        entry = self._functions.get(device_id)
        if entry is None:
            module, function = driver.load_function(self.cubin, self.name, device_id)
            # opt in from the first byte: the static mbarriers count against the default 48 KiB too
            entry = self._functions[device_id] = [module, function, 0]
        if smem > entry[2]:
            driver.allow_dynamic_smem(entry[1], smem)
            entry[2] = smem
        return entry[1]

    def _arguments(self, bound: Bound, outputs: list[ArrayInfo], workspaces: dict[str, int]) -> list[tuple[int, type]]:
        arrays = {g.name: info for g, info in zip([g for g in self.ir.globals if g.is_input], bound.inputs)}
        arrays.update({g.name: info for g, info in zip([g for g in self.ir.globals if not g.is_input], outputs)})
        arrays.update({v.name: arrays[v.view_of] for v in self.ir.views})  # a view reads its input's memory
        args = []
        maps = {m.param: m for m in self.ir.tensor_maps}
        for p in self.ir.params:
            if p.kind is ParamKind.TENSOR:
                args.append((arrays[p.tensor].ptr, ctypes.c_void_p))
            elif p.kind is ParamKind.TENSOR_MAP:
                # a TMA-stored global intermediate's map lies over its workspace (Param storage=True, named as the tensor)
                address = arrays[p.tensor].ptr if p.tensor in arrays else workspaces[p.tensor]
                args.append((self._tensor_map(maps[p.name], address, bound.env), None))
            elif p.kind in (ParamKind.WORKSPACE, ParamKind.SEMAPHORES):
                args.append((workspaces[p.name], ctypes.c_void_p))
            else:
                args.append((bound.env.get(p.symbol, 0), ctypes.c_uint32 if p.ctype == "unsigned" else ctypes.c_uint64))
        return args


    def _tensor_map(self, m, address: int, env: dict[str, int]):
        """Encoded once per array address and sizes (the driver copies it into the launch)."""
        key = (m.param, address, tuple(sorted(env.items())))
        tmap = self._tensor_maps.get(key)
        if tmap is None:
            if len(self._tensor_maps) >= TENSOR_MAP_CACHE_SIZE:
                self._tensor_maps.clear()
            tmap = self._tensor_maps[key] = tensor_maps.encode(
                m, address, env, "" if self.verified else ", ".join(self.report.codes))
        return tmap


def co_residency_problem(name: str, grid: tuple, per_sm: int, sms: int) -> str | None:
    """Why a kernel with a grid-wide barrier (an allreduce: codegen/lower/reduction.py cooperative)
    cannot launch with `grid`: its blocks wait for each other, so all must be resident at once
    (cuLaunchCooperativeKernel refuses more, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE), at most
    `per_sm` blocks on each of `sms` SMs; None where they fit (nvFuser's validateCooperativeLaunch)."""
    blocks = math.prod(grid)
    if blocks <= per_sm * sms:
        return None
    return (f"{name}: these sizes need a grid of {blocks} blocks ({' x '.join(map(str, grid))}), but its allreduce's "
            f"grid-wide barrier needs every block resident at once (a cooperative launch), and the GPU holds at most "
            f"{per_sm * sms} ({per_sm} blocks per SM x {sms} SMs, given the block's threads, registers and shared "
            f"memory); use smaller sizes or fewer blocks (bind more of the reduction to threads or loops)")


def clusters_wait_note(blocks: int, cluster: int, resident_blocks: int, resident_clusters: int) -> str | None:
    """Why a grid that fits on the GPU at once by its blocks runs in two waves, or None: the
    blocks of a cluster must share one GPC, so fewer clusters may fit than the SMs would hold
    (an H200's 132 SMs hold 66 clusters of 2 but 30 of 4). A persistent grid, each block looping
    over tiles, then takes about twice as long."""
    clusters = -(-blocks // cluster)
    if blocks > resident_blocks or clusters <= resident_clusters:
        return None
    at_once = resident_clusters * cluster
    return (f"its {blocks} blocks fit on the GPU at once, but in clusters of {cluster} only {resident_clusters} "
            f"clusters ({at_once} blocks) do, a cluster's blocks sharing one GPC: the other {blocks - at_once} "
            f"blocks wait for a second wave, which a persistent grid (a loop over tiles in each block) pays in "
            f"full; a grid of at most {at_once} blocks runs in one")


def _launch_key(inputs, out, stream: int, sizes: dict) -> tuple | None:
    """What a launch's packed arguments depend on, or None where an argument is no array (the
    full binding then says what is wrong)."""
    ins = tuple(map(signature, inputs))
    outs = None if out is None else tuple(map(signature, out))
    if None in ins or (outs is not None and None in outs):
        return None
    given = tuple(sorted(sizes.items())) if sizes else ()
    try:
        hash(given)
    except TypeError:  # a size that is no int: the binding refuses it
        return None
    return ins, outs, given, stream


def compile(fusion: Fusion, target="sm_90a") -> Kernel:  # noqa: A001 - the public name
    """Verify, lower and compile `fusion` for `target`; ScheduleRejected when it does not verify."""
    if not isinstance(fusion, Fusion):
        raise ScheduleError(f"compile: expected a tp.Fusion, got {type(fusion).__name__}")
    tgt = get_target(target)
    key = fingerprint(fusion, tgt.name)
    kernel = _memory.get(key)
    if kernel is not None:
        _memory.move_to_end(key)
        return kernel
    report = accepted_before(fusion, key) or verify(fusion, tgt)
    if not report.ok:
        raise ScheduleRejected(report)
    kernel = build_kernel(fusion.snapshot(), report, tgt)
    _memory[key] = kernel
    while len(_memory) > MEMORY_CACHE_SIZE:
        _memory.popitem(last=False)
    return kernel


def build_kernel(snapshot: Fusion, report: Report, tgt: Target, banner: str = "") -> Kernel:
    """Lower, emit and compile a frozen fusion (tp.compile calls it with a passing report only)."""
    ir = lower(snapshot, tgt, report.decisions).kernel
    include = cuda_include_dir() if uses_half_types(ir) else None
    if snapshot.fast_math:
        banner += "// compiled with --use_fast_math (Fusion.fast_math)\n"
    source = banner + emit(ir, cuda_headers=include is not None)
    cubin, resources = compile_kernel(source, tgt.name, include, snapshot.fast_math)
    kernel = Kernel(snapshot, report, tgt, ir, source, cubin, resources.get(ir.name))
    setmaxnreg = next((n.spec.num_registers for n in ir.body if isinstance(n, WarpRoles) and n.spec.num_registers),
                      None)
    notes = [] if kernel.resources is None else [spill_note(ir.name, kernel.resources, setmaxnreg),
                                                 serialized_note(ir.name, kernel.resources)]
    for note in filter(None, notes):
        warnings.warn(note, PerformanceWarning, stacklevel=3)
    return kernel


def clear_memory_cache() -> None:
    _memory.clear()


__all__ = ["compile", "Kernel", "LaunchParams", "ScheduleRejected", "clear_memory_cache"]
