"""MCP tools for leases (docs/leases.md): task claim renewal, path reservations, named slots and a
listing of every lease in force; plus the scheduler job that expires lapsed leases."""

from __future__ import annotations

from typing import Any

from ...app import App
from ...db.paging import Fields
from ...errors import InvalidArgument
from ...ids import now_ms
from ...scheduler import tick_now
from ...validators import check_name
from ..tasks import claims
from . import globs, slots, sweep
from . import paths as path_store
from . import repo as repos
from . import store as leases

JOB = "lease-expiry"
DEFAULT_PATH_TTL_SECONDS = 3600
DEFAULT_SLOT_TTL_SECONDS = 900


def register(app: App) -> None:
    db = app.db
    app.add_job(JOB, lambda: db.write(lambda c: len(sweep.expire_due(c, now=tick_now()))))
    app.allow_concurrent(JOB)  # each expiry is one compare-and-set UPDATE: any process may sweep

    def patterns(value: Any, root: str, field: str = "paths") -> list[str]:
        if isinstance(value, list):
            value = [repos.relative(p, root) if isinstance(p, str) else p for p in value]
        return globs.clean_all(value, field)

    # Only the claim's holder renews it (anyone else: LEASE_LOST, decided by the store's compare-and-set).
    @app.tool("idempotent", identity="callerOrchestrator")
    def renew_task_claim(taskId: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Extend your claim on a checked-out task by its TTL; returns `{taskId, leaseExpiresAt, fencingToken}`.

        LEASE_LOST when it lapsed or was taken over. Any call of a server started with VP_ORCHESTRATOR renews its claims too (presence).
        """
        caller, now = callerOrchestrator, now_ms()
        return db.write(lambda c: claims.renew_claim(c, task_id=taskId, caller=caller, now=now))

    @app.tool("write", identity="callerOrchestrator", instance="callerInstance")
    def reserve_paths(paths: list[str], exclusive: bool = True,
                      ttlSeconds: float = DEFAULT_PATH_TTL_SECONDS, reason: str | None = None,
                      repo: str | None = None, partial: bool = False, callerOrchestrator: str | None = None,
                      callerInstance: str | None = None) -> dict[str, Any]:
        """Reserve files by gitignore-style globs before editing them; returns `{granted, conflicts}`.

        `granted`: [{id, path, repo, exclusive, expiresAt, fencingToken}]; `conflicts`: [{path, holder,
        reason, expiresAt}]. All or nothing unless `partial: true`. Exclusive (default) excludes any overlapping
        reservation of another orchestrator; shared ones coexist. `repo` defaults to the git repo
        of the server's working directory. The git guard (`vantage-peers guard install`) refuses
        commits on paths others reserved exclusively.
        """
        caller, instance, now = callerOrchestrator, callerInstance, now_ms()
        root = repos.resolve(path_store.clean_repo(repo))
        wanted = patterns(paths, root)
        ttl, why = leases.ttl_ms(ttlSeconds), path_store.clean_reason(reason)
        return db.write(lambda c: path_store.reserve(c, paths=wanted, repo=root, holder=caller, instance=instance,
                                                exclusive=exclusive, ttl=ttl, reason=why, partial=partial, now=now))

    @app.tool("read", identity="callerOrchestrator", identity_required=False)
    def check_path_conflicts(paths: list[str], repo: str | None = None,
                             callerOrchestrator: str | None = None) -> dict[str, Any]:
        """What an exclusive reservation of `paths` would meet; returns `{conflicts, free}`, reserves nothing.

        `conflicts`: [{path, holder, reason, expiresAt}]; `free`: the paths nobody else holds.
        """
        caller = callerOrchestrator
        root = repos.resolve(path_store.clean_repo(repo))
        wanted, now = patterns(paths, root), now_ms()
        sweep.before_read(db, now)
        return db.read(lambda c: path_store.check(c, paths=wanted, repo=root, holder=caller, now=now))

    @app.tool("read")
    def list_path_reservations(repo: str | None = None, holder: str | None = None, limit: int | None = None,
                               cursor: str | None = None, fields: Fields = "full") -> dict[str, Any]:
        """Path reservations in force, newest first; returns `{items, nextCursor?}`.

        Every repo unless `repo`; `holder` = an orchestrator. Items: {id, path, repo, holder,
        exclusive, reason, expiresAt, fencingToken}.
        """
        root = repos.resolve(path_store.clean_repo(repo)) if repo else None
        who = check_name(holder, "holder") if holder else None
        now = now_ms()
        sweep.before_read(db, now)
        return db.read(lambda c: path_store.list_reservations(c, repo=root, holder=who, now=now, limit=limit,
                                                              cursor=cursor, fields=fields))

    @app.tool("idempotent", identity="callerOrchestrator")
    def renew_path_reservations(ids: list[str], callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Extend your path reservations by their TTL from now; returns `{renewed, notRenewed}`."""
        caller, now = callerOrchestrator, now_ms()
        wanted = _ids(ids)
        return db.write(lambda c: path_store.renew(c, ids=wanted, holder=caller, now=now))

    @app.tool("idempotent", identity="callerOrchestrator")
    def release_paths(ids: list[str] | None = None, paths: list[str] | None = None, repo: str | None = None,
                      callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Release your path reservations by id or by the exact patterns you reserved; returns `{released, count}`."""
        caller, now = callerOrchestrator, now_ms()
        if not ids and not paths:
            raise InvalidArgument("give ids (from reserve_paths) or paths (the patterns you reserved)")
        root = repos.resolve(path_store.clean_repo(repo))
        wanted = patterns(paths, root) if paths else None
        id_list = _ids(ids) if ids else None
        return db.write(lambda c: path_store.release(c, ids=id_list, paths=wanted, repo=root, holder=caller, now=now))

    @app.tool("destructive", identity="callerOrchestrator")
    def force_release_path_reservation(id: str, reason: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """End another agent's path reservation; returns `{released, id, holder?, path?}`.

        Master, `system` or the repo mapping's owner only; the holder gets a message with `reason`.
        """
        caller, now = callerOrchestrator, now_ms()
        why = path_store.clean_reason(reason)
        if not why:
            raise InvalidArgument("reason is required: say why the holder loses the reservation")
        master = app.actor().master
        return db.write(lambda c: path_store.force_release(c, reservation_id=id, reason=why, caller=caller,
                                                      master=master, now=now))

    @app.tool("write", identity="callerOrchestrator", instance="callerInstance")
    def acquire_slot(name: str, ttlSeconds: float = DEFAULT_SLOT_TTL_SECONDS, capacity: int = 1,
                     reason: str | None = None, callerOrchestrator: str | None = None,
                     callerInstance: str | None = None) -> dict[str, Any]:
        """Take one of `capacity` places of a named slot; returns `{acquired, id, expiresAt, fencingToken}`.

        Refused: `{acquired: false, holders, retryAfter}`. E.g. "deploy-prod" capacity 1, "e2e"
        capacity 2. Acquiring a slot you hold renews it; release_slot when done; it lapses with your presence.
        """
        caller, instance, now = callerOrchestrator, callerInstance, now_ms()
        ttl, cap, why = leases.ttl_ms(ttlSeconds), slots.clean_capacity(capacity), path_store.clean_reason(reason)
        return db.write(lambda c: slots.acquire(c, name=name, capacity=cap, ttl=ttl, holder=caller,
                                                instance=instance, reason=why, now=now))

    @app.tool("idempotent", identity="callerOrchestrator", instance="callerInstance")
    def release_slot(name: str, callerOrchestrator: str | None = None,
                     callerInstance: str | None = None) -> dict[str, Any]:
        """Give back your place in a named slot; returns `{released, name, count}`."""
        caller, instance, now = callerOrchestrator, callerInstance, now_ms()
        return db.write(lambda c: slots.release(c, name=name, holder=caller, instance=instance, now=now))

    @app.tool("read")
    def list_slots(name: str | None = None, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """Named slots in use, with their holders and expiry; returns `{items, nextCursor?}`.

        Items: {name, capacity, inUse, free, holders}.
        """
        now = now_ms()
        sweep.before_read(db, now)
        return db.read(lambda c: slots.list_slots(c, now=now, name=name, limit=limit, cursor=cursor))

    @app.tool("read")
    def list_leases(kind: str | None = None, holder: str | None = None, limit: int | None = None,
                    cursor: str | None = None, fields: Fields = "full") -> dict[str, Any]:
        """Every lease in force, newest first; returns `{items, nextCursor?}`.

        kind task = a claim, path = a reservation, slot; each with holder, expiresAt, fencingToken.
        """
        if kind is not None and kind not in leases.KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(leases.KINDS)}, got {kind!r}")
        who = check_name(holder, "holder") if holder else None
        now = now_ms()
        sweep.before_read(db, now)
        return db.read(lambda c: leases.page(c, now=now, kind=kind, holder=who, limit=limit, cursor=cursor,
                                             fields=fields))


def _ids(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(i, str) and 0 < len(i) <= 100 for i in value):
        raise InvalidArgument("ids must be a non-empty array of lease ids (lse_…) from reserve_paths or list_path_reservations")
    if len(value) > 500:
        raise InvalidArgument("ids holds more than 500 ids")
    return list(dict.fromkeys(value))
