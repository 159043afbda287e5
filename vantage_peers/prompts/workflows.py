"""The nine VantagePeers workflows, written once and served two ways.

Each workflow is the routine the toolkit's skills page describes (which tools to call, in which
order, what to present, human vs autonomous mode). `vantage_peers.prompts` serves them as MCP
prompts; `vantage_peers.prompts.plugin` writes the same text into the Claude Code plugin's
`skills/<name>/SKILL.md`, so the two can never drift (a test compares them).

Conventions in the text: `<me>` is the caller's orchestrator id (defined by the preamble that
precedes every body); tool names appear in backticks and nothing else in backticks is snake_case,
so a test can check every named tool against `tools/list`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Arg:
    name: str
    description: str
    required: bool = False


@dataclass(frozen=True)
class Workflow:
    name: str
    title: str
    summary: str  # one sentence: what it does (the prompt description and the skill description start)
    triggers: tuple[str, ...]  # natural-language trigger phrases (the skill description lists them)
    body: str
    args: tuple[Arg, ...] = field(default_factory=tuple)
    modes: bool = False  # True when the workflow behaves differently in human and autonomous mode
    argument_hint: str = ""  # the slash command's argument hint, e.g. "[--role <id>]"


ROLE = Arg("role", "Orchestrator id to act as (default: VP_ORCHESTRATOR, else whoami).")
MODE = Arg("mode", "human (present and wait) or autonomous (act); default: detect from the session.")

MODES_TEXT = """\
Mode. Human mode: a person is typing to you in this session; present results and wait for them to
decide. Autonomous mode: you run unattended (a loop, a scheduled run, `claude -p`, no one answering);
act on the results without waiting. When the mode is not given, decide from the session and say which
one you use."""

CHECK_MESSAGES = """\
1. Poll the inbox: `check_messages(recipient=<me>)`. It returns the unread receipts (oldest first)
   and does not mark them read. On a fresh deployment it returns no items: say "No new messages".
2. Show each message: sender (from, fromInstanceId), channel, time (createdAt as a date) and content.
3. Decide for each one whether it needs action (a question, a review request, a hand-off, a
   blocker). Answer with `send_message(from=<me>, channel=<the sender>, content=...)`.
   A reply that asks for work must point at a task id: create the task first with `create_task`
   (description with VERIFICATION: and TESTS: sections), then send its id; messages coordinate,
   tasks assign.
4. Mark what you processed as read: `mark_as_read(receiptIds=[...])` with the receiptId of every
   message you displayed; unread receipts come back on every poll.
5. Human mode: also bring back the tasks you dispatched that moved since your last session:
   `list_tasks(createdBy=<me>, status=["review", "done", "blocked"], updatedSince=<24 h ago, Unix ms>,
   fields="lite")`. Present messages, suggested replies and those tasks, then stop.
6. Autonomous mode: pick the next task. `list_tasks(assignedTo=<me>, status="active", fields="lite")`;
   keep going with a task already "in_progress"; otherwise take the highest priority "todo" task
   (urgent, high, medium, low) whose dependsOn tasks are all done (`get_task(taskId=...)` shows
   dependsOn), then `start_task(taskId=..., callerOrchestrator=<me>)` and
   `set_summary(orchestratorId=<me>, summary="working on <taskId>: <title>")`, and do the work.
   When that task is finished (`complete_task` with evidence), run this workflow again: it chains."""

CHECK_TASKS = """\
1. Fetch your queue: `list_tasks(assignedTo=<me>, status="open", fields="full", limit=100)`; follow
   nextCursor until it is absent. "open" means todo, in_progress, review and blocked: done and
   cancelled tasks are left out.
2. Sort by priority: urgent, then high, medium, low; inside a priority, "in_progress" first, then
   "todo", then "review".
3. Flag the blocked ones: status "blocked" (show its blockedBy reason), or a dependsOn entry that is
   not done yet (look each dependency up with `get_task(taskId=...)`) - show the blocking task ids.
4. Flag the late ones: `list_overdue_tasks(assignedTo=<me>)`.
5. Present a table: id, title, priority, status, blocked by, due. End with one line
   "Next: <taskId> - <title>": the in-progress task, else the highest-priority unblocked todo task.
   Do not start it unless asked; when asked, `start_task(taskId=..., callerOrchestrator=<me>)`."""

DAILY_START = """\
1. Say you are here: `set_summary(orchestratorId=<me>, summary="daily-start: loading context")`.
2. Recall where you left off: `recall(query="session snapshot <me>", namespace="orchestrator/<me>",
   limit=10)`, then for the project you work in `recall(query="<project> decisions blockers",
   namespace="project/<project>", limit=10)`. Keep the five most relevant memories.
3. Unread messages: `check_messages(recipient=<me>)` (count and senders; do not mark them read
   here - the check-messages workflow answers them).
4. Your queue: `list_tasks(assignedTo=<me>, status="active", fields="lite", limit=50)` and
   `list_overdue_tasks(assignedTo=<me>)`; your missions: `list_missions(pilot=<me>, status="active",
   fields="lite")`.
5. Yesterday's carry-over: `list_diaries(orchestrator=<me>, limit=1)` (its blockers).
6. Human mode: present a short brief - the five memories (one line each, with ids), unread
   messages, the top tasks sorted by priority with blockers, active missions - and a proposed
   session plan as an ordered list of task ids. Wait for the go-ahead; start nothing yourself.
7. Autonomous mode: continue the task already "in_progress", else take the highest priority
   unblocked "todo" task: `start_task(taskId=..., callerOrchestrator=<me>)`, then
   `set_summary(orchestratorId=<me>, summary="working on <taskId>: <title>")`, and begin.
   If start_task refuses because another task of yours is open, finish or pause that one first
   (`complete_task` or `pause_task`)."""

STANDUP = """\
1. Window: since your last standup note (`list_briefing_notes(topic="standup", limit=20)`, the
   newest one you created), else the last 24 hours, as Unix ms.
2. DONE: `list_tasks(assignedTo=<me>, status="done", updatedSince=<window start>, fields="full")`,
   each with its completion note.
3. IN PROGRESS: `list_tasks(assignedTo=<me>, status="in_progress", fields="lite")`.
4. BLOCKERS: `list_tasks(assignedTo=<me>, status="blocked", fields="full")` with the blockedBy
   reason and dependency ids.
5. GIT: when you have a shell, `git log --oneline --since=<window start>` in the workspace;
   otherwise write "GIT: n/a (no shell)".
6. File it: `create_briefing_note(title="Standup <me> <YYYY-MM-DD>", topic="standup",
   participants=[<me>], content=<the four sections>, createdBy=<me>)`.
7. Present the report with the four headings DONE / IN PROGRESS / BLOCKERS / GIT and the note id."""

CLOSE_DAY = """\
1. Review open work: `list_tasks(assignedTo=<me>, status="active", fields="lite")`. Human mode: ask
   which tasks to mark done; autonomous mode: decide from what you finished.
   - finished: `complete_task(taskId=..., completionNote=..., callerOrchestrator=<me>)` - the note
     is evidence, at least 40 characters with a proof token (PR/issue #NNN, commit SHA, URL,
     test ratio such as 311/314, counted artifacts such as 18 tests, file paths, ids);
   - waiting for review: `update_task(taskId=..., status="review", completionNote=...)`;
   - stopping mid-way: `pause_task(taskId=...)`; waiting on someone: `block_task(taskId=...,
     reason=...)`.
2. Diary: follow the write-diary workflow for today: `write_diary(date=<today, YYYY-MM-DD>,
   orchestrator=<me>, content=..., highlights=[...], blockers=[...])`.
3. Frictions: when something slowed you down, store one lesson:
   `store_memory(namespace="orchestrator/<me>", type="feedback", content=..., createdBy=<me>)`.
4. Session summary: `store_memory(namespace="orchestrator/<me>", type="reference",
   content="Session summary <date>: done ..., open ..., next ...", createdBy=<me>)`.
5. Presence: `set_summary(orchestratorId=<me>, summary="closed - standby until next session")`.
6. Present: tasks closed, paused or blocked (ids), the diary id and the memory ids."""

PRE_COMPACT = """\
1. Gather the state: `list_missions(pilot=<me>, status="active", fields="lite")`,
   `list_tasks(assignedTo=<me>, status="open", fields="lite")`, the blockers, and what you were
   doing this very moment (files, branch, next command).
2. Store the snapshot: `store_memory(namespace="orchestrator/<me>", type="reference",
   content="SESSION SNAPSHOT <ISO date-time>\\nSUMMARY: <3 lines>\\nMISSIONS: ...\\nTASKS: ...\\n
   BLOCKERS: ...\\nNEXT: ...", createdBy=<me>)`.
3. File the hand-off: `create_briefing_note(title="Pre-compact snapshot <me> <date-time>",
   topic="session-snapshot", participants=[<me>], content=<the same snapshot>,
   linkedMemoryIds=[<memoryId>], createdBy=<me>)`.
4. `set_summary(orchestratorId=<me>, summary="snapshot <memoryId> saved before compaction")`.
5. Tell the user it is safe to compact. The next context resumes with
   `recall(query="SESSION SNAPSHOT <me>", namespace="orchestrator/<me>", limit=3)` (daily-start
   does it)."""

RECALL = """\
1. Namespace: the one given; else infer it from the query - a project named in it:
   "project/<name>"; your own state: "orchestrator/<me>"; cross-team doctrine, mandates, fix
   patterns: "global". When nothing points to one, leave namespace out to search everything in
   scope. Namespaces are case-sensitive ("sigma" is not "Sigma").
2. Search: `recall(query=<query>, namespace=<namespace>, limit=10)` - hybrid BM25 + vector search;
   with embeddings off it answers from BM25 and says "mode": "keyword".
3. Nothing relevant with a namespace: search once more without it.
4. Present the top hits: id, type, namespace, date (createdAt), score and a one-line excerpt.
   When nothing matches say "No memory found" - never guess.
5. End answers built on it with the footer VP-Sources: recall("<query>")->[ids]."""

WRITE_DIARY = """\
1. Today's entry, if any: `get_diary(date=<date>, orchestrator=<me>)` - writing the same date again
   overwrites it, so merge rather than lose what is there.
2. Ask one grounding question: "What was the most important thing that happened today?"
   Autonomous mode: answer it yourself from the tasks you finished
   (`list_tasks(assignedTo=<me>, status="done", updatedSince=<start of today, Unix ms>,
   fields="lite")`).
3. Write it: `write_diary(date=<date>, orchestrator=<me>, content="## Highlights\\n...\\n## What I
   learned\\n...\\n## Open blockers\\n...", highlights=[...], blockers=[...])`.
4. Confirm with the diary id and the highlights."""

INIT = """\
Run three checks and print one line each - "CHECK <n> <name>: PASS" or "CHECK <n> <name>: FAIL -
<what happened>" followed by "FIX: <what to do>" - then the total.
1. MCP registration. The vantage-peers tools are in your tool list (Claude Code shows them as
   mcp__vantage-peers__<tool>, or mcp__plugin_vantage-peers_vantage-peers__<tool> from the
   plugin). Call `whoami`: PASS when it answers. Report its orchestratorId, or
   "WARN: no identity - VP_ORCHESTRATOR is unset" (then pass your id explicitly on every call).
   FIX: add the server to .mcp.json - stdio: {"mcpServers": {"vantage-peers": {"command": "uvx",
   "args": ["vantage-peers"]}}}, HTTP: {"type": "http", "url": "https://<host>/mcp", "headers":
   {"Authorization": "Bearer <token>"}} - check the JSON is valid, restart the client, then
   `claude mcp list`.
2. Connectivity. HTTP (a url is given or the entry has "type": "http"): GET <base url>/health and
   expect JSON with "status": "ok". stdio: run `uvx vantage-peers doctor` (or vantage-peers doctor)
   in a shell: PASS when it exits 0 with no FAIL line.
   FIX (HTTP): start the server with vantage-peers serve, check the URL (the client URL ends in
   /mcp, /health is on the same host), check the port and any proxy. FIX (stdio): install uv, make
   VP_DB_PATH writable, on a network drive set VP_JOURNAL_MODE=delete, read the doctor FAIL line.
3. Authenticated call. `recall(query="vantage-peers init smoke test", limit=1)`: PASS when it
   returns without error (no hits is fine).
   FIX: HTTP 401 - the Authorization header must be "Bearer <token>" with BEARER_SECRET_MASTER or
   a valid OAuth token (re-authorize an expired one); any other error - read its CODE: message.
Finish with "vantage-peers-init: <n>/3 PASS". All three must pass before the other workflows."""

WORKFLOWS: tuple[Workflow, ...] = (
    Workflow(
        "check-messages", "Check messages",
        "Poll unread messages from other orchestrators, answer the ones that need action, mark them "
        "read and, in autonomous mode, start the next unblocked todo task.",
        ("check messages", "any messages", "inbox", "peers", "new messages", "read messages"),
        CHECK_MESSAGES, (ROLE, MODE), modes=True, argument_hint="[--role <id>] [--mode human|autonomous]"),
    Workflow(
        "check-tasks", "Check tasks",
        "List the tasks assigned to you without done ones, sorted by priority, with blocked tasks "
        "and their blockers flagged and the next task named.",
        ("check tasks", "my tasks", "task list", "what should I work on", "backlog", "pending tasks"),
        CHECK_TASKS, (ROLE,), argument_hint="[--role <id>]"),
    Workflow(
        "daily-start", "Daily start",
        "Morning session start: load context (recent memories, messages, active tasks, missions), then "
        "present the day plan (human mode) or start the highest-priority unblocked task (autonomous).",
        ("start the day", "daily start", "morning plan", "daily planning", "session start", "begin day"),
        DAILY_START, (ROLE, MODE), modes=True, argument_hint="[--role <id>] [--mode human|autonomous]"),
    Workflow(
        "standup", "Standup",
        "Generate a standup report (DONE / IN PROGRESS / BLOCKERS / GIT) and file it as a briefing "
        "note with topic standup.",
        ("standup", "status report", "daily report", "sitrep", "progress report"),
        STANDUP, (ROLE,), argument_hint="[--role <id>]"),
    Workflow(
        "close-day", "Close day",
        "End-of-day wrap: update open task statuses with evidence, write the diary, store a session "
        "summary memory and set your summary to closed/standby.",
        ("close day", "end of day", "wrap up", "close session", "call it a day"),
        CLOSE_DAY, (ROLE, MODE), modes=True, argument_hint="[--role <id>]"),
    Workflow(
        "pre-compact", "Pre-compact snapshot",
        "Snapshot the session before context compaction: active missions, tasks, blockers and a "
        "3-line summary saved as a reference memory and a briefing note.",
        ("save context", "before compaction", "snapshot session", "save session", "freeze state"),
        PRE_COMPACT, (ROLE,), argument_hint="[--role <id>]"),
    Workflow(
        "recall", "Recall",
        "Hybrid semantic + BM25 search across VantagePeers memories, with the namespace taken from "
        "the query when none is given.",
        ("recall", "search memory", "what do we know about", "look up", "find in memory", "remember"),
        RECALL,
        (Arg("query", "What to search for, in natural language.", required=True),
         Arg("namespace", "Namespace to search (e.g. project/vantage-peers); default: inferred or all."),
         ROLE),
        argument_hint='"<query>" [--namespace <ns>]'),
    Workflow(
        "write-diary", "Write diary",
        "Write today's structured diary entry: one grounding question, then highlights, what was "
        "learned and open blockers.",
        ("write diary", "diary entry", "log today", "journal entry", "daily log"),
        WRITE_DIARY,
        (Arg("date", "Entry date, YYYY-MM-DD (default: today)."), ROLE, MODE), modes=True,
        argument_hint="[YYYY-MM-DD]"),
    Workflow(
        "vantage-peers-init", "VantagePeers init check",
        "Verify the VantagePeers setup - MCP registration, /health (HTTP) or doctor (stdio), and an "
        "authenticated recall - with a PASS/FAIL line and a fix for each check.",
        ("verify VP setup", "VP smoke test", "init vantage-peers", "test vantage-peers",
         "check VP connection", "is VP configured"),
        INIT, (Arg("url", "Base URL of an HTTP deployment (e.g. https://vp.example.com); omit for stdio."),),
        argument_hint="[<http base url>]"),
)

BY_NAME = {w.name: w for w in WORKFLOWS}


def identity_line(me: str | None, *, source: str) -> str:
    """The preamble line that defines `<me>` for a rendered prompt."""
    if me:
        return f'<me> = "{me}" ({source}). Pass it as recipient / from / createdBy / callerOrchestrator / ' \
               "orchestrator / orchestratorId where the steps show <me>."
    return ("<me> = your orchestrator id. VP_ORCHESTRATOR is not set on this server, so call `whoami` "
            "first; if it names no orchestrator, ask the user for the id, and pass it explicitly on every "
            "call where the steps show <me> (the server cannot default it).")


def render(workflow: Workflow, preamble: list[str]) -> str:
    parts = [f"# {workflow.title}", "", workflow.summary, "", *preamble, ""]
    if workflow.modes:
        parts += [MODES_TEXT, ""]
    parts += ["Steps:", workflow.body, ""]
    return "\n".join(parts)
