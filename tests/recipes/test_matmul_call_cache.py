"""Matmul's call cache without a GPU (the driver faked, tests/support/fake_driver.py; CPU tensors
stand in for CUDA ones): a call whose tensors have the signature of an earlier call (type, shape,
strides, dtype, device) skips the checks and the choice but launches what the first call
launched, re-checks the addresses every call, and a bad operand after a good call gets exactly
the InputError a fresh Matmul gives it (the cache never skips a check that could fail)."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.codegen import compile as compile_module
from tileproof.codegen.runtime import binding, driver
from tileproof.recipes import Matmul, matmul
from tileproof.recipes.params import EpilogueOps

from support.fake_driver import FakeDriver

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("private_cache")
SPLIT_K = (16, 24, 1024)  # M, N, K: the estimate picks split-K (two kernels)
PERSISTENT = (128, 256, 64)  # one persistent kernel, clusters of 2


@pytest.fixture
def fake(monkeypatch):
    """The faked driver, each launch's parameters read by its kernel's IR, CPU outputs, every
    operand's device accepted."""
    fake = FakeDriver(monkeypatch)
    record = fake._launch

    def launch(device_id, function, *rest):
        fake.params = function.ir.params  # the function load() made: its kernel
        record(device_id, function, *rest)

    def allocator(torch_kind, shape, strides, dtype, device_id):
        return lambda: torch.empty_strided(tuple(shape), tuple(strides), dtype=getattr(torch, dtype.name))

    def load(cubin, name, device_id):
        return "module", next(k for k in compile_module._memory.values() if k.cubin is cubin)

    monkeypatch.setattr(driver, "launch_packed", launch)
    monkeypatch.setattr(driver, "load_function", load)
    monkeypatch.setattr(driver, "resident_blocks", lambda *args: 132)
    monkeypatch.setattr(driver, "resident_clusters", lambda *args: 66)
    monkeypatch.setattr(binding, "check_device", lambda g, info, position, device_id: 0)
    monkeypatch.setattr(compile_module, "output_allocator", allocator)
    return fake


def operands(m, n, k, weight=True):
    """A [M, K] row-major and B [K, N]: the .t() of a weight [N, K], or row-major."""
    a = torch.randn(m, k).bfloat16()
    b = torch.randn(n, k).bfloat16().t() if weight else torch.randn(k, n).bfloat16()
    return a, b


def counted_plans(monkeypatch) -> list:
    """The full checks made (Matmul._plan calls)."""
    calls = []
    original = Matmul._plan

    def plan(self, a, b, terms):
        calls.append(tuple(a.shape))
        return original(self, a, b, terms)

    monkeypatch.setattr(Matmul, "_plan", plan)
    return calls


@pytest.mark.parametrize("shape,launches", [(SPLIT_K, 2), (PERSISTENT, 1)])
def test_a_repeated_signature_launches_what_the_first_call_did(fake, monkeypatch, shape, launches):
    plans = counted_plans(monkeypatch)
    entry = Matmul()
    a, b = operands(*shape)
    for _ in range(3):
        d = entry(a, b)
        assert tuple(d.shape) == shape[:2]
    assert len(plans) == 1 and len(fake.launches) == 3 * launches
    first, again = fake.launches[:launches], fake.launches[-launches:]
    assert [(x.grid, x.block, x.smem) for x in first] == [(x.grid, x.block, x.smem) for x in again]
    read = {a.data_ptr(), b.data_ptr()}  # the addresses in A's and B's tensor maps
    assert read <= set(first[0].args.values()) and read <= set(again[0].args.values())
    c, w = operands(*shape)  # the same signature at other addresses: the maps of those
    entry(c, w)
    assert len(plans) == 1 and {c.data_ptr(), w.data_ptr()} <= set(fake.launches[-launches].args.values())


def test_the_views_are_the_ones_the_checks_made(fake):
    entry = Matmul()
    a, b = operands(*SPLIT_K)
    entry(a, b)
    (plan,) = entry._plans.values()
    splits = entry.choice("K", "K", *SPLIT_K, 132).splits
    from tileproof.recipes.split_k import split_k_operands

    for view, made in zip((a.as_strided(*plan.a_view), b.as_strided(*plan.b_view)), split_k_operands(a, b, splits)):
        assert view.shape == made.shape and view.stride() == made.stride() and view.data_ptr() == made.data_ptr()
        assert torch.equal(view, made)


def unaligned(t):
    """t's values 2 bytes further in: the same shape, strides, dtype and device, a misaligned start."""
    flat = torch.empty(t.numel() + 8, dtype=t.dtype)[1:1 + t.numel()]
    return flat.as_strided(t.shape, t.stride()).copy_(t)


def test_a_cached_signature_checks_the_addresses_every_call(fake, monkeypatch):
    plans = counted_plans(monkeypatch)
    entry = Matmul()
    a, b = operands(*PERSISTENT)
    entry(a, b)
    for bad_a, bad_b, name in ((unaligned(a), b, "A"), (a, unaligned(b), "B")):
        with pytest.raises(tp.InputError, match=f"{name} does not start at a 16-byte aligned address"):
            entry(bad_a, bad_b)
    assert len(plans) == 1  # the signature was cached: only the addresses were checked
    entry(a, b)
    assert len(fake.launches) == 2


def same_error(warm, fresh, *args) -> str:
    """The InputError a Matmul that ran a good call (warm) gives args, which must be what a
    Matmul that never ran (fresh) gives."""
    with pytest.raises(tp.InputError) as was_fresh:
        fresh(*args)
    with pytest.raises(tp.InputError) as was_warm:
        warm(*args)
    assert str(was_warm.value) == str(was_fresh.value)
    return str(was_warm.value)


def test_bad_operands_after_a_good_call_get_the_fresh_entry_s_errors(fake):
    warm = Matmul()
    a, b = operands(*PERSISTENT)
    warm(a, b)
    m, n, k = PERSISTENT
    strided = torch.zeros(m, 2 * k, dtype=torch.bfloat16)[:, ::2]  # A's shape, not dense
    cases = {
        "has strides [128, 2]; it must be dense": (strided, b),
        "A must be bfloat16, got float32": (a.float(), b),
        "B must be bfloat16, got float16": (a, b.half()),
        "A is on meta and B on cpu": (torch.empty(m, k, dtype=torch.bfloat16, device="meta"), b),
        "A must be a torch.Tensor, got list": (a.tolist(), b),
        "B must be 2-D": (a, b[None]),
        "cannot read the array": (a.clone().requires_grad_(), b),  # run()'s binding: a view that needs a gradient
    }
    for message, args in cases.items():
        assert message in same_error(warm, Matmul(), *args)
    assert len(fake.launches) == 1


def test_bad_terms_after_a_good_call_get_the_fresh_entry_s_errors(fake):
    ops = EpilogueOps(bias="column", residual=True)
    warm = Matmul(epilogue=ops)
    m, n, k = PERSISTENT
    a, b = operands(*PERSISTENT)
    bias, residual = torch.randn(n), torch.randn(m, n).bfloat16()
    warm(a, b, bias, residual)
    cases = {
        "bias must be float32 or the output's bfloat16, got int32": (a, b, bias.int(), residual),
        "residual [M, N] has strides [1, 128]; it must be row-major": (a, b, bias, residual.t().contiguous().t()),
        "residual must be the output's bfloat16, got float32": (a, b, bias, residual.float()),
        "takes 4 tensors (a, b, bias, residual), got 3": (a, b, bias),
        "bias is on meta and A on cpu": (a, b, torch.empty(n, device="meta"), residual),
    }
    for message, args in cases.items():
        assert message in same_error(warm, Matmul(epilogue=ops), *args)
    half_bias = bias.bfloat16()  # widened to float32 at every call, the cached one too
    warm(a, b, half_bias, residual)
    warm(a, b, half_bias, residual)
    assert len(fake.launches) == 3


def test_the_call_s_arguments_are_checked_after_a_cached_call(fake):
    a, b = operands(*PERSISTENT)
    matmul(a, b, specialize=True)
    with pytest.raises(tp.InputError, match="specialize must be True or False, got 1"):
        matmul(a, b, specialize=1)
    with pytest.raises(tp.InputError, match="out_dtype must be one of"):
        matmul(a, b, out_dtype="int8")
    with pytest.raises(tp.InputError, match="config must be None"):
        matmul(a, b, config="huge")
    with pytest.raises(tp.InputError, match="config must be None"):
        matmul(a, b, config=["unhashable"])


def test_a_compiled_set_the_lru_dropped_is_compiled_again(fake):
    entry = Matmul(cache_size=1)
    a, b = operands(*PERSISTENT)
    c, w = operands(*SPLIT_K)
    entry(a, b)
    entry(c, w)  # drops the persistent set
    assert len(entry._kernels) == 1
    entry(a, b)
    assert len(entry._kernels) == 1 and len(fake.launches) == 4
