"""CLI backup/restore (several OS processes on one file) and export/import with files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from support.bundle_helpers import db_fingerprint
from support.paths import SUPPORT, TESTS

from vantage_peers.cli import main
from vantage_peers.db import open_database
from vantage_peers.pipeline.settings import Settings


@pytest.fixture
def env(db_path, monkeypatch):
    monkeypatch.setenv("VP_DB_PATH", str(db_path))
    monkeypatch.setenv("VP_SCHEDULER", "off")
    monkeypatch.delenv("VP_ORCHESTRATOR", raising=False)
    return db_path


def _db(path: Path):
    return open_database(Settings.from_env({}, dotenv=False).model_copy(update={"db_path": path}))


def _acks(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [x for x in lines if x.startswith("mem_") and len(x) == 30]  # a torn last line is not an ack


def _wait(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_backup_while_two_processes_write(env, tmp_path, capsys):
    _db(env).close()  # create and migrate the file first
    acks = [tmp_path / f"ack{i}.txt" for i in range(2)]
    writers = [subprocess.Popen([sys.executable, str(SUPPORT / "backup_writer.py"), str(env), str(a), f"w{i}"],
                                cwd=TESTS) for i, a in enumerate(acks)]
    try:
        _wait(lambda: all(len(_acks(a)) >= 30 for a in acks), "both writers to commit 30 rows")
        acknowledged = {x for a in acks for x in _acks(a)}  # every row acknowledged before the backup starts
        target = tmp_path / "backup.db"
        assert main(["backup", str(target)]) == 0
        report = json.loads(capsys.readouterr().out)
        _wait(lambda: all(len(_acks(a)) >= 60 for a in acks), "writers to continue after the backup")
        assert all(w.poll() is None for w in writers), "a writer died"
    finally:
        for w in writers:
            w.terminate()
        for w in writers:
            w.wait(timeout=30)
    assert report["integrity"] == "ok" and report["backup"] == str(target)
    copy = apsw.Connection(str(target), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert copy.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert copy.execute("PRAGMA journal_mode").fetchall() == [("delete",)]  # self-contained file
        in_copy = {r[0] for r in copy.execute("SELECT id FROM memories WHERE namespace LIKE 'writer/%'")}
        fts = copy.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'row'").fetchall()[0][0]
    finally:
        copy.close()
    assert acknowledged <= in_copy, f"{len(acknowledged - in_copy)} acknowledged rows missing from the backup"
    assert fts == len(in_copy)  # the full-text index is consistent with its table
    live = _db(env)
    try:
        total = live.read(lambda c: c.scalar("SELECT count(*) FROM memories WHERE namespace LIKE 'writer/%'"))
    finally:
        live.close()
    assert len(acknowledged) <= len(in_copy) < total  # writes went on during and after the backup


def test_backup_refuses_to_overwrite_and_restore_refuses_a_database_in_use(env, tmp_path, capsys):
    db = _db(env)
    from vantage_peers.domains.memory import store

    db.write(lambda c: store.store_memory(c, namespace="n", type="note", content="before backup", created_by="pi"))
    db.close()
    target = tmp_path / "b.db"
    assert main(["backup", str(target)]) == 0
    assert main(["backup", str(target)]) == 2
    assert "BACKUP_EXISTS" in capsys.readouterr().err
    assert main(["backup", str(target), "--force"]) == 0
    capsys.readouterr()
    # change the live database after the backup
    db = _db(env)
    db.write(lambda c: store.store_memory(c, namespace="n", type="note", content="after backup", created_by="pi"))
    db.close()
    # another process holds the database open (as an idle server would)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time, apsw; c = apsw.Connection(sys.argv[1]); c.execute('SELECT count(*) FROM memories')"
         ".fetchall(); print('open', flush=True); time.sleep(120)", str(env)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        assert main(["restore", str(target)]) == 2
        assert "DB_IN_USE" in capsys.readouterr().err
        contents = _contents(env)
        assert contents == {"before backup", "after backup"}  # untouched
    finally:
        holder.terminate()
        holder.wait(timeout=30)
    assert main(["restore", str(target)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["integrity"] == "ok" and Path(report["previous"]).is_file()
    assert _contents(env) == {"before backup"}
    assert _contents(Path(report["previous"])) == {"before backup", "after backup"}
    db = _db(env)  # the restored file opens, is in WAL mode again and takes writes
    try:
        assert db.conn.scalar("PRAGMA journal_mode") == "wal"
        db.write(lambda c: store.store_memory(c, namespace="n", type="note", content="later", created_by="pi"))
    finally:
        db.close()


def _contents(path: Path) -> set[str]:
    conn = apsw.Connection(str(path))
    try:
        return {r[0] for r in conn.execute("SELECT content FROM memories")}
    finally:
        conn.close()


def test_restore_refuses_what_is_not_a_backup(env, tmp_path, capsys):
    _db(env).close()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    assert main(["restore", str(junk)]) == 2
    assert "NOT_A_DATABASE" in capsys.readouterr().err
    other = tmp_path / "other.db"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert main(["restore", str(other)]) == 2
    assert "not a vantage-peers database" in capsys.readouterr().err
    assert main(["restore", str(tmp_path / "missing.db")]) == 2
    assert "NOT_FOUND" in capsys.readouterr().err


def test_cli_export_import_files_with_progress(env, tmp_path, capsys, monkeypatch):
    from vantage_peers.domains.bundles import format as fmt

    monkeypatch.setattr(fmt, "PROGRESS_EVERY", 500)
    db = _db(env)
    now = 1_700_000_000_000
    rows = [(f"mem_{i:026d}", "big", "note", f"memory {i}", "pi", now + i, now + i) for i in range(1_050)]
    db.write(lambda c: c.executemany(
        "INSERT INTO memories (id, namespace, type, content, createdBy, createdAt, updatedAt) VALUES (?,?,?,?,?,?,?)",
        rows))
    db.close()
    bundle = tmp_path / "big.okf.tar.gz"
    assert main(["export", "--namespace", "big", "-o", str(bundle)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["counts"] == {"memories": 1_050, "briefings": 0, "tasks": 0}
    assert "memories.jsonl: 1000 records" in out.err and "wrote" in out.err
    db = _db(env)
    before = db.read(db_fingerprint)
    db.close()
    assert main(["import", str(bundle), "--into", "copy"]) == 0  # default: dry-run
    out = capsys.readouterr()
    assert json.loads(out.out)["merge"]["added"]["memories"] == 1_050
    assert "memories.jsonl: 1000 records" in out.err
    db = _db(env)
    assert db.read(db_fingerprint) == before
    db.close()
    assert main(["import", str(bundle), "--into", "copy", "--mode", "merge"]) == 0
    assert json.loads(capsys.readouterr().out)["added"]["memories"] == 1_050
    assert main(["import", str(bundle), "--into", "copy", "--mode", "merge"]) == 0
    assert json.loads(capsys.readouterr().out)["added"]["memories"] == 0
    # a damaged file is refused cleanly
    broken = tmp_path / "broken.okf.tar.gz"
    broken.write_bytes(bundle.read_bytes()[:1000])
    assert main(["import", str(broken), "--into", "copy", "--mode", "replace"]) == 2
    assert "INVALID_BUNDLE" in capsys.readouterr().err
    db = _db(env)
    try:
        assert db.read(lambda c: c.scalar("SELECT count(*) FROM memories WHERE namespace = 'copy'")) == 1_050
    finally:
        db.close()
    assert not list(tmp_path.glob(".*partial*"))
    assert os.environ["VP_DB_PATH"] == str(env)


def test_restore_into_a_new_path(env, tmp_path, capsys, monkeypatch):
    db = _db(env)
    from vantage_peers.domains.memory import store

    db.write(lambda c: store.store_memory(c, namespace="n", type="note", content="carried over", created_by="pi"))
    db.close()
    target = tmp_path / "b.db"
    assert main(["backup", str(target)]) == 0
    fresh = tmp_path / "elsewhere" / "new.db"
    monkeypatch.setenv("VP_DB_PATH", str(fresh))
    capsys.readouterr()
    assert main(["restore", str(target)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["previous"] is None and report["integrity"] == "ok"
    assert _contents(fresh) == {"carried over"}


@pytest.mark.parametrize("verb", ["backup", "restore"])
def test_backup_and_restore_refuse_on_postgresql_and_name_pg_dump(env, tmp_path, capsys, monkeypatch, verb):
    """They copy the SQLite file: on PostgreSQL they refuse before touching anything, pointing to pg_dump."""
    _db(env).close()
    before = env.read_bytes()
    target = tmp_path / "copy.db"
    if verb == "restore":
        assert main(["backup", str(target)]) == 0
        capsys.readouterr()
    monkeypatch.setenv("VP_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    assert main([verb, str(target)]) == 2
    err = capsys.readouterr().err
    assert "UNSUPPORTED_BACKEND" in err and "PostgreSQL" in err and "pg_dump" in err and "migrate-db" in err
    assert env.read_bytes() == before  # the SQLite file next to it is left alone
    assert target.exists() == (verb == "restore")
