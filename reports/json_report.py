"""The JSON renderer: the Report's dataclass fields one for one, plus `ok`, `codes`
and `rendered` (the terminal text), so a tool can show exactly what a person saw; but
`decisions`, which the code generator reads (claims keyed by expressions, not a finding)."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

from ..verifier.diagnostics import Decisions, Report
from .terminal import report_to_text


def report_to_dict(report: Report) -> dict[str, Any]:
    """A JSON-ready dict (enums as their string values, everything else as built)."""
    data = dataclasses.asdict(dataclasses.replace(report, decisions=Decisions()), dict_factory=_plain_dict)
    del data["decisions"]
    data["ok"] = report.ok
    data["codes"] = report.codes
    data["rendered"] = report_to_text(report)
    return data


def report_to_json(report: Report, *, indent: int | None = 2) -> str:
    return to_json(report_to_dict(report), indent=indent)


def to_json(data: Any, *, indent: int | None = 2) -> str:
    """json.dumps that prints symbolic values (sympy expressions in tables) as text
    rather than failing on them."""
    return json.dumps(data, indent=indent, default=str)


def _plain_dict(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: value.value if isinstance(value, enum.Enum) else value for key, value in items}
