"""Server processes and their liveness (issue #30, docs/presence.md): the `processes` table.

Every server process has a session id and one row, refreshed by its heartbeat (liveness.py) with one
short statement per beat. A process is live while `stoppedAt` is unset and `liveUntil` — its last
heartbeat + 2 beats + `SLACK_MS`, written by the process itself, so readers need not know its
interval — is ahead. Rows of processes gone for a day are pruned.

Leases record the session that holds them (`agentLeases.holderSession`): `inherited` finds the
leases of an identity that a gone process of that identity held, for the process that starts next.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import socket
from pathlib import Path
from typing import Any

from ...db import Connection, Row
from ..leases import store as leases

SLACK_MS = 5_000  # a heartbeat delayed by a busy machine or a locked database is not a death
PRUNE_AFTER_MS = 24 * 3600 * 1000  # rows of processes gone for a day are deleted
NOTICE_WINDOW_MS = 24 * 3600 * 1000  # leases that lapsed or were taken this recently are still reported
LOST = ("expired", "forced", "superseded")
COLUMNS = ("session, orchestrator, instance, pid, host, pidSpace, transport, beatMs, startedAt, heartbeatAt, "
           "liveUntil, stoppedAt")
LIVE = "stoppedAt IS NULL AND liveUntil > ?"  # with now


def window_ms(beat_ms: int) -> int:
    """How long after its last heartbeat a process still counts as live."""
    return 2 * beat_ms + SLACK_MS


@functools.cache
def pid_space() -> str | None:
    """Where a pid names one process: this boot and this PID namespace (Linux), else None."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def pid_gone(pid: int) -> bool:
    """True when no process `pid` runs here (or only its zombie, killed and not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # another user's process: it exists
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] in "ZX"
    return False


@dataclasses.dataclass(frozen=True)
class Me:
    """This server process, as its row describes it."""

    session: str
    orchestrator: str | None
    instance: str
    transport: str
    beat_ms: int
    started_at: int
    pid: int = dataclasses.field(default_factory=os.getpid)
    host: str = dataclasses.field(default_factory=socket.gethostname)
    space: str | None = dataclasses.field(default_factory=pid_space)


def beat(conn: Connection, me: Me, now: int) -> None:
    """Register or refresh this process: one statement (a pruned row comes back)."""
    conn.execute(
        f"INSERT INTO processes ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL) "
        "ON CONFLICT (session) DO UPDATE SET heartbeatAt = excluded.heartbeatAt, liveUntil = excluded.liveUntil",
        (me.session, me.orchestrator, me.instance, me.pid, me.host, me.space, me.transport, me.beat_ms,
         me.started_at, now, now + window_ms(me.beat_ms)))


def stop(conn: Connection, session: str, now: int) -> None:
    """A clean shutdown: the process is gone now."""
    conn.execute("UPDATE processes SET stoppedAt = ?1, liveUntil = CASE WHEN liveUntil < ?1 THEN liveUntil ELSE ?1 END "
                 "WHERE session = ?2 AND stoppedAt IS NULL", (now, session))


def prune(conn: Connection, now: int) -> int:
    """Delete the rows of processes gone (no heartbeat) for a day."""
    return conn.execute("DELETE FROM processes WHERE heartbeatAt < ?", (now - PRUNE_AFTER_MS,))


def doc(row: Row, now: int) -> dict[str, Any]:
    out = {k: row[k] for k in ("session", "pid", "host", "transport", "startedAt", "heartbeatAt", "liveUntil")}
    if row["orchestrator"] is not None:
        out["orchestratorId"] = row["orchestrator"]
    if row["instance"]:
        out["instanceId"] = row["instance"]
    if row["stoppedAt"] is not None:
        out["stoppedAt"] = row["stoppedAt"]
    out["live"] = is_live(row, now)
    return out


def is_live(row: Row | None, now: int) -> bool:
    """Live: not stopped, heartbeat within its window, and (when it ran in this machine's PID space)
    its pid still runs — so a process killed here is gone at once, elsewhere after its window."""
    if row is None or row["stoppedAt"] is not None or row["liveUntil"] <= now:
        return False
    here = pid_space()
    return not (here is not None and row.get("pidSpace") == here and pid_gone(int(row["pid"])))


def get(conn: Connection, session: str) -> Row | None:
    return conn.one(f"SELECT {COLUMNS} FROM processes WHERE session = ?", (session,))


def overview(conn: Connection, *, now: int, limit: int = 100) -> list[dict[str, Any]]:
    """Processes that may be live first, then gone ones (newest heartbeat first): `vantage-peers status`."""
    rows = conn.query(f"SELECT {COLUMNS} FROM processes ORDER BY CASE WHEN {LIVE} THEN 0 ELSE 1 END, "
                      "heartbeatAt DESC, session LIMIT ?", (now, limit))
    return sorted((doc(r, now) for r in rows), key=lambda d: not d["live"])


def by_identity(conn: Connection, *, now: int, orchestrators: list[str] | None = None
                ) -> dict[tuple[str, str], dict[str, Any]]:
    """(orchestrator, instance) -> {processes: live count, known: rows, heartbeatAt: the latest}."""
    where, args = "", []
    if orchestrators is not None:
        if not orchestrators:
            return {}
        where = f" WHERE orchestrator IN ({','.join('?' * len(orchestrators))})"
        args = orchestrators
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in conn.query(f"SELECT {COLUMNS} FROM processes{where}", args):  # a row per process, pruned daily
        entry = out.setdefault((r["orchestrator"], r["instance"]), {"processes": 0, "known": 0, "heartbeatAt": 0})
        entry["known"] += 1
        entry["processes"] += is_live(r, now)
        entry["heartbeatAt"] = max(entry["heartbeatAt"], r["heartbeatAt"])
    return out


def liveness_of(conn: Connection, items: list[dict[str, Any]], now: int) -> None:
    """Add `live` and `processes` (live count) to instance docs (`orchestratorId`, optional `instanceId`)."""
    found = by_identity(conn, now=now, orchestrators=sorted({i["orchestratorId"] for i in items}))
    for item in items:
        known = found.get((item["orchestratorId"], item.get("instanceId") or ""), {})
        item["live"] = known.get("processes", 0) > 0
        item["processes"] = known.get("processes", 0)


# -- leases of gone processes ------------------------------------------------------------------

def _gone(row: Row, now: int) -> bool:
    """The process of a lease's session is gone: no row (pruned, or never registered), or not live."""
    return row["procSession"] is None or not is_live(row, now)


def inherited(conn: Connection, *, me: Me, orchestrator: str, instance: str, now: int,
              for_notice: bool) -> tuple[list[dict[str, Any]], bool]:
    """Leases of `orchestrator`/`instance` from other sessions whose process is gone: `(items, pending)`.

    Each item: `{id, kind, key, state, expiresAt, fencingToken, session, ...}` with state `held` (in
    force), `lapsed` (expired, nobody took the key) or `taken` (force-released, or granted to someone
    else since), lapsed and taken ones from the last 24 h. `for_notice`: the items this session was not
    told about yet (held ones it was not told about; lapsed/taken ones nobody was told about); else
    what whoami shows (held ones, and lapsed/taken ones not told to another session). `pending`: some
    lease of the identity is held by another session that still looks live (tell later, when gone)."""
    since = now - NOTICE_WINDOW_MS
    rows = conn.query(
        "SELECT l.seq AS seq, l.id AS id, l.kind AS kind, l.scope AS scope, l.key AS key, l.expiresAt AS expiresAt, "
        "l.fencingToken AS fencingToken, l.releasedAt AS releasedAt, l.releaseReason AS releaseReason, "
        "l.releasedBy AS releasedBy, l.holderSession AS holderSession, l.noticedBy AS noticedBy, "
        "p.session AS procSession, p.pid AS pid, p.host AS host, p.pidSpace AS pidSpace, "
        "p.heartbeatAt AS heartbeatAt, p.liveUntil AS liveUntil, p.stoppedAt AS stoppedAt "
        "FROM agentLeases l LEFT JOIN processes p ON p.session = l.holderSession "
        "WHERE l.holder = ?1 AND l.holderInstance = ?2 AND l.holderSession IS NOT NULL AND l.holderSession <> ?3 "
        "AND ((l.releasedAt IS NULL AND l.expiresAt > ?4) OR (l.releasedAt >= ?4 AND l.releaseReason IN "
        "('expired', 'forced', 'superseded'))) ORDER BY l.seq",
        (orchestrator, instance, me.session, since))
    items, pending = [], False
    for row in rows:
        held = row["releasedAt"] is None and row["expiresAt"] > now
        if not _gone(row, now):
            pending = pending or held
            continue
        item = _item(conn, row, held, (orchestrator, instance))
        if item is None:
            continue
        told = row["noticedBy"]
        if for_notice:
            wanted = told != me.session if held else told is None
        else:
            wanted = held or told in (None, me.session)
        if wanted:
            items.append(item)
    return items, pending


def _item(conn: Connection, row: Row, held: bool, holder: tuple[str, str]) -> dict[str, Any] | None:
    item: dict[str, Any] = {"id": row["id"], "kind": row["kind"], "key": row["key"]}
    if row["kind"] == "path":
        item["repo"] = row["scope"]
    item.update(expiresAt=row["expiresAt"], fencingToken=row["fencingToken"], session=row["holderSession"])
    if row["procSession"] is not None:
        item["process"] = {"pid": row["pid"], "host": row["host"], "lastHeartbeatAt": row["heartbeatAt"],
                           **({"stoppedAt": row["stoppedAt"]} if row["stoppedAt"] is not None else {})}
    if held:
        item["state"] = "held"
        return item
    last = leases.latest(conn, kind=row["kind"], scope=row["scope"], key=row["key"])
    item["releasedAt"] = row["releasedAt"] if row["releasedAt"] is not None else row["expiresAt"]
    if last is not None and last["seq"] != row["seq"]:
        if (last["holder"], last["holderInstance"]) == holder:
            return None  # the identity took it up again since (checkout_task after the lapse)
        item.update(state="taken", takenBy=leases.holder_text(last))
    elif row["releaseReason"] == "forced":
        item.update(state="taken", takenBy=row["releasedBy"])
    else:
        item["state"] = "lapsed"
    return item


def mark_noticed(conn: Connection, *, session: str, items: list[dict[str, Any]]) -> list[str]:
    """Record that `session` was told about `items`; returns the ids it is the first to be told about
    (held: not told to it before; lapsed/taken: not told to anyone) — two processes never both report a lapse."""
    held = [i["id"] for i in items if i["state"] == "held"]
    lost = [i["id"] for i in items if i["state"] != "held"]
    out: list[str] = []
    for ids, cond, args in ((held, "(noticedBy IS NULL OR noticedBy <> ?)", [session]), (lost, "noticedBy IS NULL", [])):
        if ids:
            marks = ",".join("?" * len(ids))
            out += [r["id"] for r in conn.query(
                f"UPDATE agentLeases SET noticedBy = ? WHERE id IN ({marks}) AND {cond} RETURNING id",
                [session, *ids, *args])]
    return out
