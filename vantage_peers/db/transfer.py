"""`vantage-peers migrate-db`: copy a whole database between the SQLite file and PostgreSQL (issue #25).

What is copied: every table of the schema — the tables `schema.sql` and `migrations/` create,
read from a scratch in-memory SQLite database, so both backends agree on the list, the columns
and the primary keys — in foreign-key order, with `seq` values kept. PostgreSQL's identity
sequences are moved past the copied values afterwards, so the next insert does not collide.

What is rebuilt rather than copied:
- Full-text indexes: the target's own triggers index every copied row (FTS5 on SQLite; on
  PostgreSQL whatever `search/` installs), so they are never out of step with the rows.
- Vectors: not copied. A table that triggers fill on insert of another (the embedding queues
  `embeddingJobs`, `fixPatternEmbeddingJobs`) is not copied: the target's triggers queue every
  copied memory and fix pattern, and the target's embedding worker (or `vantage-peers reindex`)
  embeds them again. `meta` rows about the vectors (`embedding.*`) and `vectorModels` stay behind with them.

The copy reads the source in one snapshot and writes the target in one transaction: a failure
leaves the target as it was. The target must be empty (no row in any copied table; its `meta`
rows are replaced), unless `force` — then its rows are deleted first, in that same transaction.

The verification that follows is transfer_check.py; the command, migrate_db.py.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..core.errors import VantageError
from . import busy
from .dialect import is_postgres_url as is_url
from .migrate import current_version, latest_version, migrate, schema_sql, steps

# One copy is one long transaction on each side: lock waits get this budget, not a tool call's.
TRANSFER_BUDGET_MS = 24 * 3600 * 1000
BATCH = 1000
VECTOR_META = "embedding."  # meta keys about the vectors (search/vectors.py, search/ann.py): not copied
VECTOR_TABLES = frozenset({"vectorModels"})  # the vectors' own records stay behind with them (#35)
_cursor_names = itertools.count()


class TransferError(VantageError):
    code = "MIGRATE_DB"


class TargetNotEmpty(VantageError):
    code = "TARGET_NOT_EMPTY"


@dataclass(frozen=True)
class TableSpec:
    """One table of the schema as the copy sees it."""

    name: str
    columns: tuple[str, ...]  # stored (not generated) columns, in schema order
    key: tuple[str, ...]  # primary key columns: the copy's and the checksum's order
    text_key: tuple[bool, ...]  # which key columns are text (ordered by bytes on both sides)
    derived: bool = False  # filled by triggers on another table's inserts: re-created, not copied

    @property
    def row_filter(self) -> str:
        return f"substr(\"key\", 1, {len(VECTOR_META)}) <> '{VECTOR_META}'" if self.name == "meta" else ""


def q(name: str, backend: str) -> str:
    """A quoted identifier (`commit` is a column): PostgreSQL folded the schema's unquoted names to lower case."""
    return f'"{name.lower()}"' if backend == "postgres" else f'"{name}"'


def _cols(spec: TableSpec, backend: str) -> str:
    return ", ".join(q(c, backend) for c in spec.columns)


# --- the schema, from the SQLite definition both backends follow -------------------------------

_INSERTS_INTO = re.compile(r"\bINSERT\s+INTO\s+([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)


def schema_tables() -> list[TableSpec]:
    """Every table of the latest schema, parents before children (foreign keys hold while copying)."""
    import apsw

    raw = apsw.Connection(":memory:")
    try:
        raw.execute(schema_sql())
        for _number, _name, sql in steps():
            raw.execute(sql)
        master = list(raw.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid"))
        virtual = [name for kind, name, _t, sql in master if kind == "table" and (sql or "").upper().startswith(
            "CREATE VIRTUAL")]
        plain = [name for kind, name, _t, sql in master if kind == "table" and name not in virtual
                 and not name.startswith("sqlite_") and not any(name.startswith(v + "_") for v in virtual)
                 and name not in VECTOR_TABLES]
        derived = {m.group(1) for kind, _n, _t, sql in master if kind == "trigger"
                   for m in _INSERTS_INTO.finditer(sql or "") if m.group(1) in plain}
        specs, parents = {}, {}
        for name in plain:
            info = list(raw.execute(f"PRAGMA table_xinfo({name})"))  # cid, name, type, notnull, dflt, pk, hidden
            columns = tuple(c[1] for c in info if c[6] == 0)
            keyed = sorted((c[5], c[1], (c[2] or "").upper()) for c in info if c[5])
            specs[name] = TableSpec(name, columns, tuple(k[1] for k in keyed),
                                    tuple("TEXT" in k[2] or "CHAR" in k[2] for k in keyed), name in derived)
            parents[name] = {r[2] for r in raw.execute(f"PRAGMA foreign_key_list({name})")} - {name}
    finally:
        raw.close()
    ordered: list[TableSpec] = []
    placed: set[str] = set()
    while len(ordered) < len(plain):  # schema order, each table once its parents are placed
        ready = [n for n in plain if n not in placed and parents[n] <= placed]
        if not ready:
            raise RuntimeError(f"foreign keys form a cycle among {sorted(set(plain) - placed)}")
        ordered.append(specs[ready[0]])
        placed.add(ready[0])
    return ordered


# --- opening either side ------------------------------------------------------------------------

def describe(where: str) -> str:
    if is_url(where):
        from .postgres import redacted

        return redacted(where)
    return str(Path(where).expanduser())


def _identity(where: str) -> str:
    return describe(where) if is_url(where) else str(Path(where).expanduser().resolve())


def open_side(where: str, *, role: str, busy_timeout_ms: int = 5_000, pool_size: int = 2) -> Any:
    """The source (must exist) or target (a file is created) database, not yet migrated."""
    if is_url(where):
        from .postgres import PgDatabase

        try:
            return PgDatabase(where, busy_timeout_ms=busy_timeout_ms, pool_size=pool_size)
        except Exception as exc:  # noqa: BLE001 - psycopg's errors and an unreachable server, as one line
            raise TransferError(f"cannot open the {role} {describe(where)}: {str(exc).strip()}") from None
    from .connection import Database

    path = Path(where).expanduser()
    if role == "source" and not path.is_file():
        raise TransferError(f"the source {path} does not exist; give --from an existing database file "
                            "or a postgresql:// URL")
    if path.is_dir():
        raise TransferError(f"the {role} {path} is a directory; give a database file")
    return Database(path, busy_timeout_ms=busy_timeout_ms)


def prepare(source: Any, target: Any, *, err: TextIO) -> None:
    """Both sides at this version's schema: the source migrated if older (as any command would),
    the target migrated from empty. A side newer than this vantage-peers is refused."""
    latest = latest_version()
    for db, role in ((source, "source"), (target, "target")):
        version = current_version(db)
        if version > latest:
            raise TransferError(f"the {role} is at schema version {version}, newer than this vantage-peers "
                                f"({latest}); run migrate-db with the newer vantage-peers")
        if role == "source" and version == 0:
            raise TransferError("the source holds no vantage-peers schema (version 0): check --from")
        if version < latest:
            if role == "source":
                err.write(f"migrate-db: the source is at schema version {version}; migrating it to {latest} first\n")
            migrate(db)


# --- reading and writing rows -------------------------------------------------------------------

def _select(spec: TableSpec, backend: str) -> str:
    """Text keys in byte order on both sides (PostgreSQL's "C" collation is UTF-8 byte order, like SQLite's BINARY)."""
    if backend == "postgres":
        order = ", ".join(f'{q(k, backend)}::text COLLATE "C" NULLS FIRST' if text else q(k, backend)
                          for k, text in zip(spec.key, spec.text_key, strict=True))
    else:
        order = ", ".join(f"{q(k, backend)} COLLATE BINARY" if text else q(k, backend)
                          for k, text in zip(spec.key, spec.text_key, strict=True))
    where = f" WHERE {spec.row_filter}" if spec.row_filter else ""
    return f"SELECT {_cols(spec, backend)} FROM {q(spec.name, backend)}{where} ORDER BY {order}"


def _count(conn: Any, spec: TableSpec) -> int:
    where = f" WHERE {spec.row_filter}" if spec.row_filter else ""
    return int(conn.rows(f"SELECT count(*) FROM {q(spec.name, conn.backend)}{where}")[0][0])


def stream(conn: Any, spec: TableSpec, batch: int = BATCH) -> Iterator[tuple[Any, ...]]:
    """The table's rows in key order, fetched `batch` at a time (never the whole table in memory)."""
    sql = _select(spec, conn.backend)
    if conn.backend == "postgres":
        from .postgres import _plain

        # A server-side cursor (we are inside the read transaction): PostgreSQL sends `batch` rows at a time.
        with conn.raw.cursor(name=f"vp_transfer_{next(_cursor_names)}") as cur:
            cur.itersize = batch
            cur.execute(sql)
            for row in cur:
                yield tuple(_plain(v) for v in row)
    else:
        yield from conn.raw.execute(sql)  # apsw steps the statement as we iterate


def _pg_columns(conn: Any, table: str) -> dict[str, bool]:
    """PostgreSQL's columns of `table`, lower-cased, and whether each is generated."""
    rows = conn.rows("SELECT column_name, is_generated FROM information_schema.columns "
                     "WHERE table_schema = current_schema() AND table_name = ?", (table.lower(),))
    return {name: generated == "ALWAYS" for name, generated in rows}


def check_columns(conn: Any, specs: Sequence[TableSpec]) -> None:
    """Every column the copy names exists, writable, on PostgreSQL (its schema is written by hand)."""
    if conn.backend != "postgres":
        return
    for spec in specs:
        have = _pg_columns(conn, spec.name)
        if not have:
            raise TransferError(f"the PostgreSQL database has no table {spec.name}: its schema is not "
                                "this vantage-peers' (was it migrated?)")
        missing = [c for c in spec.columns if c.lower() not in have or have[c.lower()]]
        if missing:
            raise TransferError(f"PostgreSQL's {spec.name} lacks the columns {missing} that SQLite's has; "
                                "the two schemas have drifted apart (tests/db/test_postgres_schema.py)")


def _insert(conn: Any, spec: TableSpec, rows: Sequence[tuple[Any, ...]]) -> None:
    if conn.backend == "postgres":
        with conn.raw.cursor().copy(f"COPY {q(spec.name, 'postgres')} ({_cols(spec, 'postgres')}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    else:
        marks = ", ".join("?" for _ in spec.columns)
        conn.raw.executemany(f"INSERT INTO {q(spec.name, 'sqlite')} ({_cols(spec, 'sqlite')}) VALUES ({marks})", rows)


def _reset_identities(conn: Any) -> None:
    """PostgreSQL: every identity sequence past the largest value now in its table."""
    found = conn.rows("SELECT table_name, column_name FROM information_schema.columns "
                      "WHERE table_schema = current_schema() AND is_identity = 'YES'")
    for table, column in found:
        conn.rows(f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), "
                  f'greatest(coalesce(max("{column}"), 0), 1), max("{column}") IS NOT NULL) FROM "{table}"')


def _clear(conn: Any, specs: Sequence[TableSpec], *, force: bool) -> None:
    """Make the target empty: refuse rows unless `force`; `meta` (minus vector rows) is always replaced."""
    if not force:
        filled = [(s.name, n) for s in specs if s.name != "meta" and (n := _count(conn, s))]
        if filled:
            shown = ", ".join(f"{name} ({n} rows)" for name, n in filled[:5])
            raise TargetNotEmpty(f"the target already holds rows: {shown}{' …' if len(filled) > 5 else ''}; "
                                 "give an empty database (or --force to delete the target's rows first)")
    for spec in reversed(specs):  # children first: foreign keys hold at every step
        where = f" WHERE {spec.row_filter}" if spec.row_filter else ""
        conn.execute(f"DELETE FROM {q(spec.name, conn.backend)}{where}")


# --- progress -----------------------------------------------------------------------------------

class Progress:
    """Rows per table on `err`: on a terminal a bar redrawn in place (`memories [#####.....] 5000/10000
    rows`), elsewhere (logs, pipes) one line per table once it is copied."""

    def __init__(self, err: TextIO, width: int = 30) -> None:
        self.err, self.width = err, width
        self.name, self.total, self.done = "", 0, 0
        self.label_width = 28
        try:
            self.live = err.isatty()
        except (AttributeError, ValueError):
            self.live = False

    def start(self, name: str, total: int) -> None:
        self.name, self.total, self.done = name, total, 0
        if self.live:
            self._draw()

    def advance(self, n: int) -> None:
        self.done += n
        if self.live:
            self._draw()

    def finish(self) -> None:
        self._draw()
        self.err.write("\n")
        self.err.flush()

    def _draw(self) -> None:
        filled = self.width if self.total == 0 else min(self.width, self.width * self.done // self.total)
        bar = "#" * filled + "." * (self.width - filled)
        self.err.write(f"{chr(13) if self.live else ''}{self.name:<{self.label_width}} [{bar}] "
                       f"{self.done}/{self.total} rows")
        self.err.flush()


# --- copy ---------------------------------------------------------------------------------------

@dataclass
class CopyResult:
    copied: dict[str, int]  # rows per copied table
    requeued: dict[str, int]  # derived tables: rows the target's triggers created


def copy(source: Any, target: Any, *, force: bool = False, batch: int = BATCH, err: TextIO | None = None,
         specs: Sequence[TableSpec] | None = None) -> CopyResult:
    """Every row of `source` into `target` (both migrated), in one transaction on the target."""
    err = err or sys.stderr
    specs = list(specs or schema_tables())
    progress = Progress(err)
    copied: dict[str, int] = {}
    requeued: dict[str, int] = {}

    def write(src: Any, dst: Any) -> CopyResult:
        check_columns(src, specs)
        check_columns(dst, specs)
        _clear(dst, specs, force=force)
        for spec in specs:
            if spec.derived:
                continue
            progress.start(spec.name, _count(src, spec))
            for chunk in _chunks(stream(src, spec, batch), batch):
                try:
                    _insert(dst, spec, chunk)
                except Exception as exc:
                    raise _insert_error(spec, chunk, exc) from exc
                progress.advance(len(chunk))
            copied[spec.name] = progress.done
            progress.finish()
        for spec in specs:
            if spec.derived:
                requeued[spec.name] = _count(dst, spec)
        if dst.backend == "postgres":
            _reset_identities(dst)
        return CopyResult(copied, requeued)

    with busy.call_scope(TRANSFER_BUDGET_MS):
        return source.read(lambda src: target.write(lambda dst: write(src, dst)))


def _chunks(rows: Iterable[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    it = iter(rows)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _insert_error(spec: TableSpec, chunk: Sequence[tuple[Any, ...]], exc: BaseException) -> TransferError:
    """Which table, which rows, and the database's own words; NUL characters named (PostgreSQL refuses them)."""
    keys = [spec.columns.index(k) for k in spec.key]
    first, last = ([row[i] for i in keys] for row in (chunk[0], chunk[-1]))
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = ""
    if any(isinstance(v, str) and "\x00" in v for row in chunk for v in row):
        hint = "; a text value holds a NUL character (\\x00), which PostgreSQL text cannot store: remove it first"
    return TransferError(f"copying {spec.name} (rows with {', '.join(spec.key)} from {first} to {last}) "
                         f"failed: {detail}{hint}; nothing was written to the target")
