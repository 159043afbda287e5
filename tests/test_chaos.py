"""Bounded kill -9 chaos: server processes on one file, random SIGKILLs, then every invariant.

Small for CI by default; `VP_CHAOS_SECONDS` / `VP_CHAOS_WORKERS` run it long (benchmarks/chaos.py
prints the figures of a minutes-long run in both journal modes).
"""

from __future__ import annotations

import os

import pytest
from support import chaos

pytestmark = pytest.mark.slow  # chaos: servers killed and files moved under writers


@pytest.mark.parametrize("mode", ["wal", "delete", "postgres"])
def test_sigkilled_servers_lose_nothing_acknowledged(tmp_path, mode):
    seconds = float(os.environ.get("VP_CHAOS_SECONDS", "4"))
    workers = int(os.environ.get("VP_CHAOS_WORKERS", "3"))
    url = None
    if mode == "postgres":  # the same chaos on one PostgreSQL database (issue #25)
        from support import postgres

        if postgres.available():
            pytest.skip(postgres.available())
        url = postgres.fresh_database()
    figures = chaos.run(tmp_path / "chaos.db", mode="wal" if url else mode, workers=workers, seconds=seconds,
                        tasks=200, kill_every=(0.2, 0.8), fork=False,  # pytest may hold threads: no fork()
                        database_url=url)
    print(figures)
    assert figures["starts"] >= workers and figures["ops"] > 0, figures
    assert figures["kills"] >= 1, figures
    assert figures["claims"] > 0, figures  # the race for pool tasks really ran (no double claim is meaningful)
    for key in ("lost", "duplicated", "double_claims", "owner_mismatch", "bad_receipts", "not_in_fts",
                "foreign_key_violations"):
        assert figures[key] == 0, (key, figures)
    assert figures["integrity"] == "ok" and figures["fts_integrity_failures"] == [], figures
    assert "UNCODED" not in figures["errors"] and "INTERNAL_ERROR" not in figures["errors"], figures


def test_file_moved_under_writing_servers_loses_no_acknowledged_message(tmp_path):
    """#19: three stdio servers write while the file is moved away mid-run. Every acknowledged
    message is in the moved file (writes after the move are refused, never acknowledged into a
    file nobody reads); every refusal carries a code; no fresh file appears."""
    import threading
    import time

    import apsw
    from support.faults_helpers import StdioProc

    db = tmp_path / "vp.db"
    seconds = float(os.environ.get("VP_CHAOS_SECONDS", "4"))
    servers = [StdioProc(db) for _ in range(3)]
    acked: list[str] = []
    codes: list[str] = []
    stop = threading.Event()

    def write(srv, who):
        i = 0
        while not stop.is_set():
            i += 1
            is_error, text, data = srv.call("send_message", channel="bob", content=f"{who}-{i}", **{"from": who})
            if is_error:
                codes.append(text.split("Error executing tool send_message: ", 1)[-1].split(":", 1)[0])
            else:
                acked.append(data["messageId"])

    threads = [threading.Thread(target=write, args=(s, f"w{n}"), daemon=True) for n, s in enumerate(servers)]
    for t in threads:
        t.start()
    time.sleep(seconds / 2)
    moved = tmp_path / "moved.db"
    for suffix in ("-wal", "-shm", ""):  # the way a user moves a folder's files: the db last
        if os.path.exists(f"{db}{suffix}"):
            os.rename(f"{db}{suffix}", f"{moved}{suffix}")
    time.sleep(seconds / 2)
    stop.set()
    for t in threads:
        t.join(60)
    for s in servers:
        s.close()
    conn = apsw.Connection(str(moved))
    try:
        stored = {r[0] for r in conn.execute("SELECT id FROM messages")}
        integrity = conn.execute("PRAGMA integrity_check").fetchall()[0][0]
    finally:
        conn.close()
    assert acked and codes, (len(acked), codes[:3])
    assert set(codes) <= {"DB_FILE_GONE", "STORAGE_IO", "BUSY"}, set(codes)  # STORAGE_IO: -shm moved first
    assert [m for m in acked if m not in stored] == []
    assert integrity == "ok"
    assert not db.exists()
