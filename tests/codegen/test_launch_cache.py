"""Kernel.run's launch cache without a GPU (the driver faked, tests/support/fake_driver.py): a
repeated call with the same argument signature reuses the packed launch; a change of shape,
strides, sizes or stream prepares a new one; arrays at new addresses of a known signature are
rebased from it (runtime/rebase.py: their pointers and tensor maps written, the address checks
made again); outputs run() allocates get a new address in every launch (and a tensor map of it);
bad inputs get the same InputErrors before and after a launch was cached, rebased or not."""

from __future__ import annotations

from pathlib import Path

import pytest

import tileproof as tp
from tileproof.codegen.compile import LAUNCH_CACHE_SIZE, Kernel
from tileproof.codegen.runtime.arrays import signature
from tileproof.schedule_files import discover

from support.codegen_schedules import BUILDERS, strided_input
from support.fake_driver import FakeDriver

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("private_cache")


class Array:
    """A __cuda_array_interface__ array at a chosen (fake) address."""

    def __init__(self, shape, address=1 << 40, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (address, False),
                                         "version": 3, "strides": strides}


@pytest.fixture
def counted(monkeypatch):
    """The full bindings made (Kernel._prepare_launch calls), as a list of their sizes."""
    calls = []
    original = Kernel._prepare_launch

    def prepare(self, inputs, out, stream, sizes):
        calls.append(stream)
        return original(self, inputs, out, stream, sizes)

    monkeypatch.setattr(Kernel, "_prepare_launch", prepare)
    return calls


def add_kernel(monkeypatch):
    kernel = tp.compile(BUILDERS["pointwise_add"]())
    return kernel, FakeDriver(monkeypatch, kernel.ir.params)


def pointer_param(kernel, tensor=None):
    """The pointer parameter of `tensor` (default: the first output)."""
    tensor = tensor or next(g.name for g in kernel.ir.globals if not g.is_input)
    return next(p.name for p in kernel.ir.params if p.tensor == tensor and p.kind.value == "tensor")


def test_same_signature_launches_the_packed_arguments_again(monkeypatch, counted):
    kernel, fake = add_kernel(monkeypatch)
    a, b, c = Array((4, 8), 1 << 40), Array((4, 8), 2 << 40), Array((4, 8), 3 << 40)
    for _ in range(3):
        assert kernel.run(a, b, out=[c]) == (c,)
    assert len(counted) == 1 and len(fake.launches) == 3
    assert fake.launches[0] == fake.launches[2]
    args = fake.launches[2].args
    assert args[pointer_param(kernel, "T0")] == 1 << 40 and args[pointer_param(kernel)] == 3 << 40
    assert set(args.values()) >= {4, 8}  # M and N


def test_a_new_shape_or_stream_prepares_a_new_launch_and_a_new_address_is_rebased(monkeypatch, counted):
    kernel, fake = add_kernel(monkeypatch)
    c = Array((4, 8), 3 << 40)
    kernel.run(Array((4, 8), 1 << 40), Array((4, 8), 2 << 40), out=[c])
    kernel.run(Array((4, 8), 5 << 40), Array((4, 8), 2 << 40), out=[c])  # another address: rebased, not bound
    assert fake.launches[-1].args[pointer_param(kernel, "T0")] == 5 << 40
    assert len(counted) == 1
    assert {k: v for k, v in fake.launches[-1].args.items() if k != pointer_param(kernel, "T0")} == \
        {k: v for k, v in fake.launches[0].args.items() if k != pointer_param(kernel, "T0")}
    kernel.run(Array((6, 8), 5 << 40), Array((6, 8), 2 << 40), out=[Array((6, 8), 3 << 40)])  # another shape
    assert sorted(fake.launches[-1].args.values())[:2] == [6, 8]  # M, N
    kernel.run(Array((6, 8), 5 << 40), Array((6, 8), 2 << 40), out=[Array((6, 8), 3 << 40)], stream=7)
    assert fake.launches[-1].stream == 7
    assert len(counted) == 3 and len(fake.launches) == 4
    kernel.run(Array((4, 8), 1 << 40), Array((4, 8), 2 << 40), out=[c])  # the first signature again: cached
    assert len(counted) == 3 and fake.launches[-1] == fake.launches[0]


def test_an_input_at_a_new_address_every_call_keeps_the_caches_bounded(monkeypatch, counted):
    """split-K's sum kernel reads partials run() allocates anew at each call: a new address (and
    with a symbolic kernel, new sizes) every call must not grow a kernel's caches without bound,
    and each launch reads the address it was given."""
    kernel, fake = add_kernel(monkeypatch)
    b, c = Array((4, 8), 2 << 40), Array((4, 8), 3 << 40)
    for k in range(2 * LAUNCH_CACHE_SIZE + 1):
        kernel.run(Array((4, 8), (8 + k) << 32), b, out=[c])
        assert fake.launches[-1].args[pointer_param(kernel, "T0")] == (8 + k) << 32
    assert len(counted) == 1  # bound once, every other address rebased
    assert len(kernel._launches) <= LAUNCH_CACHE_SIZE and len(kernel._templates) == 1
    for m in range(1, 2 * LAUNCH_CACHE_SIZE + 2):  # the sizes checked once each
        kernel._config({"M": m, "N": 8})
    assert 0 < len(kernel._checked) <= LAUNCH_CACHE_SIZE


def test_a_new_stride_prepares_a_new_launch(monkeypatch, counted):
    kernel = tp.compile(strided_input())
    fake = FakeDriver(monkeypatch, kernel.ir.params)
    stride = next(p.name for p in kernel.ir.params if p.kind.value == "stride")
    out = Array((16, 48), 3 << 40)
    kernel.run(Array((16, 48), strides=(64 * 4, 4)), out=[out])
    kernel.run(Array((16, 48), strides=(64 * 4, 4)), out=[out])
    kernel.run(Array((16, 48), strides=(96 * 4, 4)), out=[out])
    assert len(counted) == 2
    assert [launch.args[stride] for launch in fake.launches] == [64, 64, 96]


def test_allocated_outputs_get_a_new_address_in_every_launch(monkeypatch, counted):
    kernel, fake = add_kernel(monkeypatch)
    a, b = Array((4, 8), 1 << 40), Array((4, 8), 2 << 40)
    outs = [kernel.run(a, b)[0] for _ in range(3)]
    assert len(counted) == 1
    assert all(o.shape == (4, 8) and o.dtype == tp.float32 for o in outs)
    assert [launch.args[pointer_param(kernel)] for launch in fake.launches] == [o.ptr for o in outs]
    assert len({o.ptr for o in outs}) == 3


def test_an_allocated_tma_output_gets_a_tensor_map_of_its_address(monkeypatch, counted):
    case = next(c for c in discover([str(ROOT / "examples" / "valid" / "tma_boxes.py")]) if c.name == "tma_store")
    kernel = tp.compile(case.build(), "sm_90a")
    fake = FakeDriver(monkeypatch, kernel.ir.params)
    tmap = next(p.name for p in kernel.ir.params if p.kind.value == "tensor_map" and p.tensor == "T2")
    x = Array((256, 512), 1 << 40, typestr="<f2")
    outs = [kernel.run(x)[0] for _ in range(3)]
    assert len(counted) == 1
    assert [launch.args[tmap] for launch in fake.launches] == [o.ptr for o in outs]
    assert sorted(set(fake.encoded)) == sorted({o.ptr for o in outs})


def test_workspace_reallocation_prepares_a_new_launch(monkeypatch, counted):
    kernel, fake = add_kernel(monkeypatch)
    a, b, c = Array((4, 8), 1 << 40), Array((4, 8), 2 << 40), Array((4, 8), 3 << 40)
    kernel.run(a, b, out=[c])
    kernel._workspaces.generation += 1  # as a grown workspace does: the packed addresses are stale
    kernel.run(a, b, out=[c])
    kernel.run(a, b, out=[c])
    assert len(counted) == 2


def test_prepared_is_the_launch_run_keeps_and_is_current_until_the_workspaces_change(monkeypatch, counted):
    kernel, fake = add_kernel(monkeypatch)
    a, b, c = Array((4, 8), 1 << 40), Array((4, 8), 2 << 40), Array((4, 8), 3 << 40)
    kernel.run(a, b, out=[c])
    prepared = kernel.prepared(a, b, out=[c])
    assert len(counted) == 1 and kernel.current(prepared)
    prepared.launch()
    assert fake.launches[-1] == fake.launches[0]
    moved = kernel.prepared(Array((4, 8), 5 << 40), b, out=[c])  # not run before: rebased, not launched
    assert len(fake.launches) == 2 and len(counted) == 1
    moved.launch()
    assert fake.launches[-1].args[pointer_param(kernel, "T0")] == 5 << 40
    kernel._workspaces.generation += 1  # as a grown workspace does
    assert not kernel.current(prepared)
    assert kernel.current(kernel.prepared(a, b, out=[c])) and len(counted) == 2


def test_bad_inputs_get_the_same_input_errors_after_a_cached_launch(monkeypatch):
    kernel, _ = add_kernel(monkeypatch)
    a, b, c = Array((4, 8), 1 << 40), Array((4, 8), 2 << 40), Array((4, 8), 3 << 40)
    kernel.run(a, b, out=[c])
    with pytest.raises(tp.InputError, match=r"input T1 \(argument 1\): axis 1 has size 7, expected N \(bound to 8"):
        kernel.run(a, Array((4, 7), 2 << 40), out=[c])
    with pytest.raises(tp.InputError, match=r"input T1 \(argument 1\): expected dtype float32, got float64"):
        kernel.run(a, Array((4, 8), 2 << 40, typestr="<f8"), out=[c])
    with pytest.raises(tp.InputError, match="out\\[0\\] is the same memory as input argument 0"):
        kernel.run(a, b, out=[Array((4, 8), 1 << 40)])
    with pytest.raises(tp.InputError, match="takes 2 inputs"):
        kernel.run(a)
    with pytest.raises(tp.InputError, match="DLPack or __cuda_array_interface__"):
        kernel.run(a, [[0.0] * 8] * 4, out=[c])
    with pytest.raises(tp.InputError, match="unknown extent 'K'"):
        kernel.run(a, b, out=[c], K=3)
    with pytest.raises(tp.InputError, match="extent M must be a positive int"):
        kernel.run(a, b, out=[c], M=[4])


def test_a_rebased_launch_checks_what_depends_on_the_address(monkeypatch, counted):
    """A misaligned address of a known signature gets the full binding's InputError; an out= at an
    input's address is refused; a TMA input at a new address gets a tensor map of it; a dependent
    kernel's rebased launch stays a dependent launch."""
    kernel = tp.compile(BUILDERS["vectorized_copy"]())
    fake = FakeDriver(monkeypatch, kernel.ir.params)
    out = Array((4, 8), 3 << 40)
    kernel.run(Array((4, 8), 1 << 40), out=[out])
    with pytest.raises(tp.InputError, match=r"its address is not 16-byte aligned"):
        kernel.run(Array((4, 8), (1 << 40) + 4), out=[out])
    with pytest.raises(tp.InputError, match=r"out\[0\] is the same memory as input argument 0"):
        kernel.run(Array((4, 8), 3 << 40), out=[out])
    assert len(counted) == 1 and len(fake.launches) == 1

    case = next(c for c in discover([str(ROOT / "examples" / "valid" / "tma_boxes.py")])
                if c.name == "tma_box_by_partitioning")
    fusion = case.build()
    fusion.dependent_launch = True
    kernel = tp.compile(fusion, "sm_90a")
    fake = FakeDriver(monkeypatch, kernel.ir.params)
    loaded = next(m.tensor for m in kernel.ir.tensor_maps)
    tmap = next(p.name for p in kernel.ir.params if p.kind.value == "tensor_map" and p.tensor == loaded)
    shape = (256, 512)
    results = [kernel.run(Array(shape, (k + 1) << 40))[0] for k in range(3)]
    assert len(counted) == 2 and len(results) == 3
    assert [launch.args[tmap] for launch in fake.launches] == [(k + 1) << 40 for k in range(3)]
    assert all(launch.dependent for launch in fake.launches)


def test_signature_is_none_for_what_is_no_array():
    assert signature([1.0, 2.0]) is None
    assert signature(Array((2, 3), 1 << 40)) == (1 << 40, (2, 3), (3, 1), "float32", "cuda", None)
