"""Bundle and backup throughput on one DB file.

- export a namespace of N memories (plus N/10 tasks and briefings) to a file, validate it, import
  it (merge) into a fresh namespace, and merge it again (the idempotent no-op);
- backup the whole file while one writer process keeps inserting (rows written during the copy).

Usage: uv run python benchmarks/bundles.py [--memories 20000]
Prints records/s and MB/s per step; no targets are asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
from pathlib import Path


def _settings(path: Path):
    from vantage_peers.pipeline.settings import Settings

    return Settings.from_env({"VP_DB_PATH": str(path), "VP_SCHEDULER": "off"}, dotenv=False)


def _seed(db, n: int) -> None:
    now = 1_700_000_000_000
    mems = [(f"mem_{i:026d}", "bench", "note", f"memory {i} " + "lorem ipsum " * 20, "pi", now + i, now + i)
            for i in range(n)]
    tasks = [(f"tsk_{i:026d}", f"task {i}", "bench", "sigma", "high", "todo", "pi", now + i, now + i)
             for i in range(n // 10)]
    notes = [(f"brf_{i:026d}", f"note {i}", "bench", '["pi"]', "content " * 30, "pi", now + i, now + i)
             for i in range(n // 10)]

    def run(c):
        c.executemany("INSERT INTO memories (id, namespace, type, content, createdBy, createdAt, updatedAt) "
                      "VALUES (?,?,?,?,?,?,?)", mems)
        c.executemany("INSERT INTO tasks (id, title, project, assignedTo, priority, status, createdBy, createdAt, "
                      "updatedAt) VALUES (?,?,?,?,?,?,?,?,?)", tasks)
        c.executemany("INSERT INTO briefingNotes (id, title, topic, participants, content, createdBy, createdAt, "
                      "updatedAt) VALUES (?,?,?,?,?,?,?,?)", notes)

    db.write(run)


def _writer(path: str, stop) -> None:
    from vantage_peers.db import open_database
    from vantage_peers.domains.memory import store

    db = open_database(_settings(Path(path)))
    i = 0
    while not stop.is_set():
        i += 1
        db.write(lambda c, i=i: store.store_memory(c, namespace="writer", type="note", content=f"w {i}",
                                                   created_by="w"))
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=20_000)
    args = parser.parse_args()
    from vantage_peers.db import open_database
    from vantage_peers.domains.bundles.backup import backup
    from vantage_peers.domains.bundles.service import export_bundle, import_bundle, load

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        db = open_database(_settings(path))
        _seed(db, args.memories)
        records = args.memories + 2 * (args.memories // 10)
        bundle = Path(tmp) / "bench.okf.tar.gz"
        t0 = time.perf_counter()
        with open(bundle, "wb") as fh:
            export_bundle(db, "bench", fh)
        t_export = time.perf_counter() - t0
        size = bundle.stat().st_size
        t0 = time.perf_counter()
        with open(bundle, "rb") as fh:
            parsed = load(fh)
        t_load = time.perf_counter() - t0
        assert parsed.ok, parsed.problems[:3]
        t0 = time.perf_counter()
        first = import_bundle(db, parsed, "copy", "merge")
        t_import = time.perf_counter() - t0
        t0 = time.perf_counter()
        second = import_bundle(db, parsed, "copy", "merge")
        t_again = time.perf_counter() - t0
        assert sum(second["added"].values()) == 0 and sum(first["added"].values()) == records
        db.close()
        print(f"records: {records} ({args.memories} memories), bundle {size / 1e6:.2f} MB compressed")
        print(f"export            {t_export:6.2f} s  {records / t_export:9.0f} records/s")
        print(f"read + validate   {t_load:6.2f} s  {records / t_load:9.0f} records/s")
        print(f"import (merge)    {t_import:6.2f} s  {records / t_import:9.0f} records/s")
        print(f"merge again       {t_again:6.2f} s  (adds 0)")

        stop = mp.Event()
        writer = mp.Process(target=_writer, args=(str(path), stop))
        writer.start()
        time.sleep(1.0)
        t0 = time.perf_counter()
        report = backup(path, Path(tmp) / "copy.db")
        t_backup = time.perf_counter() - t0
        stop.set()
        writer.join(30)
        mb = report["bytes"] / 1e6
        print(f"backup under load {t_backup:6.2f} s  {mb / t_backup:9.1f} MB/s  ({mb:.1f} MB, integrity {report['integrity']})")


if __name__ == "__main__":
    main()
