"""The source tree stays readable: a module over 400 lines says in its docstring why it is one file (#33)."""

from __future__ import annotations

import ast

from support.paths import REPO

LIMIT = 400


def test_every_long_module_gives_its_reason():
    unexplained = []
    for path in sorted((REPO / "vantage_peers").rglob("*.py")):
        text = path.read_text()
        if text.count("\n") <= LIMIT:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if f"over {LIMIT} lines" not in doc:
            unexplained.append(f"{path.relative_to(REPO)} ({text.count(chr(10))} lines)")
    assert not unexplained, ("split these modules, or say in the module docstring why one file "
                             f"(a line with 'over {LIMIT} lines'): {unexplained}")
