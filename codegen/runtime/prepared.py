"""A launch prepared once per argument signature: the kernel's arguments packed as the driver
reads them (an array of pointers to each parameter's bytes), with the function, grid, block,
shared memory and stream, so that a repeated run() costs one cuLaunchKernel.

What a launch's arguments depend on (each array's address, shape, strides, dtype and device,
the sizes, the stream) is the key the Kernel keeps a PreparedLaunch under (codegen/compile.py).
Outputs that run() allocates get a new address at every call: OutputSlot allocates one and
writes its address (and its tensor maps, encoded once per address) into the packed arguments
before the launch, under a lock, since the driver copies the arguments when the launch is
issued and not later.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

from . import driver

MAPS_PER_SLOT = 16  # tensor maps kept per output, one per address the allocator handed out


class OutputSlot:
    """An output run() allocates: how to allocate it, which parameters hold its address
    (pointer parameters) and which a tensor map of it (encode: address -> CUtensorMap)."""

    def __init__(self, allocate: Callable[[], Any], pointer_params: list[int],
                 map_params: list[tuple[int, Callable[[int], Any]]]):
        self.allocate = allocate
        self.pointer_params = pointer_params
        self.map_params = map_params
        self._maps: dict[tuple[int, int], Any] = {}

    def tensor_map(self, k: int, encode: Callable[[int], Any], address: int):
        key = (k, address)
        tmap = self._maps.get(key)
        if tmap is None:
            if len(self._maps) >= MAPS_PER_SLOT * max(len(self.map_params), 1):
                self._maps.clear()
            tmap = self._maps[key] = encode(address)
        return tmap


def address_of(array) -> int:
    """The device address of an output run() allocated (a PyTorch tensor or a DeviceArray)."""
    ptr = getattr(array, "ptr", None)
    return ptr if isinstance(ptr, int) else array.data_ptr()


class PreparedLaunch:
    """One kernel launch with its arguments packed: launch() issues it as packed;
    launch_new_outputs() first allocates the outputs and writes their addresses in."""

    def __init__(self, function, grid: tuple, block: tuple, smem: int, stream: int, device_id: int,
                 args: list[tuple[Any, Any]], outputs: list[OutputSlot] | None,
                 explain: Callable[[Exception], Exception], generation: int = 0, cooperative: bool = False,
                 dependent: bool = False):
        self.function, self.grid, self.block, self.smem = function, grid, block, smem
        self.cooperative = cooperative  # cuLaunchCooperativeKernel: a grid barrier's blocks all resident
        # Fusion.dependent_launch: cuLaunchKernelEx's configuration, built once (a cooperative launch stays one)
        self._config = driver.dependent_launch_config(grid, block, smem, stream) \
            if dependent and not cooperative else None
        self.stream, self.device_id = stream, device_id
        self.outputs = outputs
        self.generation = generation  # the kernel's workspaces when packed (Workspaces.generation)
        self._explain = explain
        self._cells: list[Any] = [None] * len(args)  # each parameter's bytes, kept alive here
        self._pointers = (ctypes.c_void_p * max(len(args), 1))()
        for k, (value, ctype) in enumerate(args):
            self._set(k, value, ctype)
        self.address = ctypes.addressof(self._pointers)
        self._lock = threading.Lock()

    def _set(self, k: int, value, ctype) -> None:
        if ctype is None:  # a CUtensorMap, passed by value: its 128 bytes are where getPtr() points
            self._cells[k] = value
            self._pointers[k] = int(value.getPtr())
        else:
            cell = self._cells[k] = ctype(value)
            self._pointers[k] = ctypes.addressof(cell)

    def launch(self) -> None:
        try:
            if self._config is not None:
                driver.launch_packed_config(self.device_id, self.function, self._config, self.address)
            else:
                driver.launch_packed(self.device_id, self.function, self.grid, self.block, self.smem, self.stream,
                                     self.address, self.cooperative)
        except driver.DriverError as e:
            raise self._explain(e) from None

    def launch_new_outputs(self) -> tuple:
        """Allocate the outputs, write their addresses into the arguments, launch; the outputs."""
        arrays = tuple([slot.allocate() for slot in self.outputs])
        with self._lock:
            for slot, array in zip(self.outputs, arrays):
                address = address_of(array)
                for k in slot.pointer_params:
                    self._cells[k].value = address
                for k, encode in slot.map_params:
                    self._set(k, slot.tensor_map(k, encode, address), None)
            self.launch()
        return arrays


__all__ = ["OutputSlot", "PreparedLaunch", "address_of"]
