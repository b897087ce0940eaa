"""The layout reads as the pipeline: model imports nothing of the others and no z3/CUDA;
verifier does not import codegen or reports; within codegen, lower/ imports neither emit/ nor
runtime/ and emit/ does not import lower/; the kernel IR is plain data that emit/'s one table
prints."""

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


def resolved_imports_of(folder: str) -> set[str]:
    """Absolute module names (tileproof.x.y) a folder imports; `from pkg import name` also counts
    pkg.name, which may be a submodule."""
    names: set[str] = set()
    for f in (ROOT / folder).rglob("*.py"):
        rel = f.relative_to(ROOT).with_suffix("").parts
        package = ["tileproof", *rel[:-1]]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                names.add(mod)
                names |= {f"{mod}.{a.name}" for a in node.names}
    return names


def reaches(names: set[str], package: str) -> set[str]:
    return {n for n in names if n == package or n.startswith(package + ".")}


def test_codegen_stages_are_layered():
    lower = resolved_imports_of("codegen/lower")
    assert reaches(lower, "tileproof.codegen.lower"), "the resolver found no imports"
    assert not reaches(lower, "tileproof.codegen.emit"), reaches(lower, "tileproof.codegen.emit")
    assert not reaches(lower, "tileproof.codegen.runtime"), reaches(lower, "tileproof.codegen.runtime")
    emit = resolved_imports_of("codegen/emit")
    assert not reaches(emit, "tileproof.codegen.lower"), reaches(emit, "tileproof.codegen.lower")


def test_every_ir_node_type_in_the_emit_table():
    from tileproof.codegen import ir
    from tileproof.codegen.emit import EMIT

    node_bases = (ir.Loop, ir.Compute, ir.Sync, ir.TmaCopy, ir.TmaWait, ir.MatrixCopy, ir.CpAsyncWait, ir.CpAsyncCommit, ir.ReduceInit,
                  ir.BlockReduce, ir.Prologue, ir.Prefetched, ir.WgmmaFence, ir.WgmmaWait, ir.WarpRoles, ir.StageEmptyWait,
                  ir.StageRelease, ir.StageDrain, ir.BulkStoreWait)
    declared = {c for c in vars(ir).values() if isinstance(c, type) and issubclass(c, node_bases)}
    assert declared == set(ir.NODE_TYPES), f"ir.NODE_TYPES lacks {declared - set(ir.NODE_TYPES)}"
    missing = [t.__name__ for t in ir.NODE_TYPES if t not in EMIT]
    assert not missing, f"codegen/emit EMIT lacks {missing}"
    assert set(EMIT) == set(ir.NODE_TYPES), set(EMIT) - set(ir.NODE_TYPES)
    hooks = [t.__name__ for t in ir.NODE_TYPES if any(hasattr(t, a) for a in ("emit_cuda", "emit", "lines"))]
    assert not hooks, f"IR nodes are plain data, printed by emit/: {hooks} carry an emit method"
