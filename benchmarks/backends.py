"""The SQLite file against PostgreSQL, same tools, same machine (issue #25). Not a test.

Usage: uv run python benchmarks/backends.py [--per-process 300] [--memories 10000] [--big]
           [--racers 8] [--rounds 40] [--seconds 10] [--database-url postgresql://admin@host/postgres]
           [--only sqlite|postgres] [--skip-serve]

For each backend, through the MCP tools (in-memory SDK client, one app per OS process):
1. send_message then check_messages with 1 and 4 processes: calls/s aggregate and p50 per call,
   0 lost checked by counting rows;
2. recall p50 over `--memories` memories (10,000; `--big` adds 100,000) of text with Zipf word
   frequencies, two-word queries, keyword ranking
   (embeddings off: vectors would measure the embedding endpoint, not the database);
3. checkout race: `--racers` processes call checkout_task on the same task at once, `--rounds`
   times; exactly one winner per task is required;
and then 4 `serve` processes on one PostgreSQL against one `serve --workers 4` on the SQLite file:
8 concurrent HTTP clients (2 load processes) alternating send_message and check_messages; and
`migrate-db` of a file with `--memories` memories to PostgreSQL and back (rows/s, verification time).

PostgreSQL is the embedded server of tests/support/postgres.py (PostgreSQL 18 + pgvector), set back
to durable settings for the run (fsync on; synchronous_commit off, the counterpart of SQLite's WAL
with synchronous=NORMAL: a power cut may lose the last commits, never corrupt), or the server of
`--database-url` (an account that may CREATE DATABASE: each measurement gets a fresh database,
dropped after). A section a backend cannot run yet is printed as skipped, with the error.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing as mp
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import http_load  # noqa: E402 - benchmarks/, beside this script
from support.http_helpers import Serve  # noqa: E402

logging.disable(logging.INFO)  # the servers' and HTTP clients' request logs (here and in spawned processes)
# Text with a natural word-frequency curve: 5,000 made-up words drawn with Zipf weights (1/rank), so a
# query of two mid-frequency words matches a few percent of the memories, as real questions do.
VOCABULARY = [f"{a}{b}{c}" for a in "bdfgklmnprstvz" for b in "aeiou" for c in ("", "n", "r", "s", "l", "m", "t",
              "ck", "nd", "st", "rk", "mp", "lt", "sh")][:980]
VOCABULARY = [w + s for s in ("", "a", "o", "en", "ix") for w in VOCABULARY][:4900]
WEIGHTS = [1 / rank for rank in range(1, len(VOCABULARY) + 1)]


# -- where the databases live --------------------------------------------------------------------
class Backend:
    """One database per measurement: a fresh file, or a fresh PostgreSQL database."""

    def __init__(self, name: str, admin_url: str | None = None) -> None:
        self.name, self.admin_url = name, admin_url
        self.tmp = Path(tempfile.mkdtemp(prefix=f"vp-bench-{name}-"))
        self.count = 0

    @contextlib.contextmanager
    def database(self) -> Iterator[dict[str, Any]]:
        """Settings overrides for a new, migrated database: {'db_path': …} or {'database_url': …}."""
        self.count += 1
        path = self.tmp / f"bench{self.count}.db"
        if self.name == "sqlite":
            from vantage_peers.db import Database, migrate

            db = Database(path)
            migrate(db)
            db.close()
            yield {"db_path": path}
            return
        import psycopg
        from support.postgres import uri_for

        from vantage_peers.db import migrate
        from vantage_peers.db.postgres import PgDatabase

        name = f"vp_bench_{os.getpid()}_{self.count}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        url = uri_for(self.admin_url, name)
        db = PgDatabase(url, pool_size=1)
        migrate(db)
        db.close()
        try:
            yield {"database_url": url, "db_path": path}
        finally:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def embedded_admin_url() -> str:
    """The tests' embedded PostgreSQL, with durability settings put back for a fair comparison."""
    from support import postgres

    why = postgres.available()
    if why:
        raise SystemExit(why)
    admin = postgres.server_uri()
    server = postgres._server  # started by server_uri()
    server.psql("ALTER SYSTEM SET fsync = on")
    server.psql("ALTER SYSTEM SET synchronous_commit = off")
    postgres._restart(server)
    return admin


def settings(overrides: dict[str, Any], **extra: Any):
    from vantage_peers.pipeline.settings import Settings

    base = Settings.from_env({"VP_EMBEDDINGS": "none", "VP_SCHEDULER": "off"}, dotenv=False)
    return base.model_copy(update={"scheduler": False, **overrides, **extra})


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000 if samples else float("nan")


def in_process(overrides: dict[str, Any], body: Callable[[Any], Any]) -> Any:
    """Run `await body(client)` against a new app on the database, in this process."""
    import anyio
    from mcp import Client

    from vantage_peers.server import create_app

    app = create_app(settings(overrides))

    async def run() -> Any:
        async with Client(app.mcp) as client:
            return await body(client)

    try:
        return anyio.run(run)
    finally:
        app.db.close()


def spawn(target: Callable[..., None], args_for: Callable[[int], tuple], n: int) -> list[Any]:
    """`n` spawned processes, each putting one result on the queue passed as its last argument."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    barrier = ctx.Barrier(n)
    procs = [ctx.Process(target=target, args=(*args_for(i), barrier, out)) for i in range(n)]
    for p in procs:
        p.start()
    results = [out.get(timeout=900) for _ in procs]
    for p in procs:
        p.join(60)
    errors = [r for r in results if isinstance(r, str)]
    if errors:
        raise RuntimeError(errors[0])
    return results


# -- 1. send / check --------------------------------------------------------------------------
def _messenger(overrides: dict[str, Any], who: str, count: int, barrier, out) -> None:
    async def body(client) -> dict[str, Any]:
        import anyio

        await client.call_tool("check_messages", {"recipient": who})  # warm up
        await anyio.to_thread.run_sync(barrier.wait)
        sends, checks = [], []
        start = time.perf_counter()
        for i in range(count):
            t = time.perf_counter()
            r = await client.call_tool("send_message", {"from": who, "channel": who, "content": f"{who} {i}"})
            sends.append(time.perf_counter() - t)
            assert not r.is_error, r.content
        sent_end = time.perf_counter()
        await anyio.to_thread.run_sync(barrier.wait)
        check_start = time.perf_counter()
        for _ in range(count):
            t = time.perf_counter()
            r = await client.call_tool("check_messages", {"recipient": who, "limit": 20})
            checks.append(time.perf_counter() - t)
            assert not r.is_error, r.content
        return {"send": sends, "check": checks, "send_span": (start, sent_end),
                "check_span": (check_start, time.perf_counter())}

    try:
        out.put(in_process(overrides, body))
    except Exception as exc:  # noqa: BLE001 - reported as the section's error
        out.put(f"{type(exc).__name__}: {exc}")


def send_check(backend: Backend, processes: int, per_process: int) -> dict[str, str]:
    with backend.database() as where:
        results = spawn(_messenger, lambda i: (where, f"agent{i}", per_process), processes)
        stored = _stored_messages(where)
    total = processes * per_process

    def rate(key: str) -> float:
        spans = [r[key] for r in results]
        return total / (max(e for _, e in spans) - min(s for s, _ in spans))

    sends = [x for r in results for x in r["send"]]
    checks = [x for r in results for x in r["check"]]
    lost = total - stored
    return {"send/s": f"{rate('send_span'):.0f}", "send p50": f"{p50_ms(sends):.2f} ms",
            "check/s": f"{rate('check_span'):.0f}", "check p50": f"{p50_ms(checks):.2f} ms",
            "lost": str(lost)}


def _stored_messages(where: dict[str, Any]) -> int:
    from vantage_peers.db import open_database

    db = open_database(settings(where))
    try:
        return int(db.read(lambda c: c.scalar("SELECT count(*) FROM messages")))
    finally:
        db.close()


# -- 2. recall ---------------------------------------------------------------------------------
def fill_memories(where: dict[str, Any], n: int) -> None:
    from vantage_peers.db import open_database
    from vantage_peers.domains.memory import store

    rng = random.Random(25)
    db = open_database(settings(where))
    try:
        for start in range(0, n, 2000):
            def batch(c, start=start) -> None:
                for i in range(start, min(n, start + 2000)):
                    text = " ".join(rng.choices(VOCABULARY, WEIGHTS, k=12))
                    store.store_memory(c, namespace=f"team/t{i % 10}", type="fact", content=f"{text} #{i}",
                                       created_by="bench")
            db.write(batch)
    finally:
        db.close()


def recall(backend: Backend, memories: int, queries: int = 60) -> dict[str, str]:
    rng = random.Random(7)
    asks = [" ".join(rng.sample(VOCABULARY[20:400], 2)) for _ in range(queries)]
    with backend.database() as where:
        t = time.perf_counter()
        fill_memories(where, memories)
        filled = time.perf_counter() - t

        async def body(client) -> tuple[list[float], list[float]]:
            times, scoped = [], []
            for i, q in enumerate(asks):
                t0 = time.perf_counter()
                r = await client.call_tool("recall", {"query": q, "limit": 10})
                times.append(time.perf_counter() - t0)
                assert not r.is_error, r.content[0].text
                t0 = time.perf_counter()
                r = await client.call_tool("recall", {"query": q, "namespace": f"team/t{i % 10}", "limit": 10})
                scoped.append(time.perf_counter() - t0)
                assert not r.is_error, r.content[0].text
            return times, scoped

        times, scoped = in_process(where, body)
    return {"recall p50": f"{p50_ms(times):.2f} ms", "namespaced p50": f"{p50_ms(scoped):.2f} ms",
            "fill": f"{memories / filled:.0f} memories/s"}


# -- 3. checkout race --------------------------------------------------------------------------
def _racer(overrides: dict[str, Any], who: str, task_ids: list[str], barrier, out) -> None:
    async def body(client) -> dict[str, Any]:
        import anyio

        wins, times, errors = [], [], []
        start = time.perf_counter()
        for task_id in task_ids:
            await anyio.to_thread.run_sync(barrier.wait)  # every racer on the same task at once
            t = time.perf_counter()
            r = await client.call_tool("checkout_task", {"taskId": task_id, "callerOrchestrator": who})
            times.append(time.perf_counter() - t)
            if r.is_error:  # losing is {"claimed": false}, not an error: BUSY or worse
                errors.append(r.content[0].text if r.content else "error")
            elif r.structured_content.get("claimed"):
                wins.append(task_id)
        return {"wins": wins, "times": times, "errors": errors, "span": (start, time.perf_counter())}

    try:
        out.put(in_process(overrides, body))
    except Exception as exc:  # noqa: BLE001
        out.put(f"{type(exc).__name__}: {exc}")


def checkout_race(backend: Backend, racers: int, rounds: int) -> dict[str, str]:
    with backend.database() as where:
        async def make(client) -> list[str]:
            ids = []
            for i in range(rounds):
                r = await client.call_tool("create_task", {"title": f"race {i}", "assignedTo": "pool",
                                                           "priority": "medium", "createdBy": "bench"})
                assert not r.is_error, r.content[0].text
                data = r.structured_content
                ids.append(data.get("taskId") or data.get("result") or data.get("id"))
            return ids

        ids = in_process(where, make)
        results = spawn(_racer, lambda i: (where, f"racer{i}", ids), racers)
    wins = Counter(task for r in results for task in r["wins"])
    exactly_one = sum(1 for task in ids if wins[task] == 1)
    doubles = sum(n - 1 for n in wins.values() if n > 1)
    times = [x for r in results for x in r["times"]]
    errors = [e for r in results for e in r["errors"]]
    wall = max(r["span"][1] for r in results) - min(r["span"][0] for r in results)
    return {"tasks with exactly one winner": f"{exactly_one}/{len(ids)}", "double claims": str(doubles),
            "errors": str(len(errors)) + (f" ({errors[0][:80]})" if errors else ""),
            "checkout p50": f"{p50_ms(times):.2f} ms", "races/s": f"{len(ids) / wall:.0f}"}


# -- 4. serve processes ------------------------------------------------------------------------
def _start_serve(where: dict[str, Any], workers: int, pool: int) -> Serve:
    # The database of `where` only: a VP_DATABASE_URL of the shell must not send the file's run elsewhere.
    return Serve(where["db_path"], env={"VP_EMBEDDINGS": "none", "VP_PG_POOL_SIZE": str(pool),
                                        "VP_DATABASE_URL": where.get("database_url")},
                 args=["--workers", str(workers)])


def serve_load(backend: Backend, servers: int, workers: int, seconds: float) -> dict[str, str]:
    with backend.database() as where:
        procs: list[Serve] = []
        try:
            for _ in range(servers):
                procs.append(_start_serve(where, workers, pool=4))
            urls = [p.url for p in procs]
            ctx = mp.get_context("spawn")
            out = ctx.Queue()
            start_at = time.time() + 3
            # The same load whatever the servers: 2 load processes x 4 clients, spread over the servers.
            loaders = [ctx.Process(target=http_load.run, args=(urls, 4 * i, 4, seconds, start_at, out, "inbox"))
                       for i in range(2)]
            for p in loaders:
                p.start()
            results = [out.get(timeout=600) for _ in loaders]
            for p in loaders:
                p.join()
        finally:
            for proc in procs:
                proc.terminate()  # all at once, then each waited for
            for proc in procs:
                proc.stop()
        stored = _stored_messages(where)
    ok = sum(r["ok"] for r in results)
    sent = sum(r["sent"] for r in results)
    errors = sum(r["errors"] for r in results)
    times = [x for r in results for x in r["times"]]
    return {"calls/s": f"{ok / seconds:.0f}", "p50": f"{p50_ms(times):.2f} ms", "errors": str(errors),
            "sent/stored": f"{sent}/{stored}" + ("" if sent == stored else " MISMATCH")}


# -- 5. migrate-db ----------------------------------------------------------------------------
def migrate_speed(sqlite: Backend, postgres: Backend, memories: int) -> dict[str, str]:
    """Copy a file of `memories` memories (plus their messages-free rest) to PostgreSQL and back, verified."""
    import io

    from vantage_peers.db import transfer, transfer_check

    def one_way(src: str, dst: str) -> tuple[float, float, int]:
        source, target = transfer.open_side(src, role="source"), transfer.open_side(dst, role="target")
        try:
            transfer.prepare(source, target, err=io.StringIO())
            t = time.perf_counter()
            result = transfer.copy(source, target, err=io.StringIO())
            copied = time.perf_counter() - t
            t = time.perf_counter()
            checks = transfer_check.verify(source, target)
            verified = time.perf_counter() - t
            assert all(c.ok for c in checks), [c.name for c in checks if not c.ok]
            return copied, verified, sum(result.copied.values())
        finally:
            source.close()
            target.close()

    with sqlite.database() as file_side, postgres.database() as pg_side:
        fill_memories(file_side, memories)
        back = sqlite.tmp / "back.db"
        there = one_way(str(file_side["db_path"]), pg_side["database_url"])
        home = one_way(pg_side["database_url"], str(back))
    return {"file -> PostgreSQL": f"{there[2] / there[0]:.0f} rows/s", "verify": f"{there[1]:.1f} s",
            "PostgreSQL -> file": f"{home[2] / home[0]:.0f} rows/s", "verify back": f"{home[1]:.1f} s",
            "rows": str(there[2])}


# -- the table ---------------------------------------------------------------------------------
def attempt(label: str, fn: Callable[[], dict[str, str]], rows: list[tuple[str, dict[str, str]]]) -> None:
    print(f"... {label}", file=sys.stderr, flush=True)
    t = time.perf_counter()
    try:
        rows.append((label, fn()))
    except Exception as exc:  # noqa: BLE001 - a section that cannot run on a backend yet
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # anyio task groups: the real error
            exc = exc.exceptions[0]
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        rows.append((label, {"skipped": f"{type(exc).__name__}: {first[:200]}"}))
    print(f"    {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)


def print_table(rows: list[tuple[str, dict[str, str]]]) -> None:
    width = max(len(label) for label, _ in rows)
    for label, values in rows:
        print(f"{label:<{width}}  " + "  ".join(f"{k} {v}" for k, v in values.items()))


def run_backend(backend: Backend, args: argparse.Namespace, rows: list[tuple[str, dict[str, str]]]) -> None:
    name = backend.name
    for n in () if args.serve_only else (1, 4):
        attempt(f"{name}: send+check, {n} process(es)", lambda n=n: send_check(backend, n, args.per_process), rows)
    for count in () if args.serve_only else (args.memories, *((100_000,) if args.big else ())):
        attempt(f"{name}: recall, {count} memories", lambda c=count: recall(backend, c), rows)
    if not args.serve_only:
        attempt(f"{name}: checkout race, {args.racers} processes x {args.rounds} tasks",
                lambda: checkout_race(backend, args.racers, args.rounds), rows)
    if not args.skip_serve:
        if name == "sqlite":
            attempt("sqlite: 1 serve --workers 4, 8 HTTP clients", lambda: serve_load(backend, 1, 4, args.seconds), rows)
        else:
            attempt("postgres: 4 serve processes, 8 HTTP clients", lambda: serve_load(backend, 4, 1, args.seconds), rows)
    shutil.rmtree(backend.tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-process", type=int, default=300, help="send_message / check_messages calls per process")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--big", action="store_true", help="recall at 100,000 memories too")
    parser.add_argument("--racers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--database-url", help="a PostgreSQL server (admin URL) instead of the embedded one")
    parser.add_argument("--only", choices=("sqlite", "postgres"))
    parser.add_argument("--skip-serve", action="store_true")
    parser.add_argument("--skip-migrate", action="store_true", help="no migrate-db timing")
    parser.add_argument("--serve-only", action="store_true", help="only the serve comparison")
    args = parser.parse_args()
    names = [args.only] if args.only else ["sqlite", "postgres"]
    rows: list[tuple[str, dict[str, str]]] = []
    admin = (args.database_url or embedded_admin_url()) if "postgres" in names else None
    for name in names:
        run_backend(Backend(name, admin if name == "postgres" else None), args, rows)
    if len(names) == 2 and not (args.skip_migrate or args.serve_only):
        count = 100_000 if args.big else args.memories
        attempt(f"migrate-db, {count} memories", lambda: migrate_speed(
            Backend("sqlite"), Backend("postgres", admin), count), rows)
    print(f"\nbackends.py on {os.cpu_count()} cores (python {sys.version.split()[0]})")
    print_table(rows)


if __name__ == "__main__":
    main()
