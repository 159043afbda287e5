"""Worker for the cross-process checkout race (imported by spawned processes; keep imports light)."""

from __future__ import annotations

import threading

from vantage_peers.core.ids import now_ms
from vantage_peers.db import open_target
from vantage_peers.domains.tasks import lifecycle


def race(path: str, proc: int, threads: int, task_ids: list[str], barrier, results) -> None:
    """For each task in turn: every thread of every process tries to claim it at the same moment."""
    db = open_target(path)
    local = threading.Barrier(threads)
    out: list[tuple[str, str, bool]] = []
    lock = threading.Lock()

    def racer(n: int) -> None:
        me = f"p{proc}-t{n}"
        for task_id in task_ids:
            if n == 0:
                barrier.wait()  # all processes line up
            local.wait()  # then all threads of this process
            res = db.write(lambda c, t=task_id: lifecycle.checkout_task(c, task_id=t, caller=me, instance=None,
                                                                        now=now_ms()))
            with lock:
                out.append((task_id, me, res["claimed"]))

    pool = [threading.Thread(target=racer, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    db.close()
    results.put(out)
