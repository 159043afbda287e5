"""iframe embed sessions (spec §24): create, touch (presence only), revoke (keeps the row), get.

Every rule is decided in one SQL statement: a duplicate `sessionId` is the UNIQUE constraint,
touch and revoke are conditional UPDATEs, and `get` filters expired and revoked rows in its WHERE.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ...core.errors import Conflict, InvalidArgument
from ...core.ids import new_id, now_ms
from ...db import Connection
from ...db.paging import to_doc

MAX_ID_CHARS = 200
MAX_ORIGIN_CHARS = 2048
RETENTION_MS = 7 * 24 * 3600 * 1000  # expired rows are kept this long for audit, then cleaned up
CLEANUP_BATCH = 500


def check_session_id(value: Any, field: str = "sessionId") -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{field} must be a non-empty string (generate it with crypto.randomUUID())")
    if len(value) > MAX_ID_CHARS:
        raise InvalidArgument(f"{field} is longer than {MAX_ID_CHARS} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise InvalidArgument(f"{field} may not contain control characters")
    return value


def check_origin(value: Any) -> str:
    """`scheme://host[:port]` with scheme http or https, no user info, path, query or fragment.

    Returned normalized as browsers send the Origin header: lower-case scheme and host.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_ORIGIN_CHARS:
        raise InvalidArgument("origin must be a string such as https://dashboard.example.com")
    if any(ord(ch) <= 32 or ord(ch) == 127 for ch in value) or "\\" in value:
        raise InvalidArgument("origin may not contain spaces, control characters or backslashes")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise InvalidArgument(f"origin {value!r} is not a valid URL origin") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidArgument(f"origin must start with https:// or http://, got {value!r}")
    if not parts.hostname or "@" in parts.netloc:
        raise InvalidArgument(f"origin must name a host and no user info, got {value!r}")
    if parts.path or parts.query or parts.fragment or value.endswith(("?", "#")):
        raise InvalidArgument(f"origin is scheme://host[:port] with no path, query or fragment, got {value!r}")
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port is not None else "")


def session_doc(row: dict[str, Any]) -> dict[str, Any]:
    # The owner column (migration 011) is policy data, not part of the documented session shape.
    return to_doc({k: v for k, v in row.items() if k != "createdBy"}, bool_cols=("revoked",))


def create_session(conn: Connection, *, session_id: str, origin: str, expires_at: int, tenant_id: str | None,
                   user_id: str | None, created_by: str | None = None, now: int | None = None) -> str:
    now = now if now is not None else now_ms()
    doc_id = new_id("ifs")
    added = conn.execute(
        "INSERT INTO iframeEmbedSessions (id, sessionId, tenantId, origin, userId, createdAt, lastSeenAt, "
        "expiresAt, revoked, createdBy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT (sessionId) DO NOTHING",
        (doc_id, session_id, tenant_id, origin, user_id, now, now, expires_at, created_by),
    )
    if not added:
        raise Conflict(f"session {session_id} already exists; session ids are unique, generate a new one")
    return doc_id


def touch_session(conn: Connection, *, session_id: str, now: int | None = None) -> bool:
    """lastSeenAt = now for a live session; expiresAt is never changed."""
    now = now if now is not None else now_ms()
    return conn.execute(
        "UPDATE iframeEmbedSessions SET lastSeenAt = max(lastSeenAt, ?) "
        "WHERE sessionId = ? AND revoked = 0 AND expiresAt > ?", (now, session_id, now)) > 0


def revoke_session(conn: Connection, *, session_id: str) -> bool:
    """revoked = true; the row stays. True whenever the row exists (revoking twice is harmless)."""
    return conn.execute("UPDATE iframeEmbedSessions SET revoked = 1 WHERE sessionId = ?", (session_id,)) > 0


def get_session(conn: Connection, *, session_id: str, now: int | None = None) -> dict[str, Any] | None:
    """The session, or None when it does not exist, has expired (expiresAt <= now) or was revoked."""
    now = now if now is not None else now_ms()
    row = conn.one("SELECT * FROM iframeEmbedSessions WHERE sessionId = ? AND revoked = 0 AND expiresAt > ?",
                   (session_id, now))
    return session_doc(row) if row else None


def cleanup(conn: Connection, *, now: int | None = None, retention_ms: int = RETENTION_MS) -> int:
    """Delete sessions expired for longer than the retention (revoked ones included); returns the count."""
    now = now if now is not None else now_ms()
    return conn.execute(
        "DELETE FROM iframeEmbedSessions WHERE seq IN (SELECT seq FROM iframeEmbedSessions "
        "INDEXED BY iframeEmbedSessions_by_expiry WHERE expiresAt <= ? LIMIT ?)",
        (now - retention_ms, CLEANUP_BATCH),
    )
