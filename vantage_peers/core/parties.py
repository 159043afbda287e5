"""Who the parties of each record kind are, and who may read, see, change or force it: declared once.

Every ownership rule reads this table: the pipeline's `owns=` checks (policy.owners, through the
loaders built by `loader`), the store rules that depend on a record's state inside their transaction
(`require` below, called with the row they already hold), and docs/policy.md's visibility table
(generated: `python -m vantage_peers.core.parties --markdown`). `system` and the master bearer are
operators: every rule admits them, and an empty `force` means "operators only".

Verbs: `read` one record by its id; `see` it in a list or search; `change` it (update, lifecycle
steps, touch, mark read); `force` it (delete, cancel, force-release: the verbs that end another
party's stake). Some kinds add verbs of their own (`claim`, `settle`, `accept`, `terms`).

`tools` names, for every tool that takes an id of the kind, the argument carrying it and the verb the
call needs: `tests/pipeline/test_declarations.py` derives from the registry that every tool taking a
record id is covered here, by `owns=`, `shared=` or `master_only=` (`cite`: the id is a reference the
tool only links to, e.g. a task's missionId; `create`: the caller names a new record).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SYSTEM = "system"  # the one spelling of the operator identity (stdio callers and the master bearer's)

# Who reads or sees a record besides its parties, when a rule names no role.
TEAM = "team"  # anyone with an identity on the team (a scoped token with a fromAllowList, any local process)
NAMESPACE = "namespace scope"  # a token's namespaceReadPrefixes / namespaceWritePrefixes
OPEN_WORK = "open work"  # a task nobody holds (no assignee, or a lapsed claim): anyone may see and claim it


@dataclass(frozen=True)
class Kind:
    """One record kind: where its party columns are, and which roles each verb needs."""

    name: str
    table: str | None  # None: no table of its own (derived by its domain)
    key: str | None
    parties: Mapping[str, str]  # role -> column of `table` holding the orchestrator
    read: tuple[str, ...]
    see: tuple[str, ...]
    change: tuple[str, ...]
    force: tuple[str, ...]  # () = operators only
    tools: Mapping[str, tuple[str, str]]  # tool -> (argument carrying the id, verb)
    derived: Mapping[str, str] = field(default_factory=dict)  # role -> how it is found (not a column)
    verbs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # extra verbs -> roles
    namespace: str | None = None  # the column holding its namespace (memories)
    note: str = ""

    def roles(self, verb: str) -> tuple[str, ...]:
        if verb in ("read", "see", "change", "force"):
            return getattr(self, verb)
        if verb == "cite":  # linking to a record needs only to be able to read it
            return self.read
        return self.verbs[verb]


def _kinds(*kinds: Kind) -> dict[str, Kind]:
    return {k.name: k for k in kinds}


KINDS: dict[str, Kind] = _kinds(
    Kind("task", "tasks", "id", {"creator": "createdBy", "assignee": "assignedTo"},
         read=("creator", "assignee", "mission members", OPEN_WORK),
         see=("creator", "assignee", "mission members", OPEN_WORK),
         change=("creator", "assignee"), force=("creator",),
         derived={"mission members": "creator, pilot and agents of its mission"},
         tools={"get_task": ("taskId", "read"), "update_task": ("taskId", "change"),
                "start_task": ("taskId", "change"), "pause_task": ("taskId", "change"),
                "resume_task": ("taskId", "change"), "complete_task": ("taskId", "change"),
                "block_task": ("taskId", "change"), "add_task_dependency": ("taskId", "change"),
                "delete_task": ("taskId", "force")},
         note="cancel (update_task status=cancelled) and delete are `force`; a lapsed holder is refused "
              "every write (LEASE_LOST); a profile with recordReadScope `team` reads and sees every task"),
    Kind("task claim", None, None, {},
         read=(TEAM,), see=(TEAM,), change=("holder",), force=(),
         derived={"holder": "the claim's lease holder", "creator": "the task's creator",
                  "assignee": "the task's assignee", "pool members": "the members of the task's pool"},
         verbs={"claim": ("creator", "assignee", "pool members")},
         tools={"checkout_task": ("taskId", "claim"), "renew_task_claim": ("taskId", "change")},
         note="an unassigned task opens `claim` to anyone (unclaimed=assignee)"),
    Kind("message", "messages", "id", {"sender": "sender"},
         read=("sender", "recipients"), see=("sender", "recipients"), change=("sender",), force=("sender",),
         derived={"recipients": "the holders of its receipts (direct, channel, broadcast)"},
         tools={"get_message": ("messageId", "read"), "list_broadcast_status": ("messageId", "read"),
                "get_message_delivery": ("messageId", "change"), "delete_message": ("messageId", "force"),
                "acknowledge_message": ("messageId", "read")},
         note="a profile with recordReadScope `team` reads and sees every message"),
    Kind("receipt", "messageReceipts", "id", {"recipient": "recipient"},
         read=("recipient",), see=("recipient",), change=("recipient",), force=("recipient",),
         tools={"mark_as_read": ("receiptIds", "change"), "acknowledge_message": ("receiptIds", "change")},
         note="an inbox (vp://inbox/{orchestrator}) is read by its recipient only"),
    Kind("mission", "missions", "id", {"creator": "createdBy", "pilot": "pilot"},
         read=(TEAM,), see=(TEAM,), change=("creator", "pilot"), force=("creator",),
         derived={"members": "its agents"},
         tools={"get_mission": ("missionId", "read"), "list_tasks_by_mission": ("missionId", "read"),
                "list_tasks": ("missionId", "read"), "search_tasks_by_keyword": ("missionId", "read"),
                "update_mission": ("missionId", "change"), "update_mission_status": ("missionId", "change"),
                "update_mission_progress": ("missionId", "change"),
                "instantiate_template_into_mission": ("missionId", "change"), "create_task": ("missionId", "cite"),
                "update_task": ("missionId", "cite")},
         note="cancel is `force`; its members see its tasks"),
    Kind("template", "missionTemplates", "name", {"creator": "createdBy"},
         read=(TEAM,), see=(TEAM,), change=("creator",), force=("creator",),
         tools={"get_mission_template": ("name", "read"), "update_mission_template": ("name", "change"),
                "upsert_mission_template": ("name", "change"), "create_mission": ("templateId", "cite"),
                "instantiate_template_into_mission": ("templateName", "cite")},
         note="the seeded templates belong to system"),
    Kind("memory", "memories", "id", {"creator": "createdBy"}, namespace="namespace",
         read=(NAMESPACE,), see=(NAMESPACE,), change=(NAMESPACE,), force=(NAMESPACE,),
         tools={"get_memory": ("memoryId", "read"), "get_episode": ("memoryId", "read"),
                "create_briefing_note": ("linkedMemoryIds", "cite"),
                "update_briefing_note": ("linkedMemoryIds", "cite")},
         note="by namespace, not by party: `global` is written by the master bearer only"),
    Kind("diary entry", "diary", "id", {"owner": "orchestrator"},
         read=(TEAM,), see=(TEAM,), change=("owner",), force=("owner",),
         tools={"delete_diary": ("diaryId", "force")},
         note="write_diary writes the caller's own entry (its identity argument)"),
    Kind("path reservation", "agentLeases", "id", {"holder": "holder"},
         read=(TEAM,), see=(TEAM,), change=("holder",), force=(),
         tools={"renew_path_reservations": ("ids", "change"), "release_paths": ("ids", "change"),
                "force_release_path_reservation": ("id", "force"), "reserve_paths": ("repo", "cite"),
                "check_path_conflicts": ("repo", "read"), "list_path_reservations": ("repo", "read")},
         note="force-release: operators only (a repo mapping's creator could forge the owner chain)"),
    Kind("slot", "agentLeases", "key", {"holder": "holder"},
         read=(TEAM,), see=(TEAM,), change=("holder",), force=(),
         verbs={"claim": (TEAM,)},
         tools={"acquire_slot": ("name", "claim"), "release_slot": ("name", "change"), "list_slots": ("name", "read")}),
    Kind("repo mapping", "githubRepoMapping", "repo", {"creator": "createdBy"},
         read=(TEAM,), see=(TEAM,), change=("creator",), force=("creator",),
         tools={"get_repo_mapping": ("repo", "read"), "add_repo_mapping": ("repo", "change"),
                "remove_repo_mapping": ("repo", "force")}),
    Kind("bundle", None, None, {},
         read=(NAMESPACE,), see=(NAMESPACE,), change=(NAMESPACE, "creator"), force=(NAMESPACE, "creator"),
         derived={"creator": "the creator of each task and briefing note it would replace"},
         tools={}, note="import writes as the importer; replace deletes only what the importer could delete"),
    Kind("profile", "profiles", "orchestratorId", {"owner": "orchestratorId"},
         read=(TEAM,), see=(TEAM,), change=("owner",), force=(),
         tools={"get_profile": ("orchestratorId", "read"), "update_profile": ("orchestratorId", "change"),
                "set_summary": ("orchestratorId", "change")},
         note="the owner is the identity argument, checked against the token"),
    Kind("component", "components", "name", {"creator": "createdBy"},
         read=(TEAM,), see=(TEAM,), change=(TEAM,), force=("creator",),
         tools={"get_component": ("name", "read"), "register_component": ("name", "change"),
                "delete_component": ("name", "force")},
         note="the registry is the team's: anyone adds a revision (update_component is shared)"),
    Kind("fix pattern", "fixPatterns", "id", {"creator": "createdBy"},
         read=(TEAM,), see=(TEAM,), change=(TEAM,), force=(),
         tools={"get_fix_pattern": ("patternId", "read")}, note="attempts and validations are shared"),
    Kind("briefing note", "briefingNotes", "id", {"creator": "createdBy"},
         read=(TEAM,), see=(TEAM,), change=("creator",), force=("creator",),
         tools={"get_briefing_note": ("noteId", "read"), "update_briefing_note": ("noteId", "change"),
                "delete_briefing_note": ("noteId", "force")}),
    Kind("business unit", "businessUnits", "id", {"lead": "orchestratorId", "creator": "createdBy"},
         read=(TEAM,), see=(TEAM,), change=("lead", "creator"), force=("lead", "creator"),
         tools={"get_bu": ("buId", "read"), "update_bu": ("buId", "change"), "delete_bu": ("buId", "force")}),
    Kind("mandate", "mandates", "id", {"requester": "requestedBy", "fulfiller": "fulfilledBy"},
         read=(TEAM,), see=(TEAM,), change=("requester", "fulfiller"), force=("requester",),
         verbs={"terms": ("requester",), "step": ("fulfiller",), "settle": ("requester",)},
         tools={"get_mandate": ("mandateId", "read"), "validate_mandate_spending": ("mandateId", "read"),
                "update_mandate": ("mandateId", "change"), "accept_mandate": ("mandateId", "step"),
                "settle_mandate": ("mandateId", "settle")},
         note="status steps are the fulfiller's, settling and the terms the requester's"),
    Kind("recurring task", "recurringTasks", "id", {"creator": "createdBy"},
         read=(TEAM,), see=(TEAM,), change=("creator",), force=("creator",),
         tools={"get_recurring_task": ("recurringTaskId", "read"),
                "update_recurring_task": ("recurringTaskId", "change"),
                "pause_recurring_task": ("recurringTaskId", "change"),
                "resume_recurring_task": ("recurringTaskId", "change"),
                "delete_recurring_task": ("recurringTaskId", "force")},
         note="a template created without an identity is open to any caller"),
    Kind("embed session", "iframeEmbedSessions", "sessionId", {"creator": "createdBy"},
         read=(TEAM,), see=(TEAM,), change=("creator",), force=("creator",),
         tools={"get_iframe_session": ("sessionId", "read"), "touch_iframe_session": ("sessionId", "change"),
                "revoke_iframe_session": ("sessionId", "force")}),
    Kind("issue", "issues", "repo", {},
         read=(TEAM,), see=(TEAM,), change=(TEAM,), force=(),
         tools={"get_issue": ("repo", "read")}, note="issue state is the team's (the tools declare shared=)"),
    Kind("error", "errorLogs", "id", {},
         read=(TEAM,), see=(TEAM,), change=(), force=(), tools={"get_error": ("errorId", "read")}),
    Kind("deployment", "monitoredDeployments", "name", {},
         read=(TEAM,), see=(TEAM,), change=(), force=(), tools={},
         note="added and removed by the master bearer only (master_only=)"),
)

# Tools whose rule depends on the record's state, so the store applies it (with `of`/`names` above)
# in the transaction that writes; every other tool that needs a party is checked by its `owns=`.
STORE_RULES: dict[str, str] = {
    **dict.fromkeys(("update_task", "start_task", "pause_task", "resume_task", "complete_task", "block_task",
                     "add_task_dependency"), "tasks.rules.authorize (and the lapsed-claim check)"),
    "delete_task": "tasks.store.delete_task", "renew_task_claim": "tasks.claims.renew_claim (its holder's lease)",
    "update_mission": "missions.store.update_mission (cancel: force)",
    "update_briefing_note": "briefings.store", "delete_briefing_note": "briefings.store",
    "update_bu": "business_units.store._guard", "delete_bu": "business_units.store._guard",
    "delete_component": "components.store.delete",
    "accept_mandate": "mandates.store.transition", "settle_mandate": "mandates.store.transition",
    "update_mandate": "mandates.store.update (terms: the requester's)",
    **dict.fromkeys(("update_recurring_task", "pause_recurring_task", "resume_recurring_task",
                     "delete_recurring_task"), "recurring.store.authorize"),
    "renew_path_reservations": "leases.store.renew (the holder's own)",
    "release_paths": "leases.store.release (the holder's own)",
    "force_release_path_reservation": "leases.paths.force_release (operators)",
    "release_slot": "leases.slots.release (the holder's own)",
}

# Arguments that look like record ids but name no record a caller acts on.
NOT_RECORDS: dict[str, str] = {
    "tenantId": "a free-form routing label", "userId": "a free-form label of the embedding page's user",
    "instanceId": "a process instance of the caller", "fromInstanceId": "the caller's own instance",
    "recipientInstanceId": "the caller's own instance", "callerInstance": "the caller's own instance",
    "assignedToInstance": "an instance label on a new task", "issueId": "a GitHub issue number, shared",
}
# (tool, argument) pairs whose id-like argument names a new record or a session setting, not one to act on.
NEW_NAMES: dict[tuple[str, str], str] = {
    ("create_bu", "name"): "the new unit's name", ("update_bu", "name"): "the unit's new name",
    ("create_mission", "name"): "the new mission's name", ("update_mission", "name"): "the mission's new name",
    ("update_profile", "name"): "a display name", ("enable_toolset", "name"): "a toolset of this session",
    ("create_bu", "orchestratorId"): "the new unit's lead", ("update_bu", "orchestratorId"): "the unit's new lead",
    ("list_bus", "orchestratorId"): "a filter", ("checkout_task", "repo"): "the repo its files are reserved in",
    ("release_paths", "repo"): "the repo of the paths released (the caller's own reservations only)",
    ("create_iframe_session", "sessionId"): "the new session's id (shared=)",
}


# -- the rule ----------------------------------------------------------------------------------------
def kind(name: str) -> Kind:
    return KINDS[name]


def of(kind_name: str, row: Mapping[str, Any], verb: str) -> dict[str, Any]:
    """The parties of `row` (a record of `kind_name`) holding a role that may `verb` it: role -> name."""
    k = KINDS[kind_name]
    return {role: row[k.parties[role]] for role in k.roles(verb) if role in k.parties}


def names(kind_name: str, row: Mapping[str, Any], verb: str) -> list[Any]:
    """`of`, as the plain list of names (for rules phrased by role, rbac.require_party)."""
    return list(of(kind_name, row, verb).values())


def columns(kind_name: str) -> dict[str, str]:
    """role -> column of every party a loader reads (the pipeline's `owns=` checks)."""
    return dict(KINDS[kind_name].parties)


# -- the generated table (docs/policy.md) ------------------------------------------------------------
BEGIN, END = "<!-- parties:begin (generated by python -m vantage_peers.core.parties --markdown) -->", \
    "<!-- parties:end -->"


def _cell(roles: Iterable[str]) -> str:
    roles = tuple(roles)
    return ", ".join(roles) if roles else "operators only"


def markdown() -> str:
    """The visibility table: record kind x parties x read/see/change/force (operators: always)."""
    lines = ["| record | parties | read | see (lists) | change | force | other verbs | tools (argument: verb) |",
             "|---|---|---|---|---|---|---|---|"]
    for k in KINDS.values():
        parties = [f"{role} (`{col}`)" for role, col in k.parties.items()]
        parties += [f"{role} ({how})" for role, how in k.derived.items()]
        verbs = "; ".join(f"{v}: {_cell(r)}" for v, r in k.verbs.items())
        tools = ", ".join(f"`{t}` ({arg}: {verb}{', store' if t in STORE_RULES else ''})"
                          for t, (arg, verb) in sorted(k.tools.items()))
        note = f" — {k.note}" if k.note else ""
        lines.append(f"| {k.name}{note} | {', '.join(parties) or '—'} | {_cell(k.read)} | {_cell(k.see)} | "
                     f"{_cell(k.change)} | {_cell(k.force)} | {verbs or '—'} | {tools or '—'} |")
    return "\n".join(lines) + "\n"


def write_docs(path: Path, render: Callable[[], str] = markdown) -> bool:
    """Write the table between the markers of `path`; True when it changed."""
    text = path.read_text()
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{path}: markers {BEGIN!r} … {END!r} not found")
    new = f"{head}{BEGIN}\n{render()}{END}{tail}"
    if new != text:
        path.write_text(new)
    return new != text


def main(argv: list[str]) -> int:
    if argv[:1] == ["--markdown"]:
        if len(argv) > 1:
            changed = write_docs(Path(argv[1]))
            print(f"{argv[1]}: {'updated' if changed else 'up to date'}")
        else:
            sys.stdout.write(markdown())
        return 0
    print("usage: python -m vantage_peers.core.parties --markdown [docs/policy.md]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
