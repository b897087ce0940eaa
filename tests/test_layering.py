"""The layout reads as the pipeline: model imports nothing of the others and no z3/CUDA;
verifier does not import codegen or reports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imports_of(folder: str) -> set[str]:
    names: set[str] = set()
    for f in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                names.add("." * node.level + mod)
    return names


def test_model_is_pure_python():
    names = imports_of("model")
    assert not {n for n in names if n.split(".")[0] in {"z3", "cuda", "torch", "rich"}}
    assert not {n for n in names if n.lstrip(".").split(".")[0] in {"verifier", "codegen", "reports"} and n.startswith("..")}


def test_verifier_does_not_reach_downstream():
    names = imports_of("verifier")
    bad = {n for n in names if any(part in {"codegen", "reports"} for part in n.lstrip(".").split("."))}
    assert not bad, bad
