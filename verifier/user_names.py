"""Reports name tensors as the user did: after `make_tensor(..., name="x")`, every T0 a report
prints reads `x` (messages, notes, labels, help, counterexample and table entries, the tensor of
each diagnostic and each tensor's summary).

The rules write T<n>, the key every floor uses for a tensor; verify calls `show_user_names`
last, once every rule and the root-cause grouping have read the report, so no rule needs to
know about display names. A fusion without named tensors keeps its report as it was.

May import model/ and verifier/diagnostics."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

from ..model.fusion import Fusion
from .diagnostics import Diagnostic, Report, TensorSummary

# a tensor's T<n> as a word, not a path segment (a location's file may sit in a folder T0/)
_TENSOR = re.compile(r"(?<![/\\])\bT\d+\b(?![/\\])")

# the fields that hold no tensor name: codes and places. A diagnostic's `id` ("CODE:T2") and the
# `follows_from` that links to it are renamed alike, so the links hold (names are unique)
_KEPT = {"code", "severity", "ids", "location", "rule", "internal"}


def show_user_names(fusion: Fusion, report: Report) -> None:
    """Rewrite `report`'s diagnostics and tensor summaries with the fusion's user names."""
    names = {t.name: t.user_name for t in fusion.tensors if t.user_name}
    if not names:
        return

    def text(value: str) -> str:
        return _TENSOR.sub(lambda m: names.get(m.group(0), m.group(0)), value)

    report.diagnostics = [_renamed(d, text) for d in report.diagnostics]
    report.tensors = [_renamed(t, text) for t in report.tensors]


def _renamed(item: Diagnostic | TensorSummary, text: Callable[[str], str]):
    return dataclasses.replace(item, **{f.name: _each(getattr(item, f.name), text)
                                        for f in dataclasses.fields(item) if f.name not in _KEPT})


def _each(value: Any, text: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {_each(k, text): _each(v, text) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_each(v, text) for v in value)
    return value
