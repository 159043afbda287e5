"""The authenticated caller of an HTTP request: an SDK access token carrying its scope profile.

Apart from scopes.py so that the stores and the CLI's readers (`vantage-peers status`), which only
need namespace prefixes, do not import the MCP SDK (#34).
"""

from __future__ import annotations

from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict

from .scopes import ScopeProfile


class Principal(AccessToken):
    """An authenticated caller: the master bearer, an OAuth access token, or a Clerk user bearer."""

    # defer_build: an HTTP caller only; the stdio server never builds its validator (#34)
    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True)
    kind: str  # "master" | "oauth" | "clerk"
    profile: ScopeProfile
    family: str | None = None  # OAuth grant the token belongs to (revocation revokes the family)

    @property
    def is_master(self) -> bool:
        return self.profile.master
