"""A global intermediate written by a TMA store and read back (GLOBAL-INTERMEDIATE accepts it,
tests/rules/test_tma_store_read_back.py) launches without a GPU (the driver faked,
tests/support/fake_driver.py): the runtime allocates its buffer as a workspace, the kernel's
pointer to it and its TMA store's tensor map name the same address."""

from __future__ import annotations

import pytest

import tileproof as tp

from support.fake_driver import FakeDriver
from support.tma_read_back import read_back

pytestmark = pytest.mark.usefixtures("private_cache")


class Array:
    """A __cuda_array_interface__ array at a chosen (fake) address."""

    def __init__(self, shape, address=1 << 40, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (address, False),
                                         "version": 3, "strides": None}


def read_back_kernel():
    return tp.compile(read_back("read_back_launch", blocks="same"), "sm_90a")


def test_the_tma_store_writes_the_buffer_the_kernel_reads(monkeypatch):
    kernel = read_back_kernel()
    (work,) = [p for p in kernel.ir.params if p.kind.value == "workspace" and p.tensor == "T2"]
    assert work.storage and work.name == "T2"
    fake = FakeDriver(monkeypatch, kernel.ir.params)
    for n in (1000, 5003):
        kernel.run(Array((n,)))
    for launch in fake.launches:
        assert launch.args["tmap_T2"] == launch.args["T2"]  # the map's global address is the workspace's
    assert launch.args["T2"] % 256 == 0
