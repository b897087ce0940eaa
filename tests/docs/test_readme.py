"""The README's rule-code table is the registry: one row per registered code, nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from tileproof.verifier.registry import all_rules

README = Path(__file__).resolve().parents[2] / "README.md"


def test_rule_table_lists_every_registered_code_with_its_family_and_summary():
    rows = re.findall(r"^\| `([A-Z0-9-]+)` \| (\w+) \| (.*) \|$", README.read_text(), re.M)
    table = {code: (family, summary) for code, family, summary in rows}
    rules = {r.code: r for r in all_rules()}
    assert sorted(table) == sorted(rules), set(table) ^ set(rules)
    for code, (family, summary) in table.items():
        assert family == rules[code].family and summary.startswith(rules[code].summary.rstrip(".")), code
