"""The git guard on SQLite and PostgreSQL (issue #30): the database the server uses, reached from an
agent's shell that has no VP_* variables through the workspace identity file the server writes;
refusal texts; fail closed on an unreachable PostgreSQL. Real `git init` repos, real `git commit`s
running the installed hook, a real stdio server writing the identity file."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.git_repo import git, make_repo

from vantage_peers.domains.leases import identity_file
from vantage_peers.pipeline.settings import Settings

pytestmark = [pytest.mark.backends,
              pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


def shell_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An agent's own shell: none of the server's VP_* variables, and a default database location of
    its own (XDG_DATA_HOME), so that a stray default file is under the test's control."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VP_", "PG"))}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")
    env.update(extra)
    return env


def install(repo: Path, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "vantage_peers.cli", "guard", "install", "--repo", str(repo)],
                         cwd=tmp_path, env=shell_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def commit(repo: Path, path: str, env: dict[str, str]):
    f = repo / path
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(f"{path} {os.urandom(4).hex()}\n")
    git(repo, "add", path, env=env)
    out = git(repo, "commit", "-q", "-m", f"touch {path}", env=env, check=False)
    if out.returncode != 0:
        git(repo, "reset", "-q", "HEAD", "--", path, env=env)  # unstage what the hook refused
    return out


def stray_default_database(tmp_path: Path) -> Path:
    """A migrated SQLite file, with no reservations, where the shell's default database would be."""
    env = shell_env(tmp_path)
    where = subprocess.run([sys.executable, "-c", "from vantage_peers.pipeline.settings import default_db_path as d; "
                            "print(d())"], env=env, capture_output=True, text=True, timeout=120, check=True)
    path = Path(where.stdout.strip())
    assert str(path).startswith(str(tmp_path))
    from vantage_peers.db import open_database

    settings = Settings.from_env({"VP_EMBEDDINGS": "none"}, dotenv=False).model_copy(update={"db_path": path})
    open_database(settings).close()
    return path


class Server:
    """`vantage-peers` (stdio) started by its MCP client in the work tree, as `orchestrator`."""

    def __init__(self, repo: Path, tmp_path: Path, orchestrator: str, database: str, instance: str = "") -> None:
        env = shell_env(tmp_path, VP_ORCHESTRATOR=orchestrator, VP_INSTANCE_ID=instance, VP_EMBEDDINGS="none",
                        VP_SCHEDULER="0")
        env["VP_DATABASE_URL" if database.startswith("postgresql") else "VP_DB_PATH"] = database
        self.proc = subprocess.Popen([sys.executable, "-m", "vantage_peers.cli"], cwd=repo, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.file = repo / ".git" / "vantage-peers" / f"identity-{self.proc.pid}.json"
        deadline = time.monotonic() + 300  # a bound for a hung start, not a speed requirement
        while not self.file.exists():
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited: {self.proc.stderr.read().decode(errors='replace')}")
            assert time.monotonic() < deadline, "the server wrote no identity file"
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


def test_another_agents_reserved_file_is_refused_and_own_passes(repo, tmp_path, app, tools, db_target, backend):
    """bob works in the repo through his server (VP_ORCHESTRATOR=bob, the team's database in its env only);
    his shell has no VP_* at all, and a stray default SQLite file is there. alice holds src/**."""
    res = tools.call("reserve_paths", paths=["src/**"], repo=str(repo), reason="refactoring the API",
                     callerOrchestrator="alice", callerInstance="a1", ttlSeconds=3600)
    assert res["granted"] and not res["conflicts"]
    reservation = res["granted"][0]["id"]
    assert tools.call("reserve_paths", paths=["lib/**"], repo=str(repo), callerOrchestrator="bob")["granted"]
    install(repo, tmp_path)
    stray_default_database(tmp_path)
    server = Server(repo, tmp_path, "bob", db_target, instance="b1")
    try:
        record = json.loads(server.file.read_text())
        assert record["orchestrator"] == "bob" and record["instance"] == "b1" and record["pid"] == server.proc.pid
        assert record["database"] == ({"url": identity_file.strip_password(db_target)} if backend == "postgres"
                                      else {"path": str(Path(db_target).resolve()), "journalMode": "wal"})
        assert stat.S_IMODE(server.file.stat().st_mode) == 0o600
        assert stat.S_IMODE(server.file.parent.stat().st_mode) == 0o700
        env = shell_env(tmp_path)

        refused = commit(repo, "src/api.py", env)
        assert refused.returncode != 0, refused.stderr
        text = refused.stderr
        assert "commit refused" in text and "reserved by alice/a1 as 'src/**' until " in text
        assert "refactoring the API" in text and reservation in text
        assert "Checked as bob (the identity file" in text
        assert "wait until the reservation expires" in text and "ask alice/a1 to release_paths" in text
        assert f'force_release_path_reservation(id="{reservation}"' in text
        assert "git commit --no-verify" in text
        assert "src/api.py" not in git(repo, "log", "--name-only", "--format=").stdout

        # bob's own reservation and a free path: accepted, with bob's identity taken from the file.
        assert commit(repo, "lib/mine.py", env).returncode == 0
        assert commit(repo, "docs/free.md", env).returncode == 0
        # The shell's own settings win over the file: VP_ORCHESTRATOR=alice may commit her path.
        assert commit(repo, "src/api.py", shell_env(tmp_path, VP_ORCHESTRATOR="alice")).returncode == 0
    finally:
        server.stop()
    # The server has exited: its file stays (the work tree's last identity and database) and still counts.
    assert server.file.exists()
    again = commit(repo, "src/after.py", shell_env(tmp_path))
    assert again.returncode != 0 and "has exited" in again.stderr and "alice/a1" in again.stderr


def test_the_configured_database_wins_over_a_stray_default_file(repo, tmp_path, app, tools, db_target, backend):
    """The shell names the team's database itself (VP_DATABASE_URL, or VP_DB_PATH): that one is checked,
    never the stray default SQLite file (which has no reservations)."""
    tools.call("reserve_paths", paths=["src/**"], repo=str(repo), callerOrchestrator="alice")
    install(repo, tmp_path)
    stray = stray_default_database(tmp_path)
    name = "VP_DATABASE_URL" if backend == "postgres" else "VP_DB_PATH"
    env = shell_env(tmp_path, VP_ORCHESTRATOR="bob", **{name: db_target})
    if backend == "postgres":
        env["VP_DB_PATH"] = str(stray)  # VP_DATABASE_URL wins over VP_DB_PATH, as in the server
    refused = commit(repo, "src/a.py", env)
    assert refused.returncode != 0 and "reserved by alice" in refused.stderr
    assert "against the environment" in refused.stderr


def test_an_unreachable_postgresql_refuses_the_commit(repo, tmp_path, backend):
    """Fail closed: the team configured PostgreSQL, so "cannot reach it" is not "no reservations"."""
    if backend != "sqlite":
        pytest.skip("no database is used: one run is enough")
    install(repo, tmp_path)
    stray_default_database(tmp_path)
    url = "postgresql://bob:s3cret@127.0.0.1:9/vp_nowhere?connect_timeout=2"
    refused = commit(repo, "src/a.py", shell_env(tmp_path, VP_ORCHESTRATOR="bob", VP_DATABASE_URL=url))
    assert refused.returncode != 0
    assert "commit refused" in refused.stderr and "could not be reached" in refused.stderr
    assert "postgresql://bob@127.0.0.1:9/vp_nowhere" in refused.stderr and "s3cret" not in refused.stderr
    assert "git commit --no-verify" in refused.stderr and "VP_GUARD=warn" in refused.stderr
    warned = commit(repo, "src/a.py", shell_env(tmp_path, VP_ORCHESTRATOR="bob", VP_DATABASE_URL=url,
                                                VP_GUARD="warn"))
    assert warned.returncode == 0 and "could not be reached" in warned.stderr


def test_the_identity_file_never_holds_a_password(repo, tmp_path, backend):
    if backend != "sqlite":
        pytest.skip("no database is used: one run is enough")
    assert identity_file.strip_password("postgresql://vp:s3cr%40t@db.internal:6432/team?sslmode=require"
                                        "&password=x&sslpassword=y") == \
        "postgresql://vp@db.internal:6432/team?sslmode=require"
    assert identity_file.strip_password("postgresql://postgres:@/vp?host=/run/pg") == "postgresql://postgres@/vp?host=/run/pg"
    settings = Settings.from_env({"VP_EMBEDDINGS": "none", "VP_ORCHESTRATOR": "bob",
                                  "VP_DATABASE_URL": "postgresql://bob:s3cret@h/db"}, dotenv=False)
    path = identity_file.publish(settings, cwd=repo / ".")
    assert path is not None and path.parent == repo / ".git" / "vantage-peers"
    assert "s3cret" not in path.read_text() and json.loads(path.read_text())["database"] == {"url": "postgresql://bob@h/db"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # written through a temp file, renamed
    # No identity, or not in a git work tree: no file.
    assert identity_file.publish(settings.model_copy(update={"orchestrator": None}), cwd=repo) is None
    (tmp_path / "plain").mkdir()
    assert identity_file.publish(settings, cwd=tmp_path / "plain") is None


def test_several_agents_in_one_work_tree(repo, tmp_path, backend):
    """One file per server; the guard takes the server related to the committing shell, the newest among
    equals, none when running servers of different orchestrators cannot be told apart."""
    if backend != "sqlite":
        pytest.skip("no database is used: one run is enough")
    folder = repo / ".git" / "vantage-peers"
    folder.mkdir()
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(3)]
    try:
        alice, bob, bob2 = (p.pid for p in sleepers)

        def record(pid: int, who: str, ancestors: list[int], started: int, db: str = "/team.db") -> None:
            (folder / f"identity-{pid}.json").write_text(json.dumps(
                {"version": 1, "orchestrator": who, "instance": None, "database": {"path": db}, "pid": pid,
                 "ancestors": ancestors, "startedAt": started}))

        record(alice, "alice", [900_001, 900_002, 4_000], 1)
        record(bob, "bob", [900_003, 4_000], 2)
        chose = identity_file.choose(repo, me=[900_010, 900_002, 4_000])  # alice's agent started this shell
        assert chose.orchestrator == "alice" and chose.database == {"path": "/team.db"}
        chose = identity_file.choose(repo, me=[900_010, 900_003, 4_000])
        assert chose.orchestrator == "bob"
        chose = identity_file.choose(repo, me=[900_010, 4_000])  # equally related: ambiguous, database agreed
        assert chose.record is None and "alice, bob" in chose.note and chose.database == {"path": "/team.db"}
        record(bob2, "bob", [900_003, 4_000], 3, db="/other.db")
        assert identity_file.choose(repo, me=[900_003]).database == {"path": "/other.db"}  # the newest of bob's
        assert identity_file.choose(repo, me=[4_000]).database is None  # ambiguous, databases differ
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
    # No server running: the newest file, said to be from an exited server.
    chose = identity_file.choose(repo, me=[4_000])
    assert chose.record["pid"] == bob2 and "has exited" in chose.note
    # A new server removes the files of servers that are gone.
    settings = Settings.from_env({"VP_EMBEDDINGS": "none", "VP_ORCHESTRATOR": "carol"}, dotenv=False)
    mine = identity_file.publish(settings, cwd=repo)
    assert sorted(folder.iterdir()) == [mine]
    assert identity_file.choose(repo).orchestrator == "carol"
