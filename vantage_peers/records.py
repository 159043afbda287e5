"""A small generic helper for document tables (one row = one agent-facing document).

The team-record domains (diary, briefing notes, components, mandates, business units) all store
documents the same way: a prefixed `id`, camelCase columns, arrays and objects as JSON text,
`createdAt`/`updatedAt`. `Table` does their insert / get / patch / delete / page / keyword search
once; each domain's store keeps its own rules (who may do what, lifecycles, versions).
Column names passed here come from code, never from callers; values are always bound parameters.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .db import Connection, Row, dumps
from .errors import Forbidden, InvalidArgument, NotFound
from .ids import new_id, now_ms
from .paging import DEFAULT_LIMIT, equals, keyset_page, to_doc
from .search import budget
from .search.fts import ranked
from .search.snippets import add_snippets
from .validators import MAX_QUERY_BYTES

SYSTEM = "system"
MAX_CONTENT_BYTES = 1_048_576  # long free text (diary, briefing, component content)
MAX_FIELD_BYTES = 10_000  # short text (titles, list items, names of things)
MAX_LIST_ITEMS = 200
MAX_OBJECT_BYTES = 65_536
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _ident(name: str) -> str:
    if not name.isidentifier():  # defensive: column names are code constants, never user text
        raise ValueError(f"not a column name: {name!r}")
    return name


@dataclass(frozen=True)
class Table:
    name: str
    prefix: str
    label: str
    json_cols: tuple[str, ...] = ()
    lite_keys: tuple[str, ...] = ("_id", "_creationTime")

    # -- rows and documents ---------------------------------------------------------------
    def doc(self, row: Row) -> dict[str, Any]:
        return to_doc(row, json_cols=self.json_cols)

    def _encode(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {_ident(k): dumps(v) if k in self.json_cols else v for k, v in values.items()}

    def row(self, conn: Connection, doc_id: str) -> Row | None:
        if not isinstance(doc_id, str):
            return None
        return conn.one(f"SELECT * FROM {self.name} WHERE id = ?", (doc_id,))

    def require(self, conn: Connection, doc_id: str) -> Row:
        row = self.row(conn, doc_id)
        if row is None:
            raise NotFound(f"{self.label} {doc_id} does not exist")
        return row

    def get(self, conn: Connection, doc_id: str) -> dict[str, Any] | None:
        row = self.row(conn, doc_id)
        return self.doc(row) if row else None

    # -- writes (call inside db.write so each tool is one transaction) --------------------
    def insert(self, conn: Connection, values: Mapping[str, Any], *, now: int | None = None) -> str:
        now = now or now_ms()
        doc_id = new_id(self.prefix)
        cols = {"id": doc_id, **self._encode(values)}
        cols.setdefault("createdAt", now)
        cols.setdefault("updatedAt", now)
        marks = ", ".join("?" for _ in cols)
        conn.execute(f"INSERT INTO {self.name} ({', '.join(cols)}) VALUES ({marks})", list(cols.values()))
        return doc_id

    def patch(self, conn: Connection, doc_id: str, values: Mapping[str, Any], *, now: int | None = None,
              where: str | None = None, params: Sequence[Any] = ()) -> int:
        """Set the given columns (None values are skipped) and `updatedAt`; returns rows changed.

        `where` adds a condition decided inside SQL (e.g. a compare-and-set on `status`).
        """
        cols = self._encode({k: v for k, v in values.items() if v is not None})
        cols["updatedAt"] = now or now_ms()
        sets = ", ".join(f"{k} = ?" for k in cols)
        sql = f"UPDATE {self.name} SET {sets} WHERE id = ?"
        if where:
            sql += f" AND ({where})"
        return conn.execute(sql, [*cols.values(), doc_id, *params])

    def delete(self, conn: Connection, doc_id: str) -> bool:
        return bool(conn.execute(f"DELETE FROM {self.name} WHERE id = ?", (doc_id,)))

    # -- reads ------------------------------------------------------------------------------
    def page(
        self,
        conn: Connection,
        *,
        filters: Mapping[str, Any] | None = None,
        where: Sequence[str] = (),
        params: Sequence[Any] = (),
        sort_col: str = "createdAt",
        descending: bool = True,
        limit: int | None = None,
        default_limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
        fields: str | None = "full",
    ) -> dict[str, Any]:
        """`{items, nextCursor?}`; `filters` are column = value conditions (None = no filter)."""
        extra, extra_args = equals((_ident(col), value) for col, value in (filters or {}).items())
        clauses, args = [*where, *extra], [*params, *extra_args]
        return keyset_page(
            conn, table=self.name, to_item=self.doc, where=clauses, params=args, sort_col=sort_col,
            descending=descending, limit=limit, default_limit=default_limit, cursor=cursor, fields=fields,
            lite_keys=self.lite_keys,
        )

    def search(
        self,
        conn: Connection,
        *,
        fts: str,
        match: str,
        where: Sequence[str] = (),
        params: Sequence[Any] = (),
        limit: int,
        snippet_col: int | None = None,
        drop: Iterable[str] = (),
    ) -> list[dict[str, Any]]:
        """BM25-ranked documents matching an already-quoted FTS5 `match`, each with a `score`.

        `where` clauses refer to the document table as `d`; `drop` removes bulky keys.
        The list is trimmed (never below one item) to fit the 50,000-byte envelope.
        """
        clauses = [f"{fts} MATCH ?", *where]
        rows = budget.query(
            conn,
            f"SELECT d.*, bm25({fts}) AS rank FROM {fts} JOIN {self.name} d ON d.seq = {fts}.rowid "
            f"WHERE {' AND '.join(f'({c})' for c in clauses)} ORDER BY rank, d.id LIMIT ?",
            [match, *params, limit],
        )
        if snippet_col is not None:  # computed in Python over a bounded window (search/snippets.py)
            names = [r["name"] for r in conn.query(f"SELECT name FROM pragma_table_info('{_ident(fts)}')")]
            add_snippets(rows, match, names[snippet_col])
        dropped = set(drop)
        return ranked(rows, lambda row: {k: v for k, v in self.doc(row).items() if k not in dropped})


def require_party(caller: str, parties: Iterable[str | None], *, action: str, role: str) -> None:
    """Allow `caller` when it is one of `parties` or `system`; otherwise RBAC_DENIED naming who may."""
    allowed = list(dict.fromkeys(p for p in parties if p))  # a lead who is also the creator is named once
    if caller == SYSTEM or caller in allowed:
        return
    names = " or ".join(allowed + [SYSTEM])
    raise Forbidden(f"{action}: only {role} ({names}) may do this; callerOrchestrator is {caller}")


# -- argument checks shared by the record domains -----------------------------------------------
def _utf8_len(value: str, field: str) -> int:
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{field} is not valid Unicode text (it holds a lone surrogate)") from None


def text(value: Any, field: str, *, max_bytes: int = MAX_FIELD_BYTES, required: bool = True,
         allow_blank: bool = False) -> str | None:
    """A string argument, kept exactly as sent (no trimming), size-bounded in UTF-8 bytes."""
    if value is None:
        if required:
            raise InvalidArgument(f"{field} is required")
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{field} must be a string")
    if not allow_blank and not value.strip():
        raise InvalidArgument(f"{field} must be a non-empty string")
    if _utf8_len(value, field) > max_bytes:
        raise InvalidArgument(f"{field} is larger than {max_bytes} bytes")
    return value


def text_list(values: Any, field: str, *, max_items: int = MAX_LIST_ITEMS,
              max_bytes: int = MAX_FIELD_BYTES) -> list[str] | None:
    if values is None:
        return None
    if not isinstance(values, list):
        raise InvalidArgument(f"{field} must be an array of strings")
    if len(values) > max_items:
        raise InvalidArgument(f"{field} holds more than {max_items} items")
    return [text(v, f"{field}[{i}]", max_bytes=max_bytes) for i, v in enumerate(values)]  # type: ignore[misc]


def json_object(value: Any, field: str, *, max_bytes: int = MAX_OBJECT_BYTES) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{field} must be an object")
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    except (ValueError, UnicodeEncodeError, TypeError):
        raise InvalidArgument(f"{field} must hold only JSON values (finite numbers, valid text)") from None
    if size > max_bytes:
        raise InvalidArgument(f"{field} is larger than {max_bytes} bytes")
    return value


def number(value: Any, field: str, *, minimum: float | None = 0, maximum: float | None = None,
           positive: bool = False, required: bool = True) -> int | float | None:
    """A finite JSON number; integral floats come back as int (100000.0 -> 100000)."""
    if value is None:
        if required:
            raise InvalidArgument(f"{field} is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{field} must be a number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"{field} must be a finite number")
        if value.is_integer() and abs(value) < 2**53:
            value = int(value)
    if abs(value) > 1e15:
        raise InvalidArgument(f"{field} is out of range (at most 1e15)")
    if positive and value <= 0:
        raise InvalidArgument(f"{field} must be greater than 0")
    if minimum is not None and value < minimum:
        raise InvalidArgument(f"{field} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise InvalidArgument(f"{field} must be at most {maximum}")
    return value


def iso_date(value: Any, field: str) -> str:
    """A calendar date `YYYY-MM-DD` (validated: 2026-02-30 is refused)."""
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        raise InvalidArgument(f"{field} must be a date written YYYY-MM-DD, e.g. 2026-05-29")
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{field} is not a real calendar date: {value}") from None
    return value


def query_text(value: Any, field: str = "query") -> str:
    """A keyword query (fts_query makes any text safe for FTS5, NUL and operators included)."""
    return text(value, field, max_bytes=MAX_QUERY_BYTES)  # type: ignore[return-value]
