"""The dashboard's views over Starlette's TestClient: every view, its filters and paging, the
actions a person takes (through the tools' store functions, audited), escaping of hostile text."""

from __future__ import annotations

import re
import time

import pytest
from support.dashboard_helpers import LOCAL, csrf_of, local_client, post
from support.migration_helpers import older_file

pytestmark = pytest.mark.backends

XSS = "<script>alert('x')</script>"


@pytest.fixture
def dash(app):
    with local_client(app) as client:
        yield client


def _ids(html: str, prefix: str) -> list[str]:
    return re.findall(rf"/{prefix}/((?:tsk|msg|mis)_[0-9A-Z]+)\"", html)


def test_every_view_renders_and_the_root_goes_to_team(dash):
    assert dash.get("/").headers["location"].endswith("/team")
    for path in ("/team", "/messages", "/tasks", "/missions", "/schedule", "/memory", "/claims", "/activity",
                 "/memory?q=anything", "/tasks?status=todo"):
        r = dash.get(path)
        assert r.status_code == 200, (path, r.text[:500])
        assert "<main id=\"main\"" in r.text and "<nav aria-label=" in r.text
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert r.headers["x-frame-options"] == "DENY"
    assert dash.get("/tasks/tsk_nope").status_code == 404
    assert dash.get("/messages/msg_nope").status_code == 404
    assert dash.get("/missions/mis_nope").status_code == 404


def test_team_shows_presence_open_tasks_and_unread(dash, tools):
    tools.call("set_summary", summary="refactoring the parser", orchestratorId="bob")
    tools.call("set_summary", summary="writing docs", orchestratorId="carol", instanceId="carol-laptop")
    for i in range(3):
        tools.call("send_message", **{"from": "alice", "channel": "bob", "content": f"ping {i}"})
    tools.call("create_task", title="t1", assignedTo="bob", createdBy="alice", priority="low")
    html = dash.get("/team").text
    row = html[html.index(">bob</a>"):].split("</tr>")[0]
    assert "refactoring the parser" in row and "online" in row
    assert re.search(r">1</a></td>\s*<td><a[^>]*>3</a>", row), row  # 1 open task, 3 unread
    assert "carol-laptop" in html
    assert "carol-laptop" not in dash.get("/team?who=bob").text
    assert ">bob</a>" not in dash.get("/team?state=stale").text


def test_messages_page_through_every_message_and_filter(dash, tools):
    for i in range(60):
        tools.call("send_message", **{"from": "alice" if i % 2 else "dave", "channel": "bob", "content": f"m-{i:03d}"})
    tools.call("send_message", **{"from": "alice", "channel": "ops", "content": "ops note"})
    seen, url, pages = [], "/messages?channel=bob", 0
    while url:
        html = dash.get(url).text
        seen += re.findall(r"m-\d{3}", html)
        nxt = re.search(r'rel="next" href="([^"]+)"', html)
        url = nxt.group(1).replace("&amp;", "&") if nxt else None
        pages += 1
    assert sorted(seen) == [f"m-{i:03d}" for i in range(60)] and pages == 3
    only_alice = dash.get("/messages?channel=bob&from=alice").text
    assert len(re.findall(r"m-\d{3}", only_alice)) == 25 and "m-000" not in only_alice
    assert "ops note" not in dash.get("/messages?channel=bob").text
    # unread for one recipient; read ones drop out
    unread = tools.call("check_messages", recipient="bob")
    tools.call("mark_as_read", receiptIds=[m["receiptId"] for m in unread if m["content"] < "m-010"])
    page = dash.get("/messages?to=bob&unread=1&channel=bob").text
    assert "m-009" not in page and "m-059" in page
    assert dash.get("/messages?cursor=%7B%7D").status_code == 400  # a forged cursor is a clean 400


def test_message_detail_lists_receipts(dash, tools):
    sent = tools.call("send_message", **{"from": "alice", "channel": "bob,carol", "content": "hello both"})
    html = dash.get(f"/messages/{sent['messageId']}").text
    assert "hello both" in html and ">bob<" in html and ">carol<" in html


def test_task_board_columns_filters_and_list_paging(dash, tools):
    now = int(time.time() * 1000)
    mission = tools.call("create_mission", name="Launch", project="p", status="execute", priority="high",
                         pilot="alice", agents=["bob"], createdBy="alice")
    mid = mission if isinstance(mission, str) else mission["_id"]
    for i in range(30):
        tools.call("create_task", title=f"todo-{i:02d}", assignedTo="bob" if i % 2 else "carol", createdBy="alice",
                   priority="urgent" if i < 5 else "low", missionId=mid if i < 10 else None,
                   dueDate=now - 60_000 if i < 3 else None)
    blocked = tools.call("create_task", title="stuck-one", assignedTo="bob", createdBy="alice", priority="high")
    tools.call("block_task", taskId=blocked, reason="waiting on keys", callerOrchestrator="bob")
    board = dash.get("/tasks").text
    assert board.count('class="card task') == 12 + 1  # todo column capped at 12, blocked 1
    assert 'href="/tasks?status=todo"' in board
    assert "stuck-one" in board and "waiting on keys" in board
    only_blocked = dash.get("/tasks?blocked=1").text
    assert "stuck-one" in only_blocked and "todo-" not in only_blocked
    overdue = dash.get("/tasks?overdue=1").text
    assert sorted(re.findall(r"todo-\d\d", overdue)) == ["todo-00", "todo-01", "todo-02"]
    urgent_bob = dash.get("/tasks?priority=urgent&assignee=bob").text
    assert sorted(re.findall(r"todo-\d\d", urgent_bob)) == ["todo-01", "todo-03"]
    in_mission = dash.get(f"/tasks?mission={mid}").text
    assert len(re.findall(r"todo-\d\d", in_mission)) == 10
    first = dash.get("/tasks?status=todo").text
    second_url = re.search(r'rel="next" href="([^"]+)"', first).group(1).replace("&amp;", "&")
    second = dash.get(second_url).text
    titles = re.findall(r"todo-\d\d", first) + re.findall(r"todo-\d\d", second)
    assert sorted(titles) == [f"todo-{i:02d}" for i in range(30)]
    assert dash.get("/tasks?priority=bogus").status_code == 400


def test_task_detail_has_segments_and_history(dash, tools):
    tid = tools.call("create_task", title="measured", assignedTo="bob", createdBy="alice", priority="low")
    tools.call("start_task", taskId=tid, callerOrchestrator="bob")
    tools.call("pause_task", taskId=tid, callerOrchestrator="bob")
    html = dash.get(f"/tasks/{tid}").text
    assert html.count("<strong>started</strong>") == 1 and "<strong>stopped</strong>" in html
    assert "<strong>created</strong> · alice" in html


def test_missions_progress_and_detail(dash, tools):
    mid = tools.call("create_mission", name="Ship it", project="p", status="execute", priority="high",
                     pilot="alice", agents=["bob"], createdBy="alice")
    mid = mid if isinstance(mid, str) else mid["_id"]
    a = tools.call("create_task", title="half-a", assignedTo="bob", createdBy="alice", priority="low", missionId=mid)
    tools.call("create_task", title="half-b", assignedTo="bob", createdBy="alice", priority="low", missionId=mid)
    tools.call("start_task", taskId=a, callerOrchestrator="bob")
    tools.call("complete_task", taskId=a, completionNote="done and verified with tests",
               callerOrchestrator="bob")
    html = dash.get("/missions").text
    assert "Ship it" in html and 'value="50"' in html and "1/2" in html
    assert "Ship it" not in dash.get("/missions?pilot=zed").text
    detail = dash.get(f"/missions/{mid}").text
    assert "half-a" in detail and "half-b" in detail
    assert f'href="/missions/{mid}">Ship it</a>' in dash.get(f"/tasks/{a}").text


def test_schedule_shows_next_runs_and_jobs(dash, tools):
    rid = tools.call("create_recurring_task", title="daily standup", assignedTo="bob", cronExpression="0 9 * * *",
                     createdBy="alice")
    html = dash.get("/schedule").text
    assert "daily standup" in html and html.count("09:00:00 UTC") == 3
    assert "daily standup" not in dash.get("/schedule?paused=yes").text
    assert rid


def test_memory_search_says_why_each_hit_matched_and_filters(dash, tools):
    tools.call("store_memory", namespace="project/a", type="fact", content="the deploy uses blue green", createdBy="x")
    tools.call("store_memory", namespace="project/b", type="decision", content="deploy on fridays is banned",
               createdBy="x")
    tools.call("store_memory", namespace="global", type="fact", content="unrelated lunch menu", createdBy="x")
    html = dash.get("/memory?q=deploy").text
    assert "blue green" in html and "fridays" in html and "lunch" not in html
    assert "Matched by keyword" in html and "Mode: <strong>keyword</strong>" in html
    assert "[deploy]" in html  # the snippet marks the matched word
    scoped = dash.get("/memory?q=deploy&namespace=project/a").text
    assert "blue green" in scoped and "fridays" not in scoped
    typed = dash.get("/memory?q=deploy&type=decision").text
    assert "fridays" in typed and "blue green" not in typed
    listing = dash.get("/memory?namespace=project/*").text
    assert "blue green" in listing and "lunch" not in listing


def test_claims_and_activity(dash, tools):
    tid = tools.call("create_task", title="claimed-one", assignedTo="bob", createdBy="alice", priority="low")
    tools.call("checkout_task", taskId=tid, callerOrchestrator="carol")
    html = dash.get("/claims").text
    assert "claimed-one" in html and "carol" in html
    assert "claimed-one" not in dash.get("/claims?holder=bob").text
    tools.call("send_message", **{"from": "alice", "channel": "bob", "content": "activity ping"})
    act = dash.get("/activity").text
    assert "activity ping" in act and "claimed-one" in act
    only_msgs = dash.get("/activity?kind=message").text
    assert "activity ping" in only_msgs and "claimed-one" not in only_msgs


def test_activity_pages_through_events_with_equal_timestamps(dash, app, tools):
    now = int(time.time() * 1000)
    app.db.write(lambda c: c.executemany(
        "INSERT INTO messages (id, sender, channel, content, createdAt) VALUES (?, 'a', 'b', ?, ?)",
        [(f"msg_{i:04d}", f"evt-{i:03d}", now - 1000) for i in range(90)]))  # all in one millisecond
    seen, url = [], "/activity?kind=message"
    while url:
        html = dash.get(url).text
        seen += re.findall(r"evt-\d{3}", html)
        nxt = re.search(r'rel="next" href="([^"]+)"', html)
        url = nxt.group(1).replace("&amp;", "&") if nxt else None
    assert sorted(seen) == [f"evt-{i:03d}" for i in range(90)]


def test_hostile_text_is_escaped_everywhere(dash, tools):
    tools.call("send_message", **{"from": "alice", "channel": "bob", "content": XSS})
    tid = tools.call("create_task", title=XSS, assignedTo="bob", createdBy="alice", priority="low",
                     description=XSS)
    tools.call("store_memory", namespace="global", type="fact", content=f"{XSS} alert memo", createdBy="x")
    tools.call("set_summary", summary=XSS, orchestratorId="bob")
    for path in ("/messages", "/tasks", f"/tasks/{tid}", "/memory", "/memory?q=alert", "/team", "/activity",
                 "/messages?channel=%3Cscript%3E"):
        html = dash.get(path).text
        assert "<script>alert" not in html, path
        assert "&lt;script&gt;" in html or path == "/messages?channel=%3Cscript%3E", path


def test_actions_go_through_the_stores_and_are_audited(dash, app, tools):
    tid = tools.call("create_task", title="to move", assignedTo="bob", createdBy="alice", priority="low")
    r = post(dash, f"/actions/tasks/{tid}/reassign", {"assignee": "carol", "next": f"/tasks/{tid}"})
    assert r.status_code == 303 and r.headers["location"].startswith(f"/tasks/{tid}?ok=reassign")
    assert tools.call("get_task", taskId=tid)["assignedTo"] == "carol"
    tools.call("block_task", taskId=tid, reason="needs a key", callerOrchestrator="carol")
    post(dash, f"/actions/tasks/{tid}/unblock", {})
    task = tools.call("get_task", taskId=tid)
    assert task["status"] == "todo" and "blockedBy" not in task
    tools.call("checkout_task", taskId=tid, callerOrchestrator="dave")
    post(dash, f"/actions/tasks/{tid}/release", {})
    assert tools.call("get_task", taskId=tid)["status"] == "todo"
    assert tools.call("checkout_task", taskId=tid, callerOrchestrator="erin")["claimed"] is True
    no_reason = post(dash, f"/actions/tasks/{tid}/cancel", {"reason": ""})
    assert no_reason.status_code == 400 and "reason is required" in no_reason.text
    post(dash, f"/actions/tasks/{tid}/cancel", {"reason": "duplicate of another task"})
    task = tools.call("get_task", taskId=tid)
    assert task["status"] == "cancelled" and task["cancelReason"] == "duplicate of another task"
    again = post(dash, f"/actions/tasks/{tid}/cancel", {"reason": "twice"})  # the store's state rule holds
    assert again.status_code == 409 and "terminal" in again.text
    assert post(dash, f"/actions/tasks/{tid}/explode", {}).status_code == 404
    assert post(dash, "/actions/tasks/tsk_missing/reassign", {"assignee": "x"}).status_code == 404
    audit = app.db.read(lambda c: c.query("SELECT actor, via, action FROM humanActions ORDER BY seq"))
    assert [a["action"] for a in audit] == ["reassign_task", "unblock_task", "release_claim", "cancel_task"]
    assert {a["actor"] for a in audit} == {"human:ann"} and {a["via"] for a in audit} == {"loopback"}
    history = dash.get(f"/tasks/{tid}").text
    assert "<strong>reassign_task</strong> · human:ann" in history


def test_compose_sends_as_human_and_the_agent_reads_it(dash, tools):
    r = post(dash, "/actions/send", {"to": "bob", "content": "please rebase on main", "next": "/messages"})
    assert r.status_code == 303 and "ok=sent" in r.headers["location"]
    inbox = tools.call("check_messages", recipient="bob")
    assert [(m["from"], m["content"]) for m in inbox] == [("human:ann", "please rebase on main")]
    assert post(dash, "/actions/send", {"to": "", "content": "x"}).status_code == 400
    assert post(dash, "/actions/send", {"to": "bob", "content": ""}).status_code == 400


def test_pause_and_resume_a_recurring_task(dash, app, tools):
    rid = tools.call("create_recurring_task", title="nightly", assignedTo="bob", cronExpression="0 2 * * *",
                     createdBy="alice")
    post(dash, f"/actions/recurring/{rid}/pause", {"next": "/schedule"})
    assert tools.call("get_recurring_task", recurringTaskId=rid)["paused"] is True
    assert post(dash, f"/actions/recurring/{rid}/pause", {}).status_code == 409
    post(dash, f"/actions/recurring/{rid}/resume", {})
    assert tools.call("get_recurring_task", recurringTaskId=rid)["paused"] is False
    acts = app.db.read(lambda c: c.query("SELECT action, targetId FROM humanActions ORDER BY seq"))
    assert [(a["action"], a["targetId"]) for a in acts] == [("pause_recurring", rid), ("resume_recurring", rid)]


def test_csrf_origin_and_host_are_enforced(dash, app, tools):
    tid = tools.call("create_task", title="guarded", assignedTo="bob", createdBy="alice", priority="low")
    for token in ("", "forged", csrf_of(dash) + "x"):
        r = post(dash, f"/actions/tasks/{tid}/reassign", {"assignee": "mallory"}, token=token)
        assert r.status_code == 403 and "CSRF" in r.text
    cross = post(dash, f"/actions/tasks/{tid}/reassign", {"assignee": "mallory"}, origin="http://evil.example")
    assert cross.status_code == 403 and "BAD_ORIGIN" in cross.text
    assert tools.call("get_task", taskId=tid)["assignedTo"] == "bob"
    # A token from another session (another browser) does not work in this one.
    with local_client(app) as other:
        foreign = csrf_of(other)
    assert post(dash, f"/actions/tasks/{tid}/reassign", {"assignee": "mallory"}, token=foreign).status_code == 403
    rebinding = dash.get("/team", headers={"Host": "evil.example:8765"})
    assert rebinding.status_code == 400 and "BAD_HOST" in rebinding.text
    # open redirects: `next` must stay on this site
    r = post(dash, f"/actions/tasks/{tid}/reassign", {"assignee": "bob", "next": "//evil.example/x"})
    assert r.status_code == 303 and r.headers["location"].startswith(f"/tasks/{tid}")


def test_session_cookie_is_httponly_and_samesite_strict(app):
    with local_client(app) as fresh:
        r = fresh.get("/team")
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "vp_dash=" in cookie


def test_french(dash):
    html = dash.get("/tasks?lang=fr").text
    assert '<html lang="fr">' in html and "Tâches" in html and "Appliquer" in html and "En cours</h2>" in html
    assert '<html lang="fr">' in dash.get("/team").text  # remembered by cookie
    assert "Apply" in dash.get("/team?lang=en").text


def test_partial_render_is_only_the_live_region(dash):
    part = dash.get("/messages", headers={"X-Partial": "1"}).text
    assert "<html" not in part and "<form method=\"post\"" not in part and "<table>" in part


def test_local_dashboard_refuses_a_non_loopback_bind_without_login(app):
    from vantage_peers.dashboard import build_dashboard

    with pytest.raises(ValueError):
        build_dashboard(app.db, app.settings, login_required=False, loopback=False)
    assert LOCAL.startswith("http://127.0.0.1")


def test_migration_016_upgrades_a_version_10_file_and_keeps_its_tasks(tmp_path):
    from conftest import make_settings

    from vantage_peers.server import create_app

    path = older_file(tmp_path / "v10.db", 10,
                      "INSERT INTO tasks (id, title, assignedTo, priority, status, createdBy, createdAt, updatedAt) "
                      "VALUES ('tsk_old', 'kept across the upgrade', 'bob', 'high', 'blocked', 'alice', 1, 1)")
    app = create_app(make_settings(path))
    try:
        indexes = {r["name"] for r in app.db.read(lambda c: c.query("SELECT name FROM sqlite_master WHERE "
                                                                       "type = 'index' AND tbl_name = 'tasks'"))}
        assert "tasks_by_status_priority" in indexes
        with local_client(app) as client:
            assert "kept across the upgrade" in client.get("/tasks?blocked=1&priority=high").text
            post(client, "/actions/tasks/tsk_old/unblock", {})
        assert app.db.read(lambda c: c.scalar("SELECT status FROM tasks WHERE id = 'tsk_old'")) == "todo"
        assert app.db.read(lambda c: c.scalar("SELECT actor FROM humanActions")) == "human:ann"
    finally:
        app.db.close()


HOSTILE = ['"', "'; DROP TABLE tasks; --", "NEAR(a b", "a OR AND *", "%_\\", "\u202e\u0000x", "🚀 日本語",
           "x" * 5_000, "[[[[[[[[", "{}", "-1", "project/*/*", "*"]


def test_hostile_query_parameters_give_a_page_or_a_clean_400(dash, tools):
    from urllib.parse import quote

    tools.call("store_memory", namespace="global", type="fact", content="a plain memory", createdBy="x")
    tools.call("send_message", **{"from": "alice", "channel": "bob", "content": "hi"})
    params = {"/team": ("state", "who", "cursor"), "/messages": ("channel", "from", "to", "cursor", "unread"),
              "/tasks": ("assignee", "mission", "priority", "status", "cursor", "overdue"),
              "/missions": ("status", "pilot", "project", "cursor"), "/schedule": ("assignee", "paused", "cursor"),
              "/memory": ("q", "namespace", "type", "cursor"), "/claims": ("holder", "cursor"),
              "/activity": ("kind", "cursor")}
    for path, names in params.items():
        for name in names:
            for value in HOSTILE:
                r = dash.get(f"{path}?{name}={quote(value)}")
                assert r.status_code in (200, 400), (path, name, value[:20], r.status_code)
                if r.status_code == 400:
                    assert "INVALID_ARGUMENT" in r.text, (path, name, value[:20])
    for path in ("/tasks/%22%3E%3Cscript%3E", "/messages/" + "x" * 3000, "/missions/'%20OR%201=1"):
        assert dash.get(path).status_code == 404
    assert tools.call("list_tasks")["items"] == []  # nothing was written or dropped
    assert dash.get("/memory?q=plain").text.count("a plain memory") == 1


def test_hostile_form_values_are_refused_cleanly(dash, tools):
    tid = tools.call("create_task", title="target", assignedTo="bob", createdBy="alice", priority="low")
    for data in ({"assignee": "x" * 10_000}, {"assignee": ""}, {"assignee": "\x00"}, {"assignee": "a,b"}, {}):
        r = post(dash, f"/actions/tasks/{tid}/reassign", data)
        assert r.status_code == 400 and "INVALID_ARGUMENT" in r.text, (data, r.status_code)
    assert tools.call("get_task", taskId=tid)["assignedTo"] == "bob"
    for data in ({"to": "bob\x00", "content": "x"}, {"to": "x" * 600, "content": "x"},
                 {"to": "bob", "content": "x" * 1_000_001}):
        assert post(dash, "/actions/send", data).status_code == 400, data
    many = {f"f{i}": "x" for i in range(50)}
    assert post(dash, "/actions/send", {"to": "bob", "content": "x", **many}).status_code == 400


def test_english_and_french_have_the_same_labels():
    from vantage_peers.dashboard.i18n import LABELS

    assert set(LABELS["en"]) == set(LABELS["fr"])
    assert all(LABELS["fr"][k].strip() for k in LABELS["fr"])


def test_messages_show_acknowledgements_and_dead_letters(dash, tools, app):
    """Issue 21 in the dashboard: awaiting acknowledgement, acknowledged with its note, dead-lettered."""
    waiting = tools.call("send_message", **{"from": "alice", "channel": "bob", "content": "ack me"},
                         ackRequired=True, ackTimeoutSeconds=60)
    acked = tools.call("send_message", **{"from": "alice", "channel": "carol", "content": "acked one"},
                       ackRequired=True)
    receipt = next(m for m in tools.call("check_messages", recipient="carol") if m["content"] == "acked one")
    tools.call("acknowledge_message", receiptIds=[receipt["receiptId"]], note="on it", recipient="carol")
    dead = tools.call("send_message", **{"from": "alice", "channel": "dave", "content": "never read"},
                      ackRequired=True)
    app.db.write(lambda c: c.execute("UPDATE messageReceipts SET deadLetteredAt = 1, nextDeliveryAt = NULL "
                                     "WHERE messageId = ?", (dead["messageId"],)))
    only_waiting = dash.get("/messages?unacked=1").text
    assert waiting["messageId"] in only_waiting
    assert acked["messageId"] not in only_waiting and dead["messageId"] not in only_waiting
    only_dead = dash.get("/messages?dead=1").text
    assert dead["messageId"] in only_dead and waiting["messageId"] not in only_dead
    detail = dash.get(f"/messages/{acked['messageId']}").text
    assert "on it" in detail
    assert "Unacknowledged" in dash.get(f"/messages/{waiting['messageId']}").text


def test_live_hub_hears_a_commit_made_through_another_database_handle(app, settings):
    """The stream's Hub: PRAGMA data_version on SQLite, LISTEN/NOTIFY on PostgreSQL; a write through a
    second handle (standing for another process) bumps the version, a quiet database does not."""
    import asyncio

    from vantage_peers.dashboard.live import Hub
    from vantage_peers.db import open_database

    other = open_database(settings)
    hub = Hub(app.db, interval=0.02)

    async def run() -> tuple[int, int]:
        quiet = await hub.next_change(0, 0.3)
        await asyncio.to_thread(other.write, lambda c: c.execute(
            "INSERT INTO meta (key, value) VALUES ('live-test', 'x')"))
        return quiet, await hub.next_change(quiet, 20)

    try:
        quiet, changed = asyncio.run(run())
    finally:
        hub.close()
        other.close()
    assert quiet == 0 and changed >= 1
