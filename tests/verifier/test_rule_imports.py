"""The verifier's rule layer has no sideways arrows: a rule module imports the verifier's
registry, findings, solver, context and analysis/, never another rule module; verifier/ has no
import cycle; reports/ never reaches into verifier/rules/.

Imports are read from the source (ast), those inside functions included: an import moved into
a function to keep a cycle loadable is still a cycle. An import of a.b.c also runs a/__init__.py
and a/b/__init__.py, so it counts as an import of each of them.
"""

from __future__ import annotations

from support.import_graph import ROOT, cycles, graph, imports, modules

RULES = "tileproof.verifier.rules"


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
