"""Helpers for the fix-pattern tests: a pattern factory and the cross-process race worker."""

from __future__ import annotations

from typing import Any

from conftest import Tools

PATTERN = {
    "symptom": "Credits not deducted after video generation",
    "rootCause": "Race condition in credit validation mutation",
    "tags": ["credit-system", "race-condition"],
    "stack": ["convex"],
    "sourceProject": "myreeldream",
    "createdBy": "dave",
    "severity": "critical",
}


def create(tools: Tools, **over: Any) -> str:
    return tools.call("create_fix_pattern", **{**PATTERN, **over})["patternId"]


def attempt(tools: Tools, pattern_id: str, **over: Any) -> dict[str, Any]:
    args = {"patternId": pattern_id, "description": "Added optimistic locking to credit mutation", "worked": True,
            "why": "Prevents concurrent mutations from reading a stale balance", "createdBy": "dave", **over}
    return tools.call("add_fix_attempt", **args)


# -- run in child processes (module level so `spawn` can import it) -----------------------------------
def child_race(path: str, writer: str, pattern_ids: list[str], barrier, results, url: str | None = None) -> None:
    """Open the file (or the PostgreSQL database at `url`) independently, wait for the other writer, then
    add a worked attempt to each pattern."""
    from vantage_peers.db import Database
    from vantage_peers.domains.fix_patterns import store

    if url:
        from vantage_peers.db.postgres import PgDatabase

        db = PgDatabase(url, pool_size=2)
    else:
        db = Database(path)
    won = []
    barrier.wait(timeout=60)
    for pattern_id in pattern_ids:
        out = db.write(lambda c, p=pattern_id: store.add_attempt(
            c, pattern_id=p, description=f"fix by {writer}", worked=True, why="race", created_by=writer))
        if out["autoValidated"]:
            won.append((pattern_id, out["attemptId"]))
    db.close()
    results.put((writer, won))


# The fake embedder maps synonyms to one concept: "database" ~ "datastore", "release" ~ "rollout".
TARGET = {"symptom": "Datastore rows vanish after every rollout",
          "rootCause": "Migrations run twice when two pods start together"}
OTHERS = [("Login button unresponsive on Safari", "Event listener attached before hydration"),
          ("Images blurry on retina screens", "Missing srcset for 2x assets"),
          ("Invoice totals rounded wrongly", "Float arithmetic on money amounts")]
QUERY = "database release"  # shares no keyword with any pattern


def seed(tools, project="myreeldream"):
    target = create(tools, sourceProject=project, tags=[], stack=[], **TARGET)
    for symptom, cause in OTHERS:
        create(tools, symptom=symptom, rootCause=cause, tags=[], stack=[], sourceProject=project)
    return target
