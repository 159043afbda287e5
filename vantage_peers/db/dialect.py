"""The SQL the stores write (SQLite's dialect) turned into PostgreSQL's, in one place.

Stores write one SQL text for both backends. Most of it is already standard; what is not is rewritten
here, once per distinct statement (cached), so a domain store never branches on the database:

- placeholders: `?` and `?N` become psycopg's `%s` / `%(pN)s` (a literal `%` is doubled; a bare `?`
  among numbered ones is numbered as SQLite numbers it);
- `LIKE` is case-insensitive for ASCII in SQLite: `ILIKE`; `COLLATE NOCASE` is dropped (those
  columns are CITEXT on PostgreSQL, see pgschema.py); a `/*BYTES*/` mark after a column (a comment
  to SQLite, whose text columns are BINARY) is `COLLATE "C"`: byte order, where the database's
  collation may be linguistic (scopes.byte_range);
- SQLite's planner hints (`INDEXED BY`) are dropped;
- `INSERT OR IGNORE` becomes `INSERT … ON CONFLICT DO NOTHING`;
- scalar `max(a, b)` / `min(a, b)` become `greatest` / `least`; `instr` becomes `strpos`;
  `char(a, b…)` becomes `chr(a) || chr(b)…`; `CAST(x AS INTEGER)` is `AS BIGINT` (SQLite's integers are
  64-bit, PostgreSQL's INTEGER 32: the schema's INTEGER columns are BIGINT too);
  `a IS ?` becomes `a IS NOT DISTINCT FROM %s`;
- the JSON text functions (`json_each`, `json_group_array`, `json_insert(x, '$[#]', v)`,
  `json_array_length`) become their `json`/`jsonb` equivalents on the same TEXT columns.

Anything else SQLite-only (FTS5, vec0, PRAGMA) lives behind `search/` and `db/` functions instead.
"""

from __future__ import annotations

import functools
import re

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(value: object) -> bool:
    """Does `value` name a PostgreSQL database (issue #25) rather than a SQLite file?"""
    return bool(value) and str(value).startswith(POSTGRES_SCHEMES)


def _split_literals(sql: str) -> list[tuple[bool, str]]:
    """(is_literal, text) pieces: single-quoted literals kept apart so rewrites never touch them."""
    parts: list[tuple[bool, str]] = []
    i, start, n = 0, 0, len(sql)
    while i < n:
        if sql[i] == "'":
            if i > start:
                parts.append((False, sql[start:i]))
            j = i + 1
            while j < n:
                if sql[j] == "'":
                    if j + 1 < n and sql[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            parts.append((True, sql[i:j + 1]))
            i = start = j + 1
        else:
            i += 1
    if start < n:
        parts.append((False, sql[start:]))
    return parts


def _literal_spans(sql: str) -> list[tuple[int, int]]:
    """[start, end) of every single-quoted literal."""
    spans, at = [], 0
    for lit, piece in _split_literals(sql):
        if lit:
            spans.append((at, at + len(piece)))
        at += len(piece)
    return spans


def _call_args(text: str, open_at: int) -> tuple[list[str], int]:
    """The top-level comma-separated arguments of the call whose '(' is at `open_at`, and the index after ')'."""
    depth, args, cur, i, quote = 0, [], [], open_at, False
    while i < len(text):
        ch = text[i]
        if quote:
            cur.append(ch)
            if ch == "'":
                quote = False
        elif ch == "'":
            quote = True
            cur.append(ch)
        elif ch == "(":
            depth += 1
            if depth > 1:
                cur.append(ch)
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i + 1
            cur.append(ch)
        elif ch == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    raise ValueError(f"unbalanced parentheses in SQL: {text[open_at:open_at + 80]!r}")


def _rewrite_calls(sql: str, name: str, rewrite) -> str:
    """Replace every call `name(...)` (case-insensitive) by `rewrite(args, rest_after_call) -> (new, consumed)`."""
    pattern = re.compile(rf"\b{name}\s*\(", re.IGNORECASE)
    out, pos, search_at = [], 0, 0
    literals = _literal_spans(sql)
    while True:
        m = pattern.search(sql, search_at)
        if m is None:
            out.append(sql[pos:])
            return "".join(out)
        if any(a <= m.start() < b for a, b in literals):  # 'max(1, 2)' inside a string literal is data
            search_at = m.end()
            continue
        args, end = _call_args(sql, m.end() - 1)
        args = [_rewrite_calls(a, name, rewrite) for a in args]  # nested calls of the same function
        new, consumed = rewrite(args, sql[end:])
        out.append(sql[pos:m.start()])
        out.append(new)
        pos = search_at = end + consumed


def _json_each(args: list[str], rest: str) -> tuple[str, int]:
    alias = re.match(r"\s+(?:AS\s+)?([A-Za-z_]\w*)\b", rest, re.IGNORECASE)
    keywords = {"where", "on", "join", "group", "order", "limit", "left", "inner", "cross", "union"}
    if alias and alias.group(1).lower() not in keywords:
        return f"json_array_elements_text(({args[0]})::json) AS {alias.group(1)}(value)", alias.end()
    return f"json_array_elements_text(({args[0]})::json) AS json_each(value)", 0


def _json_insert(args: list[str], rest: str) -> tuple[str, int]:
    if len(args) != 3 or args[1] != "'$[#]'":
        raise ValueError("only json_insert(x, '$[#]', value) (append) is supported on PostgreSQL")
    return f"(({args[0]})::jsonb || jsonb_build_array(({args[2]})::text))::text", 0


def _code(text: str) -> str:
    """Rewrite one piece of SQL that holds no string literal."""
    text = re.sub(r"\bINSERT\s+OR\s+IGNORE\s+INTO\b", "INSERT /*IGNORE*/ INTO", text, flags=re.IGNORECASE)
    text = re.sub(r"\s+COLLATE\s+NOCASE\b", "", text, flags=re.IGNORECASE)
    text = re.sub(r"\s*/\*BYTES\*/", ' COLLATE "C"', text)
    text = re.sub(r"\s+(?:INDEXED\s+BY\s+\w+|NOT\s+INDEXED)\b", "", text, flags=re.IGNORECASE)  # planner hints
    text = re.sub(r"\bNOT\s+LIKE\b", "NOT ILIKE", text, flags=re.IGNORECASE)
    text = re.sub(r"(?<!NOT )\bLIKE\b", "ILIKE", text, flags=re.IGNORECASE)
    # A bare parameter tested for NULL has no type to infer: give it one (any value casts to text).
    text = re.sub(r"(\?\d*)\s+IS\s+(NOT\s+)?NULL\b", lambda m: f"CAST({m.group(1)} AS TEXT) IS {m.group(2) or ''}NULL",
                  text, flags=re.IGNORECASE)
    text = re.sub(r"\bIS\s+NOT\s+\?", "IS DISTINCT FROM ?", text, flags=re.IGNORECASE)
    text = re.sub(r"\bIS\s+\?", "IS NOT DISTINCT FROM ?", text, flags=re.IGNORECASE)
    text = re.sub(r"\binstr\s*\(", "strpos(", text, flags=re.IGNORECASE)
    text = re.sub(r"\bAS\s+INTEGER\s*\)", "AS BIGINT)", text, flags=re.IGNORECASE)
    return text


def _placeholders(text: str, numbered: bool, last: int) -> tuple[str, int]:
    """`?N` -> %(pN)s, `?` -> %s, `%` -> `%%`. In a statement that numbers some placeholders, a bare
    `?` is numbered as SQLite does (one more than the largest so far) since psycopg cannot mix the two;
    returns the text and the largest number used."""
    text = text.replace("%", "%%")
    if not numbered:
        return text.replace("?", "%s"), last

    def number(m: re.Match[str]) -> str:
        nonlocal last
        n = int(m.group(1)) if m.group(1) else last + 1
        last = max(last, n)
        return f"%(p{n})s"

    return re.sub(r"\?(\d*)", number, text), last


@functools.lru_cache(maxsize=4096)
def to_postgres(sql: str) -> tuple[str, bool]:
    """(PostgreSQL text, uses numbered parameters) for one SQLite statement."""
    pieces = [(lit, piece if lit else _code(piece)) for lit, piece in _split_literals(sql)]
    text = "".join(piece for _, piece in pieces)
    # Calls can span literals ('$[#]', '[]'): rewritten on the whole text, their parsers skip quotes.
    text = _rewrite_calls(text, "json_each", _json_each)
    text = _rewrite_calls(text, "json_insert", _json_insert)
    text = _rewrite_calls(text, "json_array_length", lambda a, r: (f"json_array_length(({a[0]})::json)", 0))
    text = _rewrite_calls(text, "json_group_array",
                          lambda a, r: (f"coalesce(json_agg({a[0]}), '[]'::json)::text", 0))
    text = _rewrite_calls(text, "char", lambda a, r: ("(" + " || ".join(f"chr({x})" for x in a) + ")", 0))
    text = _rewrite_calls(text, "max", lambda a, r: ((f"greatest({', '.join(a)})" if len(a) > 1
                                                       else f"max({a[0]})"), 0))
    text = _rewrite_calls(text, "min", lambda a, r: ((f"least({', '.join(a)})" if len(a) > 1
                                                       else f"min({a[0]})"), 0))
    if "/*IGNORE*/" in text:
        text = text.replace("/*IGNORE*/ ", "")
        returning = re.search(r"\bRETURNING\b", text, re.IGNORECASE)
        if returning:
            text = f"{text[:returning.start()]}ON CONFLICT DO NOTHING {text[returning.start():]}"
        else:
            text = f"{text.rstrip().rstrip(';')} ON CONFLICT DO NOTHING"
    pieces = _split_literals(text)
    numbered = any(not lit and re.search(r"\?\d", piece) for lit, piece in pieces)
    out, last = [], 0
    for lit, piece in pieces:
        if lit:
            out.append(piece.replace("%", "%%"))
        else:
            converted, last = _placeholders(piece, numbered, last)
            out.append(converted)
    return "".join(out), numbered


@functools.lru_cache(maxsize=4096)
def identifiers(sql: str) -> dict[str, str]:
    """lower-case -> as written, for every mixed-case word of a statement: PostgreSQL folds unquoted
    names to lower case, so result columns are given back the names the SQL (and the schema) spell."""
    return {w.lower(): w for w in _WORD.findall(sql) if not w.islower() and not w.isupper()}


def among(backend: str, column: str, keys: list[int]) -> tuple[str, list[object]]:
    """(`column` is one of the integer `keys`, its parameters) for `backend`'s connection: a list of `?`
    on SQLite; one array parameter on PostgreSQL (`= ANY(?::bigint[])`), so that a statement over 100 keys
    binds one value and keeps one text whatever their number (a list of 100 placeholders cost ≈0.7 ms
    more per statement: binding, and a new prepared text per list length). The same rows either way."""
    if backend == "postgres":
        return f"{column} = ANY(?::bigint[])", [[int(k) for k in keys]]
    return f"{column} IN ({','.join('?' for _ in keys)})", [int(k) for k in keys]
