"""Helpers shared by several test files (not tests themselves). Test files import
`support.<module>`: pytest puts tests/ on the path (pythonpath in pyproject.toml)."""
