"""driver.mem_alloc without a GPU (the cuda.bindings driver faked): the allocation a grid
reduction's workspace needs may come while the thread captures a stream into a CUDA graph (the
first launch on torch.cuda.graph's capture stream), where a global-mode capture forbids
cuMemAlloc; mem_alloc relaxes the thread's capture mode around the call and restores the mode it
found, also when the allocation fails."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tileproof.codegen.runtime import driver

RELAXED, GLOBAL = "relaxed", "global"


class FakeCu:
    """The driver calls mem_alloc makes, recorded; the thread's capture mode starts global."""

    def __init__(self, fail: bool = False):
        self.CUresult = SimpleNamespace(CUDA_SUCCESS=0)
        self.CUstreamCaptureMode = SimpleNamespace(CU_STREAM_CAPTURE_MODE_RELAXED=RELAXED)
        self.mode = GLOBAL
        self.calls: list[tuple] = []
        self.fail = fail

    def cuThreadExchangeStreamCaptureMode(self, mode):  # noqa: N802 - the driver's name
        self.calls.append(("exchange", mode))
        previous, self.mode = self.mode, mode
        return 0, previous

    def cuMemAlloc(self, nbytes):  # noqa: N802
        self.calls.append(("alloc", nbytes, self.mode))
        return (2, None) if self.fail else (0, 0x1000)

    def cuGetErrorString(self, err):  # noqa: N802
        return 0, b"out of memory"


@pytest.fixture
def fake_cu(monkeypatch):
    def install(fail=False):
        cu = FakeCu(fail)
        monkeypatch.setattr(driver, "driver", lambda: cu)
        monkeypatch.setattr(driver, "activate", lambda device_id: None)
        return cu
    return install


def test_the_allocation_runs_in_relaxed_capture_mode_and_the_mode_is_restored(fake_cu):
    cu = fake_cu()
    assert driver.mem_alloc(0, 4096) == 0x1000
    assert cu.calls == [("exchange", RELAXED), ("alloc", 4096, RELAXED), ("exchange", GLOBAL)]
    assert cu.mode == GLOBAL


def test_a_failed_allocation_restores_the_mode_and_says_what_failed(fake_cu):
    cu = fake_cu(fail=True)
    with pytest.raises(driver.DriverError, match="cuMemAlloc failed"):
        driver.mem_alloc(0, 1 << 40)
    assert cu.calls[-1] == ("exchange", GLOBAL) and cu.mode == GLOBAL
