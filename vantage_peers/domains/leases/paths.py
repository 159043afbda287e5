"""Path reservations: leases of kind `path`, key = a gitignore-style pattern, scope = the repo.

An exclusive reservation excludes every overlapping reservation of another orchestrator; shared
ones coexist with shared ones. The decision reads the reservations in force and inserts inside
one `BEGIN IMMEDIATE` transaction (overlap of globs is not SQL), so concurrent reservers are
serialised; expired rows are swept first, and each grant takes the repo's next fencing token
(one counter per repo: grants of overlapping globs are totally ordered).

A refused reservation is an error (`PATH_CONFLICT`), never a quiet `granted: []`, unless the
caller opted in to partial grants. `reserve_waiting` waits for the conflicting reservations to be
released or lapse, woken by the database's change watcher and at their `expiresAt`, with one
transaction per attempt and none while it waits.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Any

from ...core import parties
from ...core.errors import Forbidden, InvalidArgument, NotFound, VantageError
from ...core.ids import now_ms
from ...core.rbac import SYSTEM
from ...db import Connection, Database, Row, current_scope
from .. import ports
from . import globs, sweep
from . import repo as repos
from . import store as leases

KIND = "path"
FENCE_KEY = "*"
MAX_REPO_CHARS = 1_000
MAX_REASON_BYTES = 2_000
MAX_WAIT_SECONDS = 600
MAX_LISTED = 20  # reservations spelled out in a PATH_CONFLICT (every holder is always named)
EXPIRY_SLACK_SECONDS = 0.05  # wake just after a conflicting lease's expiresAt, not just before


class PathConflict(VantageError):
    """Others hold reservations overlapping the requested paths: nothing was reserved."""

    code = "PATH_CONFLICT"


def clean_repo(repo: object) -> str:
    if repo is None:
        return ""
    if not isinstance(repo, str) or len(repo) > MAX_REPO_CHARS or "\x00" in repo:
        raise InvalidArgument(f"repo must be a path or owner/name of at most {MAX_REPO_CHARS} characters")
    return repo.strip().rstrip("/") if repo.strip() not in ("", "/") else repo.strip()


def scope_of(repo: object) -> str:
    """The scope of a `repo` argument: a directory's git repository root, a name lower-cased, or the
    server's working directory's repository when None (`repo.resolve`)."""
    return repos.resolve(clean_repo(repo))


def clean_patterns(value: object, repo: str, field: str = "paths") -> list[str]:
    """The one normalisation of the patterns of a call (reserve, check, release, a task's files):
    absolute paths inside `repo` made relative, then `globs.normalise` each, folding case when the
    repo's paths are case-insensitive (`repo.case_insensitive`)."""
    if isinstance(value, list):
        value = [repos.relative(p, repo) if isinstance(p, str) else p for p in value]
    elif isinstance(value, str):
        value = [repos.relative(value, repo)]
    return globs.normalise_all(value, fold_case=repos.case_insensitive(repo), field=field)


def clean_reason(reason: object) -> str | None:
    if reason is None or reason == "":
        return None
    if not isinstance(reason, str) or len(reason.encode("utf-8", "surrogatepass")) > MAX_REASON_BYTES:
        raise InvalidArgument(f"reason must be text of at most {MAX_REASON_BYTES} bytes")
    return reason


def conflict_doc(pattern: str, row: Row) -> dict[str, Any]:
    return {"path": pattern, "holder": leases.holder_text(row), "reason": row["reason"], "expiresAt": row["expiresAt"],
            "reservedPath": row["key"], "reservationId": row["id"], "exclusive": bool(row["exclusive"])}


def _conflicts(held: list[Row], pattern: str, exclusive: bool, holder: str, fold: bool = False) -> list[Row]:
    return [r for r in held if r["holder"] != holder and (exclusive or r["exclusive"])
            and globs.overlaps(pattern, globs.held(r["key"], fold))]


def conflicts_of(conn: Connection, *, paths: list[str], repo: str, holder: str | None, exclusive: bool,
                 now: int) -> list[dict[str, Any]]:
    """Others' reservations in force that a reservation of `paths` would meet (reads only)."""
    held, fold = leases.active(conn, kind=KIND, scope=repo, now=now), repos.case_insensitive(repo)
    return [conflict_doc(p, r) for p in paths for r in _conflicts(held, p, exclusive, holder or "", fold)]


def reserve(conn: Connection, *, paths: list[str], repo: str, holder: str, instance: str | None, exclusive: bool,
            ttl: int, reason: str | None, partial: bool, now: int) -> dict[str, Any]:
    """The decision, in the caller's transaction: `{granted, conflicts, complete}`, all or nothing
    unless `partial` (then what is free is granted, and `refused` lists the rest). Never raises on a
    conflict: `reserve_in_transaction` and `reserve_waiting` turn conflicts into PATH_CONFLICT."""
    sweep.expire_due(conn, now=now, kind=KIND, scope=repo)
    held, fold = leases.active(conn, kind=KIND, scope=repo, now=now), repos.case_insensitive(repo)
    conflicts: list[dict[str, Any]] = []
    free: list[str] = []
    for pattern in paths:
        found = _conflicts(held, pattern, exclusive, holder, fold)
        conflicts += [conflict_doc(pattern, r) for r in found]
        if not found:
            free.append(pattern)
    granted: list[dict[str, Any]] = []
    if conflicts and not partial:
        return {"granted": granted, "conflicts": conflicts, "complete": False}
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
    if not conflicts:
        return {"granted": granted, "conflicts": conflicts, "complete": True}
    return {"granted": granted, "conflicts": conflicts, "complete": False,
            "refused": [p for p in paths if p not in free]}


def reserve_in_transaction(conn: Connection, *, paths: list[str], repo: str, holder: str, instance: str | None,
                           ttl: int, now: int, exclusive: bool = True, reason: str | None = None) -> dict[str, Any]:
    """All of `paths` (already `clean_patterns`) or PATH_CONFLICT, inside the caller's write
    transaction, without waiting: for a caller that reserves together with its own writes
    (`checkout_task(reserveFiles)`), whose transaction the error rolls back.
    Returns `{granted, conflicts: [], complete: true}`."""
    out = reserve(conn, paths=paths, repo=repo, holder=holder, instance=instance, exclusive=exclusive, ttl=ttl,
                  reason=reason, partial=False, now=now)
    if out["conflicts"]:
        raise PathConflict(conflict_message(out["conflicts"], repo=repo, requested=paths, now=now))
    return out


def clean_wait(value: object) -> float:
    if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or not 0 <= value <= MAX_WAIT_SECONDS):
        raise InvalidArgument(f"waitSeconds must be a number of seconds from 0 to {MAX_WAIT_SECONDS} "
                              f"(how long to wait for conflicting reservations), got {value!r}")
    return float(value)


def _fresh_lock_budget() -> None:
    """A wait is not lock contention: each attempt after one gets the call's whole busy budget again
    (VP_BUSY_TIMEOUT_MS), not what the minutes of waiting left of it."""
    scope = current_scope()
    if scope is not None:
        scope.deadline = time.monotonic() + scope.busy_budget_ms / 1000


def reserve_waiting(db: Database, *, paths: list[str], repo: str, holder: str, instance: str | None,
                    exclusive: bool, ttl: int, reason: str | None, partial: bool,
                    wait_seconds: float) -> dict[str, Any]:
    """reserve_paths: reserve now, or wait up to `wait_seconds` for the conflicting reservations to be
    released or to lapse, then reserve; PATH_CONFLICT when they are still held (with `partial`:
    what is free at the end is granted, `complete: false`).

    Never called inside a transaction: each attempt is its own write transaction, and between two
    the waiter holds no lock. It sleeps on the database's change watcher (`db.watcher`: SQLite's
    data_version, PostgreSQL's LISTEN), woken by any commit and at the earliest `expiresAt` of what
    it waits for; after a wake it reads (no write) whether the way is clear before it tries again.
    Nothing is held while waiting (all or nothing, also with `partial`): two waiters never each hold
    what the other waits for."""
    started = time.monotonic()
    deadline = started + wait_seconds

    def attempt(part: bool) -> dict[str, Any]:
        now = now_ms()
        return db.write(lambda c: reserve(c, paths=paths, repo=repo, holder=holder, instance=instance,
                                          exclusive=exclusive, ttl=ttl, reason=reason, partial=part, now=now))

    if wait_seconds <= 0:
        result = attempt(partial)
    else:
        with db.watcher() as watcher:  # opened before the first attempt: no release is missed
            result = attempt(False)
            while result["conflicts"]:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                lapse = (min(c["expiresAt"] for c in result["conflicts"]) - now_ms()) / 1000
                watcher.wait(max(0.0, min(left, lapse + EXPIRY_SLACK_SECONDS)))
                _fresh_lock_budget()
                now = now_ms()
                seen = db.read(lambda c, n=now: conflicts_of(c, paths=paths, repo=repo, holder=holder,
                                                             exclusive=exclusive, now=n))
                result = {"granted": [], "conflicts": seen, "complete": False} if seen else attempt(False)
        if result["conflicts"] and partial:
            _fresh_lock_budget()
            result = attempt(True)
    waited = time.monotonic() - started if wait_seconds > 0 else None
    if result["conflicts"] and not partial:
        raise PathConflict(conflict_message(result["conflicts"], repo=repo, requested=paths, now=now_ms(),
                                            waited=waited))
    if waited is not None:
        result["waitedSeconds"] = round(waited, 3)
    return result


def _when(ms: int, now: int) -> str:
    stamp = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    seconds = max(0, (ms - now) // 1000)
    left = f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{stamp} (in {left}, expiresAt {ms})"


def conflict_message(conflicts: list[dict[str, Any]], *, repo: str, requested: list[str], now: int,
                     waited: float | None = None) -> str:
    """The text of PATH_CONFLICT: every holder, each reservation met (pattern, expiry, reason, id) and
    which requested patterns meet it, and what to do."""
    met: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for c in conflicts:
        met.setdefault(c["reservationId"], (c, []))[1].append(c["path"])
    holders = list(dict.fromkeys(c["holder"] for c in conflicts))
    blocked = list(dict.fromkeys(c["path"] for c in conflicts))
    head = (f"nothing was reserved: {len(blocked)} of {len(requested)} requested pattern(s) overlap reservations "
            f"of {', '.join(holders)} in repo {repo or '(no repo)'!r}")
    if waited is not None:
        head += f" (waited {waited:.1f} s, waitSeconds, and they are still held)"
    lines = []
    for c, mine in list(met.values())[:MAX_LISTED]:
        why = f", reason: {c['reason'][:200]!r}" if c.get("reason") else ""  # reasons are up to 2 KB
        kind = "exclusively" if c.get("exclusive") else "shared"
        lines.append(f"{c['holder']} holds {c['reservedPath']!r} {kind} until {_when(c['expiresAt'], now)}{why} "
                     f"(reservation {c['reservationId']}), met by {', '.join(repr(p) for p in mine[:5])}"
                     + (f" and {len(mine) - 5} more" if len(mine) > 5 else ""))
    if len(met) > MAX_LISTED:
        lines.append(f"and {len(met) - MAX_LISTED} more reservations (check_path_conflicts lists them all)")
    todo = ("What to do: wait for them (call reserve_paths again with waitSeconds, up to "
            f"{MAX_WAIT_SECONDS}: it returns as soon as they are released or lapse); ask {', '.join(holders)} to "
            "release_paths (send_message); reserve only what is free with partial: true; check_path_conflicts "
            "shows what is held. Do not edit these paths until you hold them.")
    return head + ": " + "; ".join(lines) + ". " + todo


def _granted_doc(row: Row) -> dict[str, Any]:
    return {"id": row["id"], "path": row["key"], "repo": row["scope"], "exclusive": bool(row["exclusive"]),
            "expiresAt": row["expiresAt"], "fencingToken": row["fencingToken"]}


def check(conn: Connection, *, paths: list[str], repo: str, holder: str | None, now: int) -> dict[str, Any]:
    """Reservations of others that an exclusive reservation of `paths` would meet (nothing is written)."""
    conflicts = conflicts_of(conn, paths=paths, repo=repo, holder=holder, exclusive=True, now=now)
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


def force_release(conn: Connection, *, reservation_id: str, reason: str, caller: str, master: bool,
                  now: int) -> dict[str, Any]:
    """The master bearer or `system` ends someone's reservation; the holder is told why.

    Nobody else, not even the owner of the repo's GitHub mapping: any caller can create the mapping
    of a repo nobody mapped yet (or of `ORG/REPO` beside `org/repo`), so mapping ownership is a chain
    an attacker could forge for herself."""
    rows = leases.by_ids(conn, [reservation_id])
    if not rows or rows[0]["kind"] != KIND:
        raise NotFound(f"no path reservation {reservation_id!r}; list_path_reservations shows the ids")
    row = rows[0]
    if not (master or caller == SYSTEM or caller in parties.names("path reservation", row, "force")):
        raise Forbidden(f"{caller} may not force-release {leases.holder_text(row)}'s reservation of {row['key']!r} in "
                        f"{row['scope'] or '(no repo)'!r}: only the master bearer or 'system' may; ask the holder "
                        f"to release_paths (send_message), or wait until it lapses at {_when(row['expiresAt'], now)} "
                        "(reserve_paths with waitSeconds waits for it)")
    released = leases.release(conn, ids=[reservation_id], now=now, reason="forced", by=caller)
    if not released:
        return {"released": False, "id": reservation_id, "why": "already released or expired"}
    ports.notify(conn, sender=caller, channel=row["holder"], instance_id=row["holderInstance"] or None,
                 content=f"[auto] {caller} force-released your reservation of {row['key']!r} in "
                         f"{row['scope'] or '(no repo)'} ({reservation_id}): {reason}")
    return {"released": True, "id": reservation_id, "holder": leases.holder_text(row), "path": row["key"]}


def staged_conflicts(conn: Connection, *, files: list[str], repo: str, me: str | None, now: int) -> list[dict[str, Any]]:
    """For the git guard: each file matched by another orchestrator's exclusive reservation in `repo`
    (files and patterns compared in the one normalised spelling, `globs.normalise_file` / `held`;
    the conflicts name the files as given)."""
    held = [r for r in leases.active(conn, kind=KIND, scope=repo, now=now) if r["exclusive"] and r["holder"] != me]
    fold = repos.case_insensitive(repo) if held else False
    out = []
    for f in files:
        name = globs.normalise_file(f, fold_case=fold)
        for r in held:
            if globs.matches(globs.held(r["key"], fold), name):
                out.append(conflict_doc(f, r))
    return out
