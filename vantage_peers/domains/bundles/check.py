"""Checks across records of a parsed bundle: duplicate ids and where references point.

Duplicate ids are errors (import could not know which record is meant). A reference to an id that
is not in the bundle (a relation to a memory of another namespace, a task's mission) is a warning:
import keeps it when the target exists in the receiving database and drops it otherwise.
"""

from __future__ import annotations

from collections import Counter

from .format import Bundle

MEMBER_OF = {"memory": "memories.jsonl", "briefing": "briefings.jsonl", "task": "tasks.jsonl"}


def check_records(bundle: Bundle) -> None:
    for kind, records in bundle.records.items():
        dupes = [i for i, n in Counter(r.id for r in records).items() if n > 1]
        for dup in dupes[:20]:
            bundle.fail(f"{MEMBER_OF[kind]}:id={dup}", "DUPLICATE_ID", f"{kind} id {dup} appears more than once")
    segment_ids = Counter(s.id for t in bundle.records["task"] for s in t.segments or [])
    for dup in [i for i, n in segment_ids.items() if n > 1][:20]:
        bundle.fail(f"tasks.jsonl:segments.id={dup}", "DUPLICATE_ID", f"segment id {dup} appears more than once")

    memories = {r.id for r in bundle.records["memory"]}
    tasks = {r.id for r in bundle.records["task"]}
    for r in bundle.records["memory"]:
        for i, rel in enumerate(r.relations or []):
            if rel.targetId not in memories:
                bundle.warn(f"memories.jsonl:id={r.id}.relations.{i}.targetId", "EXTERNAL_REFERENCE",
                            f"relation target {rel.targetId} is not in the bundle")
            if rel.targetId == r.id:
                bundle.fail(f"memories.jsonl:id={r.id}.relations.{i}.targetId", "INVALID_RECORD",
                            "a memory cannot relate to itself")
        if r.supersededBy is not None and r.supersededBy not in memories:
            bundle.warn(f"memories.jsonl:id={r.id}.supersededBy", "EXTERNAL_REFERENCE",
                        f"superseding memory {r.supersededBy} is not in the bundle")
    for r in bundle.records["briefing"]:
        for i, mid in enumerate(r.linkedMemoryIds or []):
            if mid not in memories:
                bundle.warn(f"briefings.jsonl:id={r.id}.linkedMemoryIds.{i}", "EXTERNAL_REFERENCE",
                            f"linked memory {mid} is not in the bundle")
    for r in bundle.records["task"]:
        for i, dep in enumerate(r.dependsOn or []):
            if dep not in tasks:
                bundle.warn(f"tasks.jsonl:id={r.id}.dependsOn.{i}", "EXTERNAL_REFERENCE",
                            f"dependency {dep} is not in the bundle")
        if r.missionId is not None:
            bundle.warn(f"tasks.jsonl:id={r.id}.missionId", "EXTERNAL_REFERENCE",
                        f"mission {r.missionId} is not part of bundles; kept only if it exists where imported")
