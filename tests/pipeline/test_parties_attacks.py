"""Every record kind of core/parties.py attacked by an agent that is not one of its parties.

alice and bob each hold a scoped token (in-process: `sdk.current_principal` answers the token of
whoever is acting, as the HTTP bearer middleware would). alice owns one record of every kind; bob
tries to read, change and force each through the tools and is refused (or, where a tool only ever
acts on the caller's own records, changes nothing). On the SQLite file and on PostgreSQL.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from conftest import Tools
from mcp.server.mcpserver.exceptions import ResourceError

from vantage_peers.core import parties, sdk
from vantage_peers.core.principal import Principal
from vantage_peers.core.scopes import ScopeProfile

pytestmark = pytest.mark.backends
REFUSED = ("RBAC_DENIED", "FORBIDDEN")


def token(who: str) -> Principal:
    profile = ScopeProfile(f"{who}-agent", who, (who,), (f"project/{who}", "project/shared"),
                           (f"project/{who}", "project/shared"))
    return Principal(token=who, client_id=who, scopes=[], kind="oauth", profile=profile)


class Agents:
    """Calls made as alice or as bob (their token is the current principal during the call)."""

    def __init__(self, tools: Tools, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tools = tools
        self.acting: Principal | None = None
        monkeypatch.setattr(sdk, "current_principal", lambda: self.acting)

    def as_(self, who: str, tool: str, **args: Any) -> Any:
        self.acting = token(who)
        try:
            return self.tools.call(tool, **args)
        finally:
            self.acting = None

    def refused(self, who: str, tool: str, *codes: str, **args: Any) -> str:
        self.acting = token(who)
        try:
            result = self.tools.raw(tool, **args)
        finally:
            self.acting = None
        message = "\n".join(getattr(c, "text", "") for c in result.content)
        assert result.is_error and any(c in message for c in codes or REFUSED), f"{who} {tool}: {message[:300]}"
        return message


@pytest.fixture
def agents(tools: Tools, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agents]:
    a = Agents(tools, monkeypatch)
    for who in ("alice", "bob"):
        a.as_(who, "update_profile", orchestratorId=who, static={"role": "dev"})
    yield a


def _id(value: Any, *keys: str) -> Any:
    if isinstance(value, dict):
        for key in (*keys, "_id", "id"):
            if key in value:
                return value[key]
    return value


def test_every_kind_is_attacked_here():
    """A new record kind lands in this file: the kinds below are the ones the tests attack."""
    attacked = {"task", "task claim", "message", "receipt", "mission", "template", "memory", "diary entry",
                "path reservation", "slot", "repo mapping", "bundle", "profile", "component", "fix pattern",
                "briefing note", "business unit", "mandate", "recurring task", "embed session", "issue", "error",
                "deployment"}
    assert set(parties.KINDS) == attacked


def test_task_and_its_claim(agents):
    task = agents.as_("alice", "create_task", title="alice's", assignedTo="alice", priority="low")
    other = agents.as_("alice", "create_task", title="alice's other", assignedTo="alice", priority="low")
    assert agents.as_("bob", "get_task", taskId=task) is None  # read: not a party
    items = agents.as_("bob", "list_tasks", status="all", limit=200)["items"]
    assert task not in [t["_id"] for t in items]  # see
    for tool, args in (("update_task", {"title": "bob's"}), ("start_task", {}), ("pause_task", {}),
                       ("resume_task", {}), ("complete_task", {"completionNote": "done, by bob"}),
                       ("block_task", {"reason": "bob"}), ("add_task_dependency", {"dependsOn": other}),
                       ("update_task", {"status": "cancelled", "cancelReason": "bob"}), ("delete_task", {})):
        agents.refused("bob", tool, taskId=task, **args)  # change, force
    agents.refused("bob", "checkout_task", taskId=task)  # claim
    agents.refused("bob", "renew_task_claim", "INVALID_STATE", "RBAC_DENIED", "LEASE_LOST", taskId=task)
    agents.refused("bob", "update_task", taskId=task, title="x", callerOrchestrator="alice")  # not bob's to name
    assert agents.as_("alice", "get_task", taskId=task)["title"] == "alice's"
    assert agents.as_("alice", "checkout_task", taskId=task)["claimed"] is True


def test_message_and_receipt(agents, app):
    sent = agents.as_("alice", "send_message", channel="alice", content="note to self")
    receipt = agents.as_("alice", "check_messages")[0]["receiptId"]
    message = sent["messageId"]
    assert agents.as_("bob", "get_message", messageId=message) is None
    assert message not in [m["_id"] for m in agents.as_("bob", "list_messages", limit=200)["items"]]
    agents.refused("bob", "list_broadcast_status", "NOT_FOUND", messageId=message)
    agents.refused("bob", "get_message_delivery", messageId=message)
    agents.refused("bob", "delete_message", messageId=message)
    agents.refused("bob", "mark_as_read", receiptIds=[receipt])
    agents.refused("bob", "acknowledge_message", receiptIds=[receipt])
    agents.refused("bob", "acknowledge_message", messageId=message)

    async def inbox():
        agents.acting = token("bob")
        try:
            return await app.mcp.read_resource("vp://inbox/alice")
        finally:
            agents.acting = None

    with pytest.raises(ResourceError, match="FORBIDDEN"):
        anyio.run(inbox)
    assert [m["receiptId"] for m in agents.as_("alice", "check_messages")] == [receipt]


def test_mission_and_template(agents):
    tag = uuid.uuid4().hex[:6]
    mission = _id(agents.as_("alice", "create_mission", name=f"alice {tag}", project="p", pilot="alice",
                             priority="low", status="plan", agents=["alice"]), "missionId")
    template = f"alice-template-{tag}"
    agents.as_("alice", "upsert_mission_template", name=template, steps=[{"title": "one", "description": ""}])
    agents.refused("bob", "update_mission", missionId=mission, name="bob's")
    agents.refused("bob", "update_mission", missionId=mission, status="cancelled", cancelReason="bob")
    agents.refused("bob", "update_mission_status", missionId=mission, status="execute")
    agents.refused("bob", "update_mission_progress", missionId=mission, progress=90)
    agents.refused("bob", "instantiate_template_into_mission", missionId=mission, templateName=template)
    agents.refused("bob", "update_mission_template", name=template, steps=[{"title": "bob", "description": ""}])
    agents.refused("bob", "upsert_mission_template", name=template, steps=[{"title": "bob", "description": ""}])
    assert agents.as_("alice", "get_mission", missionId=mission)["status"] == "plan"


def test_memory_profile_and_bundle(agents):
    memory = _id(agents.as_("alice", "store_memory", namespace="project/alice", type="reference",
                            content="alice's notes", createdBy="alice"), "memoryId")
    agents.refused("bob", "get_memory", memoryId=memory)  # read: outside bob's namespaces
    agents.refused("bob", "soft_delete_memory", memoryId=memory)  # force
    agents.refused("bob", "store_memory", namespace="project/alice", type="reference", content="x")
    agents.refused("bob", "update_profile", orchestratorId="alice", static={"role": "pwned"})  # profile
    agents.refused("bob", "set_summary", orchestratorId="alice", summary="pwned")
    assert agents.as_("alice", "get_memory", memoryId=memory) is not None
    # bundle: bob's `replace` of a namespace he may write deletes only what bob could delete one by one.
    agents.as_("alice", "create_task", title="alice's shared", assignedTo="alice", priority="low",
               project="project/shared")
    from support.bundle_helpers import bundle_bytes

    empty = base64.b64encode(bundle_bytes({}, namespace="project/shared")).decode()
    result = agents.as_("bob", "import_okf_bundle", bundle=empty, namespace="project/shared", mode="replace")
    assert any("kept" in w for w in result.get("warnings", [])), result
    titles = [t["title"] for t in agents.as_("alice", "list_tasks", status="all", limit=200)["items"]]
    assert "alice's shared" in titles


def test_diary_and_notes_and_units(agents):
    diary = _id(agents.as_("alice", "write_diary", date="2026-12-01", content="dear diary"), "diaryId")
    note = _id(agents.as_("alice", "create_briefing_note", title="t", topic="project/p", participants=["alice"],
                          content="c"), "noteId")
    bu = _id(agents.as_("alice", "create_bu", name=f"alice bu {uuid.uuid4().hex[:6]}", description="d",
                        purpose="p", orchestratorId="alice"), "buId")
    component = f"alice-widget-{uuid.uuid4().hex[:6]}"
    agents.as_("alice", "register_component", name=component, type="skill", content="# x")
    agents.refused("bob", "delete_diary", diaryId=diary)
    agents.refused("bob", "update_briefing_note", noteId=note, title="bob's")
    agents.refused("bob", "delete_briefing_note", noteId=note)
    agents.refused("bob", "update_bu", buId=bu, name="bob's")
    agents.refused("bob", "delete_bu", buId=bu)
    agents.refused("bob", "delete_component", name=component, type="skill")
    assert agents.as_("alice", "get_briefing_note", noteId=note)["title"] == "t"
    assert agents.as_("alice", "get_bu", buId=bu) is not None
    assert agents.as_("alice", "get_component", name=component, type="skill") is not None


def test_mandate_and_recurring_task(agents):
    # alice requests, carol fulfils: bob is neither.
    mandate = _id(agents.as_("alice", "create_mandate", service="s", budget=10, fulfilledBy="carol"), "mandateId")
    recurring = _id(agents.as_("alice", "create_recurring_task", title="daily", assignedTo="alice",
                               cronExpression="0 9 * * *"), "recurringTaskId")
    agents.refused("bob", "accept_mandate", mandateId=mandate)
    agents.refused("bob", "update_mandate", mandateId=mandate, budget=1)
    agents.refused("bob", "settle_mandate", mandateId=mandate, finalCost=1)
    agents.refused("alice", "accept_mandate", mandateId=mandate)  # a party, but the step is the fulfiller's
    for tool, args in (("update_recurring_task", {"title": "bob's"}), ("pause_recurring_task", {}),
                       ("resume_recurring_task", {}), ("delete_recurring_task", {})):
        agents.refused("bob", tool, recurringTaskId=recurring, **args)
    assert agents.as_("alice", "get_mandate", mandateId=mandate)["status"] == "requested"
    assert agents.as_("alice", "get_recurring_task", recurringTaskId=recurring)["title"] == "daily"


def test_leases_slots_and_repo_mappings(agents):
    repo = f"alice/repo-{uuid.uuid4().hex[:6]}"
    agents.as_("alice", "add_repo_mapping", repo=repo, orchestrator="alice", project="p")
    reserved = agents.as_("alice", "reserve_paths", paths=["src/app.py"], repo=repo)
    [rid] = [g["id"] for g in reserved["granted"]]
    agents.as_("alice", "acquire_slot", name=f"deploy-{repo}")
    agents.refused("bob", "add_repo_mapping", repo=repo, orchestrator="bob", project="p")
    agents.refused("bob", "remove_repo_mapping", repo=repo)
    agents.refused("bob", "force_release_path_reservation", id=rid, reason="mine now")  # force: operators only
    # The holder's own only: bob's release and renew act on nothing of alice's.
    agents.as_("bob", "release_paths", ids=[rid])
    agents.as_("bob", "renew_path_reservations", ids=[rid])
    agents.as_("bob", "release_slot", name=f"deploy-{repo}")
    agents.refused("bob", "reserve_paths", "PATH_CONFLICT", paths=["src/./app.py"], repo=repo)
    held = agents.as_("alice", "list_path_reservations", repo=repo)["items"]
    assert [r["holder"] for r in held] == ["alice"]
    slots = agents.as_("alice", "list_slots", name=f"deploy-{repo}")["items"]
    assert [h["holder"] for s in slots for h in s.get("holders", [s])] == ["alice"]
    assert agents.as_("alice", "get_repo_mapping", repo=repo)["orchestrator"] == "alice"


def test_embed_sessions_and_master_only_records(agents):
    session = str(uuid.uuid4())
    agents.as_("alice", "create_iframe_session", sessionId=session, origin="https://embed.example",
               expiresAt=int(time.time() * 1000) + 3_600_000)
    agents.refused("bob", "touch_iframe_session", sessionId=session)
    agents.refused("bob", "revoke_iframe_session", sessionId=session)
    agents.refused("bob", "add_deployment", name="prod", deploymentUrl="https://prod.example",  # master only
                   deployKeyEnvVar="DEPLOY_KEY_PROD", githubRepo="bob/repo", orchestrator="bob")
    assert agents.as_("alice", "get_iframe_session", sessionId=session) is not None
