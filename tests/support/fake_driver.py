"""A stand-in for the CUDA driver (codegen/runtime/driver.py) that records every launch with its
packed arguments read back from memory, so that run()'s binding, launch cache and output
allocation can be tested without a GPU. Device memory is fake addresses; nothing runs."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from types import SimpleNamespace

from tileproof.codegen.ir import ParamKind
from tileproof.codegen.runtime import driver, tensor_maps

FIRST_ADDRESS = 1 << 44
ALLOCATION_ALIGN = 512


class FakeTensorMap:
    """What cuTensorMapEncodeTiled returns, holding the global address it was encoded for (the
    driver reads a map's bytes at getPtr(); here they are that address)."""

    def __init__(self, address: int, sizes, strides):
        self.cell = ctypes.c_uint64(address)
        self.sizes, self.strides = list(sizes), list(strides)

    def getPtr(self) -> int:  # noqa: N802 - cuda-python's name
        return ctypes.addressof(self.cell)


@dataclass
class Launch:
    """One cuLaunchKernel (cuLaunchCooperativeKernel where `cooperative`): the configuration and
    each parameter's value as the kernel reads it (a pointer or scalar; a tensor map's global address)."""

    grid: tuple
    block: tuple
    smem: int
    stream: int
    args: dict[str, int]
    cooperative: bool = False
    dependent: bool = False  # cuLaunchKernelEx with programmatic stream serialization (Fusion.dependent_launch)


class FakeDriver:
    """monkeypatches the driver functions run() reaches; `launches` lists what was launched,
    `encoded` the tensor maps encoded (their global addresses), `bindings` the full bindings."""

    def __init__(self, monkeypatch, params=()):
        self.launches: list[Launch] = []
        self.encoded: list[int] = []
        self.params = list(params)
        self._next = FIRST_ADDRESS
        cu = SimpleNamespace(
            CUresult=SimpleNamespace(CUDA_SUCCESS=0), cuuint64_t=int, cuuint32_t=int,
            CUtensorMapDataType=int, CUtensorMapInterleave=int, CUtensorMapSwizzle=int,
            CUtensorMapL2promotion=int, CUtensorMapFloatOOBfill=int, cuTensorMapEncodeTiled=self._encode)
        for name, value in (("driver", lambda: cu), ("capability", lambda device_id: (9, 0)),
                            ("device_name", lambda device_id: "fake"), ("pointer_device", lambda ptr: 0),
                            ("load_function", lambda cubin, name, device_id: ("module", name)),
                            ("allow_dynamic_smem", lambda function, n: None), ("activate", lambda device_id: None),
                            ("launch_packed", self._launch), ("mem_alloc", self._alloc),
                            ("dependent_launch_config", lambda grid, block, smem, stream: (grid, block, smem, stream)),
                            ("launch_packed_config", self._launch_config),
                            ("mem_free", lambda device_id, ptr: None),
                            ("memset_zero_async", lambda ptr, n, stream: None),
                            ("stream_synchronize", lambda stream: None)):
            monkeypatch.setattr(driver, name, value)
        monkeypatch.setattr(tensor_maps, "driver", lambda: cu)

    def _alloc(self, device_id: int, nbytes: int) -> int:
        address = self._next
        self._next += -(-nbytes // ALLOCATION_ALIGN) * ALLOCATION_ALIGN
        return address

    def _encode(self, dtype, rank, address, sizes, strides, box, element_strides, *modes):
        self.encoded.append(address)
        return 0, FakeTensorMap(address, sizes, strides)

    def _launch(self, device_id, function, grid, block, smem, stream, params_address, cooperative=False) -> None:
        pointers = (ctypes.c_void_p * max(len(self.params), 1)).from_address(params_address)
        args = {}
        for k, p in enumerate(self.params):
            if p.kind in (ParamKind.EXTENT, ParamKind.STRIDE):
                cell = ctypes.c_uint32 if p.ctype == "unsigned" else ctypes.c_uint64
            else:  # pointers, and a tensor map's first 8 bytes (its global address here)
                cell = ctypes.c_uint64
            args[p.name] = cell.from_address(pointers[k]).value
        self.launches.append(Launch(tuple(grid), tuple(block), smem, stream, args, cooperative))

    def _launch_config(self, device_id, function, config, params_address) -> None:
        grid, block, smem, stream = config
        self._launch(device_id, function, grid, block, smem, stream, params_address)
        self.launches[-1].dependent = True
