"""The verifier's rule layer has no sideways arrows: a rule module imports the verifier's
registry, findings, solver, context and analysis/, never another rule module; verifier/ has no
import cycle; reports/ never reaches into verifier/rules/.

Imports are read from the source (ast), those inside functions included: an import moved into
a function to keep a cycle loadable is still a cycle. An import of a.b.c also runs a/__init__.py
and a/b/__init__.py, so it counts as an import of each of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the package root (tileproof)
RULES = "tileproof.verifier.rules"


def module_name(path: Path) -> str:
    parts = ("tileproof", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(folder: str) -> dict[str, Path]:
    """Every module under `folder` (a path from the package root), by its dotted name."""
    return {module_name(p): p for p in sorted((ROOT / folder).rglob("*.py"))}


def imports(path: Path, module: str | None = None) -> list[tuple[str, int, bool]]:
    """(the dotted module each import statement of the file names, its line, whether it is inside
    a function); `from pkg import name` names pkg.name as well, which may be a submodule.
    `module`: the file's dotted name (by default from its place under the package root)."""
    tree = ast.parse(path.read_text())
    in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    package = (module or module_name(path)).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(tree):
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


def graph(folder: str) -> dict[str, set[str]]:
    """Module -> the modules of `folder` it imports (anywhere in the file)."""
    mods = modules(folder)
    return {m: {t for name, _, _ in imports(p) for t in with_packages(name) if t in mods and t != m}
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


def test_no_rule_module_imports_another():
    bad = []
    for m, path in modules("verifier/rules").items():
        if m == RULES:
            continue  # the package imports every family: that registers them
        for name, line, _ in imports(path):
            if name == RULES or name.startswith(RULES + "."):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "a rule imports another rule module; move what both need into verifier/analysis/ " \
                    "or verifier/findings.py:\n" + "\n".join(sorted(set(bad)))


def test_the_verifier_has_no_import_cycle():
    found = cycles(graph("verifier"))
    assert not found, "modules of verifier/ that import each other (in-function imports included):\n" + \
                      "\n".join(", ".join(m.removeprefix("tileproof.") for m in c) for c in found)


def test_in_function_imports_in_the_verifier_say_why():
    bare = set()
    for path in modules("verifier").values():
        lines = path.read_text().splitlines()
        bare |= {f"{path.relative_to(ROOT)}:{line}: {lines[line - 1].strip()}"
                 for _, line, inside in imports(path) if inside and "#" not in lines[line - 1]}
    assert not bare, "an import inside a function needs a reason beside it (or belongs at the top):\n" + \
                     "\n".join(sorted(bare))


def test_reports_do_not_import_rule_modules():
    bad = [f"{p.relative_to(ROOT)}:{line} imports {name}" for p in modules("reports").values()
           for name, line, _ in imports(p) if name == RULES or name.startswith(RULES + ".")]
    assert not bad, "reports import the verifier's analysis or Report, never a rule:\n" + "\n".join(sorted(set(bad)))


def test_the_checks_see_a_cycle_closed_inside_a_function(tmp_path):
    """The checks above can fail: the old registry loaded the rules inside a function, and a rule
    called verify from inside one; both imports are read, and the loop they close is found."""
    registry = tmp_path / "registry.py"
    registry.write_text("def all_rules():\n    from . import rules  # registers every family\n")
    assert imports(registry, "tileproof.verifier.registry") == [
        ("tileproof.verifier", 2, True), ("tileproof.verifier.rules", 2, True)]
    edges = {"registry": {"rules"}, "rules": {"rules.tmem"}, "rules.tmem": {"verify"}, "verify": {"registry"}}
    assert cycles(edges) == [["registry", "rules", "rules.tmem", "verify"]]
    assert cycles({**edges, "rules.tmem": set()}) == []
