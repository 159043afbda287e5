"""Authorization from the attacker's side: one orchestrator acting on another's records.

alice and bob run their own stdio servers (VP_ORCHESTRATOR) on one file. For every tool that takes
a record id, the table below has bob act on a record alice owns; the registry check makes sure a new
tool that takes a record id lands in this table or declares why its records are shared. Then the 13
paths by which a token once acted as another orchestrator, each as a named test, over real HTTP.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import pytest
from conftest import Tools, make_settings, open_tools
from support.http_helpers import scoped_token, serving, text

from vantage_peers.server import create_app

REFUSED = ("RBAC_DENIED", "FORBIDDEN", "LEASE_LOST")
# Arguments that identify a record (an id, or a name/slug a record is keyed by).
RECORD_ARGS = ("Id", "Ids")
NOT_RECORDS = {"tenantId", "instanceId", "fromInstanceId", "recipientInstanceId", "userId", "orchestratorId",
               "assignedToInstance", "templateId", "linkedMemoryIds", "issueId"}
KEYED_BY_NAME = {"update_component", "delete_component", "update_mission_template", "upsert_mission_template",
                 "add_repo_mapping", "remove_repo_mapping", "update_issue_status", "link_commit_to_issue",
                 "verify_issue", "remove_deployment"}


def record_args(app, name: str) -> list[str]:
    params = app.registered[name].policy.params
    found = [p for p in params if p.endswith(RECORD_ARGS) and p not in NOT_RECORDS]
    if name in KEYED_BY_NAME:
        found += [p for p in ("name", "repo") if p in params]
    return found


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    path = tmp_path_factory.mktemp("authz") / "team.db"
    apps = {who: create_app(make_settings(path, orchestrator=who)) for who in ("alice", "bob")}
    with open_tools(apps["alice"]) as alice, open_tools(apps["bob"]) as bob:
        yield apps, alice, bob
    for app in apps.values():
        app.db.close()


def alice_records(alice: Tools) -> dict[str, Any]:
    """One record of every kind, owned by alice (created by her server, acting as itself)."""
    ids: dict[str, Any] = {}
    tag = uuid.uuid4().hex[:6]  # the fixture's file is shared by the tests of this module
    ids["task"] = alice.call("create_task", title="alice's task", assignedTo="alice", priority="medium")
    ids["task2"] = alice.call("create_task", title="alice's other task", assignedTo="alice", priority="low")
    ids["mission"] = alice.call("create_mission", name=f"alice's mission {tag}", project="p", pilot="alice",
                                priority="medium", status="plan", agents=["alice"])
    ids["template"] = f"alice-template-{tag}"
    alice.call("upsert_mission_template", name=ids["template"], steps=[{"title": "one", "description": ""}])
    message = alice.call("send_message", channel="alice", content="to myself")
    ids["message"] = message["messageId"]
    ids["receipt"] = alice.call("check_messages")[0]["receiptId"]
    ids["component"] = f"alice-widget-{tag}"
    alice.call("register_component", name=ids["component"], type="skill", content="# x")
    ids["pattern"] = alice.call("create_fix_pattern", symptom="s", rootCause="r", sourceProject="p")
    ids["note"] = alice.call("create_briefing_note", title="t", topic="project/p", participants=["alice"],
                             content="c")
    ids["bu"] = alice.call("create_bu", name=f"alice bu {tag}", description="d", purpose="p", orchestratorId="alice")
    ids["diary"] = alice.call("write_diary", date="2026-12-01", content="dear diary")
    ids["mandate"] = alice.call("create_mandate", service="s", budget=10, fulfilledBy="alice")
    ids["recurring"] = alice.call("create_recurring_task", title="daily", assignedTo="alice",
                                  cronExpression="0 9 * * *")
    ids["repo"] = f"alice/repo-{tag}"
    alice.call("add_repo_mapping", repo=ids["repo"], orchestrator="alice", project="p")
    ids["session"] = str(uuid.uuid4())
    alice.call("create_iframe_session", sessionId=ids["session"], origin="https://embed.example",
               expiresAt=int(time.time() * 1000) + 3_600_000)
    return {k: (v["_id"] if isinstance(v, dict) and "_id" in v else
                v.get("id") or v.get("missionId") or v.get("patternId") or v.get("noteId") or v.get("buId")
                or v.get("diaryId") or v.get("mandateId") or v.get("recurringTaskId") or v.get("taskId")
                if isinstance(v, dict) else v) for k, v in ids.items()}


def attacks(ids: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """tool -> the arguments bob sends at alice's record (no identity argument: bob's server's own)."""
    task, mission = ids["task"], ids["mission"]
    return {
        "mark_as_read": {"receiptIds": [ids["receipt"]]},
        "acknowledge_message": {"receiptIds": [ids["receipt"]]},
        "delete_message": {"messageId": ids["message"]},
        "update_task": {"taskId": task, "title": "mine now"},
        "delete_task": {"taskId": task},
        "start_task": {"taskId": task},
        "pause_task": {"taskId": task},
        "resume_task": {"taskId": task},
        "complete_task": {"taskId": task, "completionNote": "done by bob, with proof: none"},
        "block_task": {"taskId": task, "reason": "bob says so"},
        "add_task_dependency": {"taskId": task, "dependsOn": ids["task2"]},
        "checkout_task": {"taskId": task},
        "renew_task_claim": {"taskId": task},
        "update_mission": {"missionId": mission, "name": "bob's now"},
        "update_mission_status": {"missionId": mission, "status": "execute"},
        "update_mission_progress": {"missionId": mission, "progress": 99},
        "instantiate_template_into_mission": {"missionId": mission, "templateName": ids["template"]},
        "update_mission_template": {"name": ids["template"], "steps": [{"title": "bob", "description": ""}]},
        "upsert_mission_template": {"name": ids["template"], "steps": [{"title": "bob", "description": ""}]},
        "delete_component": {"name": ids["component"], "type": "skill"},
        "update_briefing_note": {"noteId": ids["note"], "title": "bob's"},
        "delete_briefing_note": {"noteId": ids["note"]},
        "update_bu": {"buId": ids["bu"], "name": "bob's"},
        "delete_bu": {"buId": ids["bu"]},
        "delete_diary": {"diaryId": ids["diary"]},
        "accept_mandate": {"mandateId": ids["mandate"]},
        "update_mandate": {"mandateId": ids["mandate"], "budget": 1},
        "settle_mandate": {"mandateId": ids["mandate"], "finalCost": 1},
        "update_recurring_task": {"recurringTaskId": ids["recurring"], "title": "bob's"},
        "delete_recurring_task": {"recurringTaskId": ids["recurring"]},
        "pause_recurring_task": {"recurringTaskId": ids["recurring"]},
        "resume_recurring_task": {"recurringTaskId": ids["recurring"]},
        "add_repo_mapping": {"repo": ids["repo"], "orchestrator": "bob", "project": "p"},
        "remove_repo_mapping": {"repo": ids["repo"]},
        "touch_iframe_session": {"sessionId": ids["session"]},
        "revoke_iframe_session": {"sessionId": ids["session"]},
    }


def test_every_tool_that_takes_a_record_id_is_covered_or_declared_shared(team):
    apps, alice, bob = team
    app = apps["bob"]
    table = attacks({k: "x" for k in ("task", "task2", "mission", "receipt", "message", "pattern", "note", "bu",
                                      "diary", "mandate", "recurring", "session", "template", "component", "repo")})
    missing = []
    for name, reg in app.registered.items():
        if reg.policy.read_only or not record_args(app, name):
            continue
        if name not in table and not reg.policy.shared and not reg.policy.master_only:
            missing.append((name, record_args(app, name)))
    assert missing == [], f"declare owns=… (and add a row above) or shared='why' for: {missing}"


def test_bob_is_refused_on_every_record_of_alice(team):
    apps, alice, bob = team
    ids = alice_records(alice)
    allowed = []
    for tool, args in attacks(ids).items():
        result = bob.raw(tool, **args)
        message = "\n".join(getattr(c, "text", "") for c in result.content)
        codes = REFUSED + (("INVALID_STATE",) if tool == "renew_task_claim" else ())  # "you hold no claim"
        if not result.is_error or not any(code in message for code in codes):
            allowed.append((tool, message[:160]))
    assert allowed == [], f"bob acted on alice's records: {allowed}"
    # …and nothing of alice's changed: her task is still hers, her inbox still unread.
    assert alice.call("get_task", taskId=ids["task"])["assignedTo"] == "alice"
    assert [m["receiptId"] for m in alice.call("check_messages")] == [ids["receipt"]]
    assert alice.call("get_iframe_session", sessionId=ids["session"]) is not None
    assert alice.call("get_repo_mapping", repo=ids["repo"])["orchestrator"] == "alice"


def test_an_explicit_foreign_identity_is_refused_too(team):
    """stdio is local trust for *who* you say you are, but naming yourself bob does not make alice's
    records bob's: the same rules run on the identity the call names."""
    apps, alice, bob = team
    task = alice.call("create_task", title="explicit", assignedTo="alice", priority="low")
    assert "RBAC_DENIED" in bob.error("start_task", taskId=task, callerOrchestrator="carol")
    assert "RBAC_DENIED" in bob.error("checkout_task", taskId=task, callerOrchestrator="carol")
    assert bob.call("checkout_task", taskId=task, callerOrchestrator="alice")["claimed"] is True


def test_owners_and_system_still_act(team):
    apps, alice, bob = team
    ids = alice_records(alice)
    assert alice.call("update_mission_status", missionId=ids["mission"], status="execute") is None
    assert alice.call("touch_iframe_session", sessionId=ids["session"]) is True
    assert alice.call("mark_as_read", receiptIds=[ids["receipt"]]) == 1
    task = bob.call("create_task", title="bob's own", assignedTo="bob", priority="low")
    assert bob.call("checkout_task", taskId=task)["claimed"] is True
    assert alice.call("delete_task", taskId=task, callerOrchestrator="system")["deleted"] is True


def test_tools_list_matches_the_committed_snapshot(team):
    """Every tool's name, description, arguments, annotations and output schema, as committed: a change to
    the public contract shows up as a diff of tests/snapshots/tools_list.json (regenerate it on purpose)."""
    from pathlib import Path

    import anyio

    apps, _, _ = team
    listed = anyio.run(apps["bob"].mcp.list_tools)
    now = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed]
    path = Path(__file__).parent / "snapshots" / "tools_list.json"
    if os.environ.get("VP_UPDATE_SNAPSHOTS") == "1":  # regenerate on purpose, then review the diff
        path.write_text(json.dumps(now, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    snapshot = json.loads(path.read_text())
    assert [t["name"] for t in now] == [t["name"] for t in snapshot]
    for got, want in zip(now, snapshot, strict=True):
        assert got == want, got["name"]


# -- the 13 paths, over real HTTP with two scoped tokens -------------------------------------------------
ALICE = {"profileId": "alice-agent", "description": "alice", "fromAllowList": ["alice"],
         "namespaceReadPrefixes": ["project/a", "global"], "namespaceWritePrefixes": ["project/a"]}
BOB = {"profileId": "bob-agent", "description": "bob", "fromAllowList": ["bob"],
       "namespaceReadPrefixes": ["project/b", "global"], "namespaceWritePrefixes": ["project/b"]}


@pytest.fixture(scope="module")
def http_team(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("authz-http") / "vp.db", env={"VP_EMBEDDINGS": "none"}) as server:
        tokens = {}
        for profile in (ALICE, BOB):
            tokens[profile["description"]] = scoped_token(server, profile)
        yield server, tokens


def call(server, token: str, tool: str, args: dict[str, Any]):
    async def go(client):
        return await client.call_tool(tool, args)

    return server.mcp(token, go)


def ok(result) -> Any:
    assert not result.is_error, text(result)
    data = result.structured_content
    return data["result"] if isinstance(data, dict) and set(data) - {"warnings"} == {"result"} else data


def refused(result) -> str:
    assert result.is_error, f"expected a refusal, got {text(result)[:300]}"
    message = text(result)
    assert any(code in message for code in REFUSED), message
    return message


def bob_setup(server, tokens) -> dict[str, Any]:
    bob = tokens["bob"]
    task = ok(call(server, bob, "create_task", {"title": "bob's", "assignedTo": "bob", "priority": "low"}))
    assert isinstance(task, str), task
    ids = {"task": task}
    mission = ok(call(server, bob, "create_mission", {"name": f"bob's {uuid.uuid4().hex[:6]}", "project": "p",
                                                      "pilot": "bob", "priority": "low", "status": "plan",
                                                      "agents": ["bob"]}))
    ids["mission"] = mission if isinstance(mission, str) else mission["missionId"]
    sent = ok(call(server, tokens["alice"], "send_message", {"channel": "bob", "content": "hello bob"}))
    ids["message"] = sent["messageId"]
    ids["receipt"] = ok(call(server, bob, "check_messages", {}))[0]["receiptId"]
    ok(call(server, bob, "add_repo_mapping", {"repo": "bob/repo", "orchestrator": "bob", "project": "p"}))
    ids["session"] = str(uuid.uuid4())
    ok(call(server, bob, "create_iframe_session", {"sessionId": ids["session"], "origin": "https://b.example",
                                                   "expiresAt": int(time.time() * 1000) + 3_600_000}))
    return ids


def test_path_mark_as_read_of_anothers_receipt(http_team):
    server, tokens = http_team
    ids = bob_setup(server, tokens)
    refused(call(server, tokens["alice"], "mark_as_read", {"receiptIds": [ids["receipt"]]}))
    assert [m["receiptId"] for m in ok(call(server, tokens["bob"], "check_messages", {}))] == [ids["receipt"]]


def test_path_checkout_of_anothers_task(http_team):
    server, tokens = http_team
    ids = bob_setup(server, tokens)
    refused(call(server, tokens["alice"], "checkout_task", {"taskId": ids["task"]}))
    assert ok(call(server, tokens["bob"], "get_task", {"taskId": ids["task"]}))["assignedTo"] == "bob"


@pytest.mark.parametrize("tool,args", [
    ("update_mission_status", {"status": "execute"}),
    ("update_mission_progress", {"progress": 50}),
    ("instantiate_template_into_mission", {"templateName": "issue-resolution-v3"}),
])
def test_path_mission_changes(http_team, tool, args):
    server, tokens = http_team
    ids = bob_setup(server, tokens)
    refused(call(server, tokens["alice"], tool, {"missionId": ids["mission"], **args}))
    mission = ok(call(server, tokens["bob"], "get_mission", {"missionId": ids["mission"]}))
    assert mission["status"] == "plan" and not mission["tasks"]


@pytest.mark.parametrize("tool", ["add_repo_mapping", "remove_repo_mapping"])
def test_path_repo_mapping(http_team, tool):
    server, tokens = http_team
    bob_setup(server, tokens)
    args = {"repo": "bob/repo"} | ({"orchestrator": "alice", "project": "p"} if tool == "add_repo_mapping" else {})
    refused(call(server, tokens["alice"], tool, args))
    mapping = ok(call(server, tokens["bob"], "get_repo_mapping", {"repo": "bob/repo"}))
    assert mapping["orchestrator"] == "bob" and mapping["active"] is True


def test_path_default_template(http_team):
    server, tokens = http_team
    message = refused(call(server, tokens["alice"], "update_mission_template",
                           {"name": "issue-resolution-v3", "steps": [{"title": "pwned", "description": ""}]}))
    assert "system" in message


@pytest.mark.parametrize("tool", ["touch_iframe_session", "revoke_iframe_session"])
def test_path_iframe_session(http_team, tool):
    server, tokens = http_team
    ids = bob_setup(server, tokens)
    refused(call(server, tokens["alice"], tool, {"sessionId": ids["session"]}))
    assert ok(call(server, tokens["bob"], "get_iframe_session", {"sessionId": ids["session"]})) is not None


def task_bundle(task: dict[str, Any]) -> str:
    """A hand-made OKF bundle of project/a holding one task record."""
    from support.bundle_helpers import b64, bundle_bytes, jsonl

    record = {"id": "tsk_imported1", "priority": "low", "status": "todo", "createdAt": 1_700_000_000_000,
              "updatedAt": 1_700_000_000_000, **task}
    return b64(bundle_bytes({"tasks.jsonl": jsonl([record])}, namespace="project/a"))


def titled(server, token, title: str) -> list[dict[str, Any]]:
    items = ok(call(server, token, "list_tasks", {"limit": 200, "status": "all", "detail": "full"}))["items"]
    return [t for t in items if t["title"] == title]


def test_path_import_merge_writes_as_the_importer_and_never_into_anothers_mission(http_team):
    server, tokens = http_team
    ids = bob_setup(server, tokens)
    bundle = task_bundle({"title": "imported as bob", "assignedTo": "bob", "createdBy": "bob",
                          "missionId": ids["mission"], "project": "project/a"})
    result = ok(call(server, tokens["alice"], "import_okf_bundle",
                     {"namespace": "project/a", "mode": "merge", "bundle": bundle}))
    assert result["added"]["tasks"] == 1
    [task] = titled(server, tokens["alice"], "imported as bob")
    assert task["createdBy"] == "alice" and task.get("missionId") is None
    assert any("missionId dropped" in w for w in result["warnings"])
    mission = ok(call(server, tokens["bob"], "get_mission", {"missionId": ids["mission"]}))
    assert not mission["tasks"]


def test_path_import_replace_deletes_only_what_the_importer_could(http_team):
    server, tokens = http_team
    bob = tokens["bob"]
    ok(call(server, bob, "create_task", {"title": "bob's in project/a", "assignedTo": "bob", "priority": "low",
                                         "project": "project/a"}))
    assert titled(server, bob, "bob's in project/a")
    result = ok(call(server, tokens["alice"], "import_okf_bundle", {
        "namespace": "project/a", "mode": "replace",
        "bundle": task_bundle({"title": "alice's replacement", "assignedTo": "alice", "createdBy": "alice"})}))
    assert titled(server, bob, "bob's in project/a"), "replace deleted a task only bob may delete"
    assert any("kept" in w for w in result["warnings"])


def test_path_import_without_an_identity_is_refused(http_team):
    server, tokens = http_team
    anonymous = scoped_token(server, "client-generic", name="no-identity")
    refused(call(server, anonymous, "import_okf_bundle", {"namespace": "project/a", "mode": "merge",
                                                          "bundle": task_bundle({"title": "x", "assignedTo": "x"})}))


def test_whoami_names_the_tokens_identity(http_team):
    server, tokens = http_team
    assert ok(call(server, tokens["alice"], "whoami", {}))["orchestratorId"] == "alice"
