"""Scope profiles (§30.5): which namespaces a token reads and writes, which orchestrators it acts as.

A namespace N is inside a prefix P when P is `*`, N == P, or N starts with `P/` (a trailing `/` or
`/*` on P means the same). `master` is not a row a token can carry: it is the env-only master
bearer, checked before any profile.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import InvalidArgument, NotFound
from ..core.ids import now_ms
from ..core.scopes import RECORD_READ_SCOPES, RecordReadScope, ScopeProfile
from ..db.connection import Connection

MASTER = "master"
CLIENT_GENERIC = "client-generic"
PUBLIC_READONLY = "public-readonly"
CLERK_USER = "clerk-user"
MAX_ENTRIES = 100
MAX_ENTRY_CHARS = 200


MASTER_PROFILE = ScopeProfile(MASTER, "Full admin: every namespace, every from-address (env var only)",
                              ("*",), ("*",), ("*",), master=True)

PROJECT_EXAMPLE = "project-example"

DEFAULT_PROFILES: tuple[ScopeProfile, ...] = (
    MASTER_PROFILE,
    ScopeProfile(CLIENT_GENERIC, "DCR default: deny by default until an operator elevates the client"),
    ScopeProfile(PUBLIC_READONLY, "Read-only access to the global namespace", (), ("global",), ()),
    # A generic example of a per-project agent profile (copy it with your own ids via the admin API).
    ScopeProfile(PROJECT_EXAMPLE, "Example: acts as alice; reads/writes project/example, reads global",
                 ("alice",), ("project/example", "global"), ("project/example",)),
    ScopeProfile(CLERK_USER, "Clerk-issued user bearers; {workspaceId} is the Clerk user id",
                 ("{workspaceId}",), ("workspace/{workspaceId}", "global"), ("workspace/{workspaceId}",)),
)
_DEFAULTS = {p.profile_id: p for p in DEFAULT_PROFILES}


# -- validation -----------------------------------------------------------------------------------
def _names(value: Any, field_name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple) or len(value) > MAX_ENTRIES:
        raise InvalidArgument(f"{field_name} must be a list of at most {MAX_ENTRIES} strings")
    out = []
    for item in value:
        if not isinstance(item, str) or not item.strip() or len(item) > MAX_ENTRY_CHARS:
            raise InvalidArgument(f"{field_name} entries must be non-empty strings of at most "
                                  f"{MAX_ENTRY_CHARS} characters")
        out.append(item.strip())
    return tuple(dict.fromkeys(out))


def check_record_read(value: Any) -> RecordReadScope:
    """`recordReadScope`: whose messages and tasks the token reads (omitted: `own`)."""
    if value is None or value == "":
        return "own"
    for scope in RECORD_READ_SCOPES:
        if value == scope:
            return scope
    raise InvalidArgument(f"recordReadScope must be one of {', '.join(RECORD_READ_SCOPES)} (got {value!r}): "
                          "`own` reads the messages and tasks its identities are parties to, `team` every one")


def check_profile_id(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 100:
        raise InvalidArgument("profileId must be a non-empty string of at most 100 characters")
    return value.strip()


def from_doc(doc: dict[str, Any]) -> ScopeProfile:
    """A profile from its JSON form (admin API, CLI); `master` cannot be redefined."""
    pid = check_profile_id(doc.get("profileId"))
    if pid == MASTER:
        raise InvalidArgument("the master profile is fixed: it belongs to BEARER_SECRET_MASTER only")
    description = doc.get("description") or ""
    if not isinstance(description, str) or len(description) > 1000:
        raise InvalidArgument("description must be a string of at most 1000 characters")
    return ScopeProfile(pid, description, _names(doc.get("fromAllowList"), "fromAllowList"),
                        _names(doc.get("namespaceReadPrefixes"), "namespaceReadPrefixes"),
                        _names(doc.get("namespaceWritePrefixes"), "namespaceWritePrefixes"),
                        record_read=check_record_read(doc.get("recordReadScope")))


# -- storage --------------------------------------------------------------------------------------
def _row(row: dict[str, Any]) -> ScopeProfile:
    return ScopeProfile(row["profileId"], row["description"], tuple(json.loads(row["fromAllowList"])),
                        tuple(json.loads(row["namespaceReadPrefixes"])),
                        tuple(json.loads(row["namespaceWritePrefixes"])),
                        record_read=check_record_read(row["recordReadScope"]))


def upsert(conn: Connection, profile: ScopeProfile, *, only_if_missing: bool = False) -> bool:
    """Insert or replace a profile row; returns True when a row was written."""
    now = now_ms()
    conflict = "DO NOTHING" if only_if_missing else (
        "DO UPDATE SET description = excluded.description, fromAllowList = excluded.fromAllowList, "
        "namespaceReadPrefixes = excluded.namespaceReadPrefixes, "
        "namespaceWritePrefixes = excluded.namespaceWritePrefixes, recordReadScope = excluded.recordReadScope, "
        "updatedAt = excluded.updatedAt")
    return conn.execute(
        "INSERT INTO oauth_scope_profiles (profileId, description, fromAllowList, namespaceReadPrefixes, "
        f"namespaceWritePrefixes, recordReadScope, createdAt, updatedAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        f"ON CONFLICT (profileId) {conflict}",
        (profile.profile_id, profile.description, json.dumps(list(profile.from_allow_list)),
         json.dumps(list(profile.read_prefixes)), json.dumps(list(profile.write_prefixes)), profile.record_read,
         now, now),
    ) > 0


def seed_defaults(conn: Connection) -> list[str]:
    """Insert the default profiles that are missing (existing rows are left as the operator set them)."""
    return [p.profile_id for p in DEFAULT_PROFILES if upsert(conn, p, only_if_missing=True)]


def get(conn: Connection, profile_id: str) -> ScopeProfile | None:
    """The stored profile, else the built-in default of that name (so an unseeded file still works)."""
    if profile_id == MASTER:
        return MASTER_PROFILE
    row = conn.one("SELECT * FROM oauth_scope_profiles WHERE profileId = ?", (profile_id,))
    if row is not None:
        return _row(row)
    return _DEFAULTS.get(profile_id)


def require(conn: Connection, profile_id: str) -> ScopeProfile:
    found = get(conn, profile_id)
    if found is None:
        raise NotFound(f"scope profile {profile_id!r} does not exist; create it first "
                       "(vantage-peers token profile set …)")
    return found


def list_all(conn: Connection) -> list[ScopeProfile]:
    stored = {r["profileId"]: _row(r) for r in conn.query("SELECT * FROM oauth_scope_profiles ORDER BY profileId")}
    for p in DEFAULT_PROFILES:
        stored.setdefault(p.profile_id, p)
    return [stored[k] for k in sorted(stored)]
