"""Server time of every dashboard page at team scale: 10k tasks, 100k messages, 100k memories.

The file is filled through the domain stores (so triggers, FTS rows and receipts are real), then
each page is requested through Starlette's in-process test client: the time measured is the
server's (routing, queries, template), with no network in between. Budget: 100 ms per page.
Two figures per page: wall time, and the CPU time this process spent on the request
(`time.process_time`), which is what the page costs when the machine is not shared — on a
2-core machine shared with other work, wall time mostly measures the wait for a core.

Usage: uv run python benchmarks/dashboard.py [--tasks 10000] [--messages 100000] [--memories 100000]
       [--runs 15] [--db /tmp/dash-bench.db  (reused when it exists)]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

BUDGET_MS = 100.0
WORDS = ["deploy", "rollback", "parser", "cache", "index", "schema", "token", "queue", "worker", "lease", "retry", "budget", "metric", "alert", "review", "release", "branch", "commit", "test", "flaky", "timeout", "socket", "proxy", "config", "secret", "rotate", "backup", "restore", "migrate", "vector", "search", "memory", "mission", "pilot", "agent", "message", "channel", "receipt", "task", "board", "claim"]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def corpus():
    """benchmarks/search.py's Zipf-like corpus (4,000 words): memory text with common and rare words."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("vp_bench_search", Path(__file__).with_name("search.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.Corpus()


def fill(path: Path, *, n_tasks: int, n_messages: int, n_memories: int) -> None:
    from vantage_peers.db import Database, migrate
    from vantage_peers.domains.memory import store as memories
    from vantage_peers.domains.messaging import store as messaging
    from vantage_peers.domains.missions import store as missions
    from vantage_peers.domains.profiles import store as profiles
    from vantage_peers.domains.recurring import store as recurring
    from vantage_peers.domains.tasks import store as tasks

    rng = random.Random(7)
    db = Database(path)
    migrate(db)
    people = [f"agent-{i:02d}" for i in range(20)]
    now = int(time.time() * 1000)
    t0 = time.perf_counter()

    def base(c) -> list[str]:
        for p in people:
            profiles.ensure_profile(c, p)
            profiles.set_summary(c, orchestrator_id=p, instance_id="", summary=_text(rng, 6))
        for i in range(30):
            recurring.create(c, payload={"title": f"recurring {i}", "assignedTo": rng.choice(people),
                                         "cronExpression": "0 * * * *", "createdBy": "bench", "priority": "low"})
        return [missions.create_mission(c, fields={
            "name": f"mission {i}", "project": f"p{i % 5}", "status": "execute", "priority": "medium",
            "pilot": rng.choice(people), "agents": people[:3], "createdBy": "bench"}) for i in range(100)]

    mission_ids = db.write(base)
    statuses = ("todo", "todo", "in_progress", "review", "blocked", "done", "done", "done")
    for start in range(0, n_tasks, 2000):
        def run(c, start=start) -> None:
            for i in range(start, min(n_tasks, start + 2000)):
                tasks.create_task(c, payload={
                    "title": f"task {i} {_text(rng, 5)}", "assignedTo": rng.choice(people), "createdBy": "bench",
                    "priority": rng.choice(("urgent", "high", "medium", "low")),
                    "status": "in_progress" if statuses[i % 8] == "in_progress" else "todo",
                    "missionId": rng.choice(mission_ids) if i % 3 == 0 else None,
                    "dueDate": now + rng.randint(-5, 5) * 86_400_000 if i % 4 == 0 else None})
            c.execute("UPDATE tasks SET status = CASE seq % 8 WHEN 3 THEN 'review' WHEN 4 THEN 'blocked' "
                      "WHEN 5 THEN 'done' WHEN 6 THEN 'done' WHEN 7 THEN 'done' ELSE status END, "
                      "blockedBy = CASE seq % 8 WHEN 4 THEN 'waiting' END WHERE status = 'todo'")
        db.write(run)
    channels = people + ["broadcast-ops", "release", "incidents"]
    for start in range(0, n_messages, 5000):
        def run(c, start=start) -> None:
            for _ in range(start, min(n_messages, start + 5000)):
                messaging.send_message(c, sender=rng.choice(people), channel=rng.choice(channels),
                                       content=_text(rng, 20))
            c.execute("UPDATE messageReceipts SET readAt = createdAt WHERE readAt IS NULL AND seq % 10 != 0")
        db.write(run)
    words = corpus()
    for start in range(0, n_memories, 5000):
        def run(c, start=start) -> None:
            for i in range(start, min(n_memories, start + 5000)):
                memories.store_memory(c, namespace=f"project/p{i % 20}", type=("fact", "decision", "observation")[i % 3],
                                      content=words.text(12, 40), created_by=rng.choice(people))
        db.write(run)
    db.write(lambda c: c.execute("ANALYZE"))
    db.close()
    print(f"filled {path} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def measure(path: Path, runs: int) -> list[tuple[str, float, float, float, float]]:
    from starlette.testclient import TestClient

    from vantage_peers.dashboard import build_dashboard
    from vantage_peers.db import open_database
    from vantage_peers.pipeline.settings import Settings

    settings = Settings.from_env({"VP_DB_PATH": str(path), "VP_EMBEDDINGS": "none"}, dotenv=False)
    db = open_database(settings)
    app = build_dashboard(db, settings, login_required=False, loopback=True, local_name="bench")
    out = []
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        task_id = db.read(lambda c: c.scalar("SELECT id FROM tasks ORDER BY seq DESC LIMIT 1"))
        mission_id = db.read(lambda c: c.scalar("SELECT id FROM missions LIMIT 1"))
        message_id = db.read(lambda c: c.scalar("SELECT id FROM messages ORDER BY seq DESC LIMIT 1"))
        first = client.get("/tasks?status=done").text
        cursor = re.search(r'rel="next" href="[^"]*cursor=([^"&]+)', first).group(1)
        act = client.get("/activity").text
        act_cursor = re.search(r'rel="next" href="[^"]*cursor=([^"&]+)', act).group(1)
        pages = ["/team", "/team?state=online", "/messages", "/messages?channel=release",
                 "/messages?to=agent-03&unread=1", "/messages?unread=1", "/messages?from=agent-05",
                 f"/messages/{message_id}", "/tasks", "/tasks?assignee=agent-07", "/tasks?overdue=1",
                 "/tasks?priority=urgent&assignee=agent-02", "/tasks?blocked=1", f"/tasks?mission={mission_id}",
                 f"/tasks?status=done&cursor={cursor}", f"/tasks/{task_id}", "/missions", "/missions?status=open",
                 f"/missions/{mission_id}", "/schedule", "/memory", "/memory?namespace=project/p3",
                 "/claims",
                 "/activity", f"/activity?cursor={act_cursor}", "/activity?kind=message"]
        words = corpus().words  # most frequent first: a common + a mid-frequency word, and a rarer one
        pages += [f"/memory?q={words[3]}+{words[150]}", f"/memory?q={words[40]}&namespace=project/*&type=decision"]
        for url in pages:
            assert client.get(url).status_code == 200, url  # warm the page cache once
            samples, cpu = [], []
            for _ in range(runs):
                t, c = time.perf_counter(), time.process_time()
                r = client.get(url)
                samples.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
                assert r.status_code == 200
            samples.sort()
            cpu.sort()
            out.append((url, statistics.median(samples), samples[int(0.95 * (len(samples) - 1))],
                        statistics.median(cpu), cpu[int(0.95 * (len(cpu) - 1))]))
    db.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--db", type=Path)
    args = parser.parse_args()
    path = args.db or Path(tempfile.mkdtemp()) / "dash-bench.db"
    if not path.exists():
        fill(path, n_tasks=args.tasks, n_messages=args.messages, n_memories=args.memories)
    results = measure(path, args.runs)
    print(f"{'page':<52} {'wall p50':>9} {'wall p95':>9} {'cpu p50':>8} {'cpu p95':>8}   budget {BUDGET_MS:.0f} ms")
    worst_wall = worst_cpu = 0.0
    for url, p50, p95, c50, c95 in results:
        worst_wall, worst_cpu = max(worst_wall, p95), max(worst_cpu, c95)
        flag = "" if c95 <= BUDGET_MS else "  OVER"
        print(f"{url[:52]:<52} {p50:9.1f} {p95:9.1f} {c50:8.1f} {c95:8.1f}{flag}")
    print(f"worst p95: wall {worst_wall:.1f} ms ({worst_wall / BUDGET_MS:.2f} of the budget), "
          f"cpu {worst_cpu:.1f} ms ({worst_cpu / BUDGET_MS:.2f} of the budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
