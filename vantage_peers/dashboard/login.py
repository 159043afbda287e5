"""Who may sign in to the dashboard behind `serve`: the master secret, or any live OAuth client.

A client signs in with its id and secret (stored as SHA-256 only, compared in constant time) and
then sees what a token of that client would read, and acts only as its fromAllowList allows
(`scope.py`); revoking the client ends its sessions on their next request.
"""

from __future__ import annotations

import hmac

from ..core.errors import Forbidden
from ..db import Database
from ..http import profiles
from ..http.tokens import digest, same
from . import scope


def check_login(db: Database, *, master_secret: str | None, name: str, secret: str, client_id: str) -> str:
    """The `via` of a successful sign-in ("master" or the client id); raises Forbidden otherwise."""
    if not client_id:
        if master_secret and secret and hmac.compare_digest(secret.encode(), master_secret.encode()):
            return "master"
        raise Forbidden("LOGIN_FAILED: wrong master secret (or give an OAuth client id and its secret)")

    def read(c):
        row = c.one("SELECT clientSecretHash, scopeProfile, revokedAt FROM oauth_clients WHERE clientId = ?",
                    (client_id,))
        return row, (profiles.get(c, row["scopeProfile"]) if row else None)

    row, profile = db.read(read)
    if row is None or row["revokedAt"] is not None or not row["clientSecretHash"] or not secret \
            or not same(digest(secret), row["clientSecretHash"]) or profile is None:
        raise Forbidden("LOGIN_FAILED: unknown or revoked client, or wrong client secret")
    return client_id


def session_scope(db: Database, via: str, name: str) -> scope.Scope | None:
    """What a session may read and do now, or None when it has ended (its client revoked or gone).
    Read on every request, so a profile narrowed by the operator applies at once."""
    if via in ("master", "loopback"):
        return scope.EVERYTHING
    if via == "anonymous":
        return scope.NOTHING  # the sign-in page only (web.page refuses every view anyway)

    def read(c):
        row = c.one("SELECT scopeProfile, revokedAt FROM oauth_clients WHERE clientId = ?", (via,))
        return row, (profiles.get(c, row["scopeProfile"]) if row else None)

    row, profile = db.read(read)
    if row is None or row["revokedAt"] is not None or profile is None:
        return None
    return scope.of_client(profile, via, name)
