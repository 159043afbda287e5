"""Idempotent retries: the store behind the pipeline's `idempotent=True` policy.

A client that retries a create or a send after a timeout must not create a duplicate. The pipeline
runs such a call in one write transaction: it looks the key up, runs the body (whose writes join the
transaction) and records the result before committing, so a process killed between the commit and
the reply leaves the key recorded, and the client's retry gets the first result.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic_core import to_jsonable_python

from ..core.errors import InvalidArgument, VantageError
from ..core.ids import now_ms
from ..db import Connection

ARGUMENT = "idempotencyKey"
TTL_MS = 24 * 3600 * 1000
MAX_KEY_CHARS = 200


class IdempotencyConflict(VantageError):
    code = "IDEMPOTENCY_CONFLICT"


def check_key(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_KEY_CHARS:
        raise InvalidArgument(f"{ARGUMENT} must be a non-empty string of at most {MAX_KEY_CHARS} characters "
                              "(e.g. a UUID made once per logical operation)")
    return value


def digest(tool: str, arguments: dict[str, Any]) -> str:
    body = json.dumps({"tool": tool, "arguments": to_jsonable_python(arguments, fallback=str)}, sort_keys=True,
                      ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def replay(conn: Connection, *, caller: str, key: str, tool: str, payload: str, now: int | None = None) -> Any:
    """The first call's `(result, warnings)` when `key` was used by `caller` within 24 h; raises on
    another payload. Returns the sentinel MISSING when there is nothing to replay."""
    now = now if now is not None else now_ms()
    row = conn.one("SELECT tool, payloadHash, result, createdAt FROM idempotencyKeys WHERE caller = ? AND key = ?",
                   (caller, key))
    if row is None or row["createdAt"] <= now - TTL_MS:
        return MISSING
    if row["payloadHash"] != payload:
        raise IdempotencyConflict(f"{ARGUMENT} {key!r} was used within 24 h for a different call ({row['tool']} "
                                  "with other arguments); use a new key for a new operation")
    stored = json.loads(row["result"])
    return stored["result"], stored.get("warnings", [])


def record(conn: Connection, *, caller: str, key: str, tool: str, payload: str, result: Any,
           warnings: list[str] | None = None, now: int | None = None) -> None:
    now = now if now is not None else now_ms()
    conn.execute(
        "INSERT INTO idempotencyKeys (caller, key, tool, payloadHash, result, createdAt) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (caller, key) DO UPDATE SET tool = excluded.tool, payloadHash = excluded.payloadHash, "
        "result = excluded.result, createdAt = excluded.createdAt",
        (caller, key, tool, payload, json.dumps({"result": to_jsonable_python(result, fallback=str),
                                                 "warnings": warnings or []}, ensure_ascii=False), now))


def expire(conn: Connection, *, now: int | None = None, batch: int = 5000) -> int:
    """Forget keys older than 24 h (a scheduler job; a stale key is also ignored on read)."""
    now = now if now is not None else now_ms()
    return conn.execute("DELETE FROM idempotencyKeys WHERE (caller, key) IN (SELECT caller, key FROM "
                        "idempotencyKeys WHERE createdAt <= ? ORDER BY createdAt LIMIT ?)", (now - TTL_MS, batch))


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
