"""Renders Reports: terminal (rich), JSON, HTML. Pure functions from a Report to text.

May import verifier/ (for the Report types) and model/; nothing imports reports/ but
the CLI and the public API.
"""
