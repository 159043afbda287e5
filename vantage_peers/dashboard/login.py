"""Who may sign in to the dashboard behind `serve`: the master secret, or an OAuth client whose
scope profile grants the dashboard.

A profile grants the dashboard when it reads every namespace (`*` in namespaceReadPrefixes — the
dashboard shows the whole team) and may act as the person (`*` or `human:<name>` in its
fromAllowList — the dashboard sends messages as them). The client must not be revoked and must
present its secret (stored as SHA-256 only, compared in constant time).
"""

from __future__ import annotations

import hmac

from ..core.errors import Forbidden
from ..db import Database
from ..http import profiles
from ..http.tokens import digest, same


def grants_dashboard(profile: profiles.ScopeProfile, name: str) -> bool:
    return profile.master or ("*" in profile.read_prefixes and
                              ("*" in profile.from_allow_list or f"human:{name}" in profile.from_allow_list))


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
            or not same(digest(secret), row["clientSecretHash"]):
        raise Forbidden("LOGIN_FAILED: unknown or revoked client, or wrong client secret")
    if profile is None or not grants_dashboard(profile, name):
        raise Forbidden(f"LOGIN_FAILED: the scope profile of {client_id} does not grant the dashboard; it needs "
                        f"'*' in namespaceReadPrefixes and '*' or 'human:{name}' in fromAllowList")
    return client_id


def still_allowed(db: Database, via: str, name: str) -> bool:
    """A client session ends as soon as the client is revoked or its profile stops granting it."""
    if via in ("master", "loopback"):
        return True

    def read(c):
        row = c.one("SELECT scopeProfile, revokedAt FROM oauth_clients WHERE clientId = ?", (via,))
        return row, (profiles.get(c, row["scopeProfile"]) if row else None)

    row, profile = db.read(read)
    return row is not None and row["revokedAt"] is None and profile is not None and grants_dashboard(profile, name)
