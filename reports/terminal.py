"""The terminal renderer: a Report as rich renderables, and as plain or HTML text (the plain
text is also str(report): importing this file registers report_to_text with the Report).

Pure functions of the Report (and, optionally, the verdict the schedule file expected);
the layout follows rustc: `error[CODE]: message`, `--> file:line`, notes, `help:`.
"""

from __future__ import annotations

import io
import re
from typing import Any, Iterable

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..verifier.diagnostics import Diagnostic, Report, Severity, TensorSummary, register_text_renderer

HIGHLIGHT = "bold red"
ON_CHIP = ("Shared", "Local", "Tensor")
# Preferred order of the columns of a diagnostic table; other keys follow in their own order.
TABLE_COLUMNS = {"label": "IterDomain", "allocated": "allocated", "rule": "rule", "reason": "reason", "side": "side"}


def render_report(report: Report, *, expectation: Any = None) -> RenderableType:
    """The whole report as one rich renderable (print it with any Console)."""
    parts: list[RenderableType] = [_header(report)]
    if expectation is not None:
        parts.append(Text(f"expected: {expectation.describe()}", style="dim"))
    parts.append(_assumptions(report))
    if report.launch:
        launch = ", ".join(f"{k} = {v}" for k, v in report.launch.items())
        parts.append(Text(f"launch: {launch}", style="dim"))
    summaries = {t.name: t for t in report.tensors}
    causes = {d.id: d for d in report.diagnostics if d.id}
    for diagnostic in report.diagnostics:
        parts.append(Text(""))
        parts.append(render_diagnostic(diagnostic, summaries.get(diagnostic.tensor or ""),
                                       cause=causes.get(diagnostic.follows_from or "")))
    if report.ok:
        parts.append(_allocation_summary(report.tensors))
    return Group(*parts)


def report_to_text(report: Report, width: int = 100, *, expectation: Any = None) -> str:
    """The report as plain text (no colour codes), wrapped at `width`."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False,
                      legacy_windows=False, highlight=False)
    console.print(render_report(report, expectation=expectation))
    # padded tables leave trailing blanks that only get in the way of diffs and goldens
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


register_text_renderer(report_to_text)


def reports_to_html(entries: Iterable[tuple[str, RenderableType]], *, title: str = "tileproof report",
                    width: int = 110) -> str:
    """A self-contained HTML page: one titled section per (title, renderable) pair."""
    console = Console(file=io.StringIO(), record=True, width=width, force_terminal=True,
                      color_system="truecolor", highlight=False)
    for name, renderable in entries:
        console.print(Rule(name))
        console.print(renderable)
        console.print()
    return console.export_html(inline_styles=True, code_format=_HTML_PAGE.replace("{title}", _escape(title)))


def render_diagnostic(diagnostic: Diagnostic, summary: TensorSummary | None = None, *,
                      cause: Diagnostic | None = None) -> RenderableType:
    """One diagnostic: headline, the root cause it follows from (`cause`, listed before it),
    location, schedule tree, notes, table, counterexample, help."""
    colour = "red" if diagnostic.severity is Severity.ERROR else "yellow"
    headline = Text()
    headline.append(f"{diagnostic.severity}[{diagnostic.code}]", style=f"bold {colour}")
    headline.append(f": {diagnostic.message}", style="bold")
    parts: list[RenderableType] = [headline]
    if diagnostic.follows_from:
        named = f"{cause.severity}[{cause.code}]" if cause is not None else diagnostic.follows_from
        parts.append(_labelled("  = follows from: ", "bold magenta",
                               f"{named} above (its fix removes this {diagnostic.severity} too)"))
    if diagnostic.location:
        parts.append(Text.assemble(("  --> ", "blue"), diagnostic.location))
    for label in diagnostic.labels:
        parts.append(Text.assemble(("   |  ", "blue"), label))
    if summary is not None:
        parts.append(Padding(schedule_tree(summary, diagnostic.ids), (0, 0, 0, 2), expand=False))
    elif diagnostic.tensor:
        parts.append(Text(f"  tensor {diagnostic.tensor}", style="dim"))
    for note in diagnostic.notes:
        parts.append(_labelled("  = note: ", "bold", note))
    if diagnostic.table:
        parts.append(Padding(_diagnostic_table(diagnostic), (0, 0, 0, 2), expand=False))
    if diagnostic.counterexample:
        parts.append(Padding(_counterexample_table(diagnostic.counterexample), (0, 0, 0, 2), expand=False))
    if diagnostic.hint:
        parts.append(_labelled("  = help: ", "bold cyan", diagnostic.hint))
    if diagnostic.rule:
        parts.append(Text(f"  (rule {diagnostic.rule})", style="dim"))
    return Group(*parts)


def render_schedule(report: Report) -> Tree:
    """The schedule as one tree (`tileproof show`): the fusion, its verdict and launch, then each
    tensor's schedule_tree (memory type, loop domain with parallel types and compute-at)."""
    title = Text.assemble((report.fusion, "bold"), " on ", (report.target, "bold"), ": ")
    title.append("ACCEPTED" if report.ok else f"REJECTED ({', '.join(report.codes)})",
                 style="bold green" if report.ok else "bold red")
    tree = Tree(title, guide_style="dim")
    if report.launch:
        tree.add(Text("launch: " + ", ".join(f"{k} = {v}" for k, v in report.launch.items()), style="dim"))
    for summary in report.tensors:
        tree.add(schedule_tree(summary))
    return tree


def _labelled(prefix: str, style: str, text: str) -> Table:
    """`prefix text` where wrapped lines of text stay indented under its first word."""
    grid = Table.grid()
    grid.add_column(no_wrap=True, style=style)
    grid.add_column()
    grid.add_row(prefix, Text(text))  # a note is text: `[i10{2}]` is no rich markup
    return grid


def schedule_tree(summary: TensorSummary, highlight: Iterable[str] = ()) -> Tree:
    """A tensor's logical domain, transforms, loop domain (with `|` at the compute-at
    position) and allocation domain (with `||` at the tensor-memory lane/column split)."""
    wanted = set(highlight)
    labels = summary.id_labels
    # ids may name IterDomains (i12) or their labels (TIDx{32}); transforms print labels
    wanted_labels = {labels.get(name, name) for name in wanted}
    title = Text.assemble((summary.name, "bold"), f" ({summary.memory}, {summary.dtype})")
    if summary.definition:
        title.append(f"  {summary.definition}", style="dim")
    tree = Tree(title, guide_style="dim")
    tree.add(Text.assemble(("logical    ", "dim"), _domain(summary.logical, labels, wanted)))
    for transform in summary.transforms:
        line = Text(transform)
        for label in wanted_labels:
            line.highlight_regex(rf"(?<![\w{{]){re.escape(label)}(?![\w{{])", HIGHLIGHT)
        tree.add(line)
    loop = _domain(summary.loop, labels, wanted, marker=("|", summary.compute_at) if summary.compute_at else None)
    if summary.compute_at:
        loop.append(f"   compute-at {summary.compute_at}", style="dim")
    tree.add(Text.assemble(("loop       ", "dim"), loop))
    marker = ("||", summary.tmem_dim_sep) if summary.tmem_dim_sep is not None else None
    allocation = _domain(summary.allocation, labels, wanted, marker=marker)
    if summary.tmem_dim_sep is not None:
        allocation.append("   lanes || columns", style="dim")
    tree.add(Text.assemble(("allocation ", "dim"), allocation))
    return tree


def _domain(names: list[str], labels: dict[str, str], wanted: set[str],
            marker: tuple[str, int] | None = None) -> Text:
    """`[i0{2}, i6{2} | i7{2}]` with the wanted IterDomains highlighted."""
    text = Text("[")
    for position, name in enumerate(names):
        if marker is not None and marker[1] == position:
            text.append(f" {marker[0]} " if position else f"{marker[0]} ", style="bold magenta")
        elif position > 0:
            text.append(", ")
        label = labels.get(name, name)
        text.append(label, style=HIGHLIGHT if name in wanted or label in wanted else "")
    if marker is not None and marker[1] == len(names) and names:
        text.append(f" {marker[0]}", style="bold magenta")
    text.append("]")
    return text


def _diagnostic_table(diagnostic: Diagnostic) -> Table:
    rows = diagnostic.table
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys]
    if "label" in keys and "id" in keys:
        keys.remove("id")  # the label already names the IterDomain
    if all(row.get("side") is None for row in rows) and "side" in keys:
        keys.remove("side")
    ordered = [k for k in TABLE_COLUMNS if k in keys] + [k for k in keys if k not in TABLE_COLUMNS]
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for key in ordered:
        table.add_column(TABLE_COLUMNS.get(key, key))
    wanted = set(diagnostic.ids)
    for row in rows:
        marked = row.get("id") in wanted or row.get("label") in wanted
        table.add_row(*(_cell(row.get(k)) for k in ordered), style=HIGHLIGHT if marked else None)
    return table


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "" if value is None else str(value)


def _counterexample_table(counterexample: dict[str, Any]) -> RenderableType:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column("name", style="cyan")
    table.add_column("", style="dim")
    table.add_column("value", style="bold")
    for name, value in counterexample.items():
        table.add_row(str(name), "=", str(value))
    # a Table title wraps at the table's width, so the heading is a line of its own
    return Group(Text("counterexample:", style="bold"), table)


def _header(report: Report) -> Text:
    verdict = ("ACCEPTED", "bold green") if report.ok else ("REJECTED", "bold red")
    queries = "query" if report.queries == 1 else "queries"
    header = Text.assemble((report.fusion, "bold"), " on ", (report.target, "bold"), ": ", verdict)
    header.append(f"  ({report.seconds:.3f} s, {report.queries} z3 {queries})", style="dim")
    if report.warnings:
        header.append(f"  {len(report.warnings)} warning(s)", style="yellow")
    if report.location:
        header.append(f"\n  --> {report.location}", style="dim")
    return header


def _assumptions(report: Report) -> Text:
    if not report.assumptions:
        return Text("assumptions: none", style="dim")
    return Text.assemble(("assumptions: ", "dim"), ", ".join(report.assumptions))


def _allocation_summary(tensors: list[TensorSummary]) -> RenderableType:
    on_chip = [t for t in tensors if t.memory in ON_CHIP and t.allocation_size]
    if not on_chip:
        return Text("allocations: no on-chip tensors", style="dim")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("tensor")
    table.add_column("memory")
    table.add_column("size", justify="right")
    for t in on_chip:
        table.add_row(t.name, t.memory, _size(t.memory, t.allocation_size))
    return Group(Text("allocations:", style="bold"), Padding(table, (0, 0, 0, 2), expand=False))


def _size(memory: str, size: dict[str, Any]) -> str:
    text = f"{size.get('bytes')} bytes ({size.get('num_elements')} elements)"
    if memory == "Tensor":
        text += (f", {size.get('lanes')} lanes x {size.get('columns')} columns"
                 f" ({size.get('columns_allocated')} columns allocated)")
    return text


def _escape(text: str) -> str:
    """HTML-escaped, with braces doubled because the page is a str.format template."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("{", "{{").replace("}", "}}")


_HTML_PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="UTF-8">
<title>{title}</title>
<style>
{stylesheet}
body {{ color: {foreground}; background-color: {background}; }}
</style>
</head>
<body>
<pre style="font-family: Menlo, 'DejaVu Sans Mono', consolas, 'Courier New', monospace"><code style="font-family: inherit">{code}</code></pre>
</body>
</html>
"""
