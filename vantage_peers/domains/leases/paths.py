"""Path reservations: leases of kind `path`, key = a gitignore-style pattern, scope = the repo.

An exclusive reservation excludes every overlapping reservation of another orchestrator; shared
ones coexist with shared ones. The decision reads the reservations in force and inserts inside
one `BEGIN IMMEDIATE` transaction (overlap of globs is not SQL), so concurrent reservers are
serialised; expired rows are swept first, and each grant takes the repo's next fencing token
(one counter per repo: grants of overlapping globs are totally ordered).
"""

from __future__ import annotations

from typing import Any

from ...db import Connection, Row
from ...errors import Forbidden, InvalidArgument, NotFound
from ..messaging import store as messaging
from . import globs, sweep
from . import store as leases

KIND = "path"
FENCE_KEY = "*"
MAX_REPO_CHARS = 1_000
MAX_REASON_BYTES = 2_000
SYSTEM = "system"


def clean_repo(repo: object) -> str:
    if repo is None:
        return ""
    if not isinstance(repo, str) or len(repo) > MAX_REPO_CHARS or "\x00" in repo:
        raise InvalidArgument(f"repo must be a path or owner/name of at most {MAX_REPO_CHARS} characters")
    return repo.strip().rstrip("/") if repo.strip() not in ("", "/") else repo.strip()


def clean_reason(reason: object) -> str | None:
    if reason is None or reason == "":
        return None
    if not isinstance(reason, str) or len(reason.encode("utf-8", "surrogatepass")) > MAX_REASON_BYTES:
        raise InvalidArgument(f"reason must be text of at most {MAX_REASON_BYTES} bytes")
    return reason


def conflict_doc(pattern: str, row: Row) -> dict[str, Any]:
    return {"path": pattern, "holder": leases.holder_text(row), "reason": row["reason"], "expiresAt": row["expiresAt"],
            "reservedPath": row["key"], "reservationId": row["id"], "exclusive": bool(row["exclusive"])}


def _conflicts(held: list[Row], pattern: str, exclusive: bool, holder: str) -> list[Row]:
    return [r for r in held if r["holder"] != holder and (exclusive or r["exclusive"])
            and globs.overlaps(pattern, r["key"])]


def reserve(conn: Connection, *, paths: list[str], repo: str, holder: str, instance: str | None, exclusive: bool,
            ttl: int, reason: str | None, partial: bool, now: int) -> dict[str, Any]:
    """`{granted, conflicts}`: all or nothing unless `partial` (then what is free is granted)."""
    sweep.expire_due(conn, now=now, kind=KIND, scope=repo)
    held = leases.active(conn, kind=KIND, scope=repo, now=now)
    conflicts: list[dict[str, Any]] = []
    free: list[str] = []
    for pattern in paths:
        found = _conflicts(held, pattern, exclusive, holder)
        conflicts += [conflict_doc(pattern, r) for r in found]
        if not found:
            free.append(pattern)
    granted: list[dict[str, Any]] = []
    if conflicts and not partial:
        return {"granted": granted, "conflicts": conflicts}
    mine = {(r["key"], bool(r["exclusive"]), r["holderInstance"]): r for r in held if r["holder"] == holder}
    for pattern in free:
        same = mine.get((pattern, exclusive, instance or ""))
        if same is not None:  # reserving again what one holds: a renewal (same token), not a second row
            row = leases.renew(conn, ids=[same["id"]], holder=holder, now=now)[0]
            granted.append({**_granted_doc(row), "renewed": True})
            continue
        row = leases.grant(conn, kind=KIND, scope=repo, key=pattern, holder=holder, instance=instance, ttl=ttl,
                           now=now, exclusive=exclusive, reason=reason, fence_key=FENCE_KEY)
        granted.append(_granted_doc(row))
    return {"granted": granted, "conflicts": conflicts}


def _granted_doc(row: Row) -> dict[str, Any]:
    return {"id": row["id"], "path": row["key"], "repo": row["scope"], "exclusive": bool(row["exclusive"]),
            "expiresAt": row["expiresAt"], "fencingToken": row["fencingToken"]}


def check(conn: Connection, *, paths: list[str], repo: str, holder: str | None, now: int) -> dict[str, Any]:
    """Reservations of others that an exclusive reservation of `paths` would meet (nothing is written)."""
    held = leases.active(conn, kind=KIND, scope=repo, now=now)
    conflicts = [conflict_doc(p, r) for p in paths for r in _conflicts(held, p, True, holder or "")]
    return {"conflicts": conflicts, "free": [p for p in paths if not any(c["path"] == p for c in conflicts)]}


def list_reservations(conn: Connection, *, repo: str | None, holder: str | None, now: int,
                      limit: int | None = None, cursor: str | None = None, fields: str | None = "full") -> dict[str, Any]:
    return leases.page(conn, now=now, kind=KIND, scope=repo, holder=holder, limit=limit, cursor=cursor,
                       fields=fields)


def _own_path_ids(conn: Connection, ids: list[str], holder: str) -> tuple[list[str], list[str]]:
    """(ids of `holder`'s path reservations, the rest: unknown, not paths, or someone else's)."""
    rows = {r["id"]: r for r in leases.by_ids(conn, ids)}
    mine = [i for i in ids if i in rows and rows[i]["kind"] == KIND and rows[i]["holder"] == holder]
    return mine, [i for i in ids if i not in mine]


def renew(conn: Connection, *, ids: list[str], holder: str, now: int) -> dict[str, Any]:
    mine, other = _own_path_ids(conn, ids, holder)
    renewed = leases.renew(conn, ids=mine, holder=holder, now=now)
    done = {r["id"] for r in renewed}
    return {"renewed": [_granted_doc(r) for r in renewed],
            "notRenewed": [{"id": i, "why": "not yours, not a path reservation, or unknown" if i in other
                            else "lapsed or released: reserve_paths again"} for i in ids if i not in done]}


def release(conn: Connection, *, ids: list[str] | None, paths: list[str] | None, repo: str, holder: str,
            now: int) -> dict[str, Any]:
    """Release the holder's reservations by id, or by pattern (exact pattern, in `repo`)."""
    targets: list[str] = []
    if ids:
        targets += _own_path_ids(conn, ids, holder)[0]
    if paths:
        marks = ",".join("?" * len(paths))
        targets += [r["id"] for r in conn.query(
            f"SELECT id FROM agentLeases WHERE kind = 'path' AND scope = ? AND holder = ? AND releasedAt IS NULL "
            f"AND key IN ({marks})", [repo, holder, *paths])]
    released = leases.release(conn, ids=list(dict.fromkeys(targets)), now=now, reason="released", by=holder,
                              holder=holder)
    return {"released": [r["id"] for r in released], "count": len(released)}


def repo_owner(conn: Connection, repo: str) -> str | None:
    """The `createdBy` of the repo mapping of `repo` (migration 011 records the owner)."""
    owner = conn.scalar("SELECT createdBy FROM githubRepoMapping WHERE repo = ? COLLATE NOCASE", (repo,))
    return str(owner) if owner else None


def force_release(conn: Connection, *, reservation_id: str, reason: str, caller: str, master: bool,
                  now: int) -> dict[str, Any]:
    """Master, `system` or the repo mapping's owner ends someone's reservation; the holder is told why."""
    rows = leases.by_ids(conn, [reservation_id])
    if not rows or rows[0]["kind"] != KIND:
        raise NotFound(f"no path reservation {reservation_id!r}; list_path_reservations shows the ids")
    row = rows[0]
    if not (master or caller == SYSTEM or (row["scope"] and repo_owner(conn, row["scope"]) == caller)):
        raise Forbidden(f"{caller} may not force-release {leases.holder_text(row)}'s reservation: only the master "
                        f"bearer, 'system' or the owner of the repo mapping of {row['scope'] or '(no repo)'!r} may; "
                        "ask the holder to release_paths, or wait until it expires at "
                        f"{row['expiresAt']} ms")
    released = leases.release(conn, ids=[reservation_id], now=now, reason="forced", by=caller)
    if not released:
        return {"released": False, "id": reservation_id, "why": "already released or expired"}
    messaging.send_message(conn, sender=caller, channel=row["holder"], instance_id=row["holderInstance"] or None,
                           content=f"[auto] {caller} force-released your reservation of {row['key']!r} in "
                                   f"{row['scope'] or '(no repo)'} ({reservation_id}): {reason}")
    return {"released": True, "id": reservation_id, "holder": leases.holder_text(row), "path": row["key"]}


def staged_conflicts(conn: Connection, *, files: list[str], repo: str, me: str | None, now: int) -> list[dict[str, Any]]:
    """For the git guard: each file matched by another orchestrator's exclusive reservation in `repo`."""
    held = [r for r in leases.active(conn, kind=KIND, scope=repo, now=now) if r["exclusive"] and r["holder"] != me]
    out = []
    for f in files:
        for r in held:
            if globs.matches(r["key"], f):
                out.append(conflict_doc(f, r))
    return out
