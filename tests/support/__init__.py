"""Helpers shared by several test files (not tests themselves). Test files put tests/ on
sys.path and import `support.<module>`."""
