"""The layout reads as the pipeline: model <- hw <- execution <- {verifier, codegen, reports}.
Each floor imports only the floors below it (model imports nothing of the others, hw only model,
execution only model and hw, and none of the three imports z3 or CUDA); verifier does not import
codegen or reports; the library has no import cycle, in-function imports included; within
codegen, lower/ imports neither emit/ nor runtime/ and emit/ does not import lower/; the kernel
IR is plain data that emit/'s one table prints."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.import_graph import PACKAGE, cycles, graph, imports, modules, with_packages

ROOT = Path(__file__).resolve().parent.parent
FLOORS = ("model", "hw", "execution")  # each may import the ones before it
UPPER = ("verifier", "codegen", "reports", "recipes")
EXTERNAL = ("z3", "cuda", "torch", "rich", "triton")  # solver, driver and display: never below verifier/codegen


def _reached(folder: str) -> dict[str, list[str]]:
    """Each package module a file of `folder` imports -> where (file:line), packages included."""
    out: dict[str, list[str]] = {}
    for path in modules(folder).values():
        for name, line, _ in imports(path):
            for target in with_packages(name):
                out.setdefault(target, []).append(f"{path.relative_to(ROOT)}:{line}")
    return out


@pytest.mark.parametrize("floor", FLOORS)
def test_each_floor_imports_only_the_floors_below(floor):
    below = FLOORS[:FLOORS.index(floor) + 1]
    reached = _reached(floor)
    assert any(t.startswith(f"{PACKAGE}.{floor}.") for t in reached), "the reader found no imports"
    bad = {t: at for t, at in reached.items() if t.startswith(PACKAGE + ".")
           and t.split(".")[1] not in below}
    assert not bad, f"{floor}/ imports above its floor:\n" + "\n".join(f"{t}: {at}" for t, at in sorted(bad.items()))
    external = {t: at for t, at in reached.items() if t.split(".")[0] in EXTERNAL}
    assert not external, f"{floor}/ imports {sorted(external)}: {external}"


def test_the_library_has_no_import_cycle():
    edges = graph()
    assert len(edges) > 100, "the reader found too few modules"
    found = cycles(edges)
    assert not found, "modules that import each other (in-function imports included):\n" + \
                      "\n".join(", ".join(m.removeprefix(PACKAGE + ".") for m in c) for c in found)


def test_no_import_of_the_package_inside_a_function():
    """Optional or heavy outside modules (numpy, torch, ast) may load late; the package's own never
    need to, now that nothing imports upward."""
    inside = [f"{p.relative_to(ROOT)}:{line} {name}" for p in modules().values() for name, line, nested in imports(p)
              if nested and name.startswith(PACKAGE + ".")]
    assert not inside, "imports inside functions (each one hides a cycle or belongs at the top):\n" + \
                       "\n".join(sorted(set(inside)))


def test_the_checks_see_a_floor_reaching_up(tmp_path):
    """The floor check can fail: an execution analysis importing the verifier is found, an import
    under TYPE_CHECKING is not."""
    path = tmp_path / "leak.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..codegen import ir\n"
                    "def f():\n    from ..verifier.context import VerifyContext\n")
    names = [n for n, _, _ in imports(path, f"{PACKAGE}.execution.leak")]
    assert f"{PACKAGE}.verifier.context" in names and f"{PACKAGE}.codegen.ir" not in names


def test_verifier_does_not_reach_downstream():
    reached = _reached("verifier")
    bad = {t: at for t, at in reached.items() if t.split(".")[1:2] in (["codegen"], ["reports"])}
    assert not bad, bad


def test_reports_do_not_reach_codegen():
    reached = _reached("reports")
    bad = {t: at for t, at in reached.items() if t.split(".")[1:2] == ["codegen"]}
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


def test_codegen_renders_and_proves_nothing():
    """codegen/ reads what verify decided from its Report (verifier.diagnostics) and runs verify
    first (compile.py: verifier.verify), but asks no solver: no z3, nothing of the verifier's
    context, solver, access models or analyses (issue 32)."""
    names = resolved_imports_of("codegen")
    verifier = reaches(names, "tileproof.verifier")
    assert reaches(verifier, "tileproof.verifier.diagnostics"), "the resolver found no import of the Report"
    assert not reaches(names, "z3"), reaches(names, "z3")
    allowed = reaches(verifier, "tileproof.verifier.diagnostics") | reaches(verifier, "tileproof.verifier.verify")
    assert verifier - {"tileproof.verifier"} <= allowed, verifier - allowed


def test_every_ir_node_type_in_the_emit_table():
    from tileproof.codegen import ir
    from tileproof.codegen.emit import EMIT

    node_bases = (ir.Loop, ir.Compute, ir.Sync, ir.TmaCopy, ir.TmaWait, ir.MatrixCopy, ir.CpAsyncWait, ir.CpAsyncCommit, ir.ReduceInit,
                  ir.BlockReduce, ir.SiblingStep, ir.GridReduce, ir.GroupedGridReduce, ir.Prologue, ir.Prefetched, ir.WgmmaFence, ir.WgmmaCommit,
                  ir.WgmmaWait, ir.Tcgen05Commit, ir.Tcgen05Wait, ir.WarpRoles, ir.StageEmptyWait,
                  ir.StageRelease, ir.StageDrain, ir.BulkStoreWait, ir.IndexNames, ir.WholeTile, ir.TurnWait, ir.TurnPass,
                  ir.Rotated)
    declared = {c for c in vars(ir).values() if isinstance(c, type) and issubclass(c, node_bases)}
    assert declared == set(ir.NODE_TYPES), f"ir.NODE_TYPES lacks {declared - set(ir.NODE_TYPES)}"
    missing = [t.__name__ for t in ir.NODE_TYPES if t not in EMIT]
    assert not missing, f"codegen/emit EMIT lacks {missing}"
    assert set(EMIT) == set(ir.NODE_TYPES), set(EMIT) - set(ir.NODE_TYPES)
    hooks = [t.__name__ for t in ir.NODE_TYPES if any(hasattr(t, a) for a in ("emit_cuda", "emit", "lines"))]
    assert not hooks, f"IR nodes are plain data, printed by emit/: {hooks} carry an emit method"
