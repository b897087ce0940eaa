"""The one index algebra: every op has every renderer, and the renderers agree."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest
import z3

from tileproof.codegen.emit.cuda_expr import CUDA, to_cuda
from tileproof.model import expr as E
from tileproof.model.expr import OPS, PY_EVAL, PY_SOURCE, SYMPY, compiled, evaluate, to_sympy
from tileproof.model.simplify import bounds
from tileproof.verifier.solver import Z3_BV, Z3_INT, Query

from support.expr_gen import random_expr

RENDERERS = {"python": PY_EVAL, "python-source": PY_SOURCE, "sympy": SYMPY, "z3-bv": Z3_BV, "z3-int": Z3_INT,
             "cuda": CUDA}
ROOT_OPS = {"const", "var"}


@pytest.mark.parametrize("name", RENDERERS)
def test_every_op_in_every_table(name):
    table = RENDERERS[name]
    missing = [op for op in OPS if op not in ROOT_OPS and op not in table]
    assert not missing, f"{name} lacks {missing}"
    if name == "z3-int":
        assert table["xor"] is None  # integers cannot express xor; such queries use bit-vectors


RANGES = {v: E.const(61) for v in "abc"}  # every value below 61


def cases(n=300, seed=7):
    """Random expressions with values for a, b, c; each fits the C++'s 64 bits."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        e = random_expr(rng, 4)
        if bounds(e, RANGES).hi < 2**63:
            out.append((e, {v: rng.randint(0, 60) for v in "abc"}))
    return out


def test_z3_renderer_evaluates_like_python():
    for e, env in cases():
        want = evaluate(e, env)
        q = Query([e] + [E.const(v) for v in env.values()], RANGES, simplify=False)  # the renderer alone
        s = z3.Solver(ctx=q.ctx)
        for k, v in env.items():
            s.add(q.var(k) == q.val(v))
        got = z3.simplify(z3.substitute(q.term(e), *[(q.var(k), q.val(v)) for k, v in env.items()]))
        assert q._as_int(got) == want, (str(e), env)


def test_compiled_python_evaluates_like_python():
    for e, env in cases():
        assert compiled(e)(env) == evaluate(e, env), str(e)
    with pytest.raises(KeyError, match="no value for variable 'b'"):  # the same error as evaluate's
        compiled(E.var("a") + E.var("b"))({"a": 1})
    with pytest.raises(ZeroDivisionError):
        compiled(E.floordiv(E.var("a"), E.var("b")))({"a": 1, "b": 0})


def test_sympy_renderer_evaluates_like_python():
    for e, env in cases(150):
        subs = {s: env[s.name] for s in to_sympy(e).free_symbols}
        if e.has_op("xor"):
            continue  # sympy prints xor as an uninterpreted function
        assert int(to_sympy(e).subs(subs)) == evaluate(e, env), str(e)


def _run_cpp(tmp_path, name: str, lines: list[str]) -> list[str]:
    """What the C++ program `lines` prints, compiled by g++ -O0, split into words."""
    src = tmp_path / f"{name}.cpp"
    src.write_text("\n".join(lines))
    subprocess.run(["g++", "-O0", "-o", str(tmp_path / name), str(src)], check=True)
    return subprocess.run([str(tmp_path / name)], capture_output=True, text=True, check=True).stdout.split()

@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_cuda_renderer_evaluates_like_python(tmp_path):
    items = cases(120, seed=11)
    lines = ["#include <cstdio>", "#include <algorithm>", "using std::max;", "using std::min;", "int main() {"]
    for k, (e, env) in enumerate(items):
        lines.append("{ " + " ".join(f"unsigned long long {v} = {env[v]}ULL;" for v in "abc")
                     + f' printf("%llu\\n", (unsigned long long)({to_cuda(e)})); }}')
    lines.append("}")
    out = _run_cpp(tmp_path, "algebra", lines)
    assert [int(x) for x in out] == [evaluate(e, env) for e, env in items]



@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_a_plus_b_minus_their_max_prints_as_their_min_and_evaluates_alike(tmp_path):
    """a + b - max(a, b) (a skipped loop's trip count, min(extent, count)) prints as min(a, b); a
    sum that is not a + b keeps its max."""
    a, b, c = (E.var(v) for v in "abc")
    low = [E.add(a, E.const(1), b, E.mul(E.maximum(E.add(a, E.const(1)), b), E.const(-1))),
           E.add(E.mul(E.maximum(E.mul(a, E.const(4)), E.const(7)), E.const(-1)), E.const(7), E.mul(a, E.const(4)))]
    kept = E.add(a, c, E.mul(E.maximum(a, b), E.const(-1)))
    assert all(to_cuda(e).startswith("min(") for e in low) and "max(" in to_cuda(kept)
    envs = [{"a": 0, "b": 0, "c": 5}, {"a": 3, "b": 9, "c": 1}, {"a": 40, "b": 2, "c": 0}]
    items = [(e, env) for e in low + [kept] for env in envs]
    lines = ["#include <cstdio>", "#include <algorithm>", "using std::max;", "using std::min;", "int main() {"]
    for e, env in items:
        lines.append("{ " + " ".join(f"unsigned long long {v} = {env[v]}ULL;" for v in "abc")
                     + f' printf("%llu\\n", (unsigned long long)({to_cuda(e)})); }}')
    lines.append("}")
    out = _run_cpp(tmp_path, "minimum", lines)
    assert [int(x) for x in out] == [evaluate(e, env) % 2**64 for e, env in items]

@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_32_bit_rendering_evaluates_like_python_where_bounded(tmp_path):
    """model/simplify.py's peak, from which codegen/lower/index_width.py chooses 32 bits, covers
    every value C++ computes: where it is below 2^32 for the variables' ranges, 32-bit unsigned
    arithmetic gives Python's value at the ranges' edges (where partial sums, products and ceildiv
    numerators are largest)."""
    from tileproof.codegen.lower.index_width import LIMIT

    rng = random.Random(5)
    items, near = [], 0
    while len(items) < 150:
        his = {v: rng.choice([60, 1000, 65535, 2**20, 2**31 - 1]) for v in "abc"}
        e = random_expr(rng, 4)
        top = bounds(e, {v: (0, h) for v, h in his.items()}).peak
        if top is None or top >= LIMIT:
            continue
        near += top >= 2**31
        for env in (his, {v: rng.randint(0, h) for v, h in his.items()}):
            items.append((e, env))
    lines = ["#include <cstdio>", "#include <algorithm>", "using std::max;", "using std::min;", "int main() {"]
    for e, env in items:
        lines.append("{ " + " ".join(f"unsigned {v} = {env[v]}U;" for v in "abc")
                     + f' printf("%u\\n", (unsigned)({to_cuda(e, cast=False, bits=32)})); }}')
    lines.append("}")
    out = _run_cpp(tmp_path, "algebra32", lines)
    assert [int(x) for x in out] == [evaluate(e, env) for e, env in items]
    assert near >= 3  # some bounds close to the limit


def test_split_merge_swizzle_round_trip_brute_force():
    import tileproof as tp
    from tileproof.execution.indexing import indices_from_logical, indices_from_loop

    for n, f in [(6, 4), (8, 4), (12, 5), (16, 16)]:
        with tp.Fusion() as fusion:
            t0 = tp.make_contig_concrete_tensor([n, 4]); fusion.add_input(t0)
            t1 = tp.set(t0); fusion.add_output(t1)
        t1.split(0, f).merge(1, 2)
        if f in (4, 16):
            t1.swizzle(tp.SwizzleType.XOR, 0, 1)  # xor is its own inverse even off a bijective domain
        for i in range(n):
            for j in range(4):
                fwd = indices_from_logical(t1, [E.const(i), E.const(j)])
                env = {f"{t1.name}.{d.name}": evaluate(fwd[d.uid], {}) for d in t1.loop}
                back = indices_from_loop(t1)
                assert [evaluate(back[d.uid], env) for d in t1.logical] == [i, j]
