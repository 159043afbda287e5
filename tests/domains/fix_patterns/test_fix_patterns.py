"""Fix patterns through the MCP tools: create, get with attempts, auto-validation, validate, links,
list paging and lite projection, every refusal, hostile input."""

from __future__ import annotations

import pytest
from support.fix_patterns_helpers import PATTERN, attempt, create
from support.records_helpers import HOSTILE_QUERIES, search_hostile

from vantage_peers.domains.fix_patterns import store
from vantage_peers.pipeline.app import effective_hints

pytestmark = pytest.mark.backends

LITE = {"_id", "_creationTime", "symptom", "severity", "sourceProject", "validated"}


def test_create_and_get_round_trip(tools):
    pid = create(tools, files=["convex/credits.ts"], validatedFix=None)
    assert pid.startswith("fxp_")
    doc = tools.call("get_fix_pattern", patternId=pid)
    for key, value in PATTERN.items():
        assert doc[key] == value
    assert doc["_id"] == pid and doc["files"] == ["convex/credits.ts"] and doc["attempts"] == []
    assert doc["validated"] is False and "validatedFix" not in doc and doc["attemptCount"] == 0
    assert "seq" not in doc and "linkedIssueIds" not in doc
    assert tools.call("get_fix_pattern", patternId="fxp_unknown") is None


def test_optional_fields_default(tools):
    pid = tools.call("create_fix_pattern", symptom="s", rootCause="r", sourceProject="p", createdBy="x")["patternId"]
    doc = tools.call("get_fix_pattern", patternId=pid)
    assert doc["tags"] == [] and doc["stack"] == [] and "severity" not in doc and "files" not in doc
    given = create(tools, validatedFix="Use a transaction")
    doc = tools.call("get_fix_pattern", patternId=given)
    assert doc["validatedFix"] == "Use a transaction" and doc["validatedBy"] == "dave" and doc["validated"]


def test_worked_attempt_sets_validated_fix_once(tools):
    pid = create(tools)
    failed = attempt(tools, pid, description="Retry the mutation", worked=False, why="Still races")
    assert failed["autoValidated"] is False and "validatedFix" not in failed
    first = attempt(tools, pid, commit="abc1234")
    assert first["autoValidated"] is True and first["validatedFix"] == "Added optimistic locking to credit mutation"
    second = attempt(tools, pid, description="Serialize with a queue", createdBy="erin")
    assert second["autoValidated"] is False and second["validatedFix"] == first["validatedFix"]
    doc = tools.call("get_fix_pattern", patternId=pid)
    assert doc["validatedFix"] == first["validatedFix"] and doc["validatedAttemptId"] == first["attemptId"]
    assert doc["validatedBy"] == "dave" and doc["attemptCount"] == 3
    assert [a["_id"] for a in doc["attempts"]] == [failed["attemptId"], first["attemptId"], second["attemptId"]]
    assert [a["worked"] for a in doc["attempts"]] == [False, True, True]
    assert doc["attempts"][1]["commit"] == "abc1234" and "commit" not in doc["attempts"][0]
    assert doc["attempts"][2]["createdBy"] == "erin" and doc["attempts"][0]["why"] == "Still races"


def test_validate_fix_replaces_explicitly(tools):
    pid = create(tools)
    attempt(tools, pid)
    out = tools.call("validate_fix", patternId=pid, validatedFix="Optimistic locking with retry on conflict",
                     callerOrchestrator="pi")
    assert out["validatedFix"] == "Optimistic locking with retry on conflict" and out["validatedBy"] == "pi"
    assert "validatedAttemptId" not in out and out["validated"] is True and "attempts" not in out
    # An explicit fix is never overwritten by a later worked attempt.
    assert attempt(tools, pid, description="something else")["autoValidated"] is False
    assert tools.call("get_fix_pattern", patternId=pid)["validatedFix"] == out["validatedFix"]


def test_link_issue_is_idempotent(tools):
    pid = create(tools)
    one = tools.call("link_issue_to_pattern", patternId=pid, issueId="myreeldream-ai/MyShortReel-beta#282")
    assert one == {"patternId": pid, "issueId": "myreeldream-ai/MyShortReel-beta#282", "added": True,
                   "linkedIssueIds": ["myreeldream-ai/MyShortReel-beta#282"]}
    again = tools.call("link_issue_to_pattern", patternId=pid, issueId="myreeldream-ai/MyShortReel-beta#282")
    assert again["added"] is False and again["linkedIssueIds"] == ["myreeldream-ai/MyShortReel-beta#282"]
    tools.call("link_issue_to_pattern", patternId=pid, issueId='o/r#1"; DROP TABLE fixPatterns; --')
    assert tools.call("get_fix_pattern", patternId=pid)["linkedIssueIds"] == [
        "myreeldream-ai/MyShortReel-beta#282", 'o/r#1"; DROP TABLE fixPatterns; --']
    assert tools.listed["link_issue_to_pattern"].annotations.idempotent_hint is True


def test_list_insert_n_get_n_full_cursor_chain_and_lite_keys(tools):
    ids = [create(tools, symptom=f"symptom {i}", sourceProject=f"proj-{i % 3}",
                  severity=("critical", "major", "minor")[i % 3]) for i in range(45)]
    attempt(tools, ids[0])
    items, pages = tools.pages("list_fix_patterns", limit=7)
    assert len(items) == 45 and pages == 7 and [i["_id"] for i in items] == ids[::-1]  # newest first
    lite, _ = tools.pages("list_fix_patterns", limit=200, fields="lite")
    assert len(lite) == 45 and all(set(i) == LITE for i in lite)
    assert [i["validated"] for i in lite].count(True) == 1 and lite[-1]["validated"] is True
    only, pages = tools.pages("list_fix_patterns", project="proj-1", limit=4, detail="full")
    assert len(only) == 15 and pages == 4 and {i["sourceProject"] for i in only} == {"proj-1"}
    assert tools.call("list_fix_patterns", project="nobody")["items"] == []
    first = tools.call("list_fix_patterns")
    assert len(first["items"]) == 20 and first["nextCursor"]  # default limit
    assert len(tools.call("list_fix_patterns", limit=0)["items"]) == 1  # clamped to 1..200


def test_list_on_a_store_file(db):

    for i in range(5):
        db.write(lambda c, i=i: store.create(c, symptom=f"s{i}", root_cause="r", source_project="p",
                                             created_by="x", now=1_000))  # one millisecond for all
    seen, cursor = [], None
    while True:
        page = db.read(lambda c, cur=cursor: store.list_patterns(c, project=None, limit=2, cursor=cur,
                                                                 fields="lite"))
        seen.extend(i["_id"] for i in page["items"])
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 5


def test_unknown_pattern_ids_are_refused(tools):
    for tool, args in [
        ("add_fix_attempt", {"description": "d", "worked": True, "why": "w", "createdBy": "x"}),
        ("validate_fix", {"validatedFix": "v"}),
        ("link_issue_to_pattern", {"issueId": "o/r#1"}),
    ]:
        assert "NOT_FOUND: fix pattern fxp_nope does not exist" in tools.error(tool, patternId="fxp_nope", **args)
    assert tools.call("get_fix_pattern", patternId="'; DROP TABLE fixPatterns; --") is None


CREATE_REFUSALS = [
    ({"severity": "blocker"}, "severity"),
    ({"severity": "Critical"}, "severity"),
    ({"symptom": ""}, "symptom"),
    ({"symptom": "   "}, "symptom"),
    ({"rootCause": "\n"}, "rootCause"),
    ({"sourceProject": ""}, "sourceProject"),
    ({"symptom": 42}, "symptom"),
    ({"tags": "race"}, "tags"),
    ({"tags": [""]}, "tags"),
    ({"stack": [1, 2]}, "stack"),
    ({"files": [None]}, "files"),
    ({"validatedFix": ""}, "validatedFix"),
    ({"symptom": "\ud800"}, "symptom"),
    ({"symptom": "x" * 70_000}, "symptom"),
    ({"rootCause": "🙂" * 300_000}, "rootCause"),
]


def test_create_refusals(tools):
    for over, field in CREATE_REFUSALS:
        assert field in tools.error("create_fix_pattern", **{**PATTERN, **over}), over
    assert tools.call("list_fix_patterns")["items"] == []


def test_create_requires_an_author(tools):
    args = {k: v for k, v in PATTERN.items() if k != "createdBy"}
    assert "createdBy is required" in tools.error("create_fix_pattern", **args)


ATTEMPT_REFUSALS = [
    ({"worked": "true"}, "worked"),
    ({"worked": 1}, "worked"),
    ({"worked": None}, "worked"),
    ({"description": ""}, "description"),
    ({"why": "  "}, "why"),
    ({"commit": ""}, "commit"),
    ({"commit": 1234567}, "commit"),
    ({"patternId": None}, "patternId"),
]


def test_attempt_refusals(tools):
    pid = create(tools)
    for over, field in ATTEMPT_REFUSALS:
        args = {"patternId": pid, "description": "d", "worked": True, "why": "w", "createdBy": "x", **over}
        assert field in tools.error("add_fix_attempt", **args), over
    assert tools.call("get_fix_pattern", patternId=pid)["attemptCount"] == 0


def test_other_refusals(tools):
    pid = create(tools)
    assert "validatedFix" in tools.error("validate_fix", patternId=pid, validatedFix="")
    assert "issueId" in tools.error("link_issue_to_pattern", patternId=pid, issueId=" ")
    assert "issueId" in tools.error("link_issue_to_pattern", patternId=pid, issueId="x" * 501)
    assert "project" in tools.error("list_fix_patterns", project=" ")
    assert "cursor" in tools.error("list_fix_patterns", cursor="not-a-cursor")
    assert "fields" in tools.error("list_fix_patterns", fields="everything")
    assert "query" in tools.error("search_fix_patterns", query="   ")
    assert "query" in tools.error("search_fix_patterns", query="q" * 40_000)
    assert "limit" in tools.error("search_fix_patterns", query="x", limit="ten")
    assert tools.call("get_fix_pattern", patternId=pid)["validated"] is False


def test_big_and_unicode_text_is_kept_exactly(tools):
    big = "r" * 1_000_000
    text = "Ünïcödé 日本語 🙂 \"quotes\" AND OR NOT col:x* ((( NEAR( \r\n"
    pid = create(tools, rootCause=big, symptom=text, sourceProject="🙂-project")
    doc = tools.call("get_fix_pattern", patternId=pid)
    assert doc["rootCause"] == big and doc["symptom"] == text and doc["sourceProject"] == "🙂-project"
    assert [i["_id"] for i in tools.call("list_fix_patterns", project="🙂-project")["items"]] == [pid]
    hits = tools.call("search_fix_patterns", query="日本語")["items"]
    assert [h["_id"] for h in hits] == [pid]


def test_search_hostile_queries_never_crash(tools, backend):
    pid = create(tools, symptom='we"ird ((( NEAR( col:x* 🙂 AND OR NOT', tags=["a+b"])
    for query in HOSTILE_QUERIES:
        if not query.strip():
            assert "INVALID_ARGUMENT" in tools.error("search_fix_patterns", query=query)
            continue
        found = search_hostile(tools, backend, "search_fix_patterns", query=query, project="myreeldream")
        assert found is None or (found["mode"] == "keyword" and isinstance(found["items"], list)), query
    assert [h["_id"] for h in tools.call("search_fix_patterns", query='we"ird NEAR(')["items"]] == [pid]


def test_get_with_many_attempts_is_bounded(tools):
    pid = create(tools)
    for i in range(store.MAX_ATTEMPTS_SHOWN + 5):
        attempt(tools, pid, description=f"attempt {i}", worked=False, why="no")
    doc = tools.call("get_fix_pattern", patternId=pid)
    assert doc["attemptCount"] == store.MAX_ATTEMPTS_SHOWN + 5 and doc["attemptsTruncated"] is True
    assert len(doc["attempts"]) == store.MAX_ATTEMPTS_SHOWN
    assert doc["attempts"][-1]["description"] == f"attempt {store.MAX_ATTEMPTS_SHOWN + 4}"  # newest kept, last
    assert doc["attempts"][0]["description"] == "attempt 5"


def test_tool_names_and_annotations(tools):
    kinds = {"create_fix_pattern": (False, False), "get_fix_pattern": (True, True), "add_fix_attempt": (False, False),
             "validate_fix": (False, False), "search_fix_patterns": (True, True), "list_fix_patterns": (True, True),
             "link_issue_to_pattern": (False, True)}
    for name, (read_only, idempotent) in kinds.items():
        ann = effective_hints(tools.listed[name].annotations)  # the MCP defaults applied (docs/clients.md)
        assert (ann.read_only_hint, ann.idempotent_hint, ann.destructive_hint, ann.open_world_hint) == (
            read_only, idempotent, False, False), name
    assert {"limit", "cursor", "fields", "project"} <= set(tools.listed["list_fix_patterns"].input_schema["properties"])
    assert tools.listed["add_fix_attempt"].input_schema["properties"]["worked"]["type"] == "boolean"
