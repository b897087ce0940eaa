"""Renders Reports: terminal (rich), JSON, HTML. Pure functions from a Report to text.

May import verifier/ (for the Report types) and model/; nothing imports reports/ but
the CLI and the public API.
"""

from .explain import explain_text, list_text
from .json_report import report_to_dict, report_to_json, to_json
from .terminal import render_diagnostic, render_report, report_to_text, reports_to_html, schedule_tree

__all__ = [
    "explain_text",
    "list_text",
    "render_diagnostic",
    "render_report",
    "report_to_dict",
    "report_to_json",
    "report_to_text",
    "reports_to_html",
    "schedule_tree",
    "to_json",
]
