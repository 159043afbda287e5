"""SQL of the OAuth tables (migration 007). Every secret arrives here already hashed.

Single-use and rotation are decided in SQL: a code is consumed by `UPDATE … WHERE usedAt IS NULL`,
a refresh token rotated by `UPDATE … WHERE rotatedAt IS NULL`, so two processes racing on one
secret cannot both win.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import NotFound
from ..db.connection import Connection

CLIENT_COLUMNS = "clientId, name, redirectUris, grantTypes, authMethod, scope, scopeProfile, registeredVia, createdAt, revokedAt"


# -- clients --------------------------------------------------------------------------------------
def insert_client(conn: Connection, *, client_id: str, secret_hash: str | None, name: str | None,
                  redirect_uris: list[str], grant_types: list[str], auth_method: str, scope: str | None,
                  profile: str, metadata: dict[str, Any], via: str, now: int) -> None:
    conn.execute(
        "INSERT INTO oauth_clients (clientId, clientSecretHash, name, redirectUris, grantTypes, authMethod, "
        "scope, scopeProfile, metadata, registeredVia, createdAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (client_id, secret_hash, name, json.dumps(redirect_uris), json.dumps(grant_types), auth_method, scope,
         profile, json.dumps(metadata), via, now))


def get_client(conn: Connection, client_id: str) -> dict[str, Any] | None:
    """A live (not revoked) client row."""
    return conn.one("SELECT * FROM oauth_clients WHERE clientId = ? AND revokedAt IS NULL", (client_id,))


def client_doc(row: dict[str, Any]) -> dict[str, Any]:
    return {"clientId": row["clientId"], "name": row["name"], "redirectUris": json.loads(row["redirectUris"]),
            "grantTypes": json.loads(row["grantTypes"]), "scopeProfile": row["scopeProfile"],
            "registeredVia": row["registeredVia"], "createdAt": row["createdAt"],
            **({"revokedAt": row["revokedAt"]} if row["revokedAt"] is not None else {}),
            "activeAccessTokens": row.get("activeAccessTokens", 0)}


def list_clients(conn: Connection, *, now: int, include_revoked: bool = False) -> list[dict[str, Any]]:
    where = "" if include_revoked else "WHERE c.revokedAt IS NULL"
    rows = conn.query(
        f"SELECT c.*, (SELECT count(*) FROM oauth_access_tokens t WHERE t.clientId = c.clientId "
        f"AND t.revokedAt IS NULL AND t.expiresAt > ?) AS activeAccessTokens FROM oauth_clients c {where} "
        "ORDER BY c.createdAt, c.clientId", (now,))
    return [client_doc(r) for r in rows]


def set_client_profile(conn: Connection, client_id: str, profile: str) -> None:
    if conn.execute("UPDATE oauth_clients SET scopeProfile = ? WHERE clientId = ? AND revokedAt IS NULL",
                    (profile, client_id)) == 0:
        raise NotFound(f"OAuth client {client_id} does not exist (or was revoked)")


def revoke_client(conn: Connection, client_id: str, *, now: int) -> dict[str, Any]:
    """Revoke the client and every token it holds, in the caller's one transaction (§30.3)."""
    if conn.execute("UPDATE oauth_clients SET revokedAt = ? WHERE clientId = ? AND revokedAt IS NULL",
                    (now, client_id)) == 0:
        raise NotFound(f"OAuth client {client_id} does not exist (or was already revoked)")
    tokens = conn.execute("UPDATE oauth_access_tokens SET revokedAt = ? WHERE clientId = ? AND revokedAt IS NULL",
                          (now, client_id))
    refresh = conn.execute("UPDATE oauth_refresh_tokens SET revokedAt = ? WHERE clientId = ? "
                           "AND revokedAt IS NULL", (now, client_id))
    conn.execute("DELETE FROM oauth_authorization_codes WHERE clientId = ?", (client_id,))
    conn.execute("DELETE FROM oauth_authorization_requests WHERE clientId = ?", (client_id,))
    return {"revokedClient": True, "revokedTokens": tokens, "revokedRefresh": refresh}


# -- consent requests and codes ---------------------------------------------------------------------
def insert_request(conn: Connection, *, request_hash: str, csrf_hash: str, client_id: str,
                   params: dict[str, Any], expires_at: int) -> None:
    conn.execute("DELETE FROM oauth_authorization_requests WHERE expiresAt < ?", (expires_at - 3_600_000,))
    conn.execute("INSERT INTO oauth_authorization_requests (requestHash, csrfHash, clientId, params, expiresAt) "
                 "VALUES (?, ?, ?, ?, ?)", (request_hash, csrf_hash, client_id, json.dumps(params), expires_at))


def get_request(conn: Connection, request_hash: str, *, now: int) -> dict[str, Any] | None:
    return conn.one("SELECT * FROM oauth_authorization_requests WHERE requestHash = ? AND decidedAt IS NULL "
                    "AND expiresAt > ?", (request_hash, now))


def decide_request(conn: Connection, request_hash: str, *, now: int) -> bool:
    """Mark a pending request decided; False when it was already decided or has expired."""
    return conn.execute("UPDATE oauth_authorization_requests SET decidedAt = ? WHERE requestHash = ? "
                        "AND decidedAt IS NULL AND expiresAt > ?", (now, request_hash, now)) == 1


def insert_code(conn: Connection, *, code_hash: str, client_id: str, params: dict[str, Any],
                expires_at: int) -> None:
    conn.execute("DELETE FROM oauth_authorization_codes WHERE expiresAt < ?", (expires_at - 3_600_000,))
    conn.execute("INSERT INTO oauth_authorization_codes (codeHash, clientId, params, expiresAt) VALUES (?, ?, ?, ?)",
                 (code_hash, client_id, json.dumps(params), expires_at))


def consume_code(conn: Connection, code_hash: str, *, now: int) -> bool:
    return conn.execute("UPDATE oauth_authorization_codes SET usedAt = ? WHERE codeHash = ? AND usedAt IS NULL "
                        "AND expiresAt > ?", (now, code_hash, now)) == 1


# -- tokens ---------------------------------------------------------------------------------------
def insert_access(conn: Connection, *, token_hash: str, client_id: str, scopes: list[str], resource: str | None,
                  family: str, expires_at: int, now: int) -> None:
    conn.execute("INSERT INTO oauth_access_tokens (tokenHash, clientId, scopes, resource, familyId, expiresAt, "
                 "createdAt) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (token_hash, client_id, json.dumps(scopes), resource, family, expires_at, now))


def insert_refresh(conn: Connection, *, token_hash: str, client_id: str, scopes: list[str], resource: str | None,
                   family: str, expires_at: int, now: int) -> None:
    conn.execute("INSERT INTO oauth_refresh_tokens (tokenHash, clientId, scopes, resource, familyId, expiresAt, "
                 "createdAt) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (token_hash, client_id, json.dumps(scopes), resource, family, expires_at, now))


def get_access(conn: Connection, token_hash: str, *, now: int) -> dict[str, Any] | None:
    """A live access token joined with its live client (a revoked client's tokens are dead)."""
    return conn.one(
        "SELECT t.*, c.scopeProfile FROM oauth_access_tokens t JOIN oauth_clients c ON c.clientId = t.clientId "
        "WHERE t.tokenHash = ? AND t.revokedAt IS NULL AND t.expiresAt > ? AND c.revokedAt IS NULL",
        (token_hash, now))


def get_refresh(conn: Connection, token_hash: str) -> dict[str, Any] | None:
    return conn.one("SELECT * FROM oauth_refresh_tokens WHERE tokenHash = ?", (token_hash,))


def rotate_refresh(conn: Connection, token_hash: str, *, now: int) -> bool:
    return conn.execute("UPDATE oauth_refresh_tokens SET rotatedAt = ? WHERE tokenHash = ? AND rotatedAt IS NULL "
                        "AND revokedAt IS NULL AND expiresAt > ?", (now, token_hash, now)) == 1


def revoke_family(conn: Connection, family: str, *, now: int) -> int:
    """Revoke a whole grant (its access and refresh tokens): on revocation, or on refresh-token replay."""
    n = conn.execute("UPDATE oauth_access_tokens SET revokedAt = ? WHERE familyId = ? AND revokedAt IS NULL",
                     (now, family))
    return n + conn.execute("UPDATE oauth_refresh_tokens SET revokedAt = ? WHERE familyId = ? "
                            "AND revokedAt IS NULL", (now, family))


# -- Clerk user bearers ---------------------------------------------------------------------------------
def get_user_bearer(conn: Connection, token_hash: str, *, now: int) -> dict[str, Any] | None:
    return conn.one("SELECT * FROM userBearerTokens WHERE tokenHash = ? AND revoked = 0 AND expiresAt > ?",
                    (token_hash, now))


def issued_recently(conn: Connection, clerk_user_id: str, *, now: int, window_ms: int = 60_000) -> int:
    """Bearers issued to this Clerk user in the sliding window (read inside the issuing transaction)."""
    return int(conn.scalar("SELECT count(*) FROM credentialsAuditLog WHERE clerkUserId = ? AND issuedAt > ?",
                           (clerk_user_id, now - window_ms)))
