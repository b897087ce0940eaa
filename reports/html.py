"""The HTML renderer: one self-contained page (inline CSS and SVG, no external assets) with,
per schedule, the verdict, each diagnostic and the pictures of its on-chip tensors.

The page stays small: one <style> block for the page and its pictures, and each distinct
drawing once. A Picture's body (reports/svg.py) is drawn at its first view, inside an
element with an id; every later view is `<use href="#...">` of it (no JavaScript), with the
view's own marks (a diagnostic's counterexample, highlighted IterDomains) drawn over it and a
link to where it was drawn."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from html import escape
from typing import Any, Iterable

from ..model.types import MemoryType
from ..verifier.diagnostics import Diagnostic, Report, Severity
from .comparisons import hardware_pictures
from .layouts import Layout, smem_layout, tmem_layout, tmem_source
from .pictures import domain_graph, smem_map, tmem_map
from .svg import ARROW, PAGE_ARROW, STYLE, Picture, page_defs

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
p.follows { margin: 4px 0; color: #a0a; } ul.notes { margin: 6px 0; padding-left: 20px; } ul.notes li { margin: 2px 0; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { border: 1px solid #d8dde6; padding: 2px 8px; text-align: left; }
th { background: #eef1f6; } tr.highlight td { color: #b0151a; font-weight: bold; }
.help { color: #00639a; } .rule { color: #8a94a3; font-size: 12px; }
.picture { overflow-x: auto; margin: 8px 0; } .picture svg { display: block; }
.picture .caption { font-size: 12px; color: #3d4652; margin: 2px 0; } .picture .caption .meta { margin: 0; }
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
    figures = Figures()
    sections = [_section(entry, k, figures) for k, entry in enumerate(entries)]
    return ("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"UTF-8\">\n"
            f"<title>{escape(title)}</title>\n<style>{CSS}{STYLE}</style>\n</head>\n<body>\n{page_defs()}\n"
            f"<h1>{escape(title)}</h1>\n" + "\n".join(sections) + "\n</body>\n</html>\n")


class Figures:
    """The pictures of one page: each distinct body drawn once (`<g id="fig-N">`), later views
    of it `<use>` it and draw only their own overlay. A view in a folded section (a closed
    <details>) may use a drawing but is never the one others use: a link to it would lead
    nowhere visible."""

    def __init__(self) -> None:
        self.drawn: dict[str, int] = {}
        self.layouts: dict[tuple, Layout] = {}  # (kind, tensor, issuer) -> its enumeration, shared by its views

    def layout(self, kind: str, tensor, issuer=None) -> Layout:
        key = (kind, id(tensor), id(issuer))
        if key not in self.layouts:
            self.layouts[key] = smem_layout(tensor) if kind == "smem" else tmem_layout(tensor, issuer)
        return self.layouts[key]

    def html(self, picture: Picture, *, folded: bool = False) -> str:
        key = hashlib.sha1(f"{picture.width:.0f}x{picture.height:.0f}|{picture.body}".encode()).hexdigest()
        number = self.drawn.get(key)
        first = number is None
        if first and not folded:
            number = self.drawn[key] = len(self.drawn)
        w, h = f"{picture.width:.0f}", f"{picture.height:.0f}"
        body = picture.body.replace(ARROW, f"url(#{PAGE_ARROW})")
        if not first:
            shared = f'<use href="#fig-{number}"/>'
        else:
            shared = f'<g class="tp" id="fig-{number}">{body}</g>' if not folded else f'<g class="tp">{body}</g>'
        overlay = f'<g class="tp">{picture.overlay}</g>' if picture.overlay else ""
        caption = escape(picture.title)
        if not first:
            caption += f' <span class="meta">(drawn at <a href="#picture-{number}">picture {number}</a>)</span>'
        notes = "".join(f'<div class="meta">{escape(note)}</div>' for note in picture.notes)
        anchor = f' id="picture-{number}"' if first and not folded else ""
        return (f'<div class="picture"{anchor}><div class="caption">{caption}{notes}</div>'
                f'<svg xmlns="http://www.w3.org/2000/svg" class="tileproof" width="{w}" height="{h}" '
                f'viewBox="0 0 {w} {h}" role="img"><title>{escape(picture.title)}</title>{shared}{overlay}</svg></div>')


def _section(entry: PageEntry, number: int, figures: Figures) -> str:
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
    causes = {d.id: d for d in report.diagnostics if d.id}
    for diagnostic in report.diagnostics:
        parts.append(_diagnostic(diagnostic, entry.fusion, tensors, figures, f"schedule-{number}", causes))
    parts.append(_tensor_pictures(report, tensors, figures))
    parts.append("</section>")
    return "\n".join(parts)


def _tensors_by_name(fusion) -> dict[str, Any]:
    """The fusion's tensors by the name the report shows (the user's, else T<n>)."""
    return {t.display_name: t for t in fusion.tensors} if fusion is not None else {}


def _diagnostic(d: Diagnostic, fusion, tensors: dict[str, Any], figures: Figures, section: str,
                causes: dict[str, Diagnostic]) -> str:
    kind = "warning" if d.severity is Severity.WARNING else "error"
    anchor = f' id="{section}-{_anchor(d.id)}"' if d.id else ""
    parts = [f'<div class="diagnostic {kind}"{anchor}>',
             f'<div class="headline"><span class="code">{escape(str(d.severity))}[{escape(d.code)}]</span>: '
             f"{escape(d.message)}</div>"]
    if d.follows_from:  # a consequence links back to its root cause, listed before it
        cause = causes.get(d.follows_from)
        named = f"{cause.severity}[{cause.code}]" if cause is not None else d.follows_from
        parts.append(f'<p class="follows">follows from: <a href="#{section}-{_anchor(d.follows_from)}">'
                     f"{escape(named)}</a> above (its fix removes this {escape(str(d.severity))} too)</p>")
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
        parts.append(figures.html(domain_graph(tensor, d.ids)))
        picture = _memory_map(tensor, figures, d)
        if picture is not None:
            parts.append(figures.html(picture))
        parts += [figures.html(p) for p in hardware_pictures(fusion, d)]
    parts.append("</div>")
    return "\n".join(parts)


def _anchor(diagnostic_id: str) -> str:
    """A diagnostic id (`TMA-SWIZZLE-LAYOUT:T1#2`) as an HTML id."""
    return "diag-" + "".join(c if c.isalnum() or c == "-" else "_" for c in diagnostic_id)


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


def _memory_map(tensor, figures: Figures, diagnostic: Diagnostic | None = None) -> Picture | None:
    """The map of the memory the tensor lives in, or that it loads from (tensor memory)."""
    if tensor.memory_type is MemoryType.Shared:
        return smem_map(tensor, diagnostic=diagnostic, layout=figures.layout("smem", tensor))
    if tensor.memory_type is MemoryType.Tensor:
        return tmem_map(tensor, diagnostic=diagnostic, layout=figures.layout("tmem", tensor))
    source = tmem_source(tensor) if diagnostic is not None else None
    if source is not None:
        return tmem_map(source, issuer=tensor, diagnostic=diagnostic, layout=figures.layout("tmem", source, tensor))
    return None


def _tensor_pictures(report: Report, tensors: dict[str, Any], figures: Figures) -> str:
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
        parts.append(figures.html(domain_graph(tensor), folded=not big))
        picture = _memory_map(tensor, figures) if big else None
        if picture is not None:
            parts.append(figures.html(picture))
        parts.append("</details>")
    if not parts:
        return '<p class="meta">no on-chip tensors</p>'
    return "<h3>tensors</h3>\n" + "\n".join(parts)
