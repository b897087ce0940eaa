"""The package's import graph read from its source (ast), for the layering tests: every import
statement counts, those inside functions included (an import moved into a function to keep a
cycle loadable is still a cycle), except those under `if TYPE_CHECKING:` (never run). An import of
a.b.c also runs a/__init__.py and a/b/__init__.py, so it counts as an import of each of them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the package root (tileproof)
PACKAGE = "tileproof"
SKIPPED = ("tests", "benchmarks", "examples", "build")  # beside the package, not part of it


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or \
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def module_name(path: Path) -> str:
    parts = (PACKAGE, *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(folder: str = "") -> dict[str, Path]:
    """Every module under `folder` (a path from the package root; "" the whole package), by its
    dotted name."""
    return {module_name(p): p for p in sorted((ROOT / folder).rglob("*.py"))
            if p.relative_to(ROOT).parts[0] not in SKIPPED and not p.relative_to(ROOT).parts[0].startswith(".")}


def imports(path: Path, module: str | None = None) -> list[tuple[str, int, bool]]:
    """(the dotted module each import statement of the file names, its line, whether it is inside
    a function); `from pkg import name` names pkg.name as well, which may be a submodule.
    `module`: the file's dotted name (by default from its place under the package root)."""
    tree = ast.parse(path.read_text())
    in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _is_type_checking(block.test)
                   for n in ast.walk(block)}
    package = (module or module_name(path)).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # `if TYPE_CHECKING:` runs for the type checker only
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in in_function) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            out.append((target, node.lineno, id(node) in in_function))
            out += [(f"{target}.{a.name}", node.lineno, id(node) in in_function) for a in node.names]
    return out


def with_packages(name: str) -> set[str]:
    """The module and every package that importing it runs: a.b.c -> a.b.c, a.b, a."""
    parts = name.split(".")
    return {".".join(parts[:k]) for k in range(1, len(parts) + 1)}


def graph(folder: str = "") -> dict[str, set[str]]:
    """Module -> the modules of `folder` it imports (anywhere in the file). The package root, the
    public API every import of a submodule runs first, is not a node: its imports of the floors
    are the API's, not a loop through them. Nor is a module's own package an import of it: the
    package is running already when the module is (a pass list in lower/__init__.py importing
    its passes, which import their siblings, is no loop)."""
    mods = modules(folder)
    mods.pop(PACKAGE, None)
    return {m: {t for name, _, _ in imports(p) for t in with_packages(name)
                if t in mods and t != m and not m.startswith(t + ".")}
            for m, p in mods.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found
