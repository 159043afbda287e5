"""What a signed-in person may read and do on the dashboard: the rule the tools apply to their token.

A person signed in with an OAuth client reads what a token of that client reads — whose messages
and tasks by `policy.readers_of`, which memory namespaces by `policy.read_prefixes` (docs/policy.md,
"Who reads what") — and acts (sends as `human:<name>`, steps in on tasks and schedules) only when
the client's fromAllowList holds `*` or `human:<name>`. The master secret, the loopback dashboard and
`serve --no-auth` read and act on everything, as the master bearer and local processes do.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.principal import Principal
from ..core.scopes import ScopeProfile
from ..pipeline import policy


@dataclass(frozen=True)
class Scope:
    readers: tuple[str, ...] | None  # whose messages and tasks are shown (None: every one)
    prefixes: tuple[str, ...] | None  # the memory namespaces shown (None: every one)
    acts: bool  # may take the dashboard's actions

    @property
    def everything(self) -> bool:
        return self.readers is None and self.prefixes is None


EVERYTHING = Scope(None, None, True)
NOTHING = Scope((), (), False)


def may_act(profile: ScopeProfile, name: str) -> bool:
    """The dashboard acts as `human:<name>`: the client must be allowed that identity."""
    return profile.master or "*" in profile.from_allow_list or f"human:{name}" in profile.from_allow_list


def of_client(profile: ScopeProfile, client_id: str, name: str) -> Scope:
    """The scope of a person signed in with OAuth client `client_id`, bound to `profile`."""
    token = Principal(token="dashboard-session", client_id=client_id, scopes=[], kind="oauth", profile=profile)
    return Scope(policy.readers_of(token), policy.read_prefixes(token), may_act(profile, name))
