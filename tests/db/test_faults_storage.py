"""Issue #19 cases 2 and 3 on real stdio processes: storage that fills up or turns read-only answers
STORAGE_FULL / STORAGE_READ_ONLY / STORAGE_IO — never INTERNAL_ERROR, never a bare error without a
code (even when stderr is on the full disk), never a SIGBUS — and works again once fixed."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import subprocess
import uuid

import apsw
import pytest
from support.faults_helpers import StdioProc

from vantage_peers.core.safe_stderr import SafeStream
from vantage_peers.db.faults import storage_error

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def send(srv, content, **extra):
    return srv.call("send_message", channel="bob", content=content, **{"from": "alice"}, **extra)


def code(text: str) -> str | None:
    """The `CODE` of `[Error executing tool x: ]CODE: message`."""
    head = text.split("Error executing tool ", 1)[-1]
    head = head.split(": ", 1)[1] if head != text else head
    word = head.split(":", 1)[0]
    return word if word.isupper() else None


@pytest.fixture
def small_disk(tmp_path):
    if not ROOT:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(directory) -> os.PathLike:
    filler = directory / "filler"
    # unbuffered: a write cut short by the full disk leaves nothing for close() to flush (and fail on)
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


@pytest.mark.slow
def test_disk_full_answers_storage_full_even_with_stderr_on_that_disk(small_disk):
    # stderr on the same small disk, and VP_ORCHESTRATOR set so every call tries to log a presence failure.
    srv = StdioProc(small_disk / "vp.db", stderr_path=small_disk / "stderr.log",
                    env={"VP_ORCHESTRATOR": "alice", "VP_PRESENCE_INTERVAL_SECONDS": "0"})
    try:
        assert not send(srv, "fits")[0]
        filler = fill(small_disk)
        answers = [send(srv, "x" * 20_000 + str(i)) for i in range(5)]
        answers += [srv.call("store_memory", namespace="ns", type="fact", content="y" * 20_000, createdBy="alice")
                    for _ in range(3)]
        for is_error, text, _ in answers:
            assert is_error and code(text) == "STORAGE_FULL", text
            assert "free some space" in text and str(small_disk / "vp.db") in text
        assert not srv.call("check_messages", recipient="bob")[0]  # reads still work
        os.remove(filler)
        assert not send(srv, "after freeing space")[0]
        texts = [m["content"] for m in srv.call("check_messages", recipient="bob")[2]["result"]]
        assert texts == ["fits", "after freeing space"]  # nothing acknowledged was lost, nothing refused was stored
    finally:
        srv.close()
    assert srv.proc.returncode == 0


def chattr(flag: str, *paths) -> bool:
    return all(subprocess.run(["chattr", flag, str(p)], capture_output=True).returncode == 0 for p in paths)


@pytest.fixture
def immutable(tmp_path):
    if not ROOT:
        pytest.skip("chattr +i needs root")
    probe = tmp_path / "probe"
    probe.write_text("x")
    if not chattr("+i", probe):
        pytest.skip("this filesystem does not support chattr +i (ext4 does)")
    chattr("-i", probe)
    marked: list = []

    def mark(*paths):
        assert chattr("+i", *paths)
        marked.extend(paths)

    yield mark
    chattr("-i", *marked)


@pytest.mark.slow
def test_read_only_wal_index_is_refused_with_a_code_not_sigbus(tmp_path, immutable):
    db = tmp_path / "vp.db"
    srv = StdioProc(db)
    try:
        assert not send(srv, "before")[0]
        immutable(f"{db}-shm")
        for _ in range(3):
            is_error, text, _ = send(srv, "during" + "z" * 50_000)
            assert is_error and code(text) == "STORAGE_READ_ONLY" and "-shm" in text, text
            is_error, text, _ = srv.call("check_messages", recipient="bob")  # reads write the -shm too
            assert is_error and code(text) == "STORAGE_READ_ONLY", text
        assert srv.proc.poll() is None
        # A second process refuses to start on it, with the code, instead of dying.
        second = subprocess.run([srv.proc.args[0]], input=b"", capture_output=True, timeout=60,
                                env={**os.environ, "VP_DB_PATH": str(db), "VP_SCHEDULER": "off"})
        assert second.returncode == 2 and b"STORAGE_READ_ONLY" in second.stderr
        chattr("-i", f"{db}-shm")
        assert not send(srv, "after")[0]
    finally:
        srv.close()
    assert srv.proc.returncode == 0  # no SIGBUS (-7) at exit either


@pytest.mark.slow
def test_exit_while_the_wal_index_is_read_only_does_not_sigbus(tmp_path, immutable):
    db = tmp_path / "vp.db"
    srv = StdioProc(db)
    assert not send(srv, "before")[0]
    immutable(f"{db}-shm")
    srv.close()
    assert srv.proc.returncode == 0


@pytest.mark.slow
def test_read_only_database_and_wal_answer_storage_read_only(tmp_path, immutable):
    db = tmp_path / "vp.db"
    srv = StdioProc(db)
    try:
        assert not send(srv, "before")[0]
        immutable(db, f"{db}-wal")
        for _ in range(3):
            is_error, text, _ = send(srv, "w" * 200_000)  # past the WAL's current end
            assert is_error and code(text) == "STORAGE_READ_ONLY", text
        chattr("-i", db, f"{db}-wal")
        after = send(srv, "after")
        assert not after[0], after[1]
    finally:
        srv.close()


def test_a_connection_opened_while_read_only_is_replaced_once_writable(tmp_path, immutable):
    """A worker thread that first connects while the file is immutable gets SQLite's read-only
    fallback; it must not keep it once the file is writable again (the flake of stop 39)."""
    from concurrent.futures import ThreadPoolExecutor

    from vantage_peers.db.connection import Database

    db = Database(tmp_path / "vp.db")
    db.conn.execute("CREATE TABLE t(a)")
    immutable(db.path, f"{db.path}-wal")
    with ThreadPoolExecutor(1) as worker:  # one thread: its connection is opened now, read-only
        assert worker.submit(lambda: db.conn.opened_read_only).result()
        with pytest.raises(apsw.ReadOnlyError):
            worker.submit(lambda: db.conn.execute("INSERT INTO t VALUES (1)")).result()
        chattr("-i", db.path, f"{db.path}-wal")
        assert worker.submit(lambda: db.conn.execute("INSERT INTO t VALUES (2)")).result() == 1
        assert worker.submit(lambda: db.conn.opened_read_only).result() is False
    assert db.conn.scalar("SELECT group_concat(a) FROM t") == "2"
    db.close()


@pytest.mark.slow
def test_vanished_wal_index_is_refused(tmp_path):
    db = tmp_path / "vp.db"
    srv = StdioProc(db)
    try:
        assert not send(srv, "before")[0]
        os.remove(f"{db}-shm")
        is_error, text, _ = send(srv, "after")
        assert is_error and code(text) == "STORAGE_IO" and "restart the server" in text, text
    finally:
        srv.close()


def test_classifier_unit(tmp_path):
    class Db:
        path = tmp_path / "vp.db"
        _local = None

    assert code(str(storage_error(apsw.FullError("database or disk is full"), Db()))) == "STORAGE_FULL"
    assert code(str(storage_error(apsw.ReadOnlyError("readonly"), Db()))) == "STORAGE_READ_ONLY"
    assert code(str(storage_error(apsw.IOError("disk I/O error"), Db()))) == "STORAGE_IO"
    assert code(str(storage_error(OSError(errno.ENOSPC, "No space left"), Db()))) == "STORAGE_FULL"
    assert code(str(storage_error(OSError(errno.EROFS, "Read-only file system"), Db()))) == "STORAGE_READ_ONLY"
    eio = storage_error(OSError(errno.EIO, "Input/output error"), Db())
    assert code(str(eio)) == "STORAGE_IO" and "EIO" in str(eio) and str(Db.path) in str(eio)
    try:
        try:
            raise apsw.FullError("full")
        except apsw.FullError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert code(str(storage_error(outer, Db()))) == "STORAGE_FULL"
    assert storage_error(ValueError("no"), Db()) is None
    assert storage_error(apsw.ConstraintError("unique"), Db()) is None
    assert storage_error(ConnectionResetError(), Db()) is None


def test_safe_stderr_swallows_write_failures():
    class Full(io.StringIO):
        def write(self, s):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

    stream = SafeStream(Full())
    assert stream.write("traceback line\n") == len("traceback line\n")
    stream.flush()
    ok = io.StringIO()
    SafeStream(ok).write(uuid.uuid4().hex)
    assert len(ok.getvalue()) == 32
