"""Mission templates: documented seeds, upsert (two names), listing, and instantiation into missions."""

from __future__ import annotations

import pytest
from conftest import open_tools
from support.tasks_helpers import call, error, mission, page_all

from vantage_peers.server import create_app

pytestmark = pytest.mark.backends

V3 = ["Acknowledge", "KB Search", "Identify & Run Tests", "Write Missing Tests", "Fix", "Run ALL Tests",
      "Deploy Dev + Push", "Verification Preview", "Code Review"]
V2 = ["Acknowledge", "KB Search", "Verify Config", "Identify Tests", "Run Existing Tests", "Evaluate Coverage",
      "Write Missing Tests", "Fix", "Run ALL Tests", "Code Review", "Deploy Dev + Push", "Verification Preview",
      "Update KB", "Close Issue"]
REPO_FIX = ["Search KB", "Codebase Analysis", "Issue Diagnosis", "Impact Analysis", "Write Fix + Tests", "Run Tests",
            "Code Review", "Create PR + Comment Issue", "QA Verification", "Store Fix Pattern"]
FEATURE = ["Search KB", "Requirements Analysis", "Schema + Backend", "API/External Services", "Frontend UI", "i18n",
           "Tests + QA", "Code Review", "PR + Deploy Preview", "Store Pattern KB"]


def tpl(tools, name):
    return call(tools, "get_mission_template", {"name": name})


def test_documented_templates_are_seeded(tools):
    for name, titles in (("issue-resolution-v3", V3), ("issue-resolution-v2", V2), ("repo-fix-v1", REPO_FIX),
                         ("new-feature-v1", FEATURE)):
        doc = tpl(tools, name)
        assert [s["title"] for s in doc["steps"]] == titles, name
        assert doc["stepCount"] == len(titles) and doc["createdBy"] == "system"
    assert tpl(tools, "issue-resolution-v3")["isDefault"] is True
    assert tpl(tools, "new-feature-v1")["steps"][2]["assignedTo"] == "dev-convex-expert"
    assert [s["title"] for s in tpl(tools, "mission-generic-v1")["steps"]] == ["Plan", "Execute", "Validate",
                                                                                  "Complete"]
    for name in ("chrome-extension-mission-v1", "pricing-research-v1", "new-website-build", "gui-iframe-embed-v1"):
        assert tpl(tools, name)["stepCount"] >= 4
    defaults = [t for t in page_all(tools, "list_mission_templates", limit=200) if t["isDefault"]]
    assert [t["name"] for t in defaults] == ["issue-resolution-v3"]
    assert tpl(tools, "no-such-template") is None


def test_seeding_is_idempotent_and_keeps_edits(app, tools, settings):
    call(tools, "update_mission_template", {"name": "repo-fix-v1", "steps": [{"title": "Only", "description": ""}],
                                            "createdBy": "system"})  # seeded templates: master/system only
    again = create_app(settings)
    try:
        with open_tools(again) as t2:
            assert [s["title"] for s in tpl(t2, "repo-fix-v1")["steps"]] == ["Only"]
            assert len(page_all(t2, "list_mission_templates", limit=200)) == 9
    finally:
        again.db.close()


def test_upsert_both_names(tools):
    steps = [{"title": "Scope", "description": "Define scope.", "assignedTo": "sigma"},
             {"title": "Build", "description": "Build it.", "assignedTo": "zeta", "dependsOn": [0], "tags": ["dev"]}]
    res = call(tools, "upsert_mission_template", {"name": "custom-v1", "description": "3 steps", "steps": steps,
                                                  "isDefault": False, "createdBy": "carol"})
    assert res["created"] is True and res["stepCount"] == 2 and res["templateId"].startswith("tpl_")
    assert "RBAC_DENIED" in error(tools, "update_mission_template", {"name": "custom-v1", "steps": steps[:1],
                                                                     "createdBy": "dave"})  # carol's template
    res2 = call(tools, "update_mission_template", {"name": "custom-v1", "steps": steps[:1], "createdBy": "carol"})
    assert res2 == {**res, "created": False, "stepCount": 1}
    doc = tpl(tools, "custom-v1")
    assert doc["description"] == "3 steps" and doc["createdBy"] == "carol" and doc["stepCount"] == 1
    call(tools, "update_mission_template", {"name": "custom-v1", "steps": steps, "isDefault": True,
                                            "createdBy": "system"})
    assert tpl(tools, "custom-v1")["isDefault"] is True and tpl(tools, "issue-resolution-v3")["isDefault"] is False


def test_upsert_refusals(tools):
    base = {"name": "bad", "createdBy": "c"}
    assert "steps" in error(tools, "update_mission_template", {**base, "steps": []})
    assert "not the index" in error(tools, "update_mission_template", {
        **base, "steps": [{"title": "a", "description": "", "dependsOn": [3]}]})
    assert "not the index" in error(tools, "update_mission_template", {
        **base, "steps": [{"title": "a", "description": "", "dependsOn": [0]}]})
    assert "cycle" in error(tools, "update_mission_template", {**base, "steps": [
        {"title": "a", "description": "", "dependsOn": [1]}, {"title": "b", "description": "", "dependsOn": [0]}]})
    assert "title" in error(tools, "update_mission_template", {**base, "steps": [{"title": " ", "description": ""}]})
    assert "description" in error(tools, "update_mission_template", {**base, "steps": [{"title": "a"}]})
    assert "createdBy is required" in error(tools, "update_mission_template", {
        "name": "bad", "steps": [{"title": "a", "description": ""}]})
    assert tpl(tools, "bad") is None


def test_list_templates_paging(tools):
    for i in range(30):
        call(tools, "update_mission_template", {"name": f"z-{i:02d}", "steps": [{"title": "s", "description": ""}],
                                                "createdBy": "c"})
    items = page_all(tools, "list_mission_templates", limit=7, fields="lite")
    assert len(items) == 39 and len({i["name"] for i in items}) == 39
    assert [i["name"] for i in items] == sorted(i["name"] for i in items)
    assert all(list(i) == ["_id", "_creationTime", "name", "isDefault", "stepCount"] for i in items)


def test_instantiate_v3(tools):
    m = mission(tools, project="vantage-memory", priority="urgent", pilot="proxima")
    res = tools.call("instantiate_template_into_mission", templateName="issue-resolution-v3", missionId=m,
                     context={"issueNumber": "255", "repo": "vantage-memory"}, titlePrefix="IRP-255",
                     callerOrchestrator="proxima")
    assert res["count"] == 9 and len(res["taskIds"]) == 9
    docs = [tools.call("get_task", taskId=t) for t in res["taskIds"]]
    assert [d["title"] for d in docs] == [f"IRP-255 {t}" for t in V3]
    assert all(d["missionId"] == m and d["priority"] == "urgent" and d["project"] == "vantage-memory" for d in docs)
    assert all(d["assignedTo"] == "proxima" and d["createdBy"] == "proxima" for d in docs)
    assert "vantage-memory#255" in docs[0]["description"] and "{{" not in docs[0]["description"]
    assert "dependsOn" not in docs[0]
    assert all(docs[i]["dependsOn"] == [res["taskIds"][i - 1]] for i in range(1, 9))
    assert call(tools, "get_mission", {"missionId": m})["taskCounts"]["total"] == 9


def test_instantiate_custom_assignees_and_placeholders(tools):
    call(tools, "update_mission_template", {"name": "custom", "createdBy": "c", "steps": [
        {"title": "Scope {{what}}", "description": "on {{repo}} {{missing}}", "assignedTo": "sigma", "tags": ["s"]},
        {"title": "Build", "description": "", "dependsOn": [0]},
        {"title": "Ship", "description": "", "dependsOn": [0, 1]}]})
    m = mission(tools, pilot="tau")
    res = tools.call("instantiate_template_into_mission", templateName="custom", missionId=m,
                     context={"what": "API", "repo": "r"})
    docs = [tools.call("get_task", taskId=t) for t in res["taskIds"]]
    assert docs[0]["title"] == "Scope API" and docs[0]["description"] == "on r {{missing}}"
    assert docs[0]["assignedTo"] == "sigma" and docs[1]["assignedTo"] == "tau" and docs[0]["tags"] == ["s"]
    assert docs[2]["dependsOn"] == res["taskIds"][:2] and docs[0]["createdBy"] == "pi"


def test_instantiate_refusals(tools):
    m = mission(tools)
    assert "NOT_FOUND" in tools.error("instantiate_template_into_mission", templateName="nope", missionId=m)
    assert "NOT_FOUND" in tools.error("instantiate_template_into_mission", templateName="mission-generic-v1",
                                      missionId="msn_nope")
    assert "context" in tools.error("instantiate_template_into_mission", templateName="mission-generic-v1",
                                    missionId=m, context={"a": 1})
