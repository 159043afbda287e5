"""improvisation_digest: the documented heuristic, exclusions, window, scope and caps."""

from __future__ import annotations

import pytest

from vantage_peers.core.ids import now_ms
from vantage_peers.domains.improvisation.store import DAY_MS, is_flagged

pytestmark = pytest.mark.backends


def msg(tools, sender, content):
    return tools.call("send_message", **{"from": sender, "channel": "bob", "content": content})["messageId"]


def task(tools, creator, title, assignee="sigma", **kw):
    return tools.call("create_task", title=title, assignedTo=assignee, priority="medium", createdBy=creator, **kw)


def test_heuristic_tokens_and_footer():
    flagged = [
        "merged PR into main", "Deployed to prod", "commit ef91f6f is live", "see #954", "approved",
        "shipped it", "released 2.13", "fixed the bug", "ref k17abcdefghijklmnopqrstuvwxyz012345",
        "see tsk_01KBZP0000000000000000000A",
    ]
    for body in flagged:
        assert is_flagged(body, "sigma"), body
    clean = ["just thinking aloud", "facade decade", "1234567 is a number", "merged but VP-Sources: recall(x)→[a]",
             "#hashtag", "unfixed mergedness"]
    for body in clean:
        assert not is_flagged(body, "sigma"), body
    for author in ("system", "cron-daily", "CRON-bot", "webhook", "github-webhook-ingest"):
        assert not is_flagged("merged #12 at ef91f6f", author)
    assert is_flagged("merged", "cronus")  # the dash is mandatory


def test_digest_counts_samples_scope_and_window(tools, app):
    msg(tools, "pi", "deployed vantage-peers-mcp@2.13.0 to Railway at commit ef91f6f")
    msg(tools, "pi", "lunch?")
    msg(tools, "sigma", "merged #12 VP-Sources: recall(\"x\")→[mem_1]")
    msg(tools, "system", "deployed everything")
    t1 = task(tools, "sigma", "Fix #42 login")
    task(tools, "cron-daily", "deploy fixed nightly")
    task(tools, "tau", "plain work")
    tools.call("complete_task", taskId=t1, completionNote="merged PR #954 into main", callerOrchestrator="sigma")
    mem = tools.call("store_memory", namespace="project/x", type="decision", content="approved PR-C at 4ddca2b",
                     createdBy="tau")["memoryId"]
    tools.call("store_memory", namespace="project/x", type="note", content="approved", createdBy="cron-sync")
    d = tools.call("improvisation_digest")
    assert d["countsByCategory"] == {"message": 1, "task": 1, "memory": 1}
    assert d["countsByOrch"] == {"pi": 1, "sigma": 1, "tau": 1}
    assert [s["category"] for s in d["samples"]] == ["memory", "task", "message"]  # newest first
    assert d["samples"][0]["id"] == mem
    assert "ef91f6f" in d["samples"][2]["snippet"]
    scoped = tools.call("improvisation_digest", orchestrators=["pi"])
    assert scoped["countsByOrch"] == {"pi": 1} and len(scoped["samples"]) == 1
    assert tools.call("improvisation_digest", orchestrators=["nobody"]) == {
        "countsByOrch": {}, "countsByCategory": {}, "samples": []}
    # Outside the window nothing counts.
    old = now_ms() - 30 * DAY_MS
    app.db.write(lambda c: (c.execute("UPDATE messages SET createdAt = ?", (old,)),
                            c.execute("UPDATE tasks SET updatedAt = ?", (old,)),
                            c.execute("UPDATE memories SET createdAt = ?", (old,))))
    assert tools.call("improvisation_digest")["samples"] == []
    assert tools.call("improvisation_digest", windowDays=31)["countsByOrch"] == {"pi": 1, "sigma": 1, "tau": 1}


def test_digest_caps_samples_at_fifty(tools):
    for i in range(60):
        msg(tools, f"o{i % 3}", f"shipped build {i}")
    d = tools.call("improvisation_digest")
    assert len(d["samples"]) == 50 and sum(d["countsByOrch"].values()) == 60
    assert d["countsByCategory"] == {"message": 60}
    assert d["samples"][0]["snippet"].endswith("59")


def test_digest_rejects_bad_arguments(tools):
    assert "windowDays" in tools.error("improvisation_digest", windowDays=0)
    assert "windowDays" in tools.error("improvisation_digest", windowDays="week")
    assert "orchestrators" in tools.error("improvisation_digest", orchestrators="sigma, pi")
    assert "INVALID_ARGUMENT" in tools.error("improvisation_digest", orchestrators=["  "])


def test_digest_skips_expired_memories(tools, app):
    """Expired memories are never returned anywhere else, so the digest does not sample them either."""
    live = tools.call("store_memory", namespace="project/x", type="note", content="deployed at 4ddca2b",
                      createdBy="tau")["memoryId"]
    gone = tools.call("store_memory", namespace="project/x", type="note", content="shipped at ef91f6f",
                      createdBy="tau")["memoryId"]
    app.db.write(lambda c: c.execute("UPDATE memories SET expiresAt = ? WHERE id = ?", (now_ms() - 1_000, gone)))
    d = tools.call("improvisation_digest")
    assert [s["id"] for s in d["samples"]] == [live]
    assert d["countsByOrch"] == {"tau": 1} and d["countsByCategory"] == {"memory": 1}
