"""The CUDA driver, through cuda.bindings.driver: initialization, the device's primary
context (the one PyTorch uses), modules, launches, memory and event timing.

Only this module touches the driver; every failure to find a GPU becomes
NoDeviceError, which says what still works without one.
"""

from __future__ import annotations

import ctypes
import functools

from ..errors import NoDeviceError, TileproofError

NO_GPU_HINT = ("kernel.run needs an NVIDIA GPU and driver; verification (tp.verify), source emission "
               "and compilation (tp.compile(fusion, target='sm_90a'), kernel.cuda_source, kernel.cubin) "
               "still work without one")


class DriverError(TileproofError, RuntimeError):
    """A CUDA driver call failed (with the call and the driver's message)."""


@functools.lru_cache(maxsize=1)
def driver():
    """The initialized driver module, or NoDeviceError."""
    try:
        from cuda.bindings import driver as cu
    except ImportError as e:
        raise NoDeviceError(f"cuda-python is not importable ({e}); {NO_GPU_HINT}") from e
    try:
        (err,) = cu.cuInit(0)
    except Exception as e:  # the driver library itself is missing
        raise NoDeviceError(f"no NVIDIA driver found ({type(e).__name__}: {e}); {NO_GPU_HINT}") from None
    if err != cu.CUresult.CUDA_SUCCESS:
        raise NoDeviceError(f"cuInit failed ({_message(cu, err)}): no usable GPU; {NO_GPU_HINT}")
    err, count = cu.cuDeviceGetCount()
    if err != cu.CUresult.CUDA_SUCCESS or count == 0:
        raise NoDeviceError(f"the driver reports no GPU; {NO_GPU_HINT}")
    return cu


def _message(cu, err) -> str:
    try:
        _, text = cu.cuGetErrorString(err)
        return f"{err.name}: {text.decode() if isinstance(text, bytes) else text}"
    except Exception:
        return str(err)


def check(result, what: str):
    """Unwrap a driver call's (err, *values) tuple, raising DriverError on failure."""
    cu = driver()
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise DriverError(f"{what} failed: {_message(cu, err)}")
    return values[0] if len(values) == 1 else tuple(values) if values else None


@functools.lru_cache(maxsize=None)
def _device(device_id: int):
    cu = driver()
    err, count = cu.cuDeviceGetCount()
    if not 0 <= device_id < count:
        raise NoDeviceError(f"there is no GPU {device_id} (this machine has {count})")
    return check(cu.cuDeviceGet(device_id), "cuDeviceGet")


@functools.lru_cache(maxsize=None)
def _primary_context(device_id: int):
    return check(driver().cuDevicePrimaryCtxRetain(_device(device_id)), "cuDevicePrimaryCtxRetain")


def activate(device_id: int) -> None:
    check(driver().cuCtxSetCurrent(_primary_context(device_id)), "cuCtxSetCurrent")


@functools.lru_cache(maxsize=None)
def capability(device_id: int) -> tuple[int, int]:
    cu = driver()
    attr = cu.CUdevice_attribute
    dev = _device(device_id)
    major = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")
    minor = check(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")
    return major, minor


@functools.lru_cache(maxsize=None)
def device_name(device_id: int) -> str:
    raw = check(driver().cuDeviceGetName(256, _device(device_id)), "cuDeviceGetName")
    return raw.split(b"\0")[0].decode()


def pointer_device(ptr: int) -> int:
    """The GPU that owns a device pointer (for __cuda_array_interface__ arrays)."""
    cu = driver()
    attr = cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    return int(check(cu.cuPointerGetAttribute(attr, ptr), "cuPointerGetAttribute"))


def load_function(cubin: bytes, name: str, device_id: int):
    activate(device_id)
    cu = driver()
    module = check(cu.cuModuleLoadData(cubin), "cuModuleLoadData")
    return module, check(cu.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")


def allow_dynamic_smem(function, nbytes: int) -> None:
    """Dynamic shared memory above 48 KiB must be opted into per function."""
    cu = driver()
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(cu.cuFuncSetAttribute(function, attr, nbytes), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")


def resident_limit(function, block, smem: int, device_id: int) -> tuple[int, int]:
    """(blocks of `function` an SM runs at once, given its registers, shared memory and threads;
    the GPU's SMs): what a cooperative launch may hold, clusters aside."""
    cu = driver()
    threads = block[0] * block[1] * block[2]
    per_sm = check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, smem),
                   "cuOccupancyMaxActiveBlocksPerMultiprocessor")
    attr = cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    return int(per_sm), int(check(cu.cuDeviceGetAttribute(attr, _device(device_id)), "cuDeviceGetAttribute"))


def resident_blocks(function, block, smem: int, device_id: int) -> int:
    """How many blocks of `function` the GPU runs at once, clusters aside: blocks per SM (its
    registers, shared memory and threads) times the SMs."""
    per_sm, sms = resident_limit(function, block, smem, device_id)
    return per_sm * sms


def resident_clusters(function, grid, block, smem: int) -> int:
    """How many clusters of `function` (its __cluster_dims__) the GPU runs at once: a cluster's
    blocks must share one GPC, so fewer may fit than the SMs would hold."""
    cu = driver()
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = smem
    config.numAttrs = 0
    return check(cu.cuOccupancyMaxActiveClusters(function, config), "cuOccupancyMaxActiveClusters")


def launch(function, grid, block, smem: int, stream: int, args: list[tuple[int, type]]) -> None:
    cu = driver()
    values = tuple(v for v, _ in args)
    types = tuple(t for _, t in args)
    check(cu.cuLaunchKernel(function, *grid, *block, smem, stream, (values, types), 0), "cuLaunchKernel")


def launch_packed(device_id: int, function, grid, block, smem: int, stream: int, params_address: int,
                  cooperative: bool = False) -> None:
    """Make device_id's primary context current and cuLaunchKernel with the arguments already
    packed: `params_address` is the address of an array of pointers to each parameter's bytes
    (what prepared launches keep). Two driver calls and nothing else: the per-launch path.
    `cooperative`: cuLaunchCooperativeKernel, which runs every block at once or fails
    (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE), for a kernel whose blocks wait for each other."""
    cu = driver()
    (err,) = cu.cuCtxSetCurrent(_primary_context(device_id))
    if err == cu.CUresult.CUDA_SUCCESS:
        call = cu.cuLaunchCooperativeKernel if cooperative else cu.cuLaunchKernel
        if cooperative:
            (err,) = call(function, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, stream,
                          params_address)
        else:
            (err,) = call(function, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, stream,
                          params_address, 0)
        if err == cu.CUresult.CUDA_SUCCESS:
            return
        raise DriverError(f"{'cuLaunchCooperativeKernel' if cooperative else 'cuLaunchKernel'} failed: "
                          f"{_message(cu, err)}")
    raise DriverError(f"cuCtxSetCurrent failed: {_message(cu, err)}")


def dependent_launch_config(grid, block, smem: int, stream: int):
    """cuLaunchKernelEx's configuration of a programmatic dependent launch (PDL): the kernel may
    start once the kernel before it on the stream has let it (griddepcontrol.launch_dependents in
    each block, or its exit), and waits for that kernel's completion itself (griddepcontrol.wait,
    Fusion.dependent_launch). Built once per prepared launch: its stream is fixed."""
    cu = driver()
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = smem
    config.hStream = cu.CUstream(stream)
    attribute = cu.CUlaunchAttribute()
    attribute.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attribute.value.programmaticStreamSerializationAllowed = 1
    config.attrs = [attribute]
    config.numAttrs = 1
    return config


def launch_packed_config(device_id: int, function, config, params_address: int) -> None:
    """launch_packed through cuLaunchKernelEx with a prepared configuration (dependent_launch_config)."""
    cu = driver()
    (err,) = cu.cuCtxSetCurrent(_primary_context(device_id))
    if err == cu.CUresult.CUDA_SUCCESS:
        (err,) = cu.cuLaunchKernelEx(config, function, params_address, 0)
        if err == cu.CUresult.CUDA_SUCCESS:
            return
        raise DriverError(f"cuLaunchKernelEx failed: {_message(cu, err)}")
    raise DriverError(f"cuCtxSetCurrent failed: {_message(cu, err)}")


def synchronize(device_id: int) -> None:
    activate(device_id)
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize (a launch failed)")


def time_launches(device_id: int, stream: int, run, iterations: int) -> float:
    """Seconds per call of run() (which launches on stream), from CUDA events."""
    cu = driver()
    activate(device_id)
    start = check(cu.cuEventCreate(0), "cuEventCreate")
    stop = check(cu.cuEventCreate(0), "cuEventCreate")
    try:
        check(cu.cuEventRecord(start, stream), "cuEventRecord")
        for _ in range(iterations):
            run()
        check(cu.cuEventRecord(stop, stream), "cuEventRecord")
        check(cu.cuEventSynchronize(stop), "cuEventSynchronize (a launch failed)")
        ms = check(cu.cuEventElapsedTime(start, stop), "cuEventElapsedTime")
    finally:
        cu.cuEventDestroy(start)
        cu.cuEventDestroy(stop)
    return ms / 1e3 / iterations


def mem_alloc(device_id: int, nbytes: int) -> int:
    """nbytes of device memory, also while this thread captures a stream into a CUDA graph (a grid
    reduction's first launch on torch.cuda.graph's capture stream allocates its workspace there):
    cuMemAlloc is one of the calls a global-mode capture forbids, so the thread's capture mode is
    relaxed for the call and then restored (cuThreadExchangeStreamCaptureMode)."""
    activate(device_id)
    cu = driver()
    relaxed = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    mode = check(cu.cuThreadExchangeStreamCaptureMode(relaxed), "cuThreadExchangeStreamCaptureMode")
    try:
        return int(check(cu.cuMemAlloc(nbytes), "cuMemAlloc"))
    finally:
        check(cu.cuThreadExchangeStreamCaptureMode(mode), "cuThreadExchangeStreamCaptureMode")


def mem_free(device_id: int, ptr: int) -> None:
    try:
        activate(device_id)
        driver().cuMemFree(ptr)
    except Exception:  # interpreter shutdown or a dead context: nothing left to free
        pass


def copy_to_device(device_id: int, ptr: int, data: bytes) -> None:
    activate(device_id)
    buf = ctypes.create_string_buffer(data, len(data))
    check(driver().cuMemcpyHtoD(ptr, buf, len(data)), "cuMemcpyHtoD")


def copy_to_host(device_id: int, ptr: int, nbytes: int) -> bytes:
    activate(device_id)
    buf = ctypes.create_string_buffer(nbytes)
    check(driver().cuMemcpyDtoH(buf, ptr, nbytes), "cuMemcpyDtoH")
    return buf.raw


def memset_zero_async(ptr: int, nbytes: int, stream: int) -> None:
    """Zero nbytes at ptr, in order on `stream` (before the launches queued after it)."""
    check(driver().cuMemsetD8Async(ptr, 0, nbytes, stream), "cuMemsetD8Async")


def stream_synchronize(stream: int) -> None:
    """Wait for the work queued on `stream` (before freeing memory its launches may still use)."""
    check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize")
