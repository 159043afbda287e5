"""`vantage-peers migrate-db` (issue #25): SQLite -> PostgreSQL -> SQLite, verified by counts and checksums."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import make_settings, open_tools
from support import postgres
from support.migration_helpers import older_file
from support.transfer_helpers import HOSTILE, HUGE, fill

from vantage_peers.cli import main
from vantage_peers.db import Database, transfer, transfer_check
from vantage_peers.db.postgres import PgDatabase
from vantage_peers.server import create_app


def needs_pg(test):
    """A test on PostgreSQL: in the `postgres` lane, skipped without the dev group's driver and server."""
    return pytest.mark.postgres(pytest.mark.skipif(postgres.available() is not None,
                                                   reason=str(postgres.available()))(test))


@pytest.fixture
def env(monkeypatch):
    for name in ("VP_DATABASE_URL", "VP_DB_PATH", "VP_ORCHESTRATOR"):
        # set, then removed: the undo puts back the value from before the test (usually none), also
        # over a VP_DATABASE_URL that `main(["--database-url", …])` wrote into os.environ
        monkeypatch.setenv(name, "x")
        monkeypatch.delenv(name)
    monkeypatch.setenv("VP_SCHEDULER", "off")


@pytest.fixture
def pg_url():
    url = postgres.fresh_database("mig", migrated=False)  # empty: migrate-db migrates it
    yield url
    postgres.drop_database(url)


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    path = tmp_path / "source.db"
    app = create_app(make_settings(path, orchestrator="alice"))
    with open_tools(app) as tools:
        fill(tools, app)
    app.db.close()
    return path


def _counts(db) -> dict[str, int]:
    return db.read(lambda c: {s.name: transfer._count(c, s) for s in transfer.schema_tables()})


def _sums(db) -> dict[str, tuple[int, str]]:
    specs = [s for s in transfer.schema_tables() if not s.derived]
    return db.read(lambda c: {s.name: transfer_check.checksum(transfer.stream(c, s, 7)) for s in specs})


def _progress(err: str) -> dict[str, tuple[int, int]]:
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"^(\w+) +\[[#.]+\] (\d+)/(\d+) rows$", err, re.M)}


def _migrate(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["migrate-db", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@needs_pg
def test_round_trip_keeps_every_row_and_value(env, filled, pg_url, tmp_path, capsys):
    back = tmp_path / "back.db"
    source = Database(filled)
    before, sums_before = _counts(source), _sums(source)
    source.close()
    specs = transfer.schema_tables()
    copied = [s.name for s in specs if not s.derived]
    assert all(before[name] > 0 for name in copied), {n: before[n] for n in copied if not before[n]}

    code, out, err = _migrate(capsys, "--from", str(filled), "--to", pg_url, "--batch-size", "2")
    assert code == 0, err
    # The progress: one line per copied table with its rows, none for the re-queued embedding jobs.
    assert _progress(err) == {n: (before[n], before[n]) for n in copied}  # meta without embedding.model
    assert "embeddingJobs: not copied; the target queued" in err
    assert f"all {len(copied)} tables match" in err and "MISMATCH" not in out
    assert len([line for line in out.splitlines() if line.endswith(" ok")]) == len(copied)

    code, out, err = _migrate(capsys, "--from", pg_url, "--to", str(back))
    assert code == 0, err

    final = Database(back)
    after, sums_after = _counts(final), _sums(final)
    # Every copied table: same rows, same checksum computed independently on the two files.
    for name in copied:
        assert after[name] == before[name], name
        assert sums_after[name] == sums_before[name], name
    # Vectors' bookkeeping stays behind; the rest of meta comes over.
    keys = final.read(lambda c: {r["key"]: r["value"] for r in c.query("SELECT key, value FROM meta")})
    assert "embedding.model" not in keys and keys["dashboard.sessionKey"] == HOSTILE
    # Hostile values intact, byte for byte.
    contents = final.read(lambda c: [r["content"] for r in c.query("SELECT content FROM memories ORDER BY seq")])
    assert HOSTILE in contents and HUGE in contents
    assert final.read(lambda c: c.scalar("SELECT count(*) FROM messages WHERE content = ?", (HUGE,))) == 1
    # Every memory and fix pattern is queued again for embedding by the target's triggers.
    assert after["embeddingJobs"] == after["memories"] and after["fixPatternEmbeddingJobs"] == after["fixPatterns"]
    final.close()

    # The file made from PostgreSQL works: its full-text index was rebuilt from the rows.
    app = create_app(make_settings(back, orchestrator="alice"))
    with open_tools(app) as tools:
        found = tools.call("search_messages_by_keyword", query="Zoë")
        assert len(found["items"] if isinstance(found, dict) else found) == 3
        hits = tools.call("text_search", query="zoë", namespace="team/ü")
        assert hits["items"] if isinstance(hits, dict) else hits
    app.db.close()


@needs_pg
def test_postgres_target_takes_new_writes_after_the_copy(env, filled, pg_url, capsys):
    """Identity sequences were moved past the copied `seq` values: new rows do not collide."""
    code, _, err = _migrate(capsys, "--from", str(filled), "--to", pg_url)
    assert code == 0, err
    app = create_app(make_settings(filled.parent / "unused.db", orchestrator="alice", database_url=pg_url))
    with open_tools(app) as tools:
        memories, _ = tools.pages("list_memories", namespace="team/ü", limit=2, detail="full")
        assert {m["content"] for m in memories} >= {f"newer {HOSTILE}"}
        for i in range(3):
            tools.call("send_message", channel="bob", content=f"after the move {i}")
            tools.call("store_memory", namespace="n", type="fact", content=f"after the move {i}")
            tools.call("create_task", title=f"after the move {i}", assignedTo="alice", priority="low")
        assert len(tools.call("check_messages", recipient="bob")) >= 3
    seqs = app.db.read(lambda c: c.rows("SELECT max(seq), count(*), count(DISTINCT seq) FROM memories")[0])
    app.db.close()
    source = Database(filled)
    assert seqs[0] > source.conn.scalar("SELECT max(seq) FROM memories") and seqs[1] == seqs[2]
    source.close()


@needs_pg
def test_verification_names_a_changed_row(env, filled, pg_url, capsys):
    code, _, err = _migrate(capsys, "--from", str(filled), "--to", pg_url)
    assert code == 0, err
    db = PgDatabase(pg_url, pool_size=1)
    seq = db.read(lambda c: c.scalar("SELECT min(seq) FROM memories"))
    db.write(lambda c: c.execute("UPDATE memories SET content = content || '.' WHERE seq = ?", (seq,)))
    db.write(lambda c: c.execute("UPDATE mandates SET budget = budget + 0.000001"))
    task_seq = db.read(lambda c: c.scalar("SELECT max(seq) FROM taskNotes"))
    db.write(lambda c: c.execute("DELETE FROM taskNotes WHERE seq = ?", (task_seq,)))
    db.close()

    code, out, err = _migrate(capsys, "--from", str(filled), "--to", pg_url, "--verify-only")
    assert code == 1
    bad = {line.split()[0] for line in out.splitlines() if line.endswith("MISMATCH")}
    assert bad == {"memories", "mandates", "taskNotes"}
    assert f"MISMATCH memories: first difference at seq={seq} (differs)" in out
    assert f"MISMATCH taskNotes: first difference at seq={task_seq} (only in the source)" in out
    assert "3 table(s) differ" in err
    assert re.search(r"^messages +\d+ +\d+ +\w+ +\w+ +ok$", out, re.M)


def test_checksums_agree_across_backends_for_awkward_values():
    """The same values as each backend returns them (NUMERIC 30 vs double 30.0, text vs NULL) hash alike,
    and a change anywhere in a row changes the checksum."""
    sqlite_rows = [(1, "a", 30, None), (2, "ü🦓", 2.5, "")]
    pg_rows = [(1, "a", 30.0, None), (2, "ü🦓", 2.5, "")]
    assert transfer_check.checksum(sqlite_rows) == transfer_check.checksum(pg_rows)
    for changed in ([(1, "a", 30, "")], [(1, "a", 30.5, None)], [(1, "a ", 30, None)], [(1, 1, 30, None)]):
        assert transfer_check.checksum(changed + sqlite_rows[1:]) != transfer_check.checksum(sqlite_rows)
    assert transfer_check.checksum([("ab", "c")]) != transfer_check.checksum([("a", "bc")])


@needs_pg
def test_refuses_a_target_with_rows_unless_force(env, filled, pg_url, capsys):
    assert _migrate(capsys, "--from", str(filled), "--to", pg_url)[0] == 0
    code, out, err = _migrate(capsys, "--from", str(filled), "--to", pg_url)
    assert code == 2 and "TARGET_NOT_EMPTY: the target already holds rows: leases (1 rows), profiles (1 rows)" in err
    assert "--force" in err
    code, out, err = _migrate(capsys, "--from", str(filled), "--to", pg_url, "--force")
    assert code == 0, err
    source, target = Database(filled), PgDatabase(pg_url, pool_size=1)
    assert _counts(target) == _counts(source)  # no row twice (the source's embedding jobs: one per memory too)
    source.close()
    target.close()


@needs_pg
def test_a_nul_character_stops_the_copy_with_nothing_written(env, tmp_path, pg_url, capsys):
    path = tmp_path / "nul.db"
    app = create_app(make_settings(path, orchestrator="alice"))
    with open_tools(app) as tools:
        tools.call("send_message", channel="bob", content="fine")
        tools.call("store_memory", namespace="n", type="fact", content="fine")
    app.db.write(lambda c: c.execute("UPDATE messages SET content = ?", ("bad\x00byte",)))
    app.db.close()
    code, out, err = _migrate(capsys, "--from", str(path), "--to", pg_url)
    assert code == 2
    assert "MIGRATE_DB: copying messages" in err and "NUL character" in err and "nothing was written" in err
    target = PgDatabase(pg_url, pool_size=1)
    assert not any(_counts(target).values())  # one transaction: the memories and profiles went too
    target.close()


@needs_pg
def test_an_older_source_file_is_migrated_first(env, tmp_path, pg_url, capsys):
    path = older_file(tmp_path / "old.db", 13, "INSERT INTO meta (key, value) VALUES ('old', 'yes')",
                      "INSERT INTO messages (id, sender, channel, content, createdAt) VALUES ('m1', 'a', 'b', 'c', 1)")
    code, out, err = _migrate(capsys, "--from", str(path), "--to", pg_url)
    assert code == 0, err
    assert "the source is at schema version 13; migrating it to" in err
    db = PgDatabase(pg_url, pool_size=1)
    assert db.read(lambda c: c.scalar("SELECT content FROM messages WHERE id = 'm1'")) == "c"
    db.close()


@needs_pg
def test_command_line_mistakes_are_one_line(env, tmp_path, capsys):
    code, _, err = _migrate(capsys, "--from", str(tmp_path / "missing.db"), "--to", str(tmp_path / "t.db"))
    assert code == 2 and "MIGRATE_DB: the source" in err and "does not exist" in err
    assert not (tmp_path / "t.db").exists()
    (tmp_path / "notes.txt").write_text("not a database " * 100)
    code, _, err = _migrate(capsys, "--from", str(tmp_path / "notes.txt"), "--to", str(tmp_path / "t.db"))
    assert code == 2 and "MIGRATE_DB: opening the source failed: NotADBError" in err
    (tmp_path / "same.db").touch()
    code, _, err = _migrate(capsys, "--from", str(tmp_path / "same.db"), "--to", str(tmp_path / "." / "same.db"))
    assert code == 2 and "name the same database" in err
    code, _, err = _migrate(capsys, "--from", "postgresql://nobody@/nodb?host=/nonexistent", "--to",
                            str(tmp_path / "t.db"))
    assert code == 2 and "MIGRATE_DB: cannot open the source" in err and "Traceback" not in err


@needs_pg
def test_database_url_option_points_every_command_at_postgres(env, filled, pg_url, capsys, monkeypatch):
    assert _migrate(capsys, "--from", str(filled), "--to", pg_url)[0] == 0
    monkeypatch.setenv("VP_DB_PATH", str(filled.parent / "elsewhere.db"))
    for argv in (["--database-url", pg_url, "status", "--json"], ["status", "--json", "--database-url", pg_url]):
        monkeypatch.delenv("VP_DATABASE_URL", raising=False)
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert '"alice"' in out  # the peer copied into PostgreSQL, not the empty VP_DB_PATH file
    assert not (filled.parent / "elsewhere.db").exists()


def test_file_to_file_copy_and_a_live_source_caught_by_the_verification(env, filled, tmp_path, capsys):
    """No PostgreSQL needed: the same copy between two files; a source written after the copy no
    longer matches, and --verify-only says where."""
    copy = tmp_path / "copy.db"
    code, out, err = _migrate(capsys, "--from", str(filled), "--to", str(copy))
    assert code == 0, err
    assert _sums(Database(copy)) == _sums(Database(filled))
    app = create_app(make_settings(filled, orchestrator="alice"))
    with open_tools(app) as tools:
        tools.call("send_message", channel="bob", content="written after the copy")
    app.db.close()
    code, out, err = _migrate(capsys, "--from", str(filled), "--to", str(copy), "--verify-only")
    assert code == 1 and re.search(r"MISMATCH messages: first difference at seq=\d+ \(only in the source\)", out)
    assert "MISMATCH messageReceipts" in out
