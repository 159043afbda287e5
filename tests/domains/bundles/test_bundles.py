"""OKF bundles through the MCP tools: round trips, idempotent merge, replace, dry-run writes nothing."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile

import pytest
from support.bundle_helpers import abort_inserts_of_task, db_fingerprint

pytestmark = pytest.mark.backends

NS = "project/foo"


def seed(tools, app, ns: str = NS, n: int = 5) -> dict:
    """n memories (a chain of relations, one superseded, one soft-deleted, one episode), briefings, tasks."""
    ids = []
    for i in range(n):
        rel = [{"targetId": ids[-1], "type": "extends"}] if ids else None
        ids.append(tools.call("store_memory", namespace=ns, type="fact", content=f"fact {i} about foo",
                              createdBy="pi", relations=rel)["memoryId"])
    new = tools.call("store_memory", namespace=ns, type="decision", content="supersedes fact 0", createdBy="pi",
                     relations=[{"targetId": ids[0], "type": "updates"}])["memoryId"]
    tools.call("soft_delete_memory", memoryId=ids[1])
    episode = tools.call("store_episode", namespace=ns, context="ctx", goal="goal", action="act", outcome="out",
                         insight="insight", severity="major", createdBy="pi")
    other = tools.call("store_memory", namespace="elsewhere", type="note", content="not in foo", createdBy="pi")
    notes = [tools.call("create_briefing_note", title="linked", topic="standup", participants=["pi"],
                        content="links foo", createdBy="pi", linkedMemoryIds=[ids[2], other["memoryId"]]),
             tools.call("create_briefing_note", title="by topic", topic=NS, participants=["pi", "sigma"],
                        content="topic foo", createdBy="pi"),
             tools.call("create_briefing_note", title="unrelated", topic="other", participants=["pi"],
                        content="no", createdBy="pi")]
    t1 = tools.call("create_task", title="short project", assignedTo="sigma", priority="high", createdBy="pi",
                    project="foo")
    t2 = tools.call("create_task", title="full project", assignedTo="sigma", priority="low", createdBy="pi",
                    project=NS, dependsOn=[t1], tags=["x"])
    tools.call("start_task", taskId=t1, callerOrchestrator="sigma")
    tools.call("create_task", title="unrelated", assignedTo="sigma", priority="low", createdBy="pi", project="bar")
    return {"memories": ids + [new], "episode": episode, "notes": notes, "tasks": [t1, t2]}


def export(tools, ns: str = NS) -> dict:
    return tools.call("export_okf_bundle", namespace=ns)


def shape(app, ns: str) -> dict:
    """The namespace's rows with ids replaced by their position, so two namespaces compare equal."""
    from vantage_peers.domains.bundles import export as ex

    def run(c):
        mems = [dict(r) for r in ex.memory_rows(c, ns, now=0, live_only=False)]
        index = {m["id"]: i for i, m in enumerate(mems)}
        out_m = []
        for m in mems:
            rel = m["relations"]
            out_m.append((m["type"], m["content"], m["createdBy"], m["isLatest"], m["deletedAt"] is not None,
                          index.get(m["supersededBy"], m["supersededBy"]), m["episode"], m["createdAt"],
                          rel and sorted((str(index.get(r["targetId"], r["targetId"])), r["type"])
                                         for r in json.loads(rel))))
        notes = sorted((b["title"], b["content"], b["participants"], b["createdAt"],
                        [str(index.get(x, x)) for x in json.loads(b["linkedMemoryIds"] or "[]")])
                       for b in ex.briefing_rows(c, ns))
        tasks = ex.task_rows(c, ns)
        tindex = {t["id"]: t["title"] for t in tasks}
        out_t = sorted((t["title"], t["status"], t["priority"], t["tags"], t["createdAt"],
                        [tindex.get(d, d) for d in json.loads(t["dependsOn"] or "[]")],
                        c.scalar("SELECT count(*) FROM taskSegments WHERE taskId = ?", (t["id"],))) for t in tasks)
        return {"memories": out_m, "briefings": notes, "tasks": out_t}

    return app.db.read(run)


def test_export_holds_exactly_what_the_namespace_owns(tools, app):
    seed(tools, app)
    result = export(tools)
    assert result["manifest"]["counts"] == {"memories": 7, "briefings": 2, "tasks": 2}
    data = base64.b64decode(result["bundle"])
    assert len(data) == result["bytes"] and result["filename"] == "project-foo.okf.tar.gz"
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        assert tar.getnames() == ["manifest.json", "memories.jsonl", "briefings.jsonl", "tasks.jsonl"]
    report = tools.call("validate_okf_bundle", bundle=result["bundle"])
    assert report["valid"] is True and report["problems"] == []
    assert report["counts"] == {"memories": 7, "briefings": 2, "tasks": 2}
    # the one linked memory of another namespace is a warning, not a problem
    assert [w["code"] for w in report["warnings"]] == ["EXTERNAL_REFERENCE"]


def test_round_trip_into_a_fresh_namespace_keeps_rows_relations_counts(tools, app):
    seed(tools, app)
    bundle = export(tools)["bundle"]
    result = tools.call("import_okf_bundle", bundle=bundle, namespace="project/copy", mode="merge")
    assert result["added"] == {"memories": 7, "briefings": 2, "tasks": 2}
    assert result["embeddingsQueued"] == 7
    assert shape(app, "project/copy") == shape(app, NS)
    again = export(tools, "project/copy")
    assert again["manifest"]["counts"] == {"memories": 7, "briefings": 2, "tasks": 2}
    # nothing of the copy shares an id with the original (remapped: they live in the same file)
    orig = {r["id"] for r in app.db.read(lambda c: c.query("SELECT id FROM memories WHERE namespace = ?", (NS,)))}
    copy = {r["id"] for r in app.db.read(lambda c: c.query("SELECT id FROM memories WHERE namespace = 'project/copy'"))}
    assert len(copy) == 7 and not orig & copy
    # the tasks now belong to the copy's project key, and list_tasks finds them
    assert tools.pages("list_tasks", project="copy")[0][0]["title"] in {"short project", "full project"}
    assert len(tools.pages("list_tasks", project="copy")[0]) == 1
    assert len(tools.pages("list_tasks", project="project/copy")[0]) == 1
    # embedding jobs were queued for the imported memories
    copy_jobs = app.db.read(lambda c: c.scalar(
        "SELECT count(*) FROM embeddingJobs j JOIN memories m ON m.seq = j.memorySeq WHERE m.namespace = ?",
        ("project/copy",)))
    assert copy_jobs == 7


def test_round_trip_into_another_database_keeps_ids(tools, app, tmp_path):
    from conftest import make_settings, open_tools

    from vantage_peers.server import create_app

    ids = seed(tools, app)
    bundle = export(tools)["bundle"]
    other = create_app(make_settings(tmp_path / "other.db"))
    try:
        with open_tools(other) as t2:
            assert t2.call("import_okf_bundle", bundle=bundle, namespace=NS, mode="merge")["remapped"] == 0
            assert t2.call("get_memory", memoryId=ids["memories"][3])["content"] == "fact 3 about foo"
            mine, theirs = shape(other, NS), shape(app, NS)
            assert mine["memories"] == theirs["memories"] and mine["tasks"] == theirs["tasks"]
            # the link to the `elsewhere` memory (absent from this file) was dropped, the internal one kept
            assert [b[:4] for b in mine["briefings"]] == [b[:4] for b in theirs["briefings"]]
            assert [b[4] for b in mine["briefings"]] == [[], ["2"]]
            again = t2.call("import_okf_bundle", bundle=bundle, namespace=NS, mode="merge")
            assert sum(again["added"].values()) == 0 and again["skipped"]["memories"] == 7
    finally:
        other.db.close()


def test_merge_twice_equals_once(tools, app):
    seed(tools, app)
    bundle = export(tools)["bundle"]
    zero = "UPDATE okfImports SET importedAt = 0"  # the one column that records when, not what
    tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="merge")
    app.db.write(lambda c: c.execute(zero))
    once = app.db.read(db_fingerprint)
    second = tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="merge")
    assert second["added"] == {"memories": 0, "briefings": 0, "tasks": 0}
    assert second["skipped"] == {"memories": 7, "briefings": 2, "tasks": 2}
    app.db.write(lambda c: c.execute(zero))
    assert app.db.read(db_fingerprint) == once
    # merge into the source namespace itself adds nothing either
    same = tools.call("import_okf_bundle", bundle=bundle, namespace=NS, mode="merge")
    assert sum(same["added"].values()) == 0
    app.db.write(lambda c: c.execute(zero))
    # a different target namespace does get its own copy
    tools.call("import_okf_bundle", bundle=bundle, namespace="team2", mode="merge")
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM memories WHERE namespace = 'team2'")) == 7


def test_merge_adds_only_what_is_missing(tools, app):
    seed(tools, app)
    bundle = export(tools)["bundle"]
    tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="merge")
    extra = tools.call("store_memory", namespace=NS, type="note", content="one more", createdBy="pi")["memoryId"]
    bigger = export(tools)["bundle"]
    result = tools.call("import_okf_bundle", bundle=bigger, namespace="team", mode="merge")
    assert result["added"] == {"memories": 1, "briefings": 0, "tasks": 0}
    contents = {r["content"] for r in app.db.read(lambda c: c.query(
        "SELECT content FROM memories WHERE namespace = 'team'"))}
    assert "one more" in contents and len(contents) == 8
    assert extra  # the source row is untouched


def test_replace_swaps_the_namespace_contents(tools, app):
    seed(tools, app)
    bundle = export(tools)["bundle"]
    tools.call("store_memory", namespace="team", type="note", content="old team memory", createdBy="pi")
    tools.call("create_task", title="old team task", assignedTo="sigma", priority="low", createdBy="pi",
               project="team")
    tools.call("create_briefing_note", title="old note", topic="team", participants=["pi"], content="x",
               createdBy="pi")
    result = tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="replace")
    assert result["deleted"] == {"memories": 1, "briefings": 1, "tasks": 1}
    assert result["added"] == {"memories": 7, "briefings": 2, "tasks": 2}
    assert shape(app, "team") == shape(app, NS)
    contents = {r["content"] for r in app.db.read(lambda c: c.query(
        "SELECT content FROM memories WHERE namespace = 'team'"))}
    assert "old team memory" not in contents
    # replacing again with the same bundle yields the same shape (and merge after it adds nothing)
    tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="replace")
    assert shape(app, "team") == shape(app, NS)
    assert sum(tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="merge")["added"].values()) == 0
    # the source namespace and unrelated rows are untouched
    assert len(shape(app, NS)["memories"]) == 7
    assert app.db.read(lambda c: c.scalar("SELECT count(*) FROM tasks WHERE project = 'bar'")) == 1


def test_replace_fails_atomically(tools, app):
    seed(tools, app)
    bundle = export(tools)["bundle"]
    tools.call("store_memory", namespace="team", type="note", content="keep me", createdBy="pi")
    # a trigger that aborts the second task insert makes the transaction fail midway
    app.db.write(lambda c: abort_inserts_of_task(c, "full project"))
    before = app.db.read(db_fingerprint)
    tools.error("import_okf_bundle", bundle=bundle, namespace="team", mode="replace")
    assert app.db.read(db_fingerprint) == before


def test_dry_run_writes_nothing_and_predicts_both_modes(tools, app):
    seed(tools, app)
    bundle = export(tools)["bundle"]
    tools.call("store_memory", namespace="team", type="note", content="existing", createdBy="pi")
    before = app.db.read(db_fingerprint)
    # SQLite counts commits by other connections in data_version: a dry run commits nothing.
    version = app.db.read(lambda c: c.scalar("PRAGMA data_version")) if app.db.backend == "sqlite" else None
    report = tools.call("import_okf_bundle", bundle=bundle, namespace="team")  # default mode: dry-run
    assert report["dryRun"] is True and report["mode"] == "dry-run"
    assert report["merge"]["added"] == {"memories": 7, "briefings": 2, "tasks": 2}
    assert report["replace"]["deleted"] == {"memories": 1, "briefings": 0, "tasks": 0}
    assert app.db.read(db_fingerprint) == before
    if version is not None:
        assert app.db.read(lambda c: c.scalar("PRAGMA data_version")) == version
    real = tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="merge")
    assert real["added"] == report["merge"]["added"]
    report2 = tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="dry-run")
    assert report2["merge"]["added"] == {"memories": 0, "briefings": 0, "tasks": 0}


def test_external_references_are_kept_when_present_and_dropped_otherwise(tools, app, tmp_path):
    from conftest import make_settings, open_tools

    from vantage_peers.server import create_app

    seed(tools, app)
    bundle = export(tools)["bundle"]
    # same file: the `elsewhere` memory exists, the link is kept
    tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="merge")
    linked = app.db.read(lambda c: c.scalar(
        "SELECT linkedMemoryIds FROM briefingNotes WHERE title = 'linked' AND id NOT IN "
        "(SELECT id FROM briefingNotes WHERE title = 'linked' ORDER BY createdAt LIMIT 1)"))
    assert linked is not None and len(json.loads(linked)) == 2
    other = create_app(make_settings(tmp_path / "other.db"))
    try:
        with open_tools(other) as t2:
            result = t2.call("import_okf_bundle", bundle=bundle, namespace=NS, mode="merge")
            assert any("does not exist here" in w for w in result["warnings"])
            links = other.db.read(lambda c: c.scalar("SELECT linkedMemoryIds FROM briefingNotes WHERE title='linked'"))
            assert len(json.loads(links)) == 1
    finally:
        other.db.close()


def test_bad_arguments(tools):
    assert "base64" in tools.error("validate_okf_bundle", bundle="!!not base64!!")
    assert "bundle must be" in tools.error("import_okf_bundle", bundle="", namespace="x")
    assert "namespace" in tools.error("export_okf_bundle", namespace="  ")
    assert "INVALID_ARGUMENT" in tools.error("import_okf_bundle", bundle="AAAA", namespace="x", mode="upsert")
    assert tools.listed["import_okf_bundle"].annotations.destructive_hint is True
    assert tools.listed["validate_okf_bundle"].annotations.read_only_hint is True
    assert tools.listed["export_okf_bundle"].annotations.read_only_hint is True


def test_replace_blocked_by_a_foreign_reference_rolls_back_cleanly(tools, app):
    seed(tools, app)
    bundle = export(tools)["bundle"]
    tools.call("import_okf_bundle", bundle=bundle, namespace="team", mode="merge")
    task = app.db.read(lambda c: c.scalar("SELECT id FROM tasks WHERE project = 'team' LIMIT 1"))
    app.db.write(lambda c: c.raw.execute(
        "CREATE TABLE pins (taskId TEXT REFERENCES tasks (id)); INSERT INTO pins VALUES ('" + task + "')"))
    before = app.db.read(db_fingerprint)
    err = tools.error("import_okf_bundle", bundle=bundle, namespace="team", mode="replace")
    assert "CONFLICT" in err and "rolled back" in err
    assert app.db.read(db_fingerprint) == before
