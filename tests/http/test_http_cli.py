"""`serve` refusals and --no-auth, the `token` operator CLI, and doctor's HTTP checks."""

from __future__ import annotations

import json
import os
import subprocess

import apsw
import httpx2
import pytest
from support.http_helpers import free_port, script, serving

from vantage_peers.db import open_target
from vantage_peers.http.doctor import doctor_checks, public_base_url_problem
from vantage_peers.pipeline.settings import Settings


def run(args, env, cwd):
    return subprocess.run([script(), *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, **env})


class Result:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli(args, env, monkeypatch, capsys) -> Result:
    """`vantage-peers …` in this process (the console script's `main`), for speed."""
    from vantage_peers.cli import main

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = main(args)
    out = capsys.readouterr()
    return Result(code, out.out, out.err)


def test_serve_refuses_without_a_master_secret_or_no_auth_off_loopback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    env = {"VP_DB_PATH": str(tmp_path / "x.db"), "BEARER_SECRET_MASTER": "", "VP_SCHEDULER": "off"}
    no_secret = cli(["serve", "--port", str(free_port())], env, monkeypatch, capsys)
    assert no_secret.returncode == 2 and "BEARER_SECRET_MASTER is not set" in no_secret.stderr
    exposed = cli(["serve", "--no-auth", "--host", "0.0.0.0", "--port", str(free_port())], env, monkeypatch, capsys)
    assert exposed.returncode == 2 and "loopback" in exposed.stderr


@pytest.mark.slow
def test_no_auth_on_loopback_serves_without_a_token_and_warns(tmp_path):
    with serving(tmp_path / "open.db", env={"BEARER_SECRET_MASTER": "", "HOST": "127.0.0.1"},
                 args=["--no-auth"]) as server:
        assert httpx2.get(f"{server.base}/health").json()["status"] == "ok"
        r = server.http("POST", "/mcp", headers={"Accept": "application/json, text/event-stream"},
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
        assert r.status_code == 200 and "send_message" in r.text
        assert server.http("POST", "/oauth/register", json={}).status_code == 404
        # DNS-rebinding protection stays on for a loopback bind.
        evil = server.http("POST", "/mcp", headers={"Host": "evil.example", "Accept": "application/json"},
                           json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert evil.status_code in (400, 403, 421)
    assert "WARNING: --no-auth" in server.log.read_text()


def test_token_cli_creates_lists_elevates_and_revokes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    env = {"VP_DB_PATH": str(tmp_path / "cli.db")}

    def tok(*args):
        return cli(["token", *args], env, monkeypatch, capsys)

    prof = tok("profile", "set", "cedar-agent", "--from", "cedar", "--read", "project/cedar", "--read", "global",
               "--write", "project/cedar", "--description", "Cedar")
    assert prof.returncode == 0, prof.stderr
    assert json.loads(prof.stdout)["namespaceReadPrefixes"] == ["project/cedar", "global"]
    assert json.loads(prof.stdout)["recordReadScope"] == "own"  # the default: its own messages and tasks
    wide = tok("profile", "set", "ops-reader", "--from", "ops", "--read-records", "team")
    assert wide.returncode == 0, wide.stderr
    assert json.loads(tok("profile", "show", "ops-reader").stdout)["recordReadScope"] == "team"
    made = tok("create", "--name", "ci", "--profile", "cedar-agent")
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    assert created["client_id"].startswith("vp_client_") and len(created["client_secret"]) == 64
    assert created["grant_types"] == ["client_credentials"] and "only its SHA-256" in made.stderr
    ids = [json.loads(tok("create", "--name", f"web{i}", "--profile", "client-generic", "--redirect-uri",
                          "http://127.0.0.1:9/cb").stdout)["client_id"] for i in range(3)]
    listed = json.loads(tok("list").stdout)
    assert {c["clientId"] for c in listed} == {created["client_id"], *ids}
    up = tok("set-profile", ids[0], "cedar-agent")
    assert up.returncode == 0 and json.loads(up.stdout)["scopeProfile"] == "cedar-agent"
    master = tok("create", "--name", "x", "--profile", "master")
    assert master.returncode == 2 and "ScopeViolation" in master.stderr
    missing = tok("set-profile", ids[1], "no-such-profile")
    assert missing.returncode == 2 and "NOT_FOUND" in missing.stderr
    gone = tok("revoke", ids[2])
    assert json.loads(gone.stdout) == {"revokedClient": True, "revokedTokens": 0, "revokedRefresh": 0}
    seeded = json.loads(tok("profile", "seed").stdout)["seeded"]
    assert "client-generic" in seeded and "cedar-agent" not in seeded
    # `token profile seed` installs generic examples only (issue 24: no customer's profile)
    assert set(seeded) <= {"client-generic", "public-readonly", "project-example", "clerk-user", "master"}
    assert "marie-iris-rh" not in seeded
    # The console script is wired to the same command.
    script_list = run(["token", "list"], env, tmp_path)
    assert script_list.returncode == 0 and len(json.loads(script_list.stdout)) == 3
    conn = apsw.Connection(str(tmp_path / "cli.db"))
    blob = " ".join(str(v) for row in conn.execute("SELECT * FROM oauth_clients") for v in row)
    conn.close()
    assert created["client_secret"] not in blob


def test_doctor_http_checks():
    def status(env):
        return {label: st for st, label, _ in doctor_checks(Settings.from_env(env, dotenv=False))}

    assert status({})["http: BEARER_SECRET_MASTER"] == "WARN"
    assert status({"BEARER_SECRET_MASTER": "short"})["http: BEARER_SECRET_MASTER"] == "FAIL"
    assert status({"BEARER_SECRET_MASTER": "a" * 40})["http: BEARER_SECRET_MASTER"] == "WARN"
    assert status({"BEARER_SECRET_MASTER": "a" * 64})["http: BEARER_SECRET_MASTER"] == "ok"
    assert status({"PUBLIC_BASE_URL": "https://vp.example.com"})["http: PUBLIC_BASE_URL"] == "ok"
    for bad in ("vp.example.com", "http://vp.example.com", "https://vp.example.com/mcp", "https://x?y=1", "ftp://x"):
        assert public_base_url_problem(bad), bad
        assert status({"PUBLIC_BASE_URL": bad})["http: PUBLIC_BASE_URL"] == "FAIL"
    assert public_base_url_problem("http://127.0.0.1:3000") is None
    assert status({"HOST": "0.0.0.0"})["http: HOST"] == "WARN"
    assert status({"CLERK_JWT_ISSUER_DOMAIN": "clerk.example.com"})["http: Clerk"] == "WARN"
    assert status({"VP_ACCESS_TOKEN_TTL_SECONDS": "0"})["http: token TTLs"] == "FAIL"
    settings = Settings.from_env({"VP_ALLOWED_EXT_IDS": " a, b ,,", "PORT": "8080"}, dotenv=False)
    assert settings.allowed_ext_ids == ("a", "b") and settings.port == 8080


@pytest.mark.backends
@pytest.mark.slow
def test_serve_workers_share_one_port_and_stop_together(tmp_path, database_url):
    import concurrent.futures

    pg = {"VP_DATABASE_URL": database_url} if database_url else {}
    with serving(tmp_path / "w.db", args=["--workers", "2"], env=pg) as server:
        children = [int(p) for p in subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True,
                                                    text=True).stdout.split()]
        assert len(children) == 2

        def send(i: int) -> int:
            body = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "send_message", "arguments": {"from": "alice", "channel": "bob",
                                                                     "content": f"m{i}"}}}
            r = server.master("POST", "/mcp", json=body, headers={"Accept": "application/json, text/event-stream"})
            return r.status_code

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(send, range(40)))
        assert codes == [200] * 40
        server.terminate()
        assert server.proc.wait(30) == 0
        for pid in children:
            assert not os.path.exists(f"/proc/{pid}")  # reaped by the parent
    db = open_target(database_url or str(tmp_path / "w.db"))  # each worker has its own pool on PostgreSQL
    contents = sorted(r[0] for r in db.read(lambda c: c.rows("SELECT content FROM messages")))
    db.close()
    assert contents == sorted(f"m{i}" for i in range(40))


def test_serve_workers_refuse_a_port_in_use_with_one_line(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "VP_DB_PATH": str(tmp_path / "p.db"), "BEARER_SECRET_MASTER": "a3" * 32,
               "VP_SCHEDULER": "off"}
        out = subprocess.run([script(), "serve", "--port", str(port), "--workers", "2"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in out.stderr
    assert "Traceback" not in out.stderr
