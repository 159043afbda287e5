"""A database holding every kind of record, for `migrate-db` tests (issue #25).

Records come through the tools wherever a tool writes them; tables only other entry points write
(OAuth, webhook deliveries, the scheduler, the dashboard) get rows through the same store code or
SQL those entry points run. Text is hostile on purpose: non-ASCII and astral characters, SQL and
LIKE metacharacters, JSON, a 1 MiB value — everything NUL-free (PostgreSQL text cannot hold NUL).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

# Four-byte characters, right-to-left text, combining marks, quotes and SQL / LIKE / FTS metacharacters.
HOSTILE = "Zoë 🦓 שלום e\u0301 \"quoted\" 'single' -- ; DROP TABLE memories; % _ \\ * ( ) NEAR/2 ^ \t\n end"
HUGE = ("0123456789abcdef" * 65_536)[: 1_000_000]  # just under the 1 MiB content limit
JSON_DOC = {"nested": {"list": [1, 2.5, None, True, "ü"], "quote": "\"'"}, "emoji": "🚀", "n": 2**53}


def _id(value: Any, *keys: str) -> Any:
    if isinstance(value, dict):
        for key in (*keys, "id", "_id"):
            if value.get(key):
                return value[key]
    return value


def fill(tools: Any, app: Any) -> dict[str, Any]:
    """Every kind of record, with hostile values; returns some ids."""
    ids: dict[str, Any] = {}
    now = int(time.time() * 1000)
    call = tools.call
    call("update_profile", orchestratorId="alice", name=HOSTILE, static={"role": "lead", "workspace": HOSTILE,
                                                                            "capabilities": ["a", "ü"]})
    call("set_summary", summary=HOSTILE, orchestratorId="alice")
    # Messages, receipts, acknowledgement and read state.
    for i in range(3):
        call("send_message", channel="bob", content=f"{HOSTILE} #{i}", ackRequired=i == 0)
    call("send_message", channel="alice", content=HUGE)
    receipts = call("check_messages", recipient="alice")
    call("mark_as_read", receiptIds=[receipts[0]["receiptId"]])
    bob = call("check_messages", recipient="bob")
    call("acknowledge_message", receiptIds=[bob[0]["receiptId"]], recipient="bob", note=HOSTILE)
    # Memories: plain, JSON relations, an update chain, a soft delete, a TTL, an episode, a huge one.
    first = _id(call("store_memory", namespace="team/ü", type="fact", content=HOSTILE), "memoryId")
    call("store_memory", namespace="team/ü", type="fact", content=f"newer {HOSTILE}",
         relations=[{"targetId": first, "type": "updates"}])
    gone = _id(call("store_memory", namespace="team/ü", type="note", content="to delete"), "memoryId")
    call("soft_delete_memory", memoryId=gone)
    call("store_memory", namespace="n", type="fact", content=json.dumps(JSON_DOC), ttl="2030-01-01T00:00:00Z")
    call("store_memory", namespace="n", type="fact", content=HUGE)
    call("store_episode", namespace="n", context=HOSTILE, goal="g", action="a", outcome="o", insight="i",
         severity="high")
    # Missions, templates, tasks (dependencies, segments, claims, notes), recurring tasks.
    mission = _id(call("create_mission", name=HOSTILE, project="p", pilot="alice", priority="high", status="plan",
                       agents=["alice", "bob"], progress=12.5, description=f"spec: {json.dumps(JSON_DOC)}"), "missionId")
    call("upsert_mission_template", name="tpl ü", steps=[{"title": "one", "description": HOSTILE},
                                                        {"title": "two", "description": ""}])
    call("instantiate_template_into_mission", templateName="tpl ü", missionId=mission)
    task = _id(call("create_task", title=HOSTILE, assignedTo="alice", priority="high", missionId=mission,
                    tags=["x", "ü"], estimatedMinutes=90, description=HUGE[:150_000]), "taskId")
    other = _id(call("create_task", title="second", assignedTo="alice", priority="low"), "taskId")
    call("add_task_dependency", taskId=other, dependsOn=task)
    call("checkout_task", taskId=task)
    call("pause_task", taskId=task)
    call("resume_task", taskId=task)
    call("complete_task", taskId=task, completionNote=f"done: {HOSTILE}")
    call("create_recurring_task", title="daily ü", assignedTo="alice", cronExpression="0 9 * * *",
         timezone="Europe/Paris")
    ids.update(mission=mission, task=task)
    # Records: diary, briefing notes, components (with a revision), mandates (with spending), business units.
    call("write_diary", date="2026-12-01", content=HOSTILE, highlights=["ü", "🦓"], blockers=[])
    call("create_briefing_note", title=HOSTILE, topic="project/p", participants=["alice", "bob"], content=HUGE,
         decisions=["ship", "'quoted'"])
    call("register_component", name="widget ü", type="skill", content="# v1", team="core")
    call("update_component", name="widget ü", type="skill", content=f"# v2 {HOSTILE}", version="2.0.0")
    mandate = _id(call("create_mandate", service=HOSTILE, budget=1234.56, fulfilledBy="alice",
                       approvedCategories=["infra"]), "mandateId")
    call("accept_mandate", mandateId=mandate)
    call("update_mandate", mandateId=mandate, spend={"amount": 10.25, "category": "infra", "note": HOSTILE})
    call("create_bu", name="bu ü", description=HOSTILE, purpose="p", orchestratorId="alice", managementFee=0.15)
    # Fix patterns and attempts.
    pattern = _id(call("create_fix_pattern", symptom=HOSTILE, rootCause="r", sourceProject="p", tags=["db"],
                       severity="major", files=["a.py"]), "patternId")
    call("add_fix_attempt", patternId=pattern, description="tried", worked=True, why=HOSTILE)
    # Leases: a slot and path reservations (agentLeases, leaseFences).
    call("acquire_slot", name="deploy ü", ttlSeconds=600, reason=HOSTILE)
    call("reserve_paths", paths=["src/ü/**", "docs/%_*.md"], repo="o/r", ttlSeconds=600)
    # GitHub: a repo mapping and a deployment; an idempotent call (idempotencyKeys); an iframe session.
    call("add_repo_mapping", repo="o/r", orchestrator="alice", project="p")
    call("add_deployment", name="prod", deploymentUrl="https://deploy.example", deployKeyEnvVar="DEPLOY_KEY_PROD",
         githubRepo="o/r", orchestrator="alice")
    call("create_task", title="once", assignedTo="alice", priority="low", idempotencyKey="k-ü-1")
    call("create_iframe_session", sessionId=str(uuid.uuid4()), origin="https://embed.example",
         expiresAt=now + 3_600_000)
    bundle = call("export_okf_bundle", namespace="team/ü")
    call("import_okf_bundle", bundle=bundle.get("bundle", bundle), namespace="copy/ü", mode="merge")
    _other_entry_points(app, now)
    return ids


def _other_entry_points(app: Any, now: int) -> None:
    """Rows that HTTP sign-in, webhooks, the scheduler, the claim sweep and the dashboard write (no tool does)."""
    client = f"vp_client_{uuid.uuid4().hex[:8]}"

    def write(conn: Any) -> None:
        conn.execute("INSERT INTO oauth_scope_profiles (profileId, description, fromAllowList, "
                     "namespaceReadPrefixes, namespaceWritePrefixes, createdAt, updatedAt) "
                     "VALUES ('p-ü', ?, ?, '[\"team/\"]', '[]', ?, ?)", (HOSTILE, json.dumps(["send_message"]), now, now))
        conn.execute("INSERT INTO oauth_clients (clientId, clientSecretHash, name, redirectUris, grantTypes, "
                     "authMethod, scope, scopeProfile, metadata, createdAt) VALUES (?, 'h', ?, ?, "
                     "'[\"authorization_code\"]', 'none', 'mcp', 'p-ü', ?, ?)",
                     (client, "Client ü", json.dumps(["http://127.0.0.1/cb"]), json.dumps(JSON_DOC), now))
        conn.execute("INSERT INTO oauth_authorization_requests (requestHash, csrfHash, clientId, params, expiresAt) "
                     "VALUES ('rq', 'csrf', ?, ?, ?)", (client, json.dumps(JSON_DOC), now + 60_000))
        conn.execute("INSERT INTO oauth_authorization_codes (codeHash, clientId, params, expiresAt) "
                     "VALUES ('code', ?, '{}', ?)", (client, now + 60_000))
        conn.execute("INSERT INTO oauth_access_tokens (tokenHash, clientId, scopes, familyId, expiresAt, createdAt) "
                     "VALUES ('at', ?, 'mcp', 'fam', ?, ?)", (client, now + 60_000, now))
        conn.execute("INSERT INTO oauth_refresh_tokens (tokenHash, clientId, scopes, familyId, expiresAt, createdAt) "
                     "VALUES ('rt', ?, 'mcp', 'fam', ?, ?)", (client, now + 60_000, now))
        conn.execute("INSERT INTO userBearerTokens (tokenHash, clerkUserId, workspaceId, userName, extId, "
                     "expiresAt, createdAt) VALUES ('ub', 'user_ü', 'ws', ?, 'ext', ?, ?)", (HOSTILE, now + 1, now))
        conn.execute("INSERT INTO credentialsAuditLog (clerkUserId, workspaceId, extId, extVersion, issuedAt, "
                     "userAgent) VALUES ('user_ü', 'ws', 'ext', '1.0', ?, ?)", (now, HOSTILE))
        conn.execute("INSERT INTO githubDeliveries (deliveryId, event, action, repo, receivedAt) "
                     "VALUES (?, 'issues', 'opened', 'o/r', ?)", (str(uuid.uuid4()), now))
        conn.execute("INSERT INTO issues (id, repo, issueNumber, project, orchestrator, mapped, title, body, labels, "
                     "status, createdAt, updatedAt) VALUES ('iss-1', 'o/r', 7, 'p', 'alice', 1, ?, ?, ?, 'open', ?, ?)",
                     (HOSTILE, HUGE, json.dumps(["bug", "ü"]), now, now))
        conn.execute("INSERT INTO issueStats (id, repo, project, day, totalIssues, resolvedIssues, medianTimeToFix, "
                     "avgTimeToFix, createdAt, updatedAt) VALUES ('st-1', 'o/r', 'p', '2026-12-01', 3, 1, 2.75, "
                     "0.1, ?, ?)", (now, now))
        dep = conn.scalar("SELECT id FROM monitoredDeployments LIMIT 1")
        conn.execute("INSERT INTO errorLogs (id, deploymentId, deployment, functionName, errorMessage, hash, count, "
                     "firstSeen, lastSeen, githubRepo, createdAt, updatedAt) "
                     "VALUES ('err-1', ?, 'prod', 'f', ?, 'h', 2, ?, ?, 'o/r', ?, ?)", (dep, HOSTILE, now, now, now, now))
        conn.execute("INSERT INTO githubOutbox (id, kind, dedupKey, repo, issueNumber, payload, nextAttemptAt, "
                     "createdAt, updatedAt) VALUES ('ob-1', 'comment', 'd-1', 'o/r', 7, ?, ?, ?, ?)",
                     (json.dumps(JSON_DOC), now, now, now))
        conn.execute("INSERT INTO humanActions (id, actor, via, action, targetKind, targetId, detail, createdAt) "
                     "VALUES ('ha-1', 'human:zoë', 'loopback', 'send_message', 'message', 'm', ?, ?)",
                     (json.dumps(JSON_DOC), now))
        conn.execute("INSERT INTO schedulerJobs (name, schedule, nextRunAt, lastError) "
                     "VALUES ('job ü', '*/5 * * * *', ?, ?)", (now, HOSTILE))
        conn.execute("INSERT INTO leases (name, owner, expiresAt) VALUES ('scheduler ü', 'proc-ü', ?)", (now,))
        conn.execute("INSERT INTO processes (session, orchestrator, instance, pid, host, pidSpace, transport, beatMs, "
                     "startedAt, heartbeatAt, liveUntil, stoppedAt) VALUES ('ses-ü', 'alice', 'ü', 42, ?, NULL, "
                     "'stdio', 15000, ?, ?, ?, ?)", (HOSTILE, now, now, now + 35_000, now + 1))  # a server's heartbeat
        conn.execute("INSERT INTO httpLimits (key, tokens, failures, lockedUntil, updatedAt) "  # #31: a back-off
                     "VALUES ('backoff|203.0.113.9', 0.5, 6, ?, ?)", (now + 1000, now))
        recurring = conn.scalar("SELECT id FROM recurringTasks LIMIT 1")
        task = conn.scalar("SELECT id FROM tasks LIMIT 1")
        conn.execute("INSERT INTO recurringRuns (recurringTaskId, scheduledAt, taskId, firedAt) "
                     "VALUES (?, ?, ?, ?)", (recurring, now, task, now))
        conn.execute("INSERT INTO taskNotes (id, taskId, author, content, createdAt) "  # the claim sweep's note
                     "VALUES ('tnt-1', ?, 'system', ?, ?)", (task, HOSTILE, now))
        conn.execute("INSERT INTO meta (key, value) VALUES ('dashboard.sessionKey', ?)", (HOSTILE,))
        conn.execute("INSERT INTO meta (key, value) VALUES ('embedding.model', 'some-model')")

    app.db.write(write)
