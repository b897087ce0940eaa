"""The user's schedule and the nvFuser-style API: IterDomains, transforms, TensorViews
(tensor_base.py, tensor.py; commit_leaf_to_logical in logical_commit.py), fusions, ops (and the extent unification of the axes they map,
extent_unification.py), reductions, the MmaOp, the options a schedule passes
(options.py), targets, and the one index algebra (expr.py) with its range analysis and
simplifier (simplify.py); the snapshot verify and compile read, with broadcasts of inputs
into global memory read as views (producer_aliases.py).

Pure Python: imports nothing of hw/, execution/, verifier/, codegen/ or reports/, no z3, no CUDA.
"""
