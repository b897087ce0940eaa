"""The public surface: an explicit, sorted __all__, documented names, one error root."""

from __future__ import annotations

import __future__
import builtins
import inspect
import pickle
import pydoc
import types

import pytest
import sympy

import tileproof as tp
from tileproof.cli import UsageError
from tileproof.codegen.runtime.driver import DriverError
from tileproof.schedule_files import LoadError

# The names nvFuser gives that would shadow a Python builtin: attributes, not star-imported.
SHADOWING = {"abs", "bool", "compile", "max", "min", "pow", "set", "sum"}

PUBLIC = sorted(set(tp.__all__) | SHADOWING)
EXCEPTIONS = [getattr(tp, name) for name in PUBLIC if inspect.isclass(getattr(tp, name))
              and issubclass(getattr(tp, name), BaseException) and not issubclass(getattr(tp, name), Warning)]


def test_all_is_sorted_and_resolves():
    assert tp.__all__ == sorted(tp.__all__)
    assert len(set(tp.__all__)) == len(tp.__all__)
    for name in PUBLIC:
        assert hasattr(tp, name), name


def test_every_public_name_is_in_all_or_shadows_a_builtin():
    public = {n for n in dir(tp) if not n.startswith("_") and not isinstance(getattr(tp, n), types.ModuleType)}
    assert public - set(tp.__all__) == SHADOWING


def test_no_modules_future_features_or_internals_leak():
    for name in tp.__all__:
        obj = getattr(tp, name)
        assert not isinstance(obj, types.ModuleType), name
        assert not isinstance(obj, __future__._Feature), name
    assert not any(isinstance(getattr(tp, n), __future__._Feature) for n in dir(tp))
    for internal in ("annotations", "compute_allocation", "current_fusion", "Op", "Expr"):
        assert internal not in tp.__all__ and not hasattr(tp, internal), internal


def test_star_import_does_not_shadow_builtins():
    namespace: dict = {}
    exec("from tileproof import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == set(tp.__all__)
    assert not set(namespace) & set(dir(builtins))
    assert all(callable(getattr(tp, name)) for name in SHADOWING - {"bool"})  # still tp.set, tp.abs, tp.compile
    assert isinstance(tp.bool, tp.DataType)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_classes_and_functions_have_docstrings(name):
    obj = getattr(tp, name)
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return  # dtypes and TARGETS are values
    assert (obj.__doc__ or "").strip(), f"tp.{name} has no docstring"


@pytest.mark.parametrize("cls", [tp.TensorView, tp.IterDomain, tp.Fusion], ids=lambda c: c.__name__)
def test_scheduling_classes_document_every_public_method(cls):
    missing = []
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        func = member.fget if isinstance(member, property) else member
        if callable(func) and not (func.__doc__ or "").strip():
            missing.append(name)
    assert not missing, f"{cls.__name__}: {', '.join(missing)} have no docstring"


def test_help_on_split_says_what_it_does_and_its_nvfuser_name():
    with tp.Fusion():
        tv = tp.make_contig_concrete_tensor([8])
    text = pydoc.render_doc(tv.split, renderer=pydoc.plaintext)
    assert "factor" in text and "inner_split" in text and "TensorView::split" in text


@pytest.mark.parametrize("cls", EXCEPTIONS + [DriverError, LoadError, UsageError], ids=lambda c: c.__name__)
def test_every_exception_has_the_one_root(cls):
    assert issubclass(cls, tp.TileproofError)


def test_the_one_warning_is_a_user_warning():
    assert [n for n in PUBLIC if inspect.isclass(getattr(tp, n)) and issubclass(getattr(tp, n), Warning)] == [
        "PerformanceWarning"]
    assert issubclass(tp.PerformanceWarning, UserWarning) and not issubclass(tp.PerformanceWarning, tp.TileproofError)


@pytest.mark.parametrize("cls, builtin", [
    (tp.ScheduleError, ValueError),
    (tp.InputError, ValueError),
    (tp.UnsupportedSchedule, NotImplementedError),
    (tp.CompileError, RuntimeError),
    (tp.NoDeviceError, RuntimeError),
    (tp.InternalError, RuntimeError),
    (DriverError, RuntimeError),
], ids=lambda c: c.__name__)
def test_exceptions_keep_their_builtin_base(cls, builtin):
    assert issubclass(cls, builtin)


def test_internal_error_names_itself_a_bug_with_the_rule_and_the_query():
    error = tp.InternalError("no index for i7", rule="TMA-BOX-SIZE", query="(assert (< x 4))")
    assert str(error).startswith("tileproof bug, please report:")
    assert "rule TMA-BOX-SIZE" in str(error) and "(assert (< x 4))" in str(error)
    assert (error.rule, error.query) == ("TMA-BOX-SIZE", "(assert (< x 4))")
    assert str(tp.InternalError("plain")) == "tileproof bug, please report: plain"
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.rule == error.rule


def test_compile_error_is_an_internal_error_with_its_log():
    error = tp.CompileError("NVRTC could not compile", log="line 2: error", source="k")
    assert isinstance(error, tp.InternalError)
    assert str(error).startswith("tileproof bug, please report:")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.log, copy.source) == ("line 2: error", "k")


# -- misuse of the API: a ScheduleError naming the function, the argument and the value ---------

P = tp.ParallelType


def copy_chain():
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_contig_concrete_tensor([8, 16]); fusion.add_input(t0)
        t1 = tp.set(t0); t2 = tp.set(t1); fusion.add_output(t2)
    return fusion, t1


def other_fusions_tensor():
    return copy_chain()[1]


# (call on (fusion, t1), the words the message must hold: function, argument, value)
MISUSE = {
    "parallelize_all_like tensors holding None": (
        lambda f, t: tp.parallelize_all_like(t, [P.TIDx], [None]), ("parallelize_all_like", "tensors", "None")),
    "parallelize_all_like tensors as a string": (
        lambda f, t: tp.parallelize_all_like(t, None, "T2"), ("parallelize_all_like", "tensors", "'T2'")),
    "parallelize_all_like tensors of another fusion": (
        lambda f, t: tp.parallelize_all_like(t, None, [other_fusions_tensor()]),
        ("parallelize_all_like", "tensors", "another fusion")),
    "parallelize_all_like parallel type as a string": (
        lambda f, t: tp.parallelize_all_like(t, "TIDx"), ("parallelize_all_like", "parallel_types", "'TIDx'")),
    "parallelize_all_like one parallel type": (
        lambda f, t: tp.parallelize_all_like(t, P.TIDx), ("parallelize_all_like", "parallel_types", "TIDx")),
    "parallelize_all_like ref a string": (
        lambda f, t: tp.parallelize_all_like("T1"), ("parallelize_all_like", "ref", "'T1'")),
    "split factor rational": (lambda f, t: t.split(0, sympy.Rational(1, 2)), ("split", "factor", "1/2")),
    "split factor sympy float": (lambda f, t: t.split(0, sympy.Float(2.0)), ("split", "factor", "2.0")),
    "split factor zero": (lambda f, t: t.split(0, 0), ("split", "factor", "0")),
    "split factor negative": (lambda f, t: t.split(0, -4), ("split", "factor", "-4")),
    "split factor float": (lambda f, t: t.split(0, 2.0), ("split", "factor", "2.0")),
    "split factor bool": (lambda f, t: t.split(0, True), ("split", "factor", "True")),
    "split factor not a name": (lambda f, t: t.split(0, "2x"), ("split", "factor", "'2x'")),
    "split axis out of range": (lambda f, t: t.split(5, 2), ("split", "axis", "5")),
    "split axis bool": (lambda f, t: t.split(True, 2), ("split", "axis", "True")),
    "split inner_split string": (lambda f, t: t.split(0, 2, "no"), ("split", "inner_split", "'no'")),
    "merge axis string": (lambda f, t: t.merge("0"), ("merge", "axis_o", "'0'")),
    "merge axis_i out of range": (lambda f, t: t.merge(0, 7), ("merge", "axis_i", "7")),
    "reorder position out of range": (lambda f, t: t.reorder({0: 5}), ("reorder", "old2new", "5")),
    "reorder a string": (lambda f, t: t.reorder("10"), ("reorder", "old2new", "'10'")),
    "swizzle type as a string": (lambda f, t: t.swizzle("XOR", 0, 1), ("swizzle", "swizzle_type", "'XOR'")),
    "swizzle axis out of range": (lambda f, t: t.swizzle(tp.SwizzleType.XOR, 0, 4), ("swizzle", "y", "4")),
    "parallelize type as a string": (
        lambda f, t: t.axis(0).parallelize("TIDx"),
        ("parallelize", "parallel_type", "'TIDx'")),
    "axis out of range": (lambda f, t: t.axis(-3), ("axis", "axis", "-3")),
    "set_memory_type a string": (
        lambda f, t: t.set_memory_type("Shared"),
        ("set_memory_type", "memory_type", "'Shared'")),
    "set_allocation_domain an int": (lambda f, t: t.set_allocation_domain(3), ("set_allocation_domain", "ids", "3")),
    "set_allocation_domain contiguity a string": (
        lambda f, t: t.set_allocation_domain(t.loop, contiguity="yes"),
        ("set_allocation_domain", "contiguity", "'yes'")),
    "set_loop_domain one IterDomain": (lambda f, t: t.set_loop_domain(t.axis(0)), ("set_loop_domain", "ids", "i")),
    "set_tmem_dim_sep_pos a string": (lambda f, t: t.set_tmem_dim_sep_pos("1"), ("set_tmem_dim_sep_pos", "pos", "'1'")),
    "cache_after op a string": (lambda f, t: t.cache_after("TMA"), ("cache_after", "op", "'TMA'")),
    "cache_before op a string": (lambda f, t: t.cache_before("TMA"), ("cache_before", "op", "'TMA'")),
    "inline_at a string": (lambda f, t: t.inline_at("1"), ("inline_at", "position", "'1'")),
    "inline_most a string": (lambda f, t: tp.inline_most("copy"), ("inline_most", "fusion", "'copy'")),
    "propagate_transforms a string": (
        lambda f, t: tp.propagate_transforms("T1"),
        ("propagate_transforms", "ref", "'T1'")),
    "allocation a string": (lambda f, t: tp.allocation("T1"), ("allocation", "tv", "'T1'")),
    "tma_info a string": (lambda f, t: tp.tma_info("T1"), ("tma_info", "tv", "'T1'")),
    "verify an unknown target": (lambda f, t: tp.verify(f, target="sm_80"), ("target", "'sm_80'")),
    "verify a target list": (lambda f, t: tp.verify(f, target=["sm_90a"]), ("target", "['sm_90a']")),
    "get_target a number": (lambda f, t: tp.get_target(90), ("target", "90")),
    "set op a string": (lambda f, t: tp.set(t, op="TMA"), ("set", "op", "'TMA'")),
    "set a string": (lambda f, t: tp.set("T1"), ("set", "tv", "'T1'")),
    "make_tensor unknown dtype": (
        lambda f, t: tp.make_tensor([2], dtype="float8"),
        ("make_tensor", "dtype", "'float8'")),
    "make_tensor a Python type as dtype": (
        lambda f, t: tp.make_tensor([2], dtype=float),
        ("make_tensor", "dtype", "<class 'float'>")),
    "make_tensor shape an int": (lambda f, t: tp.make_tensor(4), ("make_tensor", "shape", "4")),
    "make_tensor contiguity a string": (
        lambda f, t: tp.make_tensor([2, 3], contiguity="yes"), ("make_tensor", "contiguity", "'yes'")),
    "make_contig_concrete_tensor shape an int": (
        lambda f, t: tp.make_contig_concrete_tensor(4), ("make_contig_concrete_tensor", "shape", "4")),
    "make_contig_concrete_tensor extent zero": (
        lambda f, t: tp.make_contig_concrete_tensor([4, 0]), ("make_contig_concrete_tensor", "extents", "0")),
    "make_contig_concrete_tensor unknown dtype": (
        lambda f, t: tp.make_contig_concrete_tensor([4], dtype="f32"),
        ("make_contig_concrete_tensor", "dtype", "'f32'")),
    "make_contig_tensor ndims a bool": (
        lambda f, t: tp.make_contig_tensor(True),
        ("make_contig_tensor", "ndims", "True")),
    "transpose dim a string": (lambda f, t: tp.transpose(t, "0", 1), ("transpose", "dim0", "'0'")),
    "transpose dim out of range": (lambda f, t: tp.transpose(t, 0, 2), ("transpose", "dim1", "2")),
    "broadcast flags an int": (lambda f, t: tp.broadcast(t, 3), ("broadcast", "is_broadcast_dim", "3")),
    "broadcast flags strings": (lambda f, t: tp.broadcast(t, ["a", "b"]), ("broadcast", "is_broadcast_dim", "'a'")),
    "add a string": (lambda f, t: tp.add(t, "2.0"), ("add", "b", "'2.0'")),
    "mul a bool": (lambda f, t: tp.mul(True, t), ("mul", "a", "True")),
    "sub None": (lambda f, t: tp.sub(t, None), ("sub", "b", "None")),
    "div two numbers": (lambda f, t: tp.div(1.0, 2), ("div", "1.0", "2")),
    "cast unknown dtype": (lambda f, t: tp.cast(t, "float8"), ("cast", "dtype", "'float8'")),
    "cast a number": (lambda f, t: tp.cast(2.0, tp.float32), ("cast", "tv", "2.0")),
    "neg None": (lambda f, t: tp.neg(None), ("neg", "a", "None")),
    "accepted allocations an int": (lambda f, t: tp.accepted(allocations=3), ("accepted", "allocations", "3")),
    "rejected messages a string": (lambda f, t: tp.rejected("X", messages="abc"), ("rejected", "messages", "'abc'")),
    "schedule params not a list": (
        lambda f, t: tp.schedule(params={"n": 5})(lambda n: None), ("schedule", "params", "5")),
    "schedule params naming no parameter": (
        lambda f, t: tp.schedule(params={"m": [5]})(lambda n: None), ("schedule", "params", "m")),
    "schedule unknown target": (
        lambda f, t: tp.schedule(target="sm_80")(lambda: None),
        ("schedule", "target", "'sm_80'")),
    "schedule expect a string": (
        lambda f, t: tp.schedule(expect="accepted")(lambda: None), ("schedule", "expect", "'accepted'")),
}


@pytest.mark.parametrize("name", MISUSE)
def test_api_misuse_names_the_function_the_argument_and_the_value(name):
    call, words = MISUSE[name]
    fusion, t1 = copy_chain()
    with fusion, pytest.raises(tp.ScheduleError) as raised:
        call(fusion, t1)
    message = str(raised.value)
    for word in words:
        assert word in message, f"{name}: {word!r} not in {message!r}"
    assert isinstance(raised.value, tp.TileproofError)


def test_a_string_naming_an_enum_member_gets_the_member_to_use():
    _, t1 = copy_chain()
    with pytest.raises(tp.ScheduleError, match=r"use tp\.ParallelType\.TIDx$"):
        t1.axis(0).parallelize("tidx")
    with pytest.raises(tp.ScheduleError, match=r"use tp\.MemoryType\.Shared$"):
        t1.memory = "shared"


def test_integer_like_axes_and_factors_are_accepted():
    np = pytest.importorskip("numpy")
    _, t1 = copy_chain()
    t1.split(np.int64(0), np.int32(4))
    assert [i.static_extent for i in t1.loop] == [2, 4, 16]
