"""MCP tools for leases (docs/leases.md): task claim renewal, path reservations, named slots and a
listing of every lease in force; plus the scheduler job that expires lapsed leases."""

from __future__ import annotations

from typing import Any

from ...core.errors import InvalidArgument
from ...core.ids import now_ms
from ...core.validators import check_name
from ...db.paging import Fields
from ...pipeline.app import App
from ...pipeline.scheduler import tick_now
from . import hooks, slots, sweep
from . import paths as path_store
from . import store as leases

JOB = "lease-expiry"
DEFAULT_PATH_TTL_SECONDS = 3600
DEFAULT_SLOT_TTL_SECONDS = 900


def register(app: App) -> None:
    db = app.db
    app.add_job(JOB, lambda: db.write(lambda c: len(sweep.expire_due(c, now=tick_now()))))
    app.allow_concurrent(JOB)  # each expiry is one compare-and-set UPDATE: any process may sweep

    # Only the claim's holder renews it (anyone else: LEASE_LOST, decided by the store's compare-and-set).
    @app.tool("idempotent", identity="callerOrchestrator")
    def renew_task_claim(taskId: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Extend your claim on a checked-out task by its TTL; returns the lease (LEASE_LOST when it lapsed or was taken)."""
        caller, now = callerOrchestrator, now_ms()
        return db.write(lambda c: hooks.renew(c, kind="task", key=taskId, holder=caller, now=now))

    # Never inside a transaction: with waitSeconds it waits between attempts (one transaction each).
    @app.tool("write", identity="callerOrchestrator", instance="callerInstance")
    def reserve_paths(paths: list[str], exclusive: bool = True,
                      ttlSeconds: float = DEFAULT_PATH_TTL_SECONDS, reason: str | None = None,
                      repo: str | None = None, partial: bool = False, waitSeconds: float = 0,
                      callerOrchestrator: str | None = None, callerInstance: str | None = None) -> dict[str, Any]:
        """Reserve files by gitignore-style globs before editing; returns `{granted, complete: true}` or PATH_CONFLICT.

        All or nothing: a conflict is a PATH_CONFLICT naming the holders; `waitSeconds` (≤ 600) waits for them; `partial: true` takes what is free (`complete: false`). The git guard refuses commits on paths others hold.
        """
        caller, instance = callerOrchestrator, callerInstance
        root = path_store.scope_of(repo)
        wanted = path_store.clean_patterns(paths, root)
        ttl, why = leases.ttl_ms(ttlSeconds), path_store.clean_reason(reason)
        wait = path_store.clean_wait(waitSeconds)
        return path_store.reserve_waiting(db, paths=wanted, repo=root, holder=caller, instance=instance,
                                          exclusive=exclusive, ttl=ttl, reason=why, partial=partial,
                                          wait_seconds=wait)

    @app.tool("read", identity="callerOrchestrator", identity_required=False)
    def check_path_conflicts(paths: list[str], repo: str | None = None,
                             callerOrchestrator: str | None = None) -> dict[str, Any]:
        """What an exclusive reservation of `paths` would meet; returns `{conflicts, free}`, reserves nothing."""
        caller = callerOrchestrator
        root = path_store.scope_of(repo)
        wanted, now = path_store.clean_patterns(paths, root), now_ms()
        return sweep.read_after_expiry(
            db, now, lambda c: path_store.check(c, paths=wanted, repo=root, holder=caller, now=now))

    @app.tool("read")
    def list_path_reservations(repo: str | None = None, holder: str | None = None, limit: int | None = None,
                               cursor: str | None = None, fields: Fields = "full") -> dict[str, Any]:
        """List path reservations in force, newest first, of every repo unless `repo`."""
        root = path_store.scope_of(repo) if repo else None
        who = check_name(holder, "holder") if holder else None
        now = now_ms()
        return sweep.read_after_expiry(db, now, lambda c: path_store.list_reservations(
            c, repo=root, holder=who, now=now, limit=limit, cursor=cursor, fields=fields))

    @app.tool("idempotent", identity="callerOrchestrator")
    def renew_path_reservations(ids: list[str], callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Extend your path reservations by their TTL; returns `{renewed, notRenewed}`."""
        caller, now = callerOrchestrator, now_ms()
        wanted = _ids(ids)
        return db.write(lambda c: path_store.renew(c, ids=wanted, holder=caller, now=now))

    @app.tool("idempotent", identity="callerOrchestrator")
    def release_paths(ids: list[str] | None = None, paths: list[str] | None = None, repo: str | None = None,
                      callerOrchestrator: str | None = None) -> dict[str, Any]:
        """Release your path reservations by id or exact pattern; returns `{released, count}`."""
        caller, now = callerOrchestrator, now_ms()
        if not ids and not paths:
            raise InvalidArgument("give ids (from reserve_paths) or paths (the patterns you reserved)")
        root = path_store.scope_of(repo)
        wanted = path_store.clean_patterns(paths, root) if paths else None
        id_list = _ids(ids) if ids else None
        return db.write(lambda c: path_store.release(c, ids=id_list, paths=wanted, repo=root, holder=caller, now=now))

    @app.tool("destructive", identity="callerOrchestrator")
    def force_release_path_reservation(id: str, reason: str, callerOrchestrator: str | None = None) -> dict[str, Any]:
        """End another agent's path reservation (master bearer or `system` only); the holder gets `reason`; returns `{released}`."""
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
        """Take one of `capacity` places of a named slot (e.g. deploy-prod, capacity 1); returns `{acquired, …}`.

        Acquiring again renews; release_slot when done; it lapses with your presence.
        """
        caller, instance, now = callerOrchestrator, callerInstance, now_ms()
        ttl, cap, why = leases.ttl_ms(ttlSeconds), slots.clean_capacity(capacity), path_store.clean_reason(reason)
        return db.write(lambda c: slots.acquire(c, name=name, capacity=cap, ttl=ttl, holder=caller,
                                                instance=instance, reason=why, now=now))

    @app.tool("idempotent", identity="callerOrchestrator", instance="callerInstance")
    def release_slot(name: str, callerOrchestrator: str | None = None,
                     callerInstance: str | None = None) -> dict[str, Any]:
        """Give back your place in a named slot; returns `{released, count}`."""
        caller, instance, now = callerOrchestrator, callerInstance, now_ms()
        return db.write(lambda c: slots.release(c, name=name, holder=caller, instance=instance, now=now))

    @app.tool("read")
    def list_slots(name: str | None = None, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """List named slots in use with their capacity, holders and expiry."""
        now = now_ms()
        return sweep.read_after_expiry(
            db, now, lambda c: slots.list_slots(c, now=now, name=name, limit=limit, cursor=cursor))

    @app.tool("read")
    def list_leases(kind: str | None = None, holder: str | None = None, limit: int | None = None,
                    cursor: str | None = None, fields: Fields = "full") -> dict[str, Any]:
        """List every lease in force (task claims, path reservations, slots), newest first."""
        if kind is not None and kind not in leases.KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(leases.KINDS)}, got {kind!r}")
        who = check_name(holder, "holder") if holder else None
        now = now_ms()
        return sweep.read_after_expiry(db, now, lambda c: leases.page(
            c, now=now, kind=kind, holder=who, limit=limit, cursor=cursor, fields=fields))


def _ids(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(i, str) and 0 < len(i) <= 100 for i in value):
        raise InvalidArgument("ids must be a non-empty array of lease ids (lse_…) from reserve_paths or list_path_reservations")
    if len(value) > 500:
        raise InvalidArgument("ids holds more than 500 ids")
    return list(dict.fromkeys(value))
