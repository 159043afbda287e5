"""iframe embed sessions: client ids, touch never extends expiresAt, revoke keeps the row, origins."""

from __future__ import annotations

import pytest
from support.migration_helpers import older_file

from vantage_peers.core.ids import now_ms
from vantage_peers.domains.iframe import store
from vantage_peers.pipeline.app import effective_hints

pytestmark = pytest.mark.backends

SID = "550e8400-e29b-41d4-a716-446655440000"


def _row(app, sid=SID):
    return app.db.read(lambda c: c.one("SELECT * FROM iframeEmbedSessions WHERE sessionId = ?", (sid,)))


def test_create_get_and_duplicate_client_id(tools):
    expires = now_ms() + 30 * 60 * 1000
    doc_id = tools.call("create_iframe_session", sessionId=SID, origin="https://dashboard.example.com",
                        userId="user_abc123", expiresAt=expires)
    assert doc_id.startswith("ifs_")
    got = tools.call("get_iframe_session", sessionId=SID)
    assert got["_id"] == doc_id and got["sessionId"] == SID and got["origin"] == "https://dashboard.example.com"
    assert got["userId"] == "user_abc123" and "tenantId" not in got and got["revoked"] is False
    assert got["expiresAt"] == expires and got["createdAt"] == got["lastSeenAt"] == got["_creationTime"]
    err = tools.error("create_iframe_session", sessionId=SID, origin="https://other.example.com",
                      expiresAt=expires)
    assert err.startswith("Error executing tool create_iframe_session: CONFLICT") or "CONFLICT" in err
    assert tools.call("get_iframe_session", sessionId="never-created") is None


def test_touch_updates_presence_only(tools, app):
    expires = now_ms() + 60_000
    tools.call("create_iframe_session", sessionId=SID, origin="https://a.example", expiresAt=expires)
    app.db.write(lambda c: c.execute("UPDATE iframeEmbedSessions SET lastSeenAt = 5 WHERE sessionId = ?", (SID,)))
    assert tools.call("touch_iframe_session", sessionId=SID) is True
    row = _row(app)
    assert row["lastSeenAt"] > 5 and row["expiresAt"] == expires  # never extended
    assert tools.call("touch_iframe_session", sessionId="unknown") is False


def test_revoke_keeps_the_row_and_hides_the_session(tools, app):
    tools.call("create_iframe_session", sessionId=SID, origin="https://a.example", expiresAt=now_ms() + 60_000,
               tenantId="acme")
    assert tools.call("revoke_iframe_session", sessionId=SID) is True
    assert tools.call("get_iframe_session", sessionId=SID) is None
    assert tools.call("touch_iframe_session", sessionId=SID) is False  # already revoked
    row = _row(app)
    assert row is not None and row["revoked"] == 1 and row["tenantId"] == "acme"  # kept for audit
    assert tools.call("revoke_iframe_session", sessionId=SID) is True  # still found
    assert tools.call("revoke_iframe_session", sessionId="unknown") is False


def test_expired_session_is_null_and_untouchable(app):
    t0 = 1_000_000
    app.db.write(lambda c: store.create_session(c, session_id=SID, origin="https://a.example", expires_at=t0 + 100,
                                                tenant_id=None, user_id=None, now=t0))
    assert app.db.read(lambda c: store.get_session(c, session_id=SID, now=t0 + 99)) is not None
    assert app.db.read(lambda c: store.get_session(c, session_id=SID, now=t0 + 100)) is None  # expiresAt <= now
    assert app.db.write(lambda c: store.touch_session(c, session_id=SID, now=t0 + 100)) is False
    assert _row(app)["lastSeenAt"] == t0


def test_cleanup_job_removes_only_long_expired_rows(app):
    t0 = 10_000_000_000
    for sid, expires, revoked in (("old", t0 - store.RETENTION_MS - 1, 0), ("old-revoked", t0 - store.RETENTION_MS, 1),
                                  ("recent-expired", t0 - 1, 0), ("revoked-live", t0 + 1000, 1), ("live", t0 + 1000, 0)):
        app.db.write(lambda c, sid=sid, expires=expires: store.create_session(
            c, session_id=sid, origin="https://a.example", expires_at=expires, tenant_id=None, user_id=None,
            now=expires - 10))
        if revoked:
            app.db.write(lambda c, sid=sid: store.revoke_session(c, session_id=sid))
    assert app.db.write(lambda c: store.cleanup(c, now=t0)) == 2
    left = {r["sessionId"] for r in app.db.read(lambda c: c.query("SELECT sessionId FROM iframeEmbedSessions"))}
    assert left == {"recent-expired", "revoked-live", "live"}
    assert "iframe-session-cleanup" in dict(app.jobs)
    assert app.job_schedules["iframe-session-cleanup"]["every_seconds"] == 3600


@pytest.mark.parametrize("origin, normalized", [
    ("https://dashboard.example.com", "https://dashboard.example.com"),
    ("HTTPS://Dashboard.Example.COM", "https://dashboard.example.com"),
    ("http://localhost:3000", "http://localhost:3000"),
    ("https://[::1]:8443", "https://[::1]:8443"),
])
def test_valid_origins(tools, origin, normalized):
    tools.call("create_iframe_session", sessionId=origin, origin=origin, expiresAt=now_ms() + 60_000)
    assert tools.call("get_iframe_session", sessionId=origin)["origin"] == normalized


@pytest.mark.parametrize("origin", [
    "https://dashboard.example.com/", "https://dashboard.example.com/app", "https://a.example?x=1",
    "https://a.example#frag", "javascript:alert(1)", "ftp://a.example", "dashboard.example.com", "https://",
    "https://user:pw@a.example", "https://a.example:99999", "https://a example.com", "", "null",
    "https://a.example\\@evil.com", "data:text/html,hi",
])
def test_invalid_origins_are_refused(tools, origin):
    err = tools.error("create_iframe_session", sessionId="s-" + origin, origin=origin, expiresAt=now_ms() + 60_000)
    assert "INVALID_ARGUMENT" in err and "origin" in err


def test_bad_ids_and_expiry(tools):
    future = now_ms() + 60_000
    assert "sessionId" in tools.error("create_iframe_session", sessionId="  ", origin="https://a.example",
                                      expiresAt=future)
    assert "sessionId" in tools.error("create_iframe_session", sessionId="x" * 201, origin="https://a.example",
                                      expiresAt=future)
    assert "expiresAt" in tools.error("create_iframe_session", sessionId="p", origin="https://a.example",
                                      expiresAt=now_ms() - 1)
    assert tools.call("get_iframe_session", sessionId="p") is None  # nothing was written


def test_tool_annotations(tools):
    listed = tools.listed
    assert listed["get_iframe_session"].annotations.read_only_hint is True
    assert listed["revoke_iframe_session"].annotations.destructive_hint is True
    assert effective_hints(listed["create_iframe_session"].annotations).read_only_hint is False  # MCP default


def test_upgrade_from_an_older_file_keeps_data(tmp_path):
    """A file at schema version 5 (before migration 009) upgrades in place without losing rows."""
    from conftest import make_settings

    from vantage_peers.db import Database, latest_version, migrate
    from vantage_peers.server import create_app

    path = tmp_path / "old.db"
    old = Database(path)
    assert migrate(old, target=5) == 5
    old.write(lambda c: c.execute(
        "INSERT INTO memories (id, namespace, type, content, createdBy, createdAt, updatedAt) "
        "VALUES ('mem_old', 'ns', 'note', 'kept', 'pi', 1, 1)"))
    old.close()
    app = create_app(make_settings(path))
    try:
        assert app.db.conn.scalar("PRAGMA user_version") == latest_version()
        assert app.db.conn.scalar("SELECT content FROM memories WHERE id = 'mem_old'") == "kept"
        assert app.db.conn.scalar("SELECT count(*) FROM iframeEmbedSessions") == 0
        assert app.db.conn.scalar("SELECT count(*) FROM okfImports") == 0
        assert app.db.conn.scalar("SELECT count(*) FROM humanActions") == 0  # migration 016 (dashboard)
    finally:
        app.db.close()


@pytest.mark.slow
def test_two_processes_creating_one_session_id_one_wins(settings):
    """The UNIQUE constraint decides a duplicate create across processes: one id, one CONFLICT."""
    import subprocess
    import sys

    from vantage_peers.server import create_app

    create_app(settings).db.close()
    code = (
        "import sys; from vantage_peers.db import open_database; from vantage_peers.pipeline.settings import Settings\n"
        "from vantage_peers.domains.iframe import store; from vantage_peers.core.errors import Conflict\n"
        "s = Settings.from_env({}, dotenv=False).model_copy(update={'db_path': sys.argv[1],"
        " 'database_url': sys.argv[2] or None})\n"
        "db = open_database(s)\n"
        "try:\n"
        "    db.write(lambda c: store.create_session(c, session_id='same', origin='https://a.example',"
        " expires_at=2**62, tenant_id=None, user_id=None)); print('created')\n"
        "except Conflict: print('conflict')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(settings.db_path), settings.database_url or ""],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert outs == ["conflict", "created"]


def test_threads_on_separate_handles_creating_one_session_id_one_wins(settings):
    """The same race on either backend: six handles (connections, pools) insert one sessionId at once."""
    import threading

    from vantage_peers.core.errors import Conflict
    from vantage_peers.db import open_database

    handles = [open_database(settings) for _ in range(6)]
    gate, outcomes, lock = threading.Barrier(len(handles)), [], threading.Lock()

    def create(db):
        gate.wait()
        try:
            db.write(lambda c: store.create_session(c, session_id="same", origin="https://a.example",
                                                    expires_at=2**62, tenant_id=None, user_id=None))
            got = "created"
        except Conflict:
            got = "conflict"
        with lock:
            outcomes.append(got)

    threads = [threading.Thread(target=create, args=(h,)) for h in handles]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(outcomes) == ["conflict"] * 5 + ["created"]
        assert handles[0].read(lambda c: c.scalar("SELECT count(*) FROM iframeEmbedSessions")) == 1
    finally:
        for h in handles:
            h.close()


def test_migration_011_keeps_sessions_and_leaves_old_ones_ownerless(tmp_path):
    """A version-10 file with a live embed session upgrades: the session stays, with no owner, so it is
    master/system's (and local stdio's) to touch or revoke; sessions created after are their creator's."""
    from conftest import make_settings, open_tools

    from vantage_peers.db import latest_version
    from vantage_peers.server import create_app

    path = older_file(tmp_path / "v10.db", 10,
                      "INSERT INTO iframeEmbedSessions (id, sessionId, origin, createdAt, lastSeenAt, expiresAt) "
                      "VALUES ('ifs_old', 'old-session', 'https://a.example', 1, 1, 9999999999999)")
    app = create_app(make_settings(path, orchestrator="alice"))
    try:
        assert app.db.conn.scalar("PRAGMA user_version") == latest_version() >= 11
        assert app.db.conn.scalar("SELECT createdBy FROM iframeEmbedSessions WHERE id = 'ifs_old'") is None
        with open_tools(app) as tools:
            assert tools.call("get_iframe_session", sessionId="old-session")["origin"] == "https://a.example"
            tools.call("create_iframe_session", sessionId="new-session", origin="https://b.example",
                       expiresAt=9_999_999_999_999)
        assert app.db.conn.scalar("SELECT createdBy FROM iframeEmbedSessions WHERE sessionId = 'new-session'") \
            == "alice"
    finally:
        app.db.close()
