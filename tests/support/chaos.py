"""Kill -9 chaos on one DB file: several server processes, random SIGKILLs, then the invariants.

Each worker is a server process (create_app + the SDK client in memory, the full tool layer) that
loops over send_message, store_memory, checkout_task and check_messages/mark_as_read, appending
one line per *acknowledged* operation to its log (an O_APPEND write: it survives the SIGKILL that
may follow). The parent kills a random worker every fraction of a second and starts a new one.
Then, on the file: every acknowledged message exists with exactly one receipt per recipient, no
message was written twice, no task was claimed twice, every acknowledged memory is in FTS, and
`integrity_check`, every FTS5 `integrity-check` and `foreign_key_check` pass.
Used by tests/test_chaos.py (seconds) and benchmarks/chaos.py (minutes).

With `database_url`, the same chaos runs on PostgreSQL (issue #25): the workers share that database,
the logs stay beside `path`, and the SQLite-only checks (integrity_check, FTS5 integrity) give way to
PostgreSQL's own constraints, which it enforces on every commit.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

PEERS = ("alice", "bob", "carol")
FTS_TABLES = ("messages_fts", "memories_fts", "tasks_fts", "briefingNotes_fts", "components_fts", "fixPatterns_fts")

def worker_main(path: str, who: str, log: str, mode: str, seed: str, tasks_file: str) -> None:
    """One server process's loop (runs until it is killed)."""
    import re

    import anyio
    from mcp import Client

    from vantage_peers.pipeline.settings import Settings
    from vantage_peers.server import create_app

    rng = random.Random(int(seed))
    tasks = Path(tasks_file).read_text().split()
    app = create_app(Settings.from_env(_env(path, mode), dotenv=False))
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def ack(*record: Any) -> None:
        os.write(fd, (json.dumps(record) + "\n").encode())

    async def main() -> None:
        async with Client(app.mcp) as client:
            ack("start", who)
            n = 0
            while True:
                n += 1
                op = rng.random()
                tag = f"{who}x{seed}x{n}"
                if op < 0.35:
                    channel = rng.choice(["alice", "bob,carol", "broadcast"])
                    r = await client.call_tool("send_message", {"from": who, "channel": channel, "content": tag})
                    if not r.is_error:
                        ack("msg", r.structured_content["messageId"], tag, channel, who)
                elif op < 0.6:
                    r = await client.call_tool("store_memory", {"namespace": f"chaos/{who}", "type": "note",
                                                                 "content": f"chaos memory {tag}", "createdBy": who})
                    if not r.is_error:
                        ack("mem", r.structured_content["memoryId"], tag)
                elif op < 0.85:
                    task = rng.choice(tasks)
                    r = await client.call_tool("checkout_task", {"taskId": task, "callerOrchestrator": who})
                    if not r.is_error and r.structured_content.get("claimed"):
                        ack("claim", task, who)
                else:
                    peer = rng.choice(PEERS)
                    r = await client.call_tool("check_messages", {"recipient": peer, "limit": 20})
                    if not r.is_error:
                        ids = [m["receiptId"] for m in r.structured_content["result"]][:5]
                        if ids:
                            r = await client.call_tool("mark_as_read", {"receiptIds": ids})
                if r.is_error:
                    text = " ".join(getattr(c, "text", "") for c in r.content)
                    m = re.search(r"([A-Z][A-Z0-9_]+): ", text)
                    ack("err", m.group(1) if m else "UNCODED", text[:200])

    anyio.run(main)


WORKER = "import sys, chaos; chaos.worker_main(*sys.argv[1:7])"


def _env(target: str, mode: str) -> dict[str, str]:
    env = {"VP_DB_PATH": target, "VP_SCHEDULER": "off", "VP_JOURNAL_MODE": mode, "VP_EMBEDDINGS": "none"}
    if target.startswith("postgresql://"):
        env["VP_DATABASE_URL"] = env.pop("VP_DB_PATH")
    return env


def prepare(path: Path, mode: str, tasks: int, workers: int, database_url: str | None = None) -> Path:
    """A fresh file with profiles (fixed broadcast audience) and `tasks` todo tasks to race for, assigned
    to a pool (an assignee nobody runs as: any worker may claim them, as in a real team)."""
    from vantage_peers.core.ids import new_id
    from vantage_peers.db import Database, migrate, open_target

    db = open_target(database_url) if database_url else Database(path, journal_mode=mode)
    migrate(db)
    names = [*PEERS, *(f"w{i}" for i in range(workers))]

    def seed(c):
        for who in names:
            c.execute("INSERT INTO profiles (id, orchestratorId, createdAt, updatedAt) VALUES (?, ?, 0, 0)",
                      (new_id("prf"), who))

    db.write(seed)
    from vantage_peers.domains.tasks import store as tasks_store

    def create(c) -> list[str]:
        return [tasks_store.create_task(c, payload={"title": f"chaos task {i}", "assignedTo": "pool",
                                                    "priority": "medium", "createdBy": "alice"})
                for i in range(tasks)]

    ids = db.write(create)
    db.close()
    tasks_file = path.with_suffix(".tasks")
    tasks_file.write_text("\n".join(ids))
    return tasks_file


class Worker:
    """A worker process by pid (forked or spawned)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def run(path: Path, *, mode: str = "wal", workers: int = 3, seconds: float = 6.0, tasks: int = 300,
        kill_every: tuple[float, float] = (0.3, 1.2), seed: int = 8, quiet: bool = True,
        fork: bool = hasattr(os, "fork"), database_url: str | None = None) -> dict[str, Any]:
    """Run the chaos for `seconds`, then check the file (or the PostgreSQL database); returns the figures."""
    rng = random.Random(seed)
    tasks_file = prepare(path, mode, tasks, workers, database_url)
    target = database_url or str(path)
    logs = [path.with_name(f"{path.stem}.w{i}.log") for i in range(workers)]
    spawned = 0

    worker_args = [target, "", "", mode, "", str(tasks_file)]
    if fork:
        # Forked from this process, which has imported everything and built the tools once, a worker
        # serves within a fraction of a second (a fresh interpreter needs seconds on a loaded machine).
        from vantage_peers.pipeline.settings import Settings
        from vantage_peers.server import create_app

        create_app(Settings.from_env(_env(target, mode), dotenv=False)).db.close()

    def spawn(i: int) -> Worker:
        nonlocal spawned
        spawned += 1
        argv = list(worker_args)
        argv[1], argv[2], argv[4] = f"w{i}", str(logs[i]), str(seed * 100_000 + spawned)
        if not fork:
            return Worker(subprocess.Popen([sys.executable, "-c", WORKER, *argv], cwd=Path(__file__).parent,
                                           stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL if quiet else None).pid)
        pid = os.fork()
        if pid == 0:  # the child: never returns into the parent's code
            try:
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 1)
                if quiet:
                    os.dup2(devnull, 2)
                worker_main(*argv)
            finally:
                os._exit(0)
        return Worker(pid)

    def log_size(i: int) -> int:
        return logs[i].stat().st_size if logs[i].exists() else 0

    procs = [spawn(i) for i in range(workers)]
    sizes = [log_size(i) for i in range(workers)]  # a worker is serving once its log grew ("start")
    kills = 0
    ready_by = time.monotonic() + 180  # start-up is slow on a loaded machine: the clock starts once all serve
    while time.monotonic() < ready_by and not all(log_size(i) > sizes[i] for i in range(workers)):
        time.sleep(0.1)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            time.sleep(rng.uniform(*kill_every))
            serving = [i for i in range(workers) if log_size(i) > sizes[i]]
            if not serving:
                continue  # every worker is still starting: a kill now would test nothing
            i = rng.choice(serving)
            procs[i].kill()
            kills += 1
            sizes[i] = log_size(i)
            procs[i] = spawn(i)
    finally:
        for p in procs:
            p.kill()
    figures = check_postgres(database_url, logs) if database_url else check(path, logs)
    figures.update(mode=mode, workers=workers, seconds=seconds, kills=kills)
    return figures


def _records(logs: list[Path]) -> list[list[Any]]:
    out = []
    for log in logs:
        if log.exists():
            for line in log.read_text().splitlines():
                try:
                    out.append(json.loads(line))
                except ValueError:  # a line cut by the kill is not an acknowledgement
                    continue
    return out


def check_postgres(url: str, logs: list[Path]) -> dict[str, Any]:
    """The invariants on PostgreSQL: the same counts, through the same SQL (db/dialect.py)."""
    from vantage_peers.db import open_target

    db = open_target(url)
    try:
        return db.read(lambda c: _invariants(_records(logs), c.rows, None))
    finally:
        db.close()


def check(path: Path, logs: list[Path]) -> dict[str, Any]:
    """The invariants, as counts (all zero but `ops` when the file is sound)."""
    import apsw

    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(10_000)
    try:
        return _invariants(_records(logs), lambda sql, params=(): list(conn.execute(sql, params)), conn)
    finally:
        conn.close()


def _invariants(records: list[list[Any]], q, conn) -> dict[str, Any]:
    """Counts over the acknowledged records; `conn` (apsw) adds SQLite's own integrity checks."""
    errors = Counter(r[1] for r in records if r[0] == "err")

    profiles = {r[0] for r in q("SELECT orchestratorId FROM profiles")}
    lost = duplicated = bad_receipts = 0
    for _, msg_id, tag, channel, sender in (r for r in records if r[0] == "msg"):
        rows = q("SELECT id FROM messages WHERE content = ?", (tag,))
        if not any(row[0] == msg_id for row in rows):
            lost += 1
        duplicated += max(0, len(rows) - 1)
        recipients = [row[0] for row in q("SELECT recipient FROM messageReceipts WHERE messageId = ?", (msg_id,))]
        expected = {"alice": {"alice"}, "bob,carol": {"bob", "carol"}}.get(channel, profiles - {sender})
        if sorted(recipients) != sorted(expected):
            bad_receipts += 1
    not_in_fts = 0
    for _, mem_id, tag in (r for r in records if r[0] == "mem"):
        rows = (q("SELECT m.id FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid "
                  "WHERE memories_fts MATCH ?", (f'"{tag}"',)) if conn is not None
                else q("SELECT m.id FROM memories m JOIN memories_fts f ON f.seq = m.seq WHERE m.content = ?",
                       (f"chaos memory {tag}",)))  # PostgreSQL: the row and its full-text side row
        if not rows:
            lost += 1 if not q("SELECT 1 FROM memories WHERE id = ?", (mem_id,)) else 0
            not_in_fts += 1
        duplicated += max(0, len(rows) - 1)
    claims = Counter(r[1] for r in records if r[0] == "claim")
    double_claims = sum(1 for n in claims.values() if n > 1)
    owner_mismatch = 0
    claimers = {r[1]: r[2] for r in records if r[0] == "claim"}
    for task, who in claimers.items():
        row = q("SELECT status, assignedTo FROM tasks WHERE id = ?", (task,))
        if not row or row[0][0] != "in_progress" or row[0][1] != who:
            owner_mismatch += 1
    integrity, fts_failures, fk = "ok", [], []
    if conn is not None:
        import apsw

        integrity = q("PRAGMA integrity_check")[0][0]
        for table in FTS_TABLES:
            try:
                conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
            except apsw.Error as exc:
                fts_failures.append(f"{table}: {exc}")
        fk = q("PRAGMA foreign_key_check")
    ops = sum(1 for r in records if r[0] in ("msg", "mem", "claim"))
    return {
        "ops": ops, "messages": sum(1 for r in records if r[0] == "msg"),
        "memories": sum(1 for r in records if r[0] == "mem"), "claims": len(claims),
        "starts": sum(1 for r in records if r[0] == "start"),
        "lost": lost, "duplicated": duplicated, "double_claims": double_claims, "owner_mismatch": owner_mismatch,
        "bad_receipts": bad_receipts, "not_in_fts": not_in_fts, "integrity": integrity,
        "fts_integrity_failures": fts_failures, "foreign_key_violations": len(fk),
        "errors": dict(errors),
    }


if __name__ == "__main__":  # a quick manual run: python tests/support/chaos.py /tmp/x.db wal 10
    print(run(Path(sys.argv[1]), mode=sys.argv[2], seconds=float(sys.argv[3]), quiet=False))
