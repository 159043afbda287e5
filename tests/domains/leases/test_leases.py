"""Leases (#22): task claims with an injected clock, LEASE_LOST, renewal by presence and by hand,
path reservations (overlap, shared/exclusive, all-or-nothing, hostile globs, foreign ids, force
release), named slots, paging, and the expiry job."""

from __future__ import annotations

import pytest
from conftest import make_settings, open_tools

from vantage_peers.core.ids import now_ms
from vantage_peers.domains.github import mappings
from vantage_peers.domains.leases import globs, paths, slots, sweep
from vantage_peers.domains.leases import store as leases
from vantage_peers.domains.leases.tools import JOB
from vantage_peers.domains.profiles import store as profiles
from vantage_peers.domains.tasks import lifecycle
from vantage_peers.domains.tasks import store as tasks_store
from vantage_peers.pipeline.scheduler import Scheduler
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends

T0 = 1_800_000_000_000
MIN = 60_000


def new_task(tools, title="claim me", creator="alice", assignee="bob") -> str:
    return tools.call("create_task", title=title, assignedTo=assignee, priority="medium", createdBy=creator)


def sweep_at(app, now: int) -> dict:
    """One tick of the expiry job with the scheduler's injected clock."""
    return Scheduler(app, clock=lambda: now).run_once({JOB})


def lapse(app, task_id: str) -> None:
    """Make the claim on `task_id` lapse now (as if its TTL had gone by) and run the expiry job."""
    app.db.write(lambda c: c.execute("UPDATE agentLeases SET expiresAt = ? WHERE key = ? AND releasedAt IS NULL",
                                     (now_ms() - 1, task_id)))
    sweep_at(app, now_ms())


def unread(tools, who: str) -> list[dict]:
    return tools.call("check_messages", recipient=who)


# -- task claims -------------------------------------------------------------------------------

def test_claim_expiry_with_an_injected_clock(app, tools):
    tid = new_task(tools)
    app.db.write(lambda c: profiles.touch(c, orchestrator_id="bob", instance_id=None))
    won = tools.call("checkout_task", taskId=tid, callerOrchestrator="bob", claimTtlSeconds=120)
    assert won["claimed"] is True and won["fencingToken"] == 1
    expires = won["leaseExpiresAt"]
    assert tools.call("get_task", taskId=tid)["claim"] == {"holder": "bob", "leaseExpiresAt": expires,
                                                           "fencingToken": 1}
    assert sweep_at(app, expires - 1)[JOB] == 0  # not yet
    assert tools.call("get_task", taskId=tid)["status"] == "in_progress"
    assert sweep_at(app, expires)[JOB] == 1  # expiresAt reached: lapsed
    doc = tools.call("get_task", taskId=tid)
    assert (doc["status"], doc["assignedTo"], doc.get("paused")) == ("todo", "bob", False)
    assert "claim" not in doc and doc["workSegments"][-1]["endedAt"] is not None
    [note] = doc["notes"]
    assert note["content"].startswith("[auto]") and "bob" in note["content"] and "last seen 20" in note["content"]
    [msg] = unread(tools, "alice")
    assert tid in msg["content"] and "bob" in msg["content"] and msg["from"] == "system"
    assert sweep_at(app, expires + 10 * MIN)[JOB] == 0  # exactly once: no second note or message
    assert len(tools.call("get_task", taskId=tid)["notes"]) == 1 and len(unread(tools, "alice")) == 1


def test_lease_lost_after_lapse_and_after_takeover(app, tools):
    tid = new_task(tools)
    won = tools.call("checkout_task", taskId=tid, callerOrchestrator="bob", claimTtlSeconds=60)
    sweep_at(app, won["leaseExpiresAt"] + 1)
    lapsed = tools.error("complete_task", taskId=tid, completionNote="done it", callerOrchestrator="bob")
    assert lapsed.find("LEASE_LOST:") >= 0 and "lapsed" in lapsed and "checkout_task" in lapsed
    assert tools.error("update_task", taskId=tid, title="renamed", callerOrchestrator="bob").find("LEASE_LOST:") >= 0
    assert tools.error("renew_task_claim", taskId=tid, callerOrchestrator="bob").find("LEASE_LOST:") >= 0
    took = tools.call("checkout_task", taskId=tid, callerOrchestrator="carol")
    assert took["claimed"] and took["fencingToken"] == 2  # the fencing token grows on every grant
    over = tools.error("complete_task", taskId=tid, completionNote="mine", callerOrchestrator="bob")
    assert over.find("LEASE_LOST:") >= 0 and "carol" in over and "taken over" in over
    assert tools.call("get_task", taskId=tid)["status"] == "in_progress"  # bob changed nothing
    tools.call("complete_task", taskId=tid, completionNote="carol did it: commit abc123", callerOrchestrator="carol")
    assert tools.call("get_task", taskId=tid)["status"] == "done"
    assert tools.call("list_leases", kind="task")["items"] == []  # completion released the claim
    # The creator never held a claim: no LEASE_LOST for them (normal RBAC applies).
    tid2 = new_task(tools, "second")
    w = tools.call("checkout_task", taskId=tid2, callerOrchestrator="bob", claimTtlSeconds=60)
    sweep_at(app, w["leaseExpiresAt"])
    tools.call("update_task", taskId=tid2, priority="high", callerOrchestrator="alice")


def test_restart_after_lapse_pause_and_block_release_the_claim(app, tools):
    tid = new_task(tools)
    tools.call("checkout_task", taskId=tid, callerOrchestrator="bob", claimTtlSeconds=60)
    lapse(app, tid)
    tools.call("start_task", taskId=tid, callerOrchestrator="bob")  # bob takes it up again by hand
    tools.call("complete_task", taskId=tid, completionNote="finished after a restart", callerOrchestrator="bob")
    tid2 = new_task(tools, "paused one")
    tools.call("checkout_task", taskId=tid2, callerOrchestrator="bob")
    tools.call("pause_task", taskId=tid2, callerOrchestrator="bob")
    tid3 = new_task(tools, "blocked one")
    tools.call("checkout_task", taskId=tid3, callerOrchestrator="bob")
    tools.call("block_task", taskId=tid3, reason="waiting on carol for the key", callerOrchestrator="bob")
    assert tools.call("list_leases")["items"] == []
    sweep_at(app, 2 * T0)  # nothing left to lapse: paused and blocked tasks stay as they are
    assert [tools.call("get_task", taskId=t)["status"] for t in (tid2, tid3)] == ["todo", "blocked"]
    assert tools.call("get_task", taskId=tid2)["paused"] is True


def test_renew_task_claim_by_hand(app, tools):
    tid = new_task(tools)
    w = tools.call("checkout_task", taskId=tid, callerOrchestrator="bob", claimTtlSeconds=60)
    r = tools.call("renew_task_claim", taskId=tid, callerOrchestrator="bob")
    assert r["fencingToken"] == w["fencingToken"] and r["leaseExpiresAt"] >= w["leaseExpiresAt"]
    assert tools.error("renew_task_claim", taskId=tid, callerOrchestrator="carol").find("INVALID_STATE:") >= 0
    assert tools.error("renew_task_claim", taskId="tsk_nope", callerOrchestrator="bob").find("NOT_FOUND:") >= 0
    for bad in (0, -5, 10**9, "x"):
        assert "INVALID_ARGUMENT" in tools.error("checkout_task", taskId=tid, callerOrchestrator="x",
                                                 claimTtlSeconds=bad)


def test_default_claim_ttl_comes_from_the_setting(tmp_path):
    app = create_app(make_settings(tmp_path / "t.db", claim_ttl_seconds=42))
    try:
        with open_tools(app) as tools:
            tid = new_task(tools)
            w = tools.call("checkout_task", taskId=tid, callerOrchestrator="bob")
            row = app.db.read(lambda c: leases.latest(c, kind="task", scope="", key=tid))
            assert row["ttlMs"] == 42_000 and w["leaseExpiresAt"] == row["grantedAt"] + 42_000
    finally:
        app.db.close()


def test_presence_renews_the_holders_leases_only(app):
    db = app.db
    tid = db.write(lambda c: tasks_store.create_task(c, payload={"title": "p", "assignedTo": "bob",
                                                                 "priority": "low", "createdBy": "alice"}))
    db.write(lambda c: lifecycle.checkout_task(c, task_id=tid, caller="bob", instance="b1", now=T0, ttl=MIN))
    db.write(lambda c: slots.acquire(c, name="deploy", capacity=1, ttl=MIN, holder="bob", instance="b1",
                                     reason=None, now=T0))
    db.write(lambda c: profiles.touch(c, orchestrator_id="bob", instance_id="b2", now=T0 + 50_000))  # other instance
    db.write(lambda c: profiles.touch(c, orchestrator_id="carol", instance_id="b1", now=T0 + 50_000))  # other orch
    rows = db.read(lambda c: leases.active(c, kind="task", now=T0))
    assert rows[0]["expiresAt"] == T0 + MIN
    db.write(lambda c: profiles.touch(c, orchestrator_id="bob", instance_id="b1", now=T0 + 50_000))
    assert {r["expiresAt"] for r in db.read(lambda c: leases.active(c, kind="task", now=T0)
                                            + leases.active(c, kind="slot", now=T0))} == {T0 + 50_000 + MIN}
    assert db.write(lambda c: sweep.expire_due(c, now=T0 + MIN + 1)) == []  # renewed: still held
    # Presence after the lapse does not revive it.
    expired = db.write(lambda c: sweep.expire_due(c, now=T0 + 50_000 + MIN))
    assert {r["kind"] for r in expired} == {"task", "slot"}
    db.write(lambda c: profiles.touch(c, orchestrator_id="bob", instance_id="b1", now=T0 + 200_000))
    assert db.read(lambda c: leases.active(c, kind="task", now=T0 + 200_000)) == []
    assert db.read(lambda c: tasks_store.get_task(c, task_id=tid))["status"] == "todo"


def test_presence_of_the_server_process_renews_through_the_pipeline(tmp_path):
    app = create_app(make_settings(tmp_path / "p.db", orchestrator="bob", presence_interval_seconds=0))
    try:
        with open_tools(app) as tools:
            tid = new_task(tools)
            tools.call("checkout_task", taskId=tid, claimTtlSeconds=60)
            before = app.db.read(lambda c: leases.latest(c, kind="task", scope="", key=tid))
            app.db.write(lambda c: c.execute("UPDATE agentLeases SET expiresAt = expiresAt - 30000, "
                                             "renewedAt = renewedAt - 30000"))  # as if 30 s went by
            tools.call("list_tasks")  # any call of this named process is presence
            after = app.db.read(lambda c: leases.latest(c, kind="task", scope="", key=tid))
            assert after["expiresAt"] >= before["expiresAt"] and after["renewedAt"] > before["renewedAt"] - 30000
    finally:
        app.db.close()


# -- path reservations -------------------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "expected"), [
    ("src/**", "src/api/x.py", True), ("src/*.py", "src/a.*", True), ("src/**", "lib/**", False),
    ("docs/*.md", "docs/a/b.md", False), ("docs/**/*.md", "docs/a/b.md", True), ("src", "src/a.py", True),
    ("/a.py", "sub/a.py", False), ("a.py", "sub/a.py", False), ("*.py", "sub/a.py", True),
    ("README.md", "src/README.md", False), ("README.md", "/README.md", True), ("src/a*", "src/b*", False),
    ("x/?.py", "x/ab.py", False), ("**", "anything/at/all", True), ("src/", "src/deep/file", True),
])
def test_glob_overlap(a, b, expected):
    assert globs.overlaps(a, b) is expected and globs.overlaps(b, a) is expected


def test_exclusive_shared_all_or_nothing_and_partial(tools):
    r = lambda who, ps, **kw: tools.call("reserve_paths", paths=ps, repo="o/r", callerOrchestrator=who, **kw)  # noqa: E731
    refused = lambda who, ps, **kw: tools.error("reserve_paths", paths=ps, repo="o/r", callerOrchestrator=who, **kw)  # noqa: E731
    first = r("bob", ["src/api/**"], reason="auth refactor")
    assert first["granted"][0]["fencingToken"] == 1 and first["complete"] is True
    err = refused("carol", ["src/api/routes.py", "docs/x.md"])  # a conflict is an error, never `granted: []`
    assert err.find("PATH_CONFLICT:") >= 0 and "bob" in err and "'src/api/**'" in err and "auth refactor" in err
    assert "src/api/routes.py" in err and "expiresAt" in err
    assert tools.call("list_path_reservations", holder="carol")["items"] == []  # all or nothing
    part = r("carol", ["src/api/routes.py", "docs/x.md"], partial=True)
    assert [g["path"] for g in part["granted"]] == ["docs/x.md"] and part["granted"][0]["fencingToken"] == 2
    assert part["complete"] is False and part["refused"] == ["src/api/routes.py"]
    c = part["conflicts"][0]
    assert (c["path"], c["holder"], c["reason"]) == ("src/api/routes.py", "bob", "auth refactor") and c["expiresAt"] > 0
    # shared coexists with shared, not with exclusive
    assert r("dave", ["assets/**"], exclusive=False)["granted"]
    assert r("erin", ["assets/logo.png"], exclusive=False)["granted"]
    assert "dave" in refused("erin", ["assets/a.css"])
    assert "carol" in refused("bob", ["docs/**"], exclusive=False)
    # one's own reservations never conflict; reserving the same again is a renewal
    again = r("bob", ["src/api/**"])
    assert again["granted"][0]["renewed"] is True and again["granted"][0]["fencingToken"] == 1
    assert r("bob", ["src/api/routes.py"])["granted"]
    # another repo is another scope
    assert tools.call("reserve_paths", paths=["src/api/**"], repo="o/other", callerOrchestrator="carol")["granted"]
    chk = tools.call("check_path_conflicts", paths=["src/api/x.py", "README.md"], repo="o/r",
                     callerOrchestrator="carol")
    assert [x["path"] for x in chk["conflicts"]] == ["src/api/x.py"] and chk["free"] == ["README.md"]


def test_release_renew_foreign_ids_and_paging(tools):
    ids = [tools.call("reserve_paths", paths=[f"pkg{i}/**"], repo="o/r", callerOrchestrator="bob")["granted"][0]["id"]
           for i in range(45)]
    items, pages = tools.pages("list_path_reservations", repo="o/r", limit=20)
    assert len(items) == 45 and {i["id"] for i in items} == set(ids) and pages == 3
    assert len(tools.call("list_path_reservations", holder="carol")["items"]) == 0
    # carol cannot renew or release bob's reservations by id
    foreign = tools.call("renew_path_reservations", ids=ids[:2], callerOrchestrator="carol")
    assert foreign["renewed"] == [] and len(foreign["notRenewed"]) == 2
    assert tools.call("release_paths", ids=ids[:2], callerOrchestrator="carol")["count"] == 0
    assert tools.call("release_paths", ids=["lse_unknown", "'; DROP TABLE agentLeases; --"],
                      callerOrchestrator="bob")["count"] == 0
    assert tools.call("renew_path_reservations", ids=ids[:2], callerOrchestrator="bob")["renewed"]
    assert tools.call("release_paths", ids=ids[:5], callerOrchestrator="bob")["count"] == 5
    assert tools.call("release_paths", paths=["pkg10/**", "pkg11/**"], repo="o/r",
                      callerOrchestrator="bob")["count"] == 2
    assert len(tools.pages("list_path_reservations", repo="o/r")[0]) == 38
    assert tools.call("renew_path_reservations", ids=ids[:1], callerOrchestrator="bob")["notRenewed"][0]["id"] == ids[0]
    assert "INVALID_ARGUMENT" in tools.error("release_paths", callerOrchestrator="bob")


def test_hostile_globs_are_refused_or_taken_literally(app, tools):
    bad = ["", "   ", "!src/**", "#comment", "../etc/passwd", "a/../../b", "x\x00y", "a" * 1001, 12, None, ["x"],
           "./!x", "**/../x"]
    for pattern in bad:
        err = tools.error("reserve_paths", paths=[pattern], repo="o/r", callerOrchestrator="bob")
        assert "INVALID_ARGUMENT" in err, (pattern, err)
    assert "INVALID_ARGUMENT" in tools.error("reserve_paths", paths=[], callerOrchestrator="bob")
    assert "INVALID_ARGUMENT" in tools.error("reserve_paths", paths=[f"p{i}" for i in range(201)],
                                             callerOrchestrator="bob")
    for weird, stored in [("'; DROP TABLE agentLeases; --", None), ("src/[unclosed", None), ("%_\\x", "%_/x"),
                          ("🚀/日本語/**", None), ("a" * 1000, None), ("**/**/**/**/**/**/x", None)]:
        res = tools.call("reserve_paths", paths=[weird], repo="o/weird", callerOrchestrator="bob")
        assert res["granted"] and res["granted"][0]["path"] == (stored or weird.strip())  # a backslash is a separator
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM agentLeases")) == 6
    for field, value in (("ttlSeconds", 0), ("ttlSeconds", 10**12), ("repo", "x" * 2000), ("reason", "r" * 3000)):
        assert "INVALID_ARGUMENT" in tools.error("reserve_paths", paths=["ok/**"], callerOrchestrator="bob",
                                                 **{field: value})


def test_force_release_rules(app, tools):
    gid = tools.call("reserve_paths", paths=["app/**"], repo="octo/app", callerOrchestrator="bob",
                     reason="migration")["granted"][0]["id"]
    denied = tools.error("force_release_path_reservation", id=gid, reason="need it", callerOrchestrator="carol")
    assert denied.find("RBAC_DENIED:") >= 0 and "release_paths" in denied and "waitSeconds" in denied
    assert tools.error("force_release_path_reservation", id="lse_nope", reason="x",
                       callerOrchestrator="system").find("NOT_FOUND:") >= 0
    # The repo mapping's owner may not (anyone can create a mapping nobody made yet): master or system only.
    app.db.write(lambda c: mappings.add(c, repo="octo/app", orchestrator="dave", project="app", created_by="dave"))
    assert "RBAC_DENIED" in tools.error("force_release_path_reservation", id=gid, reason="mine",
                                        callerOrchestrator="dave")
    done = tools.call("force_release_path_reservation", id=gid, reason="bob left for the day",
                      callerOrchestrator="system")
    assert done["released"] is True and done["holder"] == "bob"
    [msg] = unread(tools, "bob")
    assert "bob left for the day" in msg["content"] and "app/**" in msg["content"]
    assert tools.call("force_release_path_reservation", id=gid, reason="again",
                      callerOrchestrator="system")["released"] is False
    gid2 = tools.call("reserve_paths", paths=["lib/**"], repo="o/r", callerOrchestrator="bob")["granted"][0]["id"]
    assert tools.call("force_release_path_reservation", id=gid2, reason="stale",
                      callerOrchestrator="system")["released"] is True
    slot = tools.call("acquire_slot", name="deploy", ttlSeconds=60, callerOrchestrator="bob")["id"]
    assert tools.error("force_release_path_reservation", id=slot, reason="x",
                       callerOrchestrator="system").find("NOT_FOUND:") >= 0  # not a path reservation


def test_path_reservations_expire_and_free_the_paths(app, tools):
    g = tools.call("reserve_paths", paths=["src/**"], repo="o/r", ttlSeconds=30, callerOrchestrator="bob")
    exp = g["granted"][0]["expiresAt"]
    assert app.db.write(lambda c: paths.reserve(c, paths=["src/a.py"], repo="o/r", holder="carol", instance=None,
                                                exclusive=True, ttl=MIN, reason=None, partial=False,
                                                now=exp - 1))["conflicts"]
    res = app.db.write(lambda c: paths.reserve(c, paths=["src/a.py"], repo="o/r", holder="carol", instance=None,
                                               exclusive=True, ttl=MIN, reason=None, partial=False, now=exp))
    assert res["granted"] and res["granted"][0]["fencingToken"] == 2  # lazily expired, then granted


# -- slots -------------------------------------------------------------------------------------

def test_slots_capacity_release_and_expiry(app, tools):
    acq = lambda who, **kw: tools.call("acquire_slot", name="e2e", ttlSeconds=60, callerOrchestrator=who, **kw)  # noqa: E731
    a, b = acq("bob", capacity=2), acq("carol", capacity=2)
    assert a["acquired"] and b["acquired"] and b["fencingToken"] == a["fencingToken"] + 1
    full = acq("dave", capacity=2)
    assert full["acquired"] is False and {h["holder"] for h in full["holders"]} == {"bob", "carol"}
    assert full["retryAfter"] == a["expiresAt"]
    assert acq("dave", capacity=5)["acquired"] is False  # asking for more room does not widen the slot
    assert acq("bob", capacity=2).get("renewed") is True  # acquiring what one holds renews it
    [slot] = tools.call("list_slots")["items"]
    assert (slot["name"], slot["capacity"], slot["inUse"], slot["free"]) == ("e2e", 2, 2, 0)
    assert tools.call("release_slot", name="e2e", callerOrchestrator="bob")["released"] is True
    assert tools.call("release_slot", name="e2e", callerOrchestrator="bob")["released"] is False
    assert acq("dave", capacity=2)["acquired"] is True
    # carol's place lapses: the sweep frees it exactly once.
    expired = app.db.write(lambda c: sweep.expire_due(c, now=b["expiresAt"]))
    assert [r["holder"] for r in expired] == ["carol"]
    assert app.db.write(lambda c: sweep.expire_due(c, now=b["expiresAt"])) == []
    for bad in ("", "x" * 201, 5):
        assert "INVALID_ARGUMENT" in tools.error("acquire_slot", name=bad, ttlSeconds=60, callerOrchestrator="bob")
    for cap in (0, -1, 1001):
        assert "INVALID_ARGUMENT" in tools.error("acquire_slot", name="s", ttlSeconds=60, capacity=cap,
                                                 callerOrchestrator="bob")


def test_list_slots_and_list_leases_page(tools):
    for i in range(25):
        tools.call("acquire_slot", name=f"slot-{i:02d}", ttlSeconds=60, callerOrchestrator="bob")
    items, pages = tools.pages("list_slots", limit=10)
    assert [s["name"] for s in items] == [f"slot-{i:02d}" for i in range(25)] and pages == 3
    leases_, _ = tools.pages("list_leases", kind="slot", limit=7)
    assert len(leases_) == 25 and len({x["id"] for x in leases_}) == 25
    assert tools.call("list_leases", holder="carol")["items"] == []
    assert "INVALID_ARGUMENT" in tools.error("list_leases", kind="door")


def test_status_shows_leases_with_holders_and_expiry(app, tools):
    from vantage_peers import status

    tid = new_task(tools)
    tools.call("checkout_task", taskId=tid, callerOrchestrator="bob", callerInstance="bob-1")
    tools.call("reserve_paths", paths=["src/**"], repo="o/r", callerOrchestrator="carol", reason="refactor")
    tools.call("acquire_slot", name="deploy-prod", ttlSeconds=100, callerOrchestrator="dave")
    data = status.collect(app)
    held = {(x["kind"], x["key"]): x for x in data["leases"]}
    assert set(held) == {("task", tid), ("path", "src/**"), ("slot", "deploy-prod")}
    assert held[("task", tid)]["holderInstance"] == "bob-1" and held[("path", "src/**")]["holder"] == "carol"
    text = status.render(data)
    assert "leases in force (3" in text and "bob/bob-1" in text and "path src/**  (o/r)" in text
    assert "slot deploy-prod" in text and "expires in 1m" in text


def test_attackers_cannot_touch_others_leases(app, tools):
    """From the attacker's side: mallory names bob's ids, slots and tasks."""
    tid = new_task(tools)
    tools.call("checkout_task", taskId=tid, callerOrchestrator="bob")
    assert tools.call("checkout_task", taskId=tid, callerOrchestrator="mallory")["claimed"] is False
    assert "INVALID_STATE" in tools.error("renew_task_claim", taskId=tid, callerOrchestrator="mallory")
    assert "RBAC_DENIED" in tools.error("complete_task", taskId=tid, completionNote="stolen",
                                        callerOrchestrator="mallory")
    tools.call("acquire_slot", name="deploy", ttlSeconds=60, callerOrchestrator="bob")
    assert tools.call("release_slot", name="deploy", callerOrchestrator="mallory")["released"] is False
    assert tools.call("acquire_slot", name="deploy", ttlSeconds=60, callerOrchestrator="mallory")["acquired"] is False
    gid = tools.call("reserve_paths", paths=["src/**"], repo="o/r", callerOrchestrator="bob")["granted"][0]["id"]
    assert tools.call("release_paths", paths=["src/**"], repo="o/r", callerOrchestrator="mallory")["count"] == 0
    assert "RBAC_DENIED" in tools.error("force_release_path_reservation", id=gid, reason="mine now",
                                        callerOrchestrator="mallory")
    # The master bearer (HTTP) may; here through the store, as the tool passes principal.is_master.
    out = app.db.write(lambda c: paths.force_release(c, reservation_id=gid, reason="ops", caller="admin",
                                                     master=True, now=now_ms()))
    assert out["released"] is True
    held = tools.call("list_leases")["items"]
    assert {(x["kind"], x["holder"]) for x in held} == {("task", "bob"), ("slot", "bob")}


def test_read_tools_expire_lapsed_leases_lazily(app, tools):
    """No scheduler: list_leases itself expires what is due, with the task's consequences."""
    tid = new_task(tools)
    tools.call("checkout_task", taskId=tid, callerOrchestrator="bob")
    app.db.write(lambda c: c.execute("UPDATE agentLeases SET expiresAt = ? WHERE key = ?", (now_ms() - 1, tid)))
    assert tools.call("list_leases")["items"] == []
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "todo" and doc["notes"][0]["content"].startswith("[auto]")


def test_bulk_completion_and_deletion_end_the_claims(tools):
    a, b = new_task(tools, "cron job", creator="cron-x"), new_task(tools, "to delete")
    tools.call("checkout_task", taskId=a, callerOrchestrator="bob")
    tools.call("checkout_task", taskId=b, callerOrchestrator="bob")
    assert len(tools.call("list_leases", kind="task")["items"]) == 2
    done = tools.call("bulk_complete_tasks", filter={"autoGeneratedOnly": True}, dryRun=False,
                      callerOrchestrator="system")
    assert done["count"] == 1
    tools.call("delete_task", taskId=b, callerOrchestrator="alice")
    assert tools.call("list_leases", kind="task")["items"] == []


def test_get_and_list_tasks_release_a_lapsed_claim_before_showing_it(tmp_path):
    """Lazy expiry on read: a claim whose holder vanished is not shown as in progress, even between
    two scheduler ticks (the scheduler is off here)."""
    from conftest import make_settings, open_tools

    from vantage_peers.server import create_app

    app = create_app(make_settings(tmp_path / "lazy.db"))
    try:
        with open_tools(app) as tools:
            task = tools.call("create_task", title="claimed then lost", assignedTo="pool", createdBy="lead",
                              priority="low")
            assert tools.call("checkout_task", taskId=task, callerOrchestrator="worker")["claimed"] is True
            assert tools.call("get_task", taskId=task)["status"] == "in_progress"
            app.db.write(lambda c: c.execute("UPDATE agentLeases SET expiresAt = 1 WHERE kind = 'task' AND key = ?",
                                             (task,)))
            assert tools.call("get_task", taskId=task)["status"] == "todo"
            listed = tools.call("list_tasks", assignedTo="worker", status="all")["items"]
            assert [t["status"] for t in listed if t["_id"] == task] in ([], ["todo"])
    finally:
        app.db.close()


def test_lazy_expiry_checks_inside_the_read_it_precedes(app, tools, monkeypatch):
    """The read tools' due-lease check is the first statement of their own read (no transaction of its
    own: two round trips on PostgreSQL); only when a lease is due do they write, then read again."""
    tid = new_task(tools)
    tools.call("checkout_task", taskId=tid, callerOrchestrator="bob")
    reads: list[int] = []
    seen: list[tuple[str, int]] = []
    real_read, real_due, real_get, real_expire = app.db.read, sweep.any_due, tasks_store.get_task, sweep.expire_due

    def read(fn):
        reads.append(len(reads))
        return real_read(fn)

    def mark(name, real):
        return lambda *a, **k: (seen.append((name, len(reads))), real(*a, **k))[1]

    monkeypatch.setattr(app.db, "read", read)
    monkeypatch.setattr(sweep, "any_due", mark("check", real_due))
    monkeypatch.setattr(sweep, "expire_due", mark("expire", real_expire))
    monkeypatch.setattr(tasks_store, "get_task", mark("read", real_get))
    assert tools.call("get_task", taskId=tid)["status"] == "in_progress"
    assert [name for name, _ in seen] == ["check", "read"] and seen[0][1] == seen[1][1]  # one transaction
    real_write = app.db.write
    real_write(lambda c: c.execute("UPDATE agentLeases SET expiresAt = ? WHERE key = ?", (now_ms() - 1, tid)))
    seen.clear()
    doc = tools.call("get_task", taskId=tid)
    assert doc["status"] == "todo"  # the lapsed claim was released before the task was shown
    assert [name for name, _ in seen] == ["check", "expire", "read"] and seen[2][1] > seen[0][1]
