"""Who is calling, for the current tool call: the principal the HTTP auth layer authenticated.

The bearer middleware puts the verified token (a `Principal`) in the SDK's auth contextvar for the
request, and the SDK carries the request's contextvars into the tool call. stdio and in-process
calls have no principal: local trust, as before. Store code that lists or searches namespaced
rows asks `namespace_read_filter()` for the extra WHERE fragment (see memory/store.scope_sql).
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict

from .profiles import ScopeProfile, sql_filter


class Principal(AccessToken):
    """An authenticated caller: the master bearer, an OAuth access token, or a Clerk user bearer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    kind: str  # "master" | "oauth" | "clerk"
    profile: ScopeProfile
    family: str | None = None  # OAuth grant the token belongs to (revocation revokes the family)

    @property
    def is_master(self) -> bool:
        return self.profile.master


def current() -> Principal | None:
    token = get_access_token()
    return token if isinstance(token, Principal) else None


def namespace_read_filter(column: str) -> tuple[str, list[Any]] | None:
    """WHERE fragment restricting `column` to the caller's read prefixes; None = no restriction."""
    p = current()
    if p is None or p.is_master:
        return None
    return sql_filter(p.profile.read_prefixes, column)
