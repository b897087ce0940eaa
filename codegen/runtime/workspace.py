"""The global memory a grid reduction's launch needs besides its inputs and outputs
(execution/grid_reduction.py): a workspace for the blocks' partials and 32-bit semaphores.

One pair of buffers per (GPU, stream), kept by the Kernel and grown as sizes need: launches on one
stream run one after the other, so they may share them, and launches on different streams get
their own. The semaphores are zeroed when allocated, on the launch's stream; each launch's last
blocks return every semaphore they used to 0 (REDUCTION-GRID-WORKSPACE proves each is counted to
its segment's blocks and no further), so the next launch finds them zero again. Each parameter
gets its own 256-byte aligned slice. A first launch on a stream being captured into a CUDA graph
allocates that stream's buffers during the capture (driver.mem_alloc relaxes the capture mode)
and its zeroing of the semaphores becomes a node of the graph, run before the kernel at each
replay.
"""

from __future__ import annotations

from ...model.expr import evaluate
from ...model.types import int8
from ..ir import Param, ParamKind
from . import driver
from .arrays import DeviceArray

ALIGN = 256
SEMAPHORE_BYTES = 4


def _bytes(p: Param, env: dict[str, int]) -> int:
    size = p.dtype.bytes if p.kind is ParamKind.WORKSPACE else SEMAPHORE_BYTES
    return -(-max(evaluate(p.elements, env) * size, 1) // ALIGN) * ALIGN


class Workspaces:
    """The workspace and semaphore buffers of one kernel, per (device, stream)."""

    def __init__(self, params: list[Param]):
        self.params = [p for p in params if p.kind in (ParamKind.WORKSPACE, ParamKind.SEMAPHORES)]
        self._buffers: dict[tuple[int, int], dict[ParamKind, DeviceArray]] = {}
        self.generation = 0  # counts reallocations: a launch prepared before one holds freed addresses

    def pointers(self, env: dict[str, int], device_id: int, stream: int) -> dict[str, int]:
        """Parameter name -> device address, for one launch at sizes `env` on `stream`."""
        if not self.params:
            return {}
        held = self._buffers.setdefault((device_id, stream), {})
        out = {}
        for kind in (ParamKind.WORKSPACE, ParamKind.SEMAPHORES):
            params = [p for p in self.params if p.kind is kind]
            sizes = [_bytes(p, env) for p in params]
            buf = held.get(kind)
            if buf is None or buf.nbytes < sum(sizes):
                if buf is not None:  # a launch queued on the stream may still use it
                    driver.stream_synchronize(stream)
                buf = held[kind] = DeviceArray([sum(sizes)], int8, device_id)
                self.generation += 1
                if kind is ParamKind.SEMAPHORES:
                    driver.memset_zero_async(buf.ptr, buf.nbytes, stream)
            offset = 0
            for p, n in zip(params, sizes):
                out[p.name] = buf.ptr + offset
                offset += n
        return out


__all__ = ["Workspaces"]
