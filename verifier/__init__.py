"""Encodes a scheduled fusion as z3 queries, one rule per function
(rules/<family>.py, registered in registry.py), and returns a Report.

May import model/, hw/ and execution/ (and z3); never codegen/ or reports/.
"""
