"""PyTorch without a GPU: tensors read from their attributes say what DLPack says; tp.as_torch_op's
fake implementation gives the outputs' shapes, dtypes and strides (symbolic under dynamic shapes)
and run()'s InputErrors; torch.compile(fullgraph=True) traces through the operator. The GPU half
(launches, inductor, CUDA graphs) is tests/gpu/test_torch_op.py."""

from __future__ import annotations

import itertools

import pytest

import tileproof as tp
from tileproof.codegen.runtime.arrays import _from_dlpack, _from_torch, signature

from support.codegen_schedules import BUILDERS, two_outputs

pytestmark = pytest.mark.usefixtures("private_cache")
_names = itertools.count()


def unique(name: str) -> str:
    return f"tileproof_test::{name}_{next(_names)}"


torch = pytest.importorskip("torch")
FakeTensorMode = pytest.importorskip("torch._subclasses.fake_tensor").FakeTensorMode


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int64,
                                   torch.float64])
def test_a_tensor_read_directly_is_what_dlpack_says(dtype):
    base = torch.zeros(6, 10, dtype=dtype)
    for t in (base, base[1:, 2:7], base.t(), base[::2]):
        direct, exported = _from_torch(t), _from_dlpack(t, None)
        assert (direct.ptr, direct.shape, direct.strides, direct.dtype, direct.device, direct.device_id) == \
               (exported.ptr, exported.shape, exported.strides, exported.dtype, exported.device, exported.device_id)


def test_a_tensor_dlpack_refuses_is_refused_with_its_message():
    t = torch.zeros(4, requires_grad=True)
    with pytest.raises(BufferError) as direct:
        _from_torch(t)
    with pytest.raises(BufferError) as exported:
        t.__dlpack__()
    assert str(direct.value) == str(exported.value)
    kernel = tp.compile(BUILDERS["pointwise_add"]())
    with pytest.raises(tp.InputError, match=r"input T0 \(argument 0\): cannot read the array \(Can't export"):
        kernel.run(torch.zeros(4, 8, requires_grad=True), torch.zeros(4, 8))
    with pytest.raises(tp.InputError, match=r"input T0 \(argument 0\): the array is in cpu memory"):
        kernel.run(torch.zeros(4, 8), torch.zeros(4, 8))


def test_signature_changes_with_address_shape_strides_dtype_and_grad():
    t = torch.zeros(4, 8)
    keys = {signature(x) for x in (t, t[1:], t.t(), t.view(8, 4), t.to(torch.float64), t.clone(),
                                   t.clone().requires_grad_())}
    assert len(keys) == 7 and signature(t) == signature(t.view(4, 8))


def test_fake_outputs_have_the_shape_dtype_and_strides_run_allocates():
    kernel = tp.compile(BUILDERS["pointwise_add_bf16"]())
    op = tp.as_torch_op(kernel, name=unique("add"))
    with FakeTensorMode():
        a = torch.empty(5, 24, dtype=torch.bfloat16)
        out = op(a, torch.empty(5, 24, dtype=torch.bfloat16))
    assert tuple(out.shape) == (5, 24) and out.dtype == torch.bfloat16 and out.stride() == (24, 1)


def test_fake_checks_dtype_dimensions_and_equal_extents_as_run_does():
    kernel = tp.compile(BUILDERS["pointwise_add"]())
    op = tp.as_torch_op(kernel, name=unique("add"))
    with FakeTensorMode():
        a = torch.empty(4, 8)
        with pytest.raises(tp.InputError, match=r"input T1 \(argument 1\): expected dtype float32, got float64"):
            op(a, torch.empty(4, 8, dtype=torch.float64))
        with pytest.raises(tp.InputError, match=r"input T1 \(argument 1\): expected 2 dimensions, got shape \[32\]"):
            op(a, torch.empty(32))
        with pytest.raises(tp.InputError, match=r"input T1 \(argument 1\): axis 1 has size 7, expected N \(bound to "
                                                r"8 by input T0 \(argument 0\) axis 1\)"):
            op(a, torch.empty(4, 7))


def test_several_outputs_are_a_tuple():
    kernel = tp.compile(two_outputs())
    op = tp.as_torch_op(kernel, name=unique("two"))
    outs = [g for g in kernel.ir.globals if not g.is_input]
    ins = [g for g in kernel.ir.globals if g.is_input]
    with FakeTensorMode():
        args = [torch.empty([e.value for e in g.extents], dtype=getattr(torch, g.dtype.name)) for g in ins]
        result = op(*args)
    assert isinstance(result, tuple) and [tuple(r.shape) for r in result] == \
           [tuple(e.value for e in g.extents) for g in outs]


def recording_backend(graphs):
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend


def ops_called(gm) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph_traces_through_the_operator(dynamic):
    kernel = tp.compile(BUILDERS["pointwise_add"]())
    name = unique("add")
    op = tp.as_torch_op(kernel, name=name)
    graphs = []
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: op(a, b) * 2, fullgraph=True, dynamic=dynamic,
                             backend=recording_backend(graphs))
    with pytest.raises(tp.InputError, match="in cpu memory"):  # traced, then run: CPU tensors reach run()
        compiled(torch.zeros(4, 8), torch.zeros(4, 8))
    (gm,) = graphs
    assert f"{name.replace('::', '.')}.default" in ops_called(gm)
    node = next(n for n in gm.graph.nodes if str(n.target).startswith(name.replace("::", ".")))
    shape = node.meta["example_value"].shape
    a_shape = next(n.meta["example_value"].shape for n in gm.graph.nodes if n.op == "placeholder"
                   and isinstance(n.meta.get("example_value"), torch.Tensor))
    assert shape == a_shape and (not dynamic or not isinstance(shape[0], int))


def test_names_are_checked_and_a_name_is_one_kernel():
    kernel = tp.compile(BUILDERS["pointwise_add"]())
    name = unique("add")
    op = tp.as_torch_op(kernel, name=name)
    assert tp.as_torch_op(kernel, name=name) is op
    assert getattr(torch.ops.tileproof_test, name.split("::")[1]).default is op
    with pytest.raises(tp.InputError, match="already names an operator of another kernel"):
        tp.as_torch_op(tp.compile(BUILDERS["pointwise_add_f16"]()), name=name)
    with pytest.raises(tp.InputError, match="must be an identifier"):
        tp.as_torch_op(kernel, name="my lib::add")
    with pytest.raises(tp.InputError, match="expected a tp.Kernel"):
        tp.as_torch_op(lambda a: a)
    default = tp.as_torch_op(kernel)
    assert str(default).startswith(f"tileproof.{kernel.name}_")


def _named_add(a: str | None, b: str | None):
    """out = a + b over N, 128 threads a block, the inputs named a and b (None: unnamed)."""
    with tp.Fusion("named_add") as fusion:
        ta = tp.make_tensor(["N"], name=a); fusion.add_input(ta)
        tb = tp.make_tensor(["N"], name=b); fusion.add_input(tb)
        tc = tp.add(ta, tb); fusion.add_output(tc)
    tc.split(0, 128); tc.axis(0).parallelize(tp.ParallelType.BIDx); tc.axis(1).parallelize(tp.ParallelType.TIDx)
    return tp.compile(fusion)


@pytest.mark.parametrize("names, arguments", [(("x", "bias"), ["x", "bias"]), (("x", None), ["x", "T1"]),
                                              (("lambda", "b"), ["T0", "b"])])  # a keyword stays T<n>
def test_named_inputs_are_the_schemas_argument_names(names, arguments):
    op = tp.as_torch_op(_named_add(*names), name=unique("named_add"))
    assert [a.name for a in op._schema.arguments] == arguments
    with FakeTensorMode():
        x = torch.empty([300])
        assert tuple(op(**dict(zip(arguments, (x, x)))).shape) == (300,)
