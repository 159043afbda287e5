"""The console script as a user meets it: bad VP_DB_PATH, `.env` safety, the TTY hint, --help, status."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path

import pytest
from conftest import make_settings, open_tools
from support.paths import console_script as _script

from vantage_peers.server import create_app

COMMANDS = (["doctor"], ["status"], ["reindex"], [])  # [] = the stdio server


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any vantage-peers or embedding setting."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VP_", "OPENAI_", "AI_GATEWAY_", "GITHUB_", "BEARER_"))}
    return {**env, "VP_SCHEDULER": "off", **extra}


def run(args: list[str], env: dict[str, str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([_script(), *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd,
                          input=stdin)


def _bad_paths(tmp_path: Path) -> dict[str, Path]:
    blocker = tmp_path / "plain-file"
    blocker.write_text("not a directory")
    return {"a directory": tmp_path, "parent is a file": blocker / "vp.db",
            "uncreatable parent": Path("/proc/vantage-peers-test/vp.db")}


def _assert_one_line_exit_2(out: subprocess.CompletedProcess, why: str) -> None:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, (why, out.stdout, out.stderr)
    assert len(lines) == 1 and "VP_DB_PATH" in lines[0] and "Traceback" not in out.stderr, (why, out.stderr)
    assert lines[0].startswith("vantage-peers: BAD_DB_PATH"), lines[0]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "stdio")
def test_a_bad_db_path_is_one_line_and_exit_2_for_every_command(tmp_path, args):
    _assert_one_line_exit_2(run(args, clean_env(VP_DB_PATH=str(tmp_path)), tmp_path), "a directory")


@pytest.mark.slow
def test_every_kind_of_bad_db_path_is_one_line(tmp_path):
    for why, path in _bad_paths(tmp_path).items():
        _assert_one_line_exit_2(run([], clean_env(VP_DB_PATH=str(path)), tmp_path), why)


def test_a_file_that_is_not_a_database_is_one_line(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    out = run(["status"], clean_env(VP_DB_PATH=str(junk)), tmp_path)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "not point to a SQLite database" in out.stderr


def _doctor_settings(stdout: str) -> dict[str, str]:
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("  ") and " = " in line:
            key, value = line.strip().split(" = ", 1)
            rows[key] = value
    return rows


@pytest.mark.slow
def test_dotenv_contributes_only_vp_variables(tmp_path):
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-unrelated-app-secret\nGITHUB_TOKEN=ghp_x\n"
                                   "VP_ORCHESTRATOR=from-dotenv\nVP_TOOLSETS=core,records\n")
    out = run(["doctor"], clean_env(VP_DB_PATH=str(tmp_path / "d.db")), tmp_path)
    shown = _doctor_settings(out.stdout)
    assert shown["VP_EMBEDDINGS"] == "local"  # the other app's key did not switch the openai provider on
    assert shown["VP_ORCHESTRATOR"] == "from-dotenv" and shown["VP_TOOLSETS"] == "core,records"
    assert "OPENAI_API_KEY / AI_GATEWAY_API_KEY" not in shown  # not the openai provider: the key does nothing
    assert "sk-unrelated" not in out.stdout + out.stderr
    # Settings that do nothing in this installation are not listed (HTTP, GitHub, UI arrive as packages).
    import importlib.util

    for module, names in (("vantage_peers.http", ("PORT", "PUBLIC_BASE_URL", "BEARER_SECRET_MASTER")),
                          ("vantage_peers.domains.github", ("GITHUB_TOKEN", "GITHUB_WEBHOOK_SECRET")),
                          ("vantage_peers.ui", ("VP_EMIT_UI_MARKERS",))):
        present = importlib.util.find_spec(module) is not None
        for name in names:
            assert (name in shown) == present, name
    assert "ghp_x" not in out.stdout


@pytest.mark.slow
def test_dotenv_that_sets_vp_embeddings_counts_in_full(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on: the reachability check fails fast, offline
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / ".env").write_text(f"VP_EMBEDDINGS=openai\nOPENAI_API_KEY=sk-for-vantage\n"
                                   f"OPENAI_BASE_URL=http://127.0.0.1:{port}/v1\n")
    out = run(["doctor"], clean_env(VP_DB_PATH=str(tmp_path / "d.db")), tmp_path)
    shown = _doctor_settings(out.stdout)
    assert shown["VP_EMBEDDINGS"] == "openai"
    assert shown["OPENAI_API_KEY / AI_GATEWAY_API_KEY"] == "set"  # secrets: set/unset, never the value
    assert "sk-for-vantage" not in out.stdout + out.stderr
    # The real environment still wins over the file.
    env_wins = run(["doctor"], clean_env(VP_DB_PATH=str(tmp_path / "d.db"), VP_EMBEDDINGS="none"), tmp_path)
    assert _doctor_settings(env_wins.stdout)["VP_EMBEDDINGS"] == "none"


@pytest.mark.slow
def test_the_server_says_what_it_is_on_a_terminal(tmp_path):
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([_script()], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=clean_env(VP_DB_PATH=str(tmp_path / "t.db")), cwd=tmp_path)
    os.close(slave)
    try:
        deadline, err = time.monotonic() + 60, b""
        while b"\n" not in err and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 0.5)
            if ready:
                err += os.read(proc.stderr.fileno(), 4096)
        line = err.decode().splitlines()[0]
        assert "speaks MCP over stdio" in line and "claude mcp add" in line
        assert proc.poll() is None  # still serving: a client may be driving the terminal
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        os.close(master)
    # Piped stdin (what MCP clients do): no hint, nothing but protocol on stdout.
    piped = run([], clean_env(VP_DB_PATH=str(tmp_path / "t.db")), tmp_path, stdin="")
    assert "speaks MCP" not in piped.stderr and piped.stdout == ""


@pytest.mark.parametrize("args", [["doctor"], ["status"], ["reindex"]], ids=lambda a: a[0])
def test_every_command_help_has_an_example_and_its_settings(tmp_path, args):
    out = run([*args, "--help"], clean_env(), tmp_path)
    assert out.returncode == 0
    assert "example:" in out.stdout and "settings read: VP_DB_PATH" in out.stdout


def test_main_help_shows_examples_and_settings(tmp_path):
    out = run(["--help"], clean_env(), tmp_path)
    assert out.returncode == 0 and "examples:" in out.stdout and "VP_TOOLSETS" in out.stdout
    for command in ("doctor", "status", "reindex"):
        assert command in out.stdout


@pytest.mark.slow
def test_status_shows_peers_unread_tasks_and_jobs(tmp_path):
    db = tmp_path / "status.db"
    app = create_app(make_settings(db, orchestrator="alice"))
    try:
        with open_tools(app) as tools:
            tools.call("set_summary", orchestratorId="bob", instanceId="bob-1", summary="fixing the build")
            for i in range(3):
                tools.call("send_message", channel="bob", content=f"m{i}", **{"from": "alice"})
            tools.call("send_message", channel="carol", content="x", **{"from": "alice"})
            for i in range(4):
                tools.call("create_task", title=f"t{i}", assignedTo="bob", priority="low", createdBy="alice")
            done = tools.call("create_task", title="d", assignedTo="bob", priority="low", createdBy="alice")
            tools.call("complete_task", taskId=done, completionNote="finished and verified", callerOrchestrator="bob")
            tools.call("create_recurring_task", title="weekly report", assignedTo="bob",
                       cronExpression="0 9 * * 1", createdBy="alice")
        from vantage_peers.pipeline.scheduler import Scheduler

        Scheduler(app).run_once({"memory-expiry"})
        from vantage_peers.core.ids import now_ms
        from vantage_peers.pipeline.scheduler import claim_job

        assert app.db.write(lambda c: claim_job(c, name="embeddings", schedule="every tick", owner="proc-x",
                                                now=now_ms(), ttl_ms=600_000))  # a job running right now
    finally:
        app.db.close()
    out = run(["status", "--json"], clean_env(VP_DB_PATH=str(db)), tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert any(p["orchestratorId"] == "bob" and p["instanceId"] == "bob-1" for p in data["peers"])
    assert {u["recipient"]: u["unread"] for u in data["unread"]} == {"bob": 3, "carol": 1}
    assert data["openTasks"] == [{"assignedTo": "bob", "open": 4, "todo": 4, "in_progress": 0, "review": 0,
                                  "blocked": 0}]
    assert {"embeddings"} <= {j["name"] for j in data["jobs"]}
    expiry = next(j for j in data["jobs"] if j["name"] == "memory-expiry")
    assert expiry["runCount"] == 1 and expiry["lastStatus"] == "ok" and expiry["lastRunAt"] > 0
    running = {j["name"]: j["runningBy"] for j in data["jobs"]}
    assert running["embeddings"] == "proc-x" and running["memory-expiry"] is None
    assert data["recurring"]["active"] == 1 and data["recurring"]["nextDue"][0]["title"] == "weekly report"
    text = run(["status"], clean_env(VP_DB_PATH=str(db)), tmp_path).stdout
    assert "bob/bob-1" in text and "fixing the build" in text and "scheduler jobs" in text
    assert "recurring tasks: 1 active" in text and "weekly report" in text and "never run" in text
    assert any(line.split()[:2] == ["bob", "4"] for line in text.splitlines())


def test_read_only_filesystem_and_unwritable_file_are_refused(tmp_path, monkeypatch):
    """Branches a root test run cannot produce for real (root writes through permissions)."""
    from vantage_peers.pipeline.settings import BadDatabasePath, check_db_path

    real_statvfs = os.statvfs

    class ReadOnly:
        def __init__(self, real):
            self.f_flag = real.f_flag | os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda p: ReadOnly(real_statvfs(p)))
    with pytest.raises(BadDatabasePath, match="read-only filesystem"):
        check_db_path(tmp_path / "ro.db")
    monkeypatch.setattr(os, "statvfs", real_statvfs)
    existing = tmp_path / "locked.db"
    existing.write_bytes(b"")
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != existing)
    with pytest.raises(BadDatabasePath, match="not readable and writable"):
        check_db_path(existing)
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != tmp_path)
    with pytest.raises(BadDatabasePath, match="is not writable"):
        check_db_path(tmp_path / "new.db")
