"""List pages: `{items, nextCursor?}`, clamped limits, opaque keyset cursors, lite projection
(the 50,000-byte cap itself is `envelope.py`).

Cursors are base64url JSON of the last returned row's (sort value, id): stable when many rows
share one millisecond, and never a raw offset. `nextCursor` is absent (not null) on the last page.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from ..core.envelope import fit_envelope
from ..core.errors import InvalidArgument
from .connection import Connection, Row, loads

DEFAULT_LIMIT = 20
MAX_LIMIT = 200
# A cursor this server issues is base64 of a small JSON object (a sort value of at most ~10 KB of text
# and an id); anything longer is refused before it is decoded.
MAX_CURSOR_CHARS = 16_384
_BAD_CURSOR = "cursor is not a cursor this server issued; pass nextCursor back unchanged"

Fields = Literal["lite", "full"]


def clamp_limit(limit: int | None, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    if limit is None:
        return default
    return max(1, min(int(limit), maximum))


def encode_cursor(sort_value: Any, row_id: str) -> str:
    raw = json.dumps({"t": sort_value, "i": row_id}, ensure_ascii=False, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _sortable(value: Any) -> bool:
    """A sort value SQLite can bind: text, a 64-bit integer, a finite float (or NULL); never a list or bool."""
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return isinstance(value, float) and math.isfinite(value)


def decode_cursor(cursor: str | None) -> tuple[Any, str] | None:
    """(sort value, id) from a cursor."""
    if cursor is None or cursor == "":
        return None
    if not isinstance(cursor, str):
        raise InvalidArgument(f"{_BAD_CURSOR} (a cursor is a string)")
    if len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidArgument(f"{_BAD_CURSOR} (longer than {MAX_CURSOR_CHARS} characters)")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError, RecursionError, TypeError):
        # RecursionError: nested brackets ("[[[[…]]]]") exhaust the JSON decoder's stack.
        raise InvalidArgument(_BAD_CURSOR) from None
    if isinstance(data, dict) and "t" in data and isinstance(data.get("i"), str) and _sortable(data["t"]):
        return data["t"], data["i"]
    raise InvalidArgument(_BAD_CURSOR)


def to_doc(row: Row, *, json_cols: Iterable[str] = (), bool_cols: Iterable[str] = (),
           rename: dict[str, str] | None = None) -> dict[str, Any]:
    """A stored row as the document agents see: `_id`, `_creationTime`, no internal keys, no nulls."""
    out: dict[str, Any] = {"_id": row["id"]}
    if "createdAt" in row:
        out["_creationTime"] = row["createdAt"]
    json_set, bool_set, names = set(json_cols), set(bool_cols), rename or {}
    for key, value in row.items():
        if key in ("seq", "id") or value is None:
            continue
        if key in json_set:
            value = loads(value)
        elif key in bool_set:
            value = bool(value)
        out[names.get(key, key)] = value
    return out


def project(item: dict[str, Any], fields: str | None, lite_keys: Sequence[str]) -> dict[str, Any]:
    if fields == "lite":
        return {k: item[k] for k in lite_keys if k in item}
    return item


def check_fields(fields: str | None) -> str:
    if fields in (None, "full"):
        return "full"
    if fields == "lite":
        return "lite"
    raise InvalidArgument(f"fields must be 'lite' or 'full', got {fields!r}")


def equals(pairs: Iterable[tuple[str, Any]]) -> tuple[list[str], list[Any]]:
    """`column = ?` clauses (and their params) for every pair whose value is not None."""
    where, params = [], []
    for column, value in pairs:
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    return where, params


def keyset_page(
    conn: Connection,
    *,
    table: str,
    to_item: Callable[[Row], dict[str, Any]],
    where: Sequence[str] = (),
    params: Sequence[Any] = (),
    sort_col: str = "createdAt",
    descending: bool = True,
    limit: int | None = None,
    default_limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    fields: str | None = "full",
    lite_keys: Sequence[str] = ("_id", "_creationTime"),
    keep: Callable[[dict[str, Any]], bool] | None = None,
    items_key: str = "items",
) -> dict[str, Any]:
    """One page of `table` ordered by (sort_col, id), as `{items, nextCursor?}`.

    `keep` filters rows after the fetch (a page may then hold fewer than `limit` items, by
    design, and the cursor still advances past the filtered rows).
    """
    fields = check_fields(fields)
    size = clamp_limit(limit, default_limit)
    clauses, args = list(where), list(params)
    anchor = decode_cursor(cursor)
    op = "<" if descending else ">"
    if anchor is not None:
        value, last_id = anchor
        clauses.append(f"({sort_col} {op} ? OR ({sort_col} = ? AND id {op} ?))")
        args.extend([value, value, last_id])
    direction = "DESC" if descending else "ASC"
    sql = f"SELECT * FROM {table}"
    if clauses:
        sql += " WHERE " + " AND ".join(f"({c})" for c in clauses)
    sql += f" ORDER BY {sort_col} {direction}, id {direction} LIMIT ?"
    rows = conn.query(sql, [*args, size + 1])
    has_more = len(rows) > size
    rows = rows[:size]

    kept: list[tuple[Row, dict[str, Any]]] = []
    for row in rows:
        item = to_item(row)
        if keep is None or keep(item):
            kept.append((row, project(item, fields, lite_keys)))
    items = [item for _, item in kept]
    fit = fit_envelope(items, key=items_key)
    envelope: dict[str, Any] = {items_key: items[:fit]}
    if fit < len(items):
        last = kept[fit - 1][0]
        envelope["nextCursor"] = encode_cursor(last[sort_col], last["id"])
    elif has_more and rows:
        envelope["nextCursor"] = encode_cursor(rows[-1][sort_col], rows[-1]["id"])
    return envelope
