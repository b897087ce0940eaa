"""Renders Reports: terminal (rich), JSON, HTML with SVG pictures. Pure functions from a Report
(and, for pictures, the scheduled fusion) to text.

May import model/, hw/, execution/ and verifier/ (the Report types and analysis/, never
rules/); nothing imports reports/ but the CLI and the public API.
"""

from .explain import explain_text, list_text
from .html import PageEntry, report_page
from .json_report import report_to_dict, report_to_json, to_json
from .pictures import domain_graph_svg, smem_map_svg, tmem_map_svg
from .terminal import (render_diagnostic, render_report, render_schedule, report_to_text, reports_to_html,
                       schedule_tree)

__all__ = [
    "PageEntry",
    "domain_graph_svg",
    "explain_text",
    "list_text",
    "render_diagnostic",
    "render_report",
    "render_schedule",
    "report_page",
    "report_to_dict",
    "report_to_json",
    "report_to_text",
    "reports_to_html",
    "schedule_tree",
    "smem_map_svg",
    "tmem_map_svg",
    "to_json",
]
