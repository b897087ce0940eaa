"""The HTML renderer: one self-contained page (inline CSS and SVG, no external assets) with,
per schedule, the verdict, each diagnostic and the pictures of its on-chip tensors."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Iterable

from ..model.types import MemoryType
from ..verifier.diagnostics import Diagnostic, Report, Severity
from .layouts import tmem_source
from .pictures import domain_graph_svg, smem_map_svg, tmem_map_svg

CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 24px; color: #1d1f23;
       background: #fafbfc; max-width: 1500px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin: 0 0 6px 0; } h3 { font-size: 15px; margin: 14px 0 6px 0; }
section.schedule { background: #fff; border: 1px solid #d8dde6; border-radius: 8px; padding: 16px 20px; margin: 18px 0; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 10px; font-weight: bold; color: #fff; }
.verdict.accepted { background: #2e7d32; } .verdict.rejected { background: #c62828; } .verdict.error { background: #6d4c41; }
.status.pass { color: #2e7d32; } .status.fail { color: #c62828; }
.meta { color: #5f6b7a; font-size: 13px; margin: 3px 0; }
.diagnostic { border-left: 4px solid #c62828; background: #fff6f6; padding: 8px 14px; margin: 12px 0; }
.diagnostic.warning { border-left-color: #ef8f00; background: #fffaf0; }
.headline { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-weight: bold; }
.code { color: #c62828; } .warning .code { color: #ef8f00; }
ul.notes { margin: 6px 0; padding-left: 20px; } ul.notes li { margin: 2px 0; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { border: 1px solid #d8dde6; padding: 2px 8px; text-align: left; }
th { background: #eef1f6; } tr.highlight td { color: #b0151a; font-weight: bold; }
.help { color: #00639a; } .rule { color: #8a94a3; font-size: 12px; }
.picture { overflow-x: auto; margin: 8px 0; } .picture svg { display: block; }
details > summary { cursor: pointer; font-weight: bold; margin: 8px 0; }
pre.error { background: #f6f0ee; padding: 8px; white-space: pre-wrap; }
"""


@dataclass
class PageEntry:
    """One schedule on the page: its report (None when it failed to build or verify), the fusion
    the pictures are drawn from, and the line saying whether it met its expectation."""

    title: str
    report: Report | None
    fusion: Any = None
    error: str | None = None
    expectation: str | None = None
    passed: bool | None = None


def report_page(entries: Iterable[PageEntry], *, title: str = "tileproof report") -> str:
    sections = [_section(entry, k) for k, entry in enumerate(entries)]
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"UTF-8\">\n"
            f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f"<h1>{escape(title)}</h1>\n" + "\n".join(sections) + "\n</body>\n</html>\n")


def _section(entry: PageEntry, number: int) -> str:
    status = "" if entry.passed is None else ("pass" if entry.passed else "fail")
    parts = [f'<section class="schedule" id="schedule-{number}">',
             f'<h2 class="status {status}">{escape(entry.title)}</h2>']
    report = entry.report
    if report is None:
        parts.append('<span class="verdict error">NOT VERIFIED</span>')
        parts.append(f'<pre class="error">{escape(entry.error or "")}</pre></section>')
        return "\n".join(parts)
    verdict = "accepted" if report.ok else "rejected"
    parts.append(f'<p><span class="verdict {verdict}">{verdict.upper()}</span> '
                 f'<b>{escape(report.fusion)}</b> on <b>{escape(report.target)}</b>'
                 f' <span class="meta">({report.seconds:.3f} s, {report.queries} z3 queries)</span></p>')
    if report.location:
        parts.append(f'<p class="meta">defined at {escape(report.location)}</p>')
    if entry.expectation:
        parts.append(f'<p class="meta">expected: {escape(entry.expectation)}</p>')
    parts.append(f'<p class="meta">assumptions: {escape(", ".join(report.assumptions) or "none")}</p>')
    if report.launch:
        parts.append('<p class="meta">launch: ' + escape(", ".join(f"{k} = {v}" for k, v in report.launch.items())) + "</p>")
    tensors = _tensors_by_name(entry.fusion)
    for diagnostic in report.diagnostics:
        parts.append(_diagnostic(diagnostic, tensors))
    parts.append(_tensor_pictures(report, tensors))
    parts.append("</section>")
    return "\n".join(parts)


def _tensors_by_name(fusion) -> dict[str, Any]:
    return {t.name: t for t in fusion.tensors} if fusion is not None else {}


def _diagnostic(d: Diagnostic, tensors: dict[str, Any]) -> str:
    kind = "warning" if d.severity is Severity.WARNING else "error"
    parts = [f'<div class="diagnostic {kind}">',
             f'<div class="headline"><span class="code">{escape(str(d.severity))}[{escape(d.code)}]</span>: '
             f"{escape(d.message)}</div>"]
    if d.location:
        parts.append(f'<div class="meta">--&gt; {escape(d.location)}</div>')
    parts += [f'<div class="meta">| {escape(label)}</div>' for label in d.labels]
    if d.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>note: {_pre(n)}</li>" for n in d.notes) + "</ul>")
    if d.table:
        parts.append(_table(d.table, set(d.ids)))
    if d.counterexample:
        rows = "".join(f"<tr><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>" for k, v in d.counterexample.items())
        parts.append(f'<table class="counterexample"><tr><th colspan="2">counterexample</th></tr>{rows}</table>')
    if d.hint:
        parts.append(f'<p class="help"><b>help:</b> {escape(d.hint)}</p>')
    if d.rule:
        parts.append(f'<div class="rule">rule {escape(d.rule)}</div>')
    tensor = tensors.get(d.tensor or "")
    if tensor is not None:
        parts.append(_picture(domain_graph_svg(tensor, d.ids)))
        picture = _memory_map(tensor, d)
        if picture:
            parts.append(_picture(picture))
    parts.append("</div>")
    return "\n".join(parts)


def _pre(text: str) -> str:
    """Multi-line notes (tracebacks, tables) keep their lines."""
    return f"<pre>{escape(text)}</pre>" if "\n" in text else escape(text)


def _table(rows: list[dict[str, Any]], wanted: set[str]) -> str:
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    head = "".join(f"<th>{escape(k)}</th>" for k in keys)
    body = []
    for row in rows:
        marked = row.get("id") in wanted or row.get("label") in wanted
        cells = "".join(f"<td>{escape(_cell(row.get(k)))}</td>" for k in keys)
        body.append(f'<tr class="highlight">{cells}</tr>' if marked else f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "" if value is None else str(value)


def _memory_map(tensor, diagnostic: Diagnostic | None = None) -> str | None:
    """The map of the memory the tensor lives in, or that it loads from (tensor memory)."""
    if tensor.memory_type is MemoryType.Shared:
        return smem_map_svg(tensor, diagnostic=diagnostic)
    if tensor.memory_type is MemoryType.Tensor:
        return tmem_map_svg(tensor, diagnostic=diagnostic)
    source = tmem_source(tensor) if diagnostic is not None else None
    if source is not None:
        return tmem_map_svg(source, issuer=tensor, diagnostic=diagnostic)
    return None


def _tensor_pictures(report: Report, tensors: dict[str, Any]) -> str:
    """Every on-chip tensor: allocation, IterDomain graph and (smem/tmem) map; registers folded."""
    parts = []
    for summary in report.tensors:
        tensor = tensors.get(summary.name)
        if summary.memory == "Global" or tensor is None:
            continue
        size = summary.allocation_size
        facts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in size.items())
        big = summary.memory in ("Shared", "Tensor")
        parts.append(f"<details{' open' if big else ''}><summary>{escape(summary.name)} "
                     f"({escape(summary.memory)}, {escape(summary.dtype)}): {escape(facts)}</summary>")
        parts.append(_picture(domain_graph_svg(tensor)))
        picture = _memory_map(tensor) if big else None
        if picture:
            parts.append(_picture(picture))
        parts.append("</details>")
    if not parts:
        return '<p class="meta">no on-chip tensors</p>'
    return "<h3>tensors</h3>\n" + "\n".join(parts)


def _picture(svg: str) -> str:
    return f'<div class="picture">{svg}</div>'
