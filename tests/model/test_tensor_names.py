"""A fusion input's user name (issue 35 item 4): make_tensor(..., name="x") and the other input
constructors check it at the door (a letter, then letters, digits or underscores; not T<n>;
unique in the fusion), keep T<n> as the tensor's key, and show the name where the tensor is
printed (ops, Fusion.tensor); the compile cache tells a named schedule from an unnamed one."""

from __future__ import annotations

import pytest

import tileproof as tp
from tileproof.model.fingerprint import fingerprint


def _copy(name: str | None = None):
    with tp.Fusion("copy") as fusion:
        t0 = tp.make_tensor(["N"], name=name); fusion.add_input(t0)
        t1 = tp.set(t0); fusion.add_output(t1)
    return fusion, t0, t1


def test_a_named_input_keeps_its_key_and_shows_its_name():
    fusion, t0, t1 = _copy("x")
    assert (t0.name, t0.user_name, t0.display_name) == ("T0", "x", "x")
    assert (t1.user_name, t1.display_name) == (None, "T1")
    assert str(t1.definition) == "T1 = set(x)"
    assert fusion.tensor("x") is t0 and fusion.tensor("T0") is t0


@pytest.mark.parametrize("make", [
    lambda name: tp.make_contig_tensor(2, name=name),
    lambda name: tp.make_contig_concrete_tensor([4, 8], name=name),
])
def test_every_input_constructor_takes_a_name(make):
    with tp.Fusion("f"):
        assert make("queries").display_name == "queries"


@pytest.mark.parametrize("name,message", [
    ("", "name must be a letter followed by letters, digits or underscores"),
    ("2x", "name must be a letter"),
    ("_x", "name must be a letter"),
    ("a-b", "name must be a letter"),
    (7, "got 7"),
    ("T3", "looks like an unnamed tensor's T<n>"),
])
def test_a_malformed_name_is_refused_at_the_call(name, message):
    with tp.Fusion("f") as fusion:
        with pytest.raises(tp.ScheduleError, match=rf"^make_tensor: .*{message}"):
            tp.make_tensor([4], name=name)
    assert fusion.tensors == []  # the refused call made no tensor


def test_a_name_is_unique_in_its_fusion():
    with tp.Fusion("f"):
        tp.make_tensor([4], name="x")
        with pytest.raises(tp.ScheduleError, match="make_contig_tensor: fusion f already has a tensor named 'x'"):
            tp.make_contig_tensor(1, name="x")
    with tp.Fusion("g"):
        tp.make_tensor([4], name="x")  # another fusion may use it


def test_the_name_is_part_of_the_fingerprint():
    """It names the kernel's parameter, so a named and an unnamed schedule compile apart."""
    assert fingerprint(_copy()[0], "sm_90a") != fingerprint(_copy("x")[0], "sm_90a")
    assert fingerprint(_copy("x")[0], "sm_90a") == fingerprint(_copy("x")[0], "sm_90a")


def test_set_name_names_an_ops_output():
    fusion, t0, t1 = _copy("x")
    assert t1.set_name("y") is t1 and str(t1.definition) == "y = set(x)"
    with pytest.raises(tp.ScheduleError, match="set_name: fusion copy already has a tensor named 'x'"):
        t1.set_name("x")
