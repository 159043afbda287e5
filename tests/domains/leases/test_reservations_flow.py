"""Path reservations as a flow between agents (#30, #32): a refusal is a PATH_CONFLICT error, a
caller may wait for the holder (`waitSeconds`, woken by the database's change watcher and at the
holder's expiry), every spelling of a path is one path (one normalisation), case on case-insensitive
repositories, repo names compared case-insensitively, and force-release only by master or system —
a repo mapping its creator made herself is no owner chain (the attacker's side)."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import ToolError, make_settings, open_tools

from vantage_peers.core.ids import now_ms
from vantage_peers.domains.leases import globs, paths, slots
from vantage_peers.server import create_app

pytestmark = pytest.mark.backends

MIN = 60_000
HAS_GIT = shutil.which("git") is not None


def reserve(tools, who: str, patterns: list[str], repo: str = "o/r", **kw):
    return tools.call("reserve_paths", paths=patterns, repo=repo, callerOrchestrator=who, **kw)


def refused(tools, who: str, patterns: list[str], repo: str = "o/r", **kw) -> str:
    return tools.error("reserve_paths", paths=patterns, repo=repo, callerOrchestrator=who, **kw)


def git_repo(where: Path, *config: tuple[str, str]) -> Path:
    where.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(where)], check=True, capture_output=True, timeout=60)
    for key, value in config:
        subprocess.run(["git", "config", key, value], cwd=where, check=True, capture_output=True, timeout=60)
    return where


class WatcherSpy:
    """Wraps `db.watcher` to see that (and how long) a waiting reservation sleeps on it."""

    def __init__(self, db) -> None:
        self.real = db.watcher
        self.waiting = threading.Event()
        self.timeouts: list[float] = []

    def __call__(self, **kw):
        spy, inner = self, self.real(**kw)

        class Watched:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                inner.close()

            def wait(self, timeout):
                spy.timeouts.append(timeout)
                spy.waiting.set()
                return inner.wait(timeout)

        return Watched()


@pytest.fixture
def other(settings):
    """A second server process of the team on the same database (bob's, the holder)."""
    application = create_app(settings)
    with open_tools(application) as t:
        yield t
    application.db.close()


def in_thread(fn):
    box: dict = {}

    def run():
        try:
            box["result"] = fn()
        except ToolError as exc:
            box["error"] = str(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


# -- unmistakable conflicts ------------------------------------------------------------------------

def test_a_refused_reservation_is_a_path_conflict_naming_every_holder(tools):
    reserve(tools, "bob", ["src/api/**"], reason="auth refactor", callerInstance="b1")
    reserve(tools, "carol", ["src/*.py"], exclusive=False)
    err = refused(tools, "dave", ["src/api/routes.py", "src/main.py", "docs/free.md"])
    assert err.find("PATH_CONFLICT:") >= 0
    # every holder (orchestrator/instance), the pattern each holds, expiry, reason, id; what to do
    assert "bob/b1 holds 'src/api/**' exclusively until " in err and "auth refactor" in err
    assert "carol holds 'src/*.py' shared until " in err
    held = tools.call("list_path_reservations", repo="o/r")["items"]
    for row in held:
        assert str(row["expiresAt"]) in err and row["id"] in err
    assert "2 of 3 requested" in err and "'docs/free.md'" not in err
    for hint in ("waitSeconds", "release_paths", "check_path_conflicts", "partial: true"):
        assert hint in err, hint
    assert tools.call("list_path_reservations", holder="dave")["items"] == []  # nothing was reserved
    # partial: the caller opted in, and the answer says it is incomplete
    part = reserve(tools, "dave", ["src/api/routes.py", "docs/free.md"], partial=True)
    assert part["complete"] is False and part["refused"] == ["src/api/routes.py"]
    assert [g["path"] for g in part["granted"]] == ["docs/free.md"] and part["conflicts"][0]["holder"] == "bob/b1"
    whole = reserve(tools, "dave", ["lib/**"], partial=True)
    assert whole["complete"] is True and "refused" not in whole


def test_reserve_in_transaction_rolls_back_the_callers_writes_with_it(db):
    now = now_ms()
    db.write(lambda c: paths.reserve_in_transaction(c, paths=["src/**"], repo="o/r", holder="bob", instance=None,
                                                    ttl=MIN, now=now))

    def claim_and_reserve(c):
        slots.acquire(c, name="my-claim", capacity=1, ttl=MIN, holder="carol", instance=None, reason=None, now=now)
        return paths.reserve_in_transaction(c, paths=["docs/x.md", "src/app.py"], repo="o/r", holder="carol",
                                            instance="c1", ttl=MIN, now=now)

    with pytest.raises(paths.PathConflict) as info:
        db.write(claim_and_reserve)
    assert str(info.value).startswith("PATH_CONFLICT: ") and "bob holds 'src/**'" in str(info.value)
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM agentLeases WHERE holder = 'carol'")) == 0
    out = db.write(lambda c: paths.reserve_in_transaction(c, paths=["docs/x.md"], repo="o/r", holder="carol",
                                                          instance="c1", ttl=MIN, now=now))
    assert out["complete"] is True and [g["path"] for g in out["granted"]] == ["docs/x.md"]


# -- waiting ---------------------------------------------------------------------------------------

def test_a_waiting_reservation_is_granted_when_the_holder_releases(app, tools, other, monkeypatch):
    spy = WatcherSpy(app.db)
    monkeypatch.setattr(app.db, "watcher", spy)
    reserve(other, "bob", ["src/**"], reason="refactor")
    thread, box = in_thread(lambda: reserve(tools, "carol", ["src/app.py"], waitSeconds=300))
    assert spy.waiting.wait(120), box  # carol met bob's reservation and sleeps on the watcher
    assert "result" not in box
    assert other.call("release_paths", paths=["src/**"], repo="o/r", callerOrchestrator="bob")["count"] == 1
    thread.join(240)
    assert not thread.is_alive()
    got = box.get("result") or pytest.fail(box.get("error", "no answer"))
    assert got["complete"] is True and [g["path"] for g in got["granted"]] == ["src/app.py"]
    assert got["waitedSeconds"] >= 0
    # It slept on the watcher until a change (bob's expiry is an hour away, waitSeconds 300): no polling.
    assert spy.timeouts[0] > 60


def test_a_waiting_reservation_wakes_at_the_holders_expiry(app, tools, other, monkeypatch):
    spy = WatcherSpy(app.db)
    monkeypatch.setattr(app.db, "watcher", spy)
    gid = reserve(other, "bob", ["src/**"])["granted"][0]["id"]
    app.db.write(lambda c: c.execute("UPDATE agentLeases SET expiresAt = ? WHERE id = ?", (now_ms() + 1500, gid)))
    got = reserve(tools, "carol", ["src/app.py"], waitSeconds=300)  # nothing is committed: only expiry wakes it
    assert got["complete"] is True and got["granted"][0]["path"] == "src/app.py"
    if spy.timeouts:  # (a very slow start may find bob's lease lapsed already)
        assert spy.timeouts[0] <= 1.6  # woken at bob's expiresAt, not at waitSeconds


def test_a_wait_that_times_out_is_a_path_conflict_saying_it_waited(app, tools, other, monkeypatch):
    spy = WatcherSpy(app.db)
    monkeypatch.setattr(app.db, "watcher", spy)
    reserve(other, "bob", ["src/**"], reason="long job")
    err = refused(tools, "carol", ["src/app.py", "docs/a.md"], waitSeconds=1)
    assert err.find("PATH_CONFLICT:") >= 0 and "waited" in err and "still held" in err and "long job" in err
    assert spy.timeouts and max(spy.timeouts) <= 1
    assert tools.call("list_path_reservations", holder="carol")["items"] == []
    # partial + waitSeconds: nothing is held while waiting; at the end what is free is granted
    part = reserve(tools, "carol", ["src/app.py", "docs/a.md"], waitSeconds=0.5, partial=True)
    assert part["complete"] is False and part["refused"] == ["src/app.py"] and "waitedSeconds" in part
    assert [g["path"] for g in part["granted"]] == ["docs/a.md"]


def test_wait_seconds_is_validated(tools):
    for bad in (-1, 601, 10**9, "soon"):
        err = refused(tools, "carol", ["src/**"], waitSeconds=bad)
        assert "INVALID_ARGUMENT" in err and "waitSeconds" in err, (bad, err)
    assert reserve(tools, "carol", ["src/**"], waitSeconds=600)["complete"] is True  # free: no wait at all


# -- one normalisation -----------------------------------------------------------------------------

def test_every_spelling_of_a_held_path_conflicts_with_it(tools):
    reserve(tools, "bob", ["src/app.py"])
    for spelling in ("src/./app.py", "src//app.py", "src/x/../app.py", "./src/app.py", "/src/app.py",
                     "src\\app.py", "src/app.py/"):
        err = refused(tools, "carol", [spelling])
        assert "PATH_CONFLICT" in err and "bob holds 'src/app.py'" in err, spelling
        chk = tools.call("check_path_conflicts", paths=[spelling], repo="o/r", callerOrchestrator="carol")
        assert chk["free"] == [] and chk["conflicts"][0]["holder"] == "bob", spelling
    for escaping in ("../outside.py", "src/../../outside.py", "**/../x"):
        err = refused(tools, "carol", [escaping])
        assert "INVALID_ARGUMENT" in err and ("leaves the repository" in err or "'..' after '**'" in err), err
    # reserving another spelling of what one holds is a renewal; releasing by any spelling releases it
    again = reserve(tools, "bob", ["./src//x/../app.py"])
    assert again["granted"][0]["renewed"] is True and again["granted"][0]["path"] == "src/app.py"
    assert tools.call("release_paths", paths=["src/./app.py"], repo="o/r", callerOrchestrator="bob")["count"] == 1
    assert reserve(tools, "carol", ["src/x/../app.py"])["granted"][0]["path"] == "src/app.py"


def test_normalise_keeps_glob_meaning():
    n = globs.normalise
    assert [n(p) for p in ("./*.py", "a/../*.py", "/src/*.py", "docs//", "src/x/..", ".", "src/**/./x")] == \
        ["/*.py", "/*.py", "src/*.py", "docs/", "src/", "**", "src/**/x"]
    assert globs.overlaps(n("./*.py"), "a.py") and not globs.overlaps(n("./*.py"), "sub/a.py")
    assert globs.normalise_file("./src//x/../App.py", fold_case=True) == "src/app.py"
    assert n("Src/App.py", fold_case=True) == "src/app.py" and n("Src/App.py") == "Src/App.py"


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_case_insensitive_repository_folds_case_everywhere(tmp_path, app, tools):
    ci = git_repo(tmp_path / "ci-repo", ("core.ignorecase", "true"))  # what git writes on macOS / Windows
    got = reserve(tools, "bob", ["Src/App.py"], repo=str(ci))
    assert got["granted"][0]["path"] == "src/app.py"
    err = refused(tools, "carol", ["SRC/app.PY"], repo=str(ci))
    assert "PATH_CONFLICT" in err and "bob" in err
    # the git guard compares staged files the same way
    found = app.db.read(lambda c: paths.staged_conflicts(c, files=["SRC/APP.py"], repo=str(ci), me="carol",
                                                         now=now_ms()))
    assert [f["path"] for f in found] == ["SRC/APP.py"] and found[0]["holder"] == "bob"
    # a case-sensitive repository keeps them apart
    cs = git_repo(tmp_path / "cs-repo")
    reserve(tools, "bob", ["Src/App.py"], repo=str(cs))
    assert reserve(tools, "carol", ["src/app.py"], repo=str(cs))["granted"][0]["path"] == "src/app.py"
    assert app.db.read(lambda c: paths.staged_conflicts(c, files=["src/App.py"], repo=str(cs), me="carol",
                                                        now=now_ms())) == []


def test_repo_names_and_the_case_setting(tools, monkeypatch):
    reserve(tools, "bob", ["src/**"], repo="Org/Victim")
    assert "PATH_CONFLICT" in refused(tools, "carol", ["src/a.py"], repo="org/VICTIM")  # one scope
    assert tools.call("list_path_reservations", repo="ORG/victim")["items"][0]["repo"] == "org/victim"
    assert reserve(tools, "carol", ["Docs/A.md"], repo="o/r")["granted"]
    assert reserve(tools, "dave", ["docs/a.md"], repo="o/r")["granted"]  # named repos: case-sensitive paths
    monkeypatch.setenv("VP_CASE_INSENSITIVE_PATHS", "1")
    err = refused(tools, "erin", ["DOCS/a.MD"], repo="o/r")
    assert "carol" in err and "dave" in err  # rows stored before are compared folded too


# -- force release: the attacker's side ------------------------------------------------------------

def test_a_mapping_mallory_creates_does_not_let_her_force_release(tools, db_path, database_url):
    gid = reserve(tools, "alice", ["src/**"], repo="org/victim", reason="alice's refactor")["granted"][0]["id"]
    mallory_app = create_app(make_settings(db_path, database_url=database_url, orchestrator="mallory"))
    try:
        with open_tools(mallory_app) as mallory:
            for slug in ("ORG/VICTIM", "org/victim"):  # the case-folded twin, and the repo itself
                made = mallory.call("add_repo_mapping", repo=slug, orchestrator="mallory", project="victim")
                assert made["createdBy"] == "mallory"
            err = mallory.error("force_release_path_reservation", id=gid, reason="mine now")
            assert "RBAC_DENIED" in err and "master bearer or 'system'" in err
            err = mallory.error("force_release_path_reservation", id=gid, reason="mine now",
                                callerOrchestrator="mallory")
            assert "RBAC_DENIED" in err
    finally:
        mallory_app.db.close()
    [held] = tools.call("list_path_reservations", repo="org/victim")["items"]
    assert (held["id"], held["holder"]) == (gid, "alice")
    assert tools.call("force_release_path_reservation", id=gid, reason="ops", callerOrchestrator="system")["released"]
