"""Scopes: which namespaces a credential reads and writes, which orchestrators it acts as.

Transport-neutral, and free of the MCP SDK (`vantage-peers status` reads through it): the HTTP layer
turns a token into a `Principal` (principal.py) carrying a `ScopeProfile`; the
call pipeline (calls.py / policy.py) applies it the same way to every tool. A namespace N is inside
a prefix P when P is `*`, N == P, or N starts with `P/` (a trailing `/` or `/*` on P means the same).

"Starts with" is byte for byte, in SQL too: a prefix is the half-open range [P/, P0) in byte order,
which only a byte-order collation keeps contiguous. SQLite's namespace columns are BINARY; on
PostgreSQL the database's collation may be linguistic (en_US.UTF-8 ignores case and punctuation at
first: `PROJECT/A` and `projecta` fall inside ['project/a/', 'project/a0'), `project/a/sub` outside),
so the range's column carries the BYTE_ORDER mark, which db/dialect.py writes `COLLATE "C"` (issue #32).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# Whose messages and tasks a token reads (docs/policy.md, "Who reads what"): `own` = those its
# identities are parties to (the default); `team` = every one (the issue's `read: team/*`).
RecordReadScope = Literal["own", "team"]
RECORD_READ_SCOPES: tuple[RecordReadScope, ...] = ("own", "team")


@dataclass(frozen=True)
class ScopeProfile:
    profile_id: str
    description: str = ""
    from_allow_list: tuple[str, ...] = ()
    read_prefixes: tuple[str, ...] = ()
    write_prefixes: tuple[str, ...] = ()
    master: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    record_read: RecordReadScope = "own"

    def doc(self) -> dict[str, Any]:
        return {"profileId": self.profile_id, "description": self.description,
                "fromAllowList": list(self.from_allow_list),
                "namespaceReadPrefixes": list(self.read_prefixes),
                "namespaceWritePrefixes": list(self.write_prefixes),
                "recordReadScope": self.record_read}

    def substitute(self, **values: str) -> ScopeProfile:
        """`{workspaceId}` placeholders filled in (the Clerk user profile is a template)."""
        def fill(items: tuple[str, ...]) -> tuple[str, ...]:
            out = []
            for item in items:
                for key, value in values.items():
                    item = item.replace("{" + key + "}", value)
                out.append(item)
            return tuple(out)

        return ScopeProfile(self.profile_id, self.description, fill(self.from_allow_list),
                            fill(self.read_prefixes), fill(self.write_prefixes), record_read=self.record_read)




def within(namespace: str, prefix: str) -> bool:
    if prefix == "*":
        return True
    base = prefix[:-2] if prefix.endswith("/*") else prefix.rstrip("/")
    return namespace == base or namespace.startswith(base + "/")


def allows(prefixes: tuple[str, ...], namespace: str) -> bool:
    return any(within(namespace, p) for p in prefixes)


# A comment to SQLite, whose namespace columns are BINARY (an explicit `COLLATE BINARY` would be a
# no-op there, but it stops SQLite's OR optimization from using the indexes); `COLLATE "C"` on PostgreSQL.
BYTE_ORDER = "/*BYTES*/"


def byte_range(column: str) -> str:
    """`low <= column < high` compared byte by byte (two `?`): the range of a namespace prefix, on an
    index in that order (SQLite's, PostgreSQL's `COLLATE "C"` ones of db/pg/additions/021_collate_c.sql)."""
    return f"{column} {BYTE_ORDER} >= ? AND {column} {BYTE_ORDER} < ?"


def sql_filter(prefixes: tuple[str, ...], column: str) -> tuple[str, list[Any]]:
    """A WHERE fragment keeping rows whose `column` lies inside one of `prefixes` (none = no row)."""
    if any(p == "*" for p in prefixes):
        return "1", []
    parts, params = [], []
    for p in prefixes:
        base = p[:-2] if p.endswith("/*") else p.rstrip("/")
        # '/' is 0x2F and '0' 0x30: the half-open range [base/, base0) is everything under base/, in
        # byte order only. Equality is byte for byte in any (deterministic) collation.
        parts.append(f"({column} = ? OR ({byte_range(column)}))")
        params += [base, base + "/", base + "0"]
    return ("(" + " OR ".join(parts) + ")") if parts else "0", params
