"""The project's documentation stands on its own: every public name and method is documented,
every relative link of the docs resolves to a file of the repository (and a heading there, when
it names one), no doc points outside the repository, and `tileproof explain` cites only files that
exist (ours by path, other projects' by the project's name)."""

from __future__ import annotations

import enum
import inspect
import re
from pathlib import Path

import pytest

import tileproof as tp
from tileproof.reports.explain import explain_text
from tileproof.verifier.registry import all_rules

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "tests" / "gpu" / "README.md",
               *(ROOT / "docs").glob("*.md")])
PUBLIC = sorted(set(tp.__all__) | {"abs", "compile", "max", "set", "sum"})  # the shadowing names live on tp only
# Internal project notes that are not part of the repository: no doc or rule may point at them,
# nor at a top-level note (an all-capitals `NAME.md`) that the repository does not hold.
FORBIDDEN = ("../shared", "/work/shared")
NOTE = re.compile(r"\b[A-Z][A-Z_]+\.md\b")


def _outside_notes(text: str) -> list[str]:
    """What `text` points at outside the repository: FORBIDDEN paths, and notes it does not hold."""
    notes = {m.group(0) for m in NOTE.finditer(text)}
    return [f for f in FORBIDDEN if f in text] + sorted(n for n in notes if not any(ROOT.rglob(n)))
# A citation of another project's file names the project first ("nvFuser doc/dev/tma.md").
OTHER_PROJECTS = ("nvFuser", "CUTLASS", "CuTe", "Triton", "DeepGEMM", "PyTorch")
PATH = re.compile(r"(?<![\w/.-])((?:\.\./)*[\w.-]+(?:/[\w.-]+)*\.(?:py|md|json|hpp|cpp|h|cu|toml))(#[\w-]+)?")


def test_the_docs_exist():
    assert {p.name for p in (ROOT / "docs").glob("*.md")} >= {"architecture.md", "supported.md", "hardware.md"}


# -- docstrings -------------------------------------------------------------------------------------

def _doc(obj) -> str:
    return (inspect.getdoc(obj) or "").strip()


def _generated(cls: type) -> bool:
    """A dataclass's docstring that @dataclass wrote: its own signature, not a description."""
    return (cls.__doc__ or "").startswith(f"{cls.__name__}(")


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_has_a_docstring(name):
    obj = getattr(tp, name)
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return  # dtypes and TARGETS are values
    assert _doc(obj), f"tp.{name} has no docstring"
    if inspect.isclass(obj):
        assert not _generated(obj), f"tp.{name}'s docstring is the signature @dataclass wrote"


def _public_members(cls: type):
    """(name, function) for every public method and property a tileproof class defines or inherits
    from a tileproof class; enum members and data fields are values, not methods."""
    seen = set()
    for owner in cls.__mro__:
        if not owner.__module__.startswith("tileproof"):
            continue
        for name, member in vars(owner).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if issubclass(cls, enum.Enum) and name in cls.__members__:
                continue
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if isinstance(member, property) or inspect.isfunction(member):
                yield name, getattr(cls, name) if isinstance(member, property) else member


CLASSES = [getattr(tp, n) for n in PUBLIC if inspect.isclass(getattr(tp, n))]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_public_methods_and_properties_have_docstrings(cls):
    missing = [name for name, member in _public_members(cls) if not _doc(member)]
    assert not missing, f"{cls.__name__}: {', '.join(missing)} have no docstring"


def test_the_member_check_sees_methods_properties_and_inherited_ones():
    names = dict(_public_members(tp.Split))
    assert {"make", "forward", "backward", "inputs", "outputs"} <= set(names)
    assert "Serial" not in dict(_public_members(tp.ParallelType))
    assert {"is_thread", "cuda_name"} <= set(dict(_public_members(tp.ParallelType)))


# -- links --------------------------------------------------------------------------------------------

def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _anchors(path: Path) -> set[str]:
    text = _without_code_blocks(path.read_text())
    anchors, counts = set(), {}
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
        slug = _slug(heading)
        n = counts.get(slug, 0)
        anchors.add(slug if n == 0 else f"{slug}-{n}")
        counts[slug] = n + 1
    return anchors


def _links(path: Path) -> list[str]:
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", _without_code_blocks(path.read_text()))


def _check_target(source: Path, target: str) -> str | None:
    """What is wrong with a relative link from `source` to `target`, or None."""
    file_part, _, anchor = target.partition("#")
    resolved = (source.parent / file_part).resolve() if file_part else source
    if ROOT not in resolved.parents and resolved != ROOT:
        return f"{target} points outside the repository"
    if not resolved.exists():
        return f"{target}: no such file"
    if anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
        return f"{target}: {resolved.name} has no heading with the anchor #{anchor}"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_to_files_and_headings_of_the_repository(doc):
    problems = []
    for target in _links(doc):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        problem = _check_target(doc, target)
        if problem:
            problems.append(problem)
    assert not problems, problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_points_outside_the_repository(doc):
    text = doc.read_text()
    assert not _outside_notes(text), doc


def _named_paths(text: str) -> list[tuple[str, str]]:
    """(path, the bullet, table row or paragraph before it) for every `file.ext` in code spans."""
    out, text = [], _without_code_blocks(text)
    for m in re.finditer(r"`([^`\n]+)`", text):
        path = PATH.fullmatch(m.group(1))
        if path:
            before = text[:m.start()]
            start = max(before.rfind("\n\n"), before.rfind("\n- "), before.rfind("\n|"))
            out.append((path.group(1), before[start:]))
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_files_named_in_the_docs_exist(doc):
    """A file a doc names in `code` is ours (relative to the repository root or to the doc) or
    another project's, named as such in the same bullet, row or paragraph."""
    missing = [path for path, context in _named_paths(doc.read_text())
               if not (ROOT / path).exists() and not (doc.parent / path).exists()
               and not any(p in context for p in OTHER_PROJECTS + ("CUDA",))]
    assert not missing, missing


def test_the_link_checker_finds_broken_links_and_anchors(tmp_path):
    readme = ROOT / "README.md"
    assert _check_target(readme, "docs/hardware.md#tma-rank") is None
    assert "no such file" in _check_target(readme, "docs/nothing.md")
    assert "no heading" in _check_target(readme, "docs/hardware.md#no-such-section")
    assert "outside" in _check_target(readme, "../shared/notes.md")
    assert _outside_notes("see ROADMAP.md and README.md") == ["ROADMAP.md"]
    assert _slug("TMA swizzle span and row pitch") == "tma-swizzle-span-and-row-pitch"
    assert _slug("Generated kernels (`gpu_kernels.py`)") == "generated-kernels-gpu_kernelspy"
    named = _named_paths("- ours: `model/expr.py`\n- Source: nvFuser\n  `doc/dev/tma.md`\n\nsee `doc/dev/tma.md`")
    assert [(p, any(o in c for o in OTHER_PROJECTS)) for p, c in named] == [
        ("model/expr.py", False), ("doc/dev/tma.md", True), ("doc/dev/tma.md", False)]


# -- tileproof explain ----------------------------------------------------------------------------------

def _cited_paths(text: str) -> list[tuple[str, str | None, str]]:
    """(path, anchor, the citation it appears in) for every file path in an explain page; a
    citation is the text between semicolons (or line starts) around the path."""
    out = []
    flat = text.replace("\n", " ")
    for m in PATH.finditer(flat):
        start = max(flat.rfind(";", 0, m.start()), 0)
        out.append((m.group(1), m.group(2)[1:] if m.group(2) else None, flat[start:m.start()]))
    return out


RULES = all_rules()


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_explain_cites_only_files_that_exist(rule):
    text = explain_text(rule.code)
    assert not _outside_notes(text), rule.code
    problems = []
    for path, anchor, citation in _cited_paths(text):
        if (ROOT / path).is_file():
            if anchor and anchor not in _anchors(ROOT / path):
                problems.append(f"{path}#{anchor}: no such heading")
        elif path.endswith("hardware.md") or not any(p in citation for p in OTHER_PROJECTS):
            problems.append(f"{path} is not a file of this repository nor another project's file")
    assert not problems, problems


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_reported_with_names_only_rule_codes(rule):
    """The optional "Reported with" section is a list of codes; citations belong in References."""
    codes = {r.code for r in RULES}
    assert set(rule.reported_with) <= codes, rule.reported_with


def test_explain_checker_flags_missing_files_and_sections():
    cited = _cited_paths("PTX ISA 5.5.7; docs/hardware.md#tma-rank; nvFuser doc/dev/tma.md (step 1);\n"
                         "hardware.md; tileproof verifier/solver.py")
    assert [(p, a) for p, a, _ in cited] == [("docs/hardware.md", "tma-rank"), ("doc/dev/tma.md", None),
                                             ("hardware.md", None), ("verifier/solver.py", None)]
    assert "nvFuser" in cited[1][2] and "nvFuser" not in cited[2][2]
