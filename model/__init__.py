"""The schedule IR: IterDomains, transforms, TensorViews, fusions, ops, targets, and
the one index algebra (expr.py) with its range analysis and simplifier (simplify.py) and
the index maps built from it (indexing.py).

Pure Python: imports nothing of verifier/, codegen/ or reports/, no z3, no CUDA.
"""
