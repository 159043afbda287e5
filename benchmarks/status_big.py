"""`vantage-peers status` on a large database, warm, beside the one-tool SDK floor's cold start (#34).

Fills a fresh SQLite file with `--rows` memories (each queued for embedding, as a write queues it),
as many messages with one receipt each (a third unread, over 50 recipients), a tenth as many tasks
over the open and closed statuses and 200 peers, by SQL (the tools would take minutes); then, in
alternating order, runs `status` (warm: the file is in the page cache after the first run) and the
floor of benchmarks/startup.py. Prints medians, the median of the per-round ratios, and the load.

Usage: uv run python benchmarks/status_big.py [--rows 100000] [--runs 7] [--bytecode]
Targets: status <= 1 s warm on 100k rows (and <= 1.5x the floor's cold start on an empty file:
benchmarks/startup.py).
"""

from __future__ import annotations

import argparse
import os
import runpy
import statistics
import tempfile
from pathlib import Path

STARTUP = runpy.run_path(str(Path(__file__).with_name("startup.py")))
ROWS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "


def fill(path: Path, rows: int) -> None:
    from vantage_peers.pipeline.settings import Settings
    from vantage_peers.server import create_app

    app = create_app(Settings.from_env({"VP_DB_PATH": str(path), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none"},
                                       dotenv=False), serve=False)

    def write(c):
        now = 1_760_000_000_000
        c.execute(ROWS + "INSERT INTO memories (id, namespace, type, content, createdBy, createdAt, updatedAt) "
                  "SELECT 'mem_' || i, 'ns' || (i % 20), 'note', 'memory ' || i || ' about topic ' || (i % 97), "
                  "'peer' || (i % 200), ?2 + i, ?2 + i FROM n", (rows, now))
        c.execute(ROWS + "INSERT INTO messages (id, sender, channel, content, sessionDay, createdAt) "
                  "SELECT 'msg_' || i, 'peer' || (i % 200), 'peer' || (i % 50), 'message ' || i, '2026-01-01', "
                  "?2 + i FROM n", (rows, now))
        c.execute(ROWS + "INSERT INTO messageReceipts (id, messageId, recipient, createdAt, readAt) "
                  "SELECT 'rcp_' || i, 'msg_' || i, 'peer' || (i % 50), ?2 + i, "
                  "CASE WHEN i % 3 = 0 THEN NULL ELSE ?2 + i END FROM n", (rows, now))
        c.execute(ROWS + "INSERT INTO tasks (id, title, assignedTo, priority, status, createdBy, createdAt, updatedAt) "
                  "SELECT 'task_' || i, 'task ' || i, 'peer' || (i % 200), 'medium', "
                  "CASE i % 6 WHEN 0 THEN 'todo' WHEN 1 THEN 'in_progress' WHEN 2 THEN 'review' WHEN 3 THEN 'blocked' "
                  "WHEN 4 THEN 'done' ELSE 'cancelled' END, 'peer0', ?2 + i, ?2 + i FROM n", (rows // 10, now))
        c.execute(ROWS + "INSERT INTO instances (id, orchestratorId, instanceId, lastSeen, createdAt) "
                  "SELECT 'inst_' || i, 'peer' || i, '', ?2 + i, ?2 FROM n", (200, now))

    try:
        app.db.write(write)
    finally:
        app.db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bytecode", action="store_true", help="write and use .pyc files (a private cache)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    minimal = tmp / "minimal.py"
    minimal.write_text(STARTUP["MINIMAL"])
    db = tmp / "big.db"
    fill(db, args.rows)
    env = {**os.environ, "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none", "VP_DB_PATH": str(db)}
    env.pop("VP_ORCHESTRATOR", None)
    if args.bytecode:  # as an installed package runs (startup.py --bytecode)
        env.update(PYTHONDONTWRITEBYTECODE="", PYTHONPYCACHEPREFIX=str(tmp / "pyc"))
    cases = {"floor cold start": lambda: STARTUP["_stdio"](env, tmp, minimal),
             f"status ({args.rows:,} rows, warm)": lambda: STARTUP["_command"](env, tmp, "status")}
    for run in cases.values():
        run()  # warm-up: the page cache, and any migration
    print(f"load average before: {STARTUP['loadavg']()}")
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cases}
    for i in range(args.runs):
        for name in list(cases)[i % 2:] + list(cases)[:i % 2]:
            samples[name].append(cases[name]())
    print(f"load average after:  {STARTUP['loadavg']()}")
    floor = samples[next(iter(cases))]
    print(f"{'case':<32} {'ms':>8} {'x floor':>8} {'CPU ms':>8} {'x floor':>8}   (medians of {args.runs} rounds)")
    for name, values in samples.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[2] for v in values)
        ratio = statistics.median(v[0] / f[0] for v, f in zip(values, floor, strict=True))
        cpu_ratio = statistics.median(v[2] / f[2] for v, f in zip(values, floor, strict=True))
        print(f"{name:<32} {wall * 1000:8.1f} {ratio:8.2f} {cpu * 1000:8.1f} {cpu_ratio:8.2f}")
    print("targets: status <= 1 s warm at 100k rows")


if __name__ == "__main__":
    main()
