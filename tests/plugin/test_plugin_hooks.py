"""The plugin's hook scripts, run as Claude Code runs them: a subprocess reading the event on stdin.

Every documented blocked and passing example of the toolkit hooks page is here, with each opt-out,
malformed input (fail open), a hook that never gets EOF (fail open on its budget) and the exact
output format.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys

import pytest
from support.plugin_helpers import ALL_HOOKS, HOOKS, assert_blocked, assert_passed, event, run_hook, vp

EVIDENCE = "enforce-evidence-bound-completion"
NO_TASK = "enforce-no-task-in-message"
QUALITY = "enforce-task-quality"
TIME = "block-time-estimates"
COMPACT = "auto-compact-reminder"
MISSION = "enforce-mission-template"
BRIEF = "enforce-brief-template"
SHIP = "enforce-ship-24-7"

PAD = "Shipped the retry logic and the client wrapper; "  # 48 characters, no proof token


def complete(note, *, scoped=False, **extra):
    return run_hook(EVIDENCE, event(vp("complete_task", scoped), {"taskId": "tsk_x", "completionNote": note, **extra}))


# -- enforce-evidence-bound-completion ---------------------------------------------------------
def test_evidence_documented_examples():
    reason = assert_blocked(complete("done"), EVIDENCE, '"done" is a claim, not evidence.', "at least 40")
    assert "allow-no-evidence" in reason
    assert_passed(complete("PR #546 merged, build passes, commit acc0092"))
    # the plugin-bundled server's scoped tool name is checked the same way
    assert_blocked(complete("done", scoped=True), EVIDENCE, "is a claim")


@pytest.mark.parametrize("token", [
    "https://github.com/o/r/pull/546",  # URL
    "commit 9f3c2a1",  # SHA, 7 hex
    "fixes #113",  # PR / issue number
    "see tsk_01JABCDEF0123456789ABCDEFG",  # a vantage-peers id
    "memory kd750j7z7tqre6hxqmfsa8s9ed89erng",  # a Convex id
    "311/314 passing",  # test ratio
    "18 tests added",  # counted artifact
    "2900 rows migrated",  # counted artifact
    "report in analysis/report.md",  # file path
    "screenshot qa/screenshots/x.png",  # file path
])
def test_evidence_each_proof_token_passes(token):
    note = PAD + token
    assert len(note) >= 40
    assert_passed(complete(note))


def test_evidence_blocks_long_note_without_token_and_claims_only():
    assert_blocked(complete(PAD.strip()), EVIDENCE, "no verifiable proof token")
    assert_blocked(complete("Done. Merged. All good. Fixed. PASS. Done. Merged!"), EVIDENCE, "is a claim, not evidence")
    for word in ("merged", "PASS", "all good", "fixed"):
        assert_blocked(complete(word), EVIDENCE, f'"{word}" is a claim')


def test_evidence_short_note_with_token_and_missing_note():
    assert_blocked(complete("PR #546 merged"), EVIDENCE, "14 characters; at least 40")
    assert_blocked(run_hook(EVIDENCE, event(vp("complete_task"), {"taskId": "tsk_x"})), EVIDENCE, "no completionNote")
    assert_blocked(complete("   "), EVIDENCE, "no completionNote")


def test_evidence_opt_out_needs_a_reason():
    assert_passed(complete("done // allow-no-evidence: phone call with the client, nothing digital"))
    assert_blocked(complete("done // allow-no-evidence:"), EVIDENCE, "no verifiable proof token")


def test_evidence_update_task_only_when_closing():
    def update(**args):
        return run_hook(EVIDENCE, event(vp("update_task"), {"taskId": "tsk_x", **args}))

    assert_blocked(update(status="done", completionNote="fixed"), EVIDENCE, '"fixed" is a claim')
    assert_blocked(update(status="review"), EVIDENCE, 'update_task to status "review" has no completionNote')
    assert_passed(update(status="review", completionNote=PAD + "#546"))
    assert_passed(update(status="in_progress"))
    assert_passed(update(priority="high"))
    assert_passed(update(status=7))  # not a string: nothing to judge


# -- enforce-no-task-in-message ------------------------------------------------------------------
def message(content, **extra):
    return run_hook(NO_TASK, event(vp("send_message"), {"channel": "sigma", "content": content, **extra}))


def test_no_task_documented_examples():
    # the page's example uses `to`; the server's argument is `channel` - the hook reads content either way
    blocked = run_hook(NO_TASK, event(vp("send_message"), {"to": "sigma",
                                                             "content": "Please implement the retry logic for the HTTP client."}))
    assert_blocked(blocked, NO_TASK, "imperative instruction without a task reference", "'implement'")
    assert_passed(message("Task k170xxx is ready for your review — #546 is open."))


@pytest.mark.parametrize("verb", ["implement", "fix", "build", "deploy", "create", "update"])
def test_no_task_each_imperative_verb(verb):
    assert_blocked(message(f"Can you {verb.upper()} the exporter today?"), NO_TASK, repr(verb))
    assert_passed(message(f"Can you {verb} the exporter? It is task tsk_01JABCDEF0123456789ABCDEFG."))


def test_no_task_passes_reports_and_other_references():
    assert_passed(message("Implemented and merged, thanks for the review."))  # past tense: a report
    assert_passed(message("Morning! Standup note is filed."))
    assert_passed(message("Please fix the flaky test, taskId: tsk_01JABC0000"))
    assert_passed(run_hook(NO_TASK, event(vp("send_message", True), {"channel": "pi", "content": "fix it, task 42b"})))
    assert_blocked(run_hook(NO_TASK, event(vp("send_message", True), {"channel": "pi", "content": "fix it"})), NO_TASK)


# -- enforce-task-quality ------------------------------------------------------------------------
DOC_TASK = """Implement Bearer token rotation endpoint.
VERIFICATION:
- [ ] POST /rotate-token returns 200 with new bearer
- [ ] Old bearer returns 401 after rotation
TESTS:
- [ ] npm test -- --grep "bearer rotation"
"""


def create_task(description=None, **extra):
    args = {"title": "Rotate bearer", "assignedTo": "sigma", "priority": "high", **extra}
    if description is not None:
        args["description"] = description
    return run_hook(QUALITY, event(vp("create_task"), args))


def test_task_quality_documented_example_and_refusals():
    assert_passed(create_task(DOC_TASK))
    assert_passed(create_task("Do X.\n**VERIFICATION:**\n- [ ] a\n**TESTS:**\n- [ ] b"))
    assert_blocked(create_task("Implement it.\nVERIFICATION:\n- [ ] works"), QUALITY, "lacks TESTS:", "T-VERIFY")
    assert_blocked(create_task("Implement it."), QUALITY, "lacks VERIFICATION: and TESTS:")
    assert_blocked(create_task(), QUALITY, "has no description", "VERIFICATION:\n- [ ]")
    assert_blocked(create_task("verification: x\ntests: y"), QUALITY, "lacks")  # the markers are upper-case


# -- block-time-estimates ------------------------------------------------------------------------
@pytest.mark.parametrize(("tool", "args"), [
    ("Write", {"file_path": "/p/plan.md", "content": "# Plan\nThis will take about 3 days.\n"}),
    ("Edit", {"file_path": "/p/a.py", "old_string": "x", "new_string": "# refactor: ~2h\n"}),
    (vp("send_message"), {"channel": "pi", "content": "Should take 2 hours, ETA: Friday"}),
    (vp("create_task"), {"title": "Export", "description": "Estimate: 4h"}),
    (vp("update_task"), {"taskId": "tsk_x", "description": "roughly 2-3 days of work"}),
    (vp("create_mission", True), {"name": "M", "brief": "a quick 5-minute fix then ship"}),
    (vp("send_message"), {"channel": "pi", "content": "ce sera prêt dans 2 jours"}),
])
def test_time_estimates_blocked(tool, args):
    assert_blocked(run_hook(TIME, event(tool, args)), TIME, "time/effort estimate", "allow-time-estimate")


def test_time_estimates_override_is_per_line_and_needs_a_reason():
    ok = "CACHE_TTL = 300  # about 5 minutes // allow-time-estimate: TTL constant\nretries = 3\n"
    assert_passed(run_hook(TIME, event("Write", {"file_path": "/p/c.py", "content": ok})))
    hash_form = "cron: '*/15 * * * *'  # runs about 15 minutes apart # allow-time-estimate: cron interval\n"
    assert_passed(run_hook(TIME, event("Write", {"file_path": "/p/c.yml", "content": hash_form})))
    other_line = "x = 1 // allow-time-estimate: TTL constant\nthis takes about 2 hours\n"
    reason = assert_blocked(run_hook(TIME, event("Write", {"file_path": "/p/c.py", "content": other_line})), TIME)
    assert "line 2: 'about 2 hours'" in reason
    no_reason = "this takes about 2 hours // allow-time-estimate:\n"
    assert_blocked(run_hook(TIME, event("Write", {"file_path": "/p/c.py", "content": no_reason})), TIME)


def test_time_estimates_passes_clean_content_and_unmatched_tools():
    assert_passed(run_hook(TIME, event("Write", {"file_path": "/p/a.py", "content": "timeout = 30\nretries = 3\n"})))
    assert_passed(run_hook(TIME, event(vp("send_message"), {"channel": "pi", "content": "Task tsk_1 done, see #5"})))
    assert_passed(run_hook(TIME, event("Read", {"file_path": "/p/plan.md", "content": "takes about 3 days"})))
    assert_passed(run_hook(TIME, event("Edit", {"file_path": "/p/a", "old_string": "takes about 3 days",
                                                "new_string": "see the VERIFICATION list"})))


# -- enforce-mission-template --------------------------------------------------------------------
def test_mission_template_required():
    base = {"name": "Launch", "project": "p", "status": "plan", "priority": "high", "pilot": "pi", "agents": ["pi"]}
    for args in (base, {**base, "templateId": "  "}, {**base, "templateId": None}):
        assert_blocked(run_hook(MISSION, event(vp("create_mission"), args)), MISSION,
                       "no templateId", "list_mission_templates", "update_mission_template")
    assert_passed(run_hook(MISSION, event(vp("create_mission"), {**base, "templateId": "issue-resolution-v3"})))
    assert_passed(run_hook(MISSION, event(vp("get_mission"), {"missionId": "msn_1"})))


# -- enforce-brief-template ----------------------------------------------------------------------
def test_brief_template_for_task_and_agent_tools():
    brief = "Template reference: resources/templates/brief-backend.md\nFILES: a.py\nEXACT CHANGES: ..."
    for tool in ("Task", "Agent"):
        args = {"description": "Backend work", "prompt": "Implement the endpoint.", "subagent_type": "general-purpose"}
        assert_blocked(run_hook(BRIEF, event(tool, args)), BRIEF, "no 'Template reference:' line",
                       "Template reference: resources/templates/brief-backend.md",
                       "resources/templates/agent-brief-template.md")
        assert_passed(run_hook(BRIEF, event(tool, {**args, "prompt": brief})))
    assert_blocked(run_hook(BRIEF, event("Task", {"prompt": "Template reference:\nFILES: a"})), BRIEF)
    assert_passed(run_hook(BRIEF, event("Bash", {"command": "ls"})))


# -- auto-compact-reminder -----------------------------------------------------------------------
REMINDER = "Context is growing — consider running the `pre-compact` skill before context window is full."


def post(state, session="sess-1"):
    return run_hook(COMPACT, event("Bash", {"command": "ls"}, "PostToolUse", session_id=session,
                                   tool_response={"stdout": ""}), env={"VP_HOOK_STATE_DIR": str(state)})


def test_compact_reminder_at_35_then_every_15(tmp_path):
    counter = tmp_path / f"compact-{hashlib.sha256(b'sess-1').hexdigest()[:32]}.count"
    for n in (1, 2, 3):  # a fresh session counts from one, silently
        assert_passed(post(tmp_path))
        assert counter.read_text() == str(n)
    counter.write_text("30")  # skip ahead: calls 31..50
    fired = []
    for n in range(31, 51):
        proc = post(tmp_path)
        assert proc.returncode == 0
        if proc.stdout:
            out = json.loads(proc.stdout)
            assert out == {"systemMessage": REMINDER,
                           "hookSpecificOutput": {"hookEventName": "PostToolUse",
                                                  "additionalContext": f"{REMINDER} ({n} tool calls in this session.)"}}
            fired.append(n)
    assert fired == [35, 50]


def test_compact_counter_is_per_session_and_reset_on_session_start(tmp_path):
    digest = hashlib.sha256(b"sess-2").hexdigest()[:32]
    counter = tmp_path / f"compact-{digest}.count"
    counter.write_text("64")
    assert json.loads(post(tmp_path, "sess-2").stdout)["systemMessage"] == REMINDER  # 65 = 35 + 2 x 15
    assert post(tmp_path, "sess-3").stdout == b""  # another session counts from 1
    resume = run_hook(COMPACT, {"session_id": "sess-2", "hook_event_name": "SessionStart", "source": "resume"},
                      env={"VP_HOOK_STATE_DIR": str(tmp_path)})
    assert_passed(resume)
    assert counter.read_text() == "65"  # a resumed session keeps its context, and its count
    start = run_hook(COMPACT, {"session_id": "sess-2", "hook_event_name": "SessionStart", "source": "compact"},
                     env={"VP_HOOK_STATE_DIR": str(tmp_path)})
    assert_passed(start)
    assert not counter.exists()
    assert post(tmp_path, "sess-2").stdout == b"" and counter.read_text() == "1"
    counter.write_text("garbage")
    assert post(tmp_path, "sess-2").stdout == b"" and counter.read_text() == "1"
    assert_passed(run_hook(COMPACT, {"hook_event_name": "PostToolUse", "tool_name": "Bash"},
                           env={"VP_HOOK_STATE_DIR": str(tmp_path)}))  # no session id: nothing to count


def test_compact_state_dir_unusable_fails_open(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert_passed(post(blocker / "sub"))


# -- enforce-ship-24-7 (opt-in) ------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "defer to tomorrow",  # the page's own install test: must exit 2
    "Let's wait until next session before merging",
    "PR is approved, ship tomorrow",
    "sigma signed off -> defer",
    "overnight risk: defer",
    "on peut reporter à lundi",
])
def test_ship_24_7_blocks_temporal_defers(text):
    proc = run_hook(SHIP, event(vp("send_message"), {"channel": "pi", "content": text}))
    assert_blocked(proc, SHIP, "temporal defer", "allow-temporal-defer")


def test_ship_24_7_allows_client_constraints_opt_out_and_other_tools():
    for text in ("RDV Marie ce soir, defer to tomorrow", "awaiting Marie confirm repo, defer to monday",
                 "attente confirmation Anthony : reporter à demain", "Shipped #546 now, commit acc0092",
                 "defer to tomorrow # allow-temporal-defer: prod freeze during the incident"):
        assert_passed(run_hook(SHIP, event(vp("send_message"), {"channel": "pi", "content": text})))
    note = {"taskId": "tsk_x", "completionNote": "merged #5, deploy tonight"}
    assert_blocked(run_hook(SHIP, event(vp("complete_task"), note)), SHIP)
    assert_passed(run_hook(SHIP, event(vp("create_mission"), {"brief": "defer to tomorrow"})))


# -- every hook: fail open -----------------------------------------------------------------------
MALFORMED = [b"", b"not json", b"[1, 2]", b'"a string"', b"{", b"\xff\xfe\x00garbage",
             json.dumps({"tool_name": 42, "tool_input": "x"}).encode(),
             json.dumps({"tool_name": vp("complete_task"), "tool_input": ["done"]}).encode(),
             json.dumps({"tool_name": vp("send_message"), "tool_input": {"content": {"nested": "fix it"}}}).encode(),
             json.dumps({"tool_name": "Task", "tool_input": None}).encode()]


@pytest.mark.parametrize("name", ALL_HOOKS)
def test_malformed_input_fails_open(name, tmp_path):
    for raw in MALFORMED:
        assert_passed(run_hook(name, raw=raw, env={"VP_HOOK_STATE_DIR": str(tmp_path)}))


def test_hook_that_never_gets_eof_fails_open_on_its_budget():
    procs = [subprocess.Popen([sys.executable, str(HOOKS / f"{name}.py")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={"VP_HOOK_TIMEOUT_SECONDS": "0.3", "PATH": "/usr/bin:/bin"})
             for name in ALL_HOOKS]
    try:
        for proc in procs:
            proc.stdin.write(b'{"tool_name": "mcp__vantage-peers__complete_task", "tool_input": {"complet')
            proc.stdin.flush()
        for proc in procs:
            assert proc.wait(timeout=60) == 0
            assert proc.stdout.read() == b""
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.stdin.close()
            proc.stdout.close()
            proc.stderr.close()


def test_hook_whose_helper_cannot_load_fails_open(tmp_path):
    for name in ALL_HOOKS:
        lonely = tmp_path / f"{name}.py"
        shutil.copy(HOOKS / f"{name}.py", lonely)  # without _vp_hook.py beside it
        assert_passed(run_hook(name, event(vp("complete_task"), {"completionNote": "done"}), script=lonely))


def test_huge_inputs_are_judged_without_hanging():
    big = "a/" * 300_000  # pathological for a naive path pattern
    assert_blocked(complete(big), EVIDENCE, "no verifiable proof token")
    assert_passed(complete("PR #546 merged, commit acc0092, " + big))
    assert_passed(complete(PAD + "report in analysis/report.md."))
    assert_blocked(message("fix " + "x " * 500_000), NO_TASK)
    lines = "\n".join(f"line {i} is fine" for i in range(50_000)) + "\nthis takes about 2 hours\n"
    assert "line 50001" in assert_blocked(run_hook(TIME, event("Write", {"file_path": "/p", "content": lines})), TIME)
