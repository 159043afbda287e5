"""Text of SQLite scripts for the translator (db/pgschema.py): statements, comments, the error."""

from __future__ import annotations

import re

IDENT = r'(?:"[^"]+"|[A-Za-z_]\w*)'


class Untranslatable(ValueError):
    """A SQLite statement this module has no PostgreSQL translation for."""

    def __init__(self, statement: str, why: str) -> None:
        self.statement = statement
        super().__init__(f"cannot translate to PostgreSQL ({why}): {' '.join(statement.split())[:300]}")


def strip_comments(sql: str) -> str:
    """`sql` without its `--` and `/* */` comments (a comment may hold a quote, a literal may hold `--`)."""
    out, i, n = [], 0, len(sql)
    while i < n:
        if sql[i] == "'":
            j = sql.find("'", i + 1)
            while j != -1 and sql[j + 1:j + 2] == "'":
                j = sql.find("'", j + 2)
            j = n if j == -1 else j + 1
            out.append(sql[i:j])
            i = j
        elif sql.startswith("--", i):
            i = n if sql.find("\n", i) == -1 else sql.find("\n", i)
        elif sql.startswith("/*", i):
            i = n if sql.find("*/", i) == -1 else sql.find("*/", i) + 2
            out.append(" ")
        else:
            out.append(sql[i])
            i += 1
    return "".join(out)


def split_statements(sql: str) -> list[str]:
    """The statements of a script, comments removed; a trigger's `BEGIN … END` stays one statement."""
    text = strip_comments(sql)
    out, start, in_literal = [], 0, False
    for i, ch in enumerate(text):
        if ch == "'":
            in_literal = not in_literal
        elif ch == ";" and not in_literal:
            piece = text[start:i].strip()
            if re.match(r"CREATE\s+(TEMP\w*\s+)?TRIGGER\b", piece, re.IGNORECASE) and \
                    not re.search(r"\bEND\s*$", piece, re.IGNORECASE):
                continue  # a statement of the trigger's body
            if piece:
                out.append(piece)
            start = i + 1
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out


def words(text: str) -> str:
    return " ".join(text.split())
