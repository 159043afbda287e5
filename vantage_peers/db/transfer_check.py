"""`migrate-db`'s verification: each side's row count and checksum per table, and where they part.

Both databases are read table by table in primary-key order (text keys in byte order on both: see
`transfer.stream`), and each side computes, from its own rows alone, a count and a SHA-256 over
every row's values — numbers, text and NULL encoded the same whichever backend returned them (an
integral float is the integer: SQLite's NUMERIC affinity keeps 30 where PostgreSQL gives 30.0).
Walking the two streams side by side also names the first key where they differ.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from . import busy
from .transfer import BATCH, TRANSFER_BUDGET_MS, TableSpec, TransferError, schema_tables, stream


@dataclass
class TableCheck:
    """One table's verification: each side's count and checksum, and where they first differ."""

    name: str
    source_rows: int = 0
    target_rows: int = 0
    source_sum: str = ""
    target_sum: str = ""
    first_difference: str | None = None

    @property
    def ok(self) -> bool:
        return self.source_rows == self.target_rows and self.source_sum == self.target_sum


def _canonical(value: Any) -> bytes:
    """One value's bytes for the checksum, the same whichever backend returned it."""
    if value is None:
        return b"n"
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        value = int(value)  # SQLite's NUMERIC affinity keeps 30 where PostgreSQL's double gives 30.0
    if isinstance(value, int):
        return b"i%d" % value
    if isinstance(value, float):
        return b"f" + repr(value).encode()
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        return b"s%d:" % len(data) + data
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        return b"b%d:" % len(data) + data
    return b"r" + repr(value).encode()


def row_bytes(row: Sequence[Any]) -> bytes:
    return b"|".join(_canonical(v) for v in row)


def checksum(rows: Iterable[Sequence[Any]]) -> tuple[int, str]:
    """(row count, SHA-256 hex) over rows in key order."""
    digest, count = hashlib.sha256(), 0
    for row in rows:
        digest.update(row_bytes(row))
        digest.update(b"\n")
        count += 1
    return count, digest.hexdigest()


def _compare(spec: TableSpec, left: Iterator[tuple[Any, ...]], right: Iterator[tuple[Any, ...]]) -> TableCheck:
    """Both sides' count and checksum (each computed from its own rows alone), walked side by side to
    name the first key where they differ."""
    check = TableCheck(spec.name)
    sums = hashlib.sha256(), hashlib.sha256()
    keys = [spec.columns.index(k) for k in spec.key]
    for a, b in itertools.zip_longest(left, right):
        encoded = [None if row is None else row_bytes(row) for row in (a, b)]
        for i, data in enumerate(encoded):
            if data is not None:
                sums[i].update(data)
                sums[i].update(b"\n")
        check.source_rows += a is not None
        check.target_rows += b is not None
        if check.first_difference is None and encoded[0] != encoded[1]:
            row = a if a is not None else b
            where = "only in the source" if b is None else "only in the target" if a is None else "differs"
            shown = ", ".join(f"{spec.key[j]}={row[i]!r}" for j, i in enumerate(keys))  # type: ignore[index]
            check.first_difference = f"{shown} ({where})"
    check.source_sum, check.target_sum = sums[0].hexdigest(), sums[1].hexdigest()
    return check


def verify(source: Any, target: Any, *, batch: int = BATCH,
           specs: Sequence[TableSpec] | None = None) -> list[TableCheck]:
    """Count and checksum every copied table on both sides (each in one snapshot)."""
    specs = [s for s in (specs or schema_tables()) if not s.derived]

    def run(src: Any, dst: Any) -> list[TableCheck]:
        for conn in (src, dst):
            if conn.backend == "postgres" and conn.rows("SHOW server_encoding")[0][0] != "UTF8":
                raise TransferError("the PostgreSQL database is not UTF8-encoded; create it with ENCODING 'UTF8'")
        return [_compare(s, stream(src, s, batch), stream(dst, s, batch)) for s in specs]

    with busy.call_scope(TRANSFER_BUDGET_MS):
        return source.read(lambda src: target.read(lambda dst: run(src, dst)))


def format_checks(checks: Sequence[TableCheck]) -> str:
    """The verification table: one line per table, then the differences."""
    width = max([len("table"), *(len(c.name) for c in checks)])
    lines = [f"{'table':<{width}}  {'source rows':>11}  {'target rows':>11}  {'source sha256':<16}  "
             f"{'target sha256':<16}  result"]
    for c in checks:
        lines.append(f"{c.name:<{width}}  {c.source_rows:>11}  {c.target_rows:>11}  {c.source_sum[:16]:<16}  "
                     f"{c.target_sum[:16]:<16}  {'ok' if c.ok else 'MISMATCH'}")
    for c in checks:
        if not c.ok:
            lines.append(f"MISMATCH {c.name}: first difference at {c.first_difference}")
    return "\n".join(lines)
