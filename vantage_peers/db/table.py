"""The document-table helper (one row = one agent-facing document).

The team-record domains (diary, briefing notes, components, mandates, business units) all store
documents the same way: a prefixed `id`, camelCase columns, arrays and objects as JSON text,
`createdAt`/`updatedAt`. `Table` does their insert / get / patch / delete / page once; each
domain's store keeps its own rules (who may do what, lifecycles, versions). Keyword search over a
table is `search.keyword` (db knows nothing of search). Column names passed here come from code,
never from callers; values are always bound parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import NotFound
from ..core.ids import new_id, now_ms
from .connection import Connection, Row, dumps
from .paging import DEFAULT_LIMIT, equals, keyset_page, to_doc


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
