"""Arrays in and out of kernels: what an argument is (a PyTorch tensor read directly, else DLPack
or __cuda_array_interface__), the signature a launch is cached under, the stream a launch
defaults to, and new output arrays of the inputs' kind (PyTorch tensors, else DeviceArray).

Reading an array's metadata needs no GPU, so count, dtype, shape and contiguity are
checked before the driver is touched. PyTorch is never imported here: a tensor can only exist
once its program imported torch, so `sys.modules` says whether to look for one.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass

from ...model.types import DTYPES, DataType
from . import driver

DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_DTYPES = {(2, 32): "float32", (2, 64): "float64", (2, 16): "float16", (4, 16): "bfloat16", (6, 8): "bool",
              (0, 8): "int8", (0, 32): "int32", (0, 64): "int64"}
_CAI_DTYPES = {"f4": "float32", "f8": "float64", "f2": "float16", "i1": "int8", "i4": "int32", "i8": "int64",
               "b1": "bool"}
_CAI_TYPESTR = {v: k for k, v in _CAI_DTYPES.items()}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


@dataclass(frozen=True)
class ArrayInfo:
    """What a kernel needs to know of an argument; strides are in elements."""

    obj: object
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str  # a tileproof dtype name, or a description of an unsupported one
    device: str  # "cuda", "cpu", ...
    device_id: int | None  # None: ask the driver (__cuda_array_interface__ does not say)

    @property
    def is_torch(self) -> bool:
        return type(self.obj).__module__.split(".")[0] == "torch"


def dense_strides(shape, order) -> tuple[int, ...]:
    """Element strides of a dense array of `shape` whose axes lie in memory in `order` (outermost
    first)."""
    strides, running = [0] * len(shape), 1
    for axis in reversed(order):
        strides[axis] = running
        running *= max(int(shape[axis]), 1)
    return tuple(strides)


def contiguous_strides(shape) -> tuple[int, ...]:
    return dense_strides(shape, range(len(shape)))


_torch_tensor = None  # torch.Tensor, once torch is imported (a module is not unloaded): a launch asks per argument


def _torch_tensor_type():
    global _torch_tensor
    if _torch_tensor is None:
        _torch_tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    return _torch_tensor


def is_torch_tensor(obj) -> bool:
    tensor = _torch_tensor or _torch_tensor_type()
    return tensor is not None and isinstance(obj, tensor)


def describe(obj, stream: int | None = None) -> ArrayInfo:
    """Metadata of obj; raises TypeError when it is no array tileproof can read."""
    if isinstance(obj, DeviceArray):
        return ArrayInfo(obj, obj.ptr, obj.shape, obj.strides, obj.dtype.name, "cuda", obj.device_id)
    if is_torch_tensor(obj):
        return _from_torch(obj)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        try:
            return _from_dlpack(obj, stream)
        except BufferError:
            if not hasattr(obj, "__cuda_array_interface__"):
                raise
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj)
    raise TypeError(f"expected an array with DLPack or __cuda_array_interface__, got {type(obj).__name__}")


def _from_torch(t) -> ArrayInfo:
    """A PyTorch tensor's metadata from its attributes (what DLPack would say, without a capsule);
    BufferError, as from DLPack, for what DLPack refuses to export."""
    if t.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if str(t.layout) != "torch.strided":
        raise BufferError(f"a tensor of layout {t.layout} has no strided memory (use .to_dense())")
    device = t.device
    dtype = str(t.dtype).removeprefix("torch.")
    return ArrayInfo(t, t.data_ptr(), tuple(t.shape), tuple(t.stride()), dtype, device.type,
                     device.index if device.type == "cuda" else 0)


def signature(obj) -> tuple | None:
    """What a launch's arguments depend on of obj: (address, shape, strides, dtype, device, ...),
    hashable, cheap for PyTorch tensors (read from the tensor, no DLPack capsule); None where obj
    is no array tileproof can read (the full check then says why)."""
    if is_torch_tensor(obj):
        return obj.data_ptr(), obj.shape, obj.stride(), obj.dtype, obj.device, obj.requires_grad
    try:
        info = describe(obj)
    except Exception:  # noqa: BLE001 - not an array, or one its exporter refuses: bind() reports it
        return None
    return info.ptr, info.shape, info.strides, info.dtype, info.device, info.device_id


def default_stream(inputs) -> int:
    """The stream a launch on `inputs` uses when run() is given none: PyTorch's current stream on
    the first CUDA tensor's device, else the legacy default stream (0)."""
    for obj in inputs:
        if is_torch_tensor(obj) and obj.is_cuda:
            torch = sys.modules["torch"]
            raw = _current_raw_stream or _raw_stream_reader(torch)
            if raw:
                return raw(obj.device.index)
            return torch.cuda.current_stream(obj.device).cuda_stream
    return 0


_current_raw_stream = None  # torch._C._cuda_getCurrentRawStream, what torch's own launchers read


def _raw_stream_reader(torch):
    """torch's reader of a device's current raw stream (looked up once), or False where it has none."""
    global _current_raw_stream
    _current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or False
    return _current_raw_stream


def order_after_current_stream(inputs, stream: int) -> None:
    """Make `stream` wait for the work queued on PyTorch's current stream (what exporting the
    tensors by DLPack to another stream does) where run() is given a stream that is not it."""
    for obj in inputs:
        if is_torch_tensor(obj) and obj.is_cuda:
            torch = sys.modules["torch"]
            current = torch.cuda.current_stream(obj.device)
            if current.cuda_stream != stream:
                torch.cuda.ExternalStream(stream, device=obj.device).wait_stream(current)
            return


def _from_dlpack(obj, stream: int | None) -> ArrayInfo:
    dev_type, _ = obj.__dlpack_device__()
    if dev_type in (DL_CUDA, DL_CUDA_MANAGED):
        # 1 is the legacy default stream in the DLPack protocol; 0 is not allowed
        capsule = obj.__dlpack__(stream=stream if stream else 1)
    else:
        capsule = obj.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = _DLTensor.from_address(get(capsule, b"dltensor"))
    shape = tuple(t.shape[k] for k in range(t.ndim))
    strides = tuple(t.strides[k] for k in range(t.ndim)) if t.strides else contiguous_strides(shape)
    code = (t.dtype.code, t.dtype.bits)
    dtype = _DL_DTYPES.get(code, f"DLPack type code {code[0]} with {code[1]} bits") if t.dtype.lanes == 1 \
        else f"{t.dtype.lanes}-lane vector type"
    device = {DL_CPU: "cpu", DL_CUDA: "cuda", DL_CUDA_HOST: "cuda host", DL_CUDA_MANAGED: "cuda"}.get(
        t.device.device_type, f"DLPack device type {t.device.device_type}")
    ptr = (t.data or 0) + t.byte_offset
    info = ArrayInfo(obj, ptr, shape, strides, dtype, device, t.device.device_id)
    del capsule  # unconsumed: the producer's capsule destructor releases its reference
    return info


def _from_cai(obj) -> ArrayInfo:
    d = obj.__cuda_array_interface__
    shape = tuple(int(n) for n in d["shape"])
    typestr = d["typestr"]
    dtype = _CAI_DTYPES.get(typestr[1:], f"array-interface type {typestr}")
    size = int(typestr[2:]) if typestr[2:].isdigit() else 1
    strides = tuple(s // size for s in d["strides"]) if d.get("strides") else contiguous_strides(shape)
    return ArrayInfo(obj, int(d["data"][0]), shape, strides, dtype, "cuda", None)


class DeviceArray:
    """A GPU array owned by tileproof (outputs when the inputs are not PyTorch tensors).
    Exposes __cuda_array_interface__ (except bfloat16, which it cannot describe)."""

    def __init__(self, shape, dtype: DataType, device_id: int = 0, strides=None):
        self.shape = tuple(int(n) for n in shape)
        self.dtype = dtype
        self.device_id = device_id
        self.strides = tuple(strides) if strides is not None else contiguous_strides(self.shape)
        self.nbytes = _span(self.shape, self.strides) * dtype.bytes
        self.ptr = driver.mem_alloc(device_id, max(self.nbytes, 1))

    def __del__(self):
        if getattr(self, "ptr", None):
            driver.mem_free(self.device_id, self.ptr)
            self.ptr = 0

    @property
    def __cuda_array_interface__(self):
        if self.dtype.name not in _CAI_TYPESTR:
            raise AttributeError(f"{self.dtype} has no __cuda_array_interface__ type string")
        code = _CAI_TYPESTR[self.dtype.name]
        return {"shape": self.shape, "typestr": ("|" if code == "i1" else "<") + code,
                "data": (self.ptr, False), "version": 3,
                "strides": tuple(s * self.dtype.bytes for s in self.strides)}

    @classmethod
    def from_numpy(cls, array, dtype: DataType | str, device_id: int = 0, order=None) -> "DeviceArray":
        """Upload a numpy array (bfloat16: float32 values, rounded to nearest even), dense with its
        axes in memory in `order` (outermost first; default: row-major), its shape the array's."""
        dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
        order = tuple(range(array.ndim)) if order is None else tuple(order)
        if sorted(order) != list(range(array.ndim)):
            raise ValueError(f"order {order} is not a permutation of the array's {array.ndim} axes")
        raw = to_raw(array, dtype).transpose(order)
        out = cls(array.shape, dtype, device_id, dense_strides(array.shape, order))
        driver.copy_to_device(device_id, out.ptr, raw.tobytes())  # tobytes: C order of the transposed view
        return out

    def to_numpy(self):
        """Download (bfloat16 comes back as float32, exactly)."""
        import numpy as np

        raw = driver.copy_to_host(self.device_id, self.ptr, self.nbytes)
        storage = np.uint16 if self.dtype.name == "bfloat16" else np.dtype(self.dtype.name)
        flat = np.frombuffer(raw, dtype=storage)
        view = np.lib.stride_tricks.as_strided(
            flat, self.shape, tuple(s * self.dtype.bytes for s in self.strides)).copy()
        return from_raw(view, self.dtype)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device_id})"


def _span(shape, strides) -> int:
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def to_raw(array, dtype: DataType):
    """numpy values -> numpy storage of dtype (bfloat16 as uint16 bit patterns)."""
    import numpy as np

    if dtype.name != "bfloat16":
        return np.ascontiguousarray(array, dtype=np.dtype(dtype.name))
    array = np.asarray(array)
    narrow = _float32_round_to_odd(array) if array.dtype == np.float64 else array
    bits = np.ascontiguousarray(narrow, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
    nan = np.isnan(np.ascontiguousarray(narrow, dtype=np.float32))
    return np.where(nan, 0x7FC0, rounded).astype(np.uint16)


def _float32_round_to_odd(values):
    """float64 -> float32 rounding to odd (an inexact result: toward zero, last bit set), so that
    rounding that on to bfloat16 rounds as once from float64 (as cvt.rn.bf16.f64 does): float32
    keeps more than two bits beyond bfloat16's, which a tie needs."""
    import numpy as np

    values = np.ascontiguousarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = values.astype(np.float32)
        back = nearest.astype(np.float64)
        inexact = np.isfinite(values) & (back != values)
        away = inexact & (np.abs(back) > np.abs(values))
    toward_zero = np.where(away, np.nextafter(nearest, np.float32(0)), nearest).astype(np.float32)
    bits = toward_zero.view(np.uint32)
    return np.where(inexact, bits | np.uint32(1), bits).astype(np.uint32).view(np.float32)


def from_raw(raw, dtype: DataType):
    """numpy storage of dtype -> numpy values (bfloat16 widened to float32)."""
    import numpy as np

    if dtype.name != "bfloat16":
        return raw
    return (raw.astype(np.uint32) << 16).view(np.float32)


def output_allocator(torch_kind: bool, shape, strides, dtype: DataType, device_id: int):
    """A function of no arguments returning a new uninitialized output array (a PyTorch tensor
    where torch_kind, else a DeviceArray), everything it needs looked up once."""
    shape, strides = tuple(shape), tuple(strides)
    if torch_kind:
        torch = sys.modules["torch"]
        empty, empty_strided = torch.empty, torch.empty_strided
        torch_dtype, device = getattr(torch, dtype.name), torch.device("cuda", device_id)
        if strides == contiguous_strides(shape):
            return lambda: empty(shape, dtype=torch_dtype, device=device)
        return lambda: empty_strided(shape, strides, dtype=torch_dtype, device=device)
    return lambda: DeviceArray(shape, dtype, device_id, strides)


def new_output(like: ArrayInfo | None, shape, strides, dtype: DataType, device_id: int):
    """An uninitialized output array of the first input's kind."""
    return output_allocator(like is not None and like.is_torch, shape, strides, dtype, device_id)()
