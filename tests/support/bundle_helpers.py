"""Building bundles by hand (valid and hostile) and fingerprinting a database's contents."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import tarfile
from typing import Any


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


def manifest_for(members: dict[str, bytes], namespace: str = "src", **over: Any) -> dict[str, Any]:
    counts = {"memories.jsonl": "memories", "briefings.jsonl": "briefings", "tasks.jsonl": "tasks"}
    doc = {
        "format": "okf", "formatVersion": 1,
        "source": {"tool": "hand-made", "namespace": namespace, "exportedAt": 1},
        "counts": {counts[n]: data.count(b"\n") for n, data in members.items() if n in counts},
        "members": {n: {"sha256": hashlib.sha256(d).hexdigest(), "bytes": len(d), "records": d.count(b"\n")}
                    for n, d in members.items()},
    }
    doc.update(over)
    return doc


def tar_gz(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(raw.getvalue())


def file_entry(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def bundle_bytes(members: dict[str, bytes], manifest: dict[str, Any] | None = None, namespace: str = "src") -> bytes:
    doc = manifest if manifest is not None else manifest_for(members, namespace)
    entries = [file_entry("manifest.json", json.dumps(doc).encode())]
    entries += [file_entry(n, d) for n, d in members.items()]
    return tar_gz(entries)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def memory(i: int, **over: Any) -> dict[str, Any]:
    doc = {"id": f"mem_{i}", "type": "note", "content": f"memory {i}", "createdBy": "pi", "isLatest": True,
           "createdAt": 1_700_000_000_000 + i, "updatedAt": 1_700_000_000_000 + i}
    doc.update(over)
    return doc


def db_fingerprint(conn) -> str:
    """sha256 over every row of every ordinary table (the DB's logical content)."""
    digest = hashlib.sha256()
    if conn.backend == "postgres":
        tables = [r[0] for r in conn.rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_type = 'BASE TABLE' ORDER BY table_name")]
    else:
        tables = [r[0] for r in conn.rows(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")]
    for table in tables:
        digest.update(table.encode())
        for row in sorted(repr(r) for r in conn.rows(f'SELECT * FROM "{table}"')):
            digest.update(row.encode())
    return digest.hexdigest()


def abort_inserts_of_task(conn, title: str) -> None:
    """A trigger that makes inserting a task titled `title` fail: a transaction that breaks midway."""
    if conn.backend == "postgres":
        conn.script(
            "CREATE FUNCTION fail_import() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF NEW.title = '{title}' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$; "
            "CREATE TRIGGER fail_import BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION fail_import()")
    else:
        conn.script(f"CREATE TRIGGER fail_import BEFORE INSERT ON tasks WHEN new.title = '{title}' "
                    "BEGIN SELECT RAISE(ABORT, 'boom'); END")
