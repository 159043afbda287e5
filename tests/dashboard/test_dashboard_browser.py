"""End to end in a real browser: Playwright driving Debian's chromium against a real
`vantage-peers dashboard` process.

It opens every view, sees a message sent by another process appear without a reload, composes a
reply that an agent then reads with `check_messages`, runs axe-core on every view (no serious or
critical violation), and saves the screenshots under docs/img/ (the README shows them).

Needs chromium (`.ci/run` installs the Debian package) and axe-core (`.ci/run` installs the npm
package into .ci/cache); skipped, saying which, only when one of them is missing.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import make_settings, open_tools
from support.dashboard_helpers import dashboard_process, send_from_another_process
from support.http_helpers import free_port
from support.paths import REPO

from vantage_peers.server import create_app

IMG = REPO / "docs" / "img"
VIEWS = ("team", "messages", "tasks", "missions", "schedule", "memory", "claims", "activity")


def _chromium() -> str | None:
    for candidate in (os.environ.get("VP_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def _axe() -> Path | None:
    for candidate in (os.environ.get("VP_AXE_JS"), REPO / ".ci/cache/node_modules/axe-core/axe.min.js"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


CHROMIUM, AXE = _chromium(), _axe()
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run "
                                                "does it) — the package registry could not be reached"),
    pytest.mark.skipif(AXE is None, reason="axe-core is not installed (.ci/run installs it with npm into "
                                           ".ci/cache) — npm could not be reached"),
]

SERIOUS = """() => axe.run(document, {resultTypes: ['violations']}).then(r => r.violations
    .filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', ')))"""


def _seed(tools) -> dict[str, str]:
    now = int(time.time() * 1000)
    for who, doing in (("alice", "planning the 2.0 release"), ("bob", "fixing the flaky parser test"),
                       ("carol", "reviewing the migration")):
        tools.call("set_summary", summary=doing, orchestratorId=who)
    mission = tools.call("create_mission", name="Release 2.0", project="core", status="execute", priority="high",
                         pilot="alice", agents=["bob", "carol"], createdBy="alice")
    mid = mission if isinstance(mission, str) else mission["_id"]
    ids = {}
    for title, who, prio, due in (("Fix the flaky parser test", "bob", "urgent", now - 3_600_000),
                                  ("Write the migration guide", "carol", "medium", None),
                                  ("Tag the release", "alice", "high", now + 86_400_000),
                                  ("Rotate the CI secret", "bob", "low", None)):
        ids[title] = tools.call("create_task", title=title, assignedTo=who, createdBy="alice", priority=prio,
                                missionId=mid, dueDate=due)
    tools.call("start_task", taskId=ids["Fix the flaky parser test"], callerOrchestrator="bob")
    tools.call("block_task", taskId=ids["Rotate the CI secret"], reason="waiting on ops for the vault token",
               callerOrchestrator="bob")
    tools.call("create_recurring_task", title="Morning stand-up notes", assignedTo="alice",
               cronExpression="0 9 * * 1-5", createdBy="alice")
    tools.call("store_memory", namespace="project/core", type="decision",
               content="Releases are tagged from main after the full suite passes.", createdBy="alice")
    tools.call("store_memory", namespace="project/core", type="observation",
               content="The parser test is flaky when the tmp dir is on a network drive.", createdBy="bob")
    tools.call("send_message", **{"from": "bob", "channel": "alice", "content": "Parser fix is in review."})
    tools.call("send_message", **{"from": "carol", "channel": "broadcast", "content": "Migration guide draft is up."})
    return ids


def test_dashboard_in_a_real_browser(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    db = tmp_path / "e2e.db"
    app = create_app(make_settings(db))
    with open_tools(app) as tools, sync_playwright() as pw:
        ids = _seed(tools)
        port = free_port()
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            # 1. Live: under the real CSP (no bypass), a message from another process appears
            # without a reload; a reply composed in the page reaches the agent.
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            with dashboard_process(db, port, name="Dana") as base:
                page.goto(f"{base}/messages")
                expect(page.locator("#live-state")).to_have_class("live on", timeout=15_000)
                page.evaluate("window.__noReload = 'still here'")
                send_from_another_process(db, "Hello from another process", sender="bob", channel="alice")
                expect(page.locator("#live")).to_contain_text("Hello from another process", timeout=10_000)
                assert page.evaluate("window.__noReload") == "still here"
                page.fill("#to", "bob")
                page.fill("#content", "Thanks Bob, merging after review.")
                page.click("button[type=submit]:has-text('Send')")
                expect(page.locator(".notice")).to_be_visible()
                inbox = tools.call("check_messages", recipient="bob")  # also holds carol's broadcast
                assert [(m["from"], m["content"]) for m in inbox if m["from"].startswith("human:")] == [
                    ("human:Dana", "Thanks Bob, merging after review.")]
                page.evaluate("window.__noReload = 'across the restart'")
            # 2. The server stops and comes back on the same port: the page reconnects by itself
            # and keeps updating, still without a reload.
            expect(page.locator("#live-state")).to_have_class("live off", timeout=15_000)
            with dashboard_process(db, port, name="Dana") as base:
                expect(page.locator("#live-state")).to_have_class("live on", timeout=20_000)
                send_from_another_process(db, "Back after the restart", sender="carol", channel="alice")
                expect(page.locator("#live")).to_contain_text("Back after the restart", timeout=10_000)
                assert page.evaluate("window.__noReload") == "across the restart"
                assert not [e for e in errors if "Content Security Policy" in e], errors
                page.close()
                _views(browser, base, ids, expect)
                # 3. Unblock from the task page, with the keyboard only.
                page = browser.new_page()
                page.goto(f"{base}/tasks/{ids['Rotate the CI secret']}")
                page.focus("button:has-text('Unblock')")
                page.keyboard.press("Enter")
                expect(page.locator(".notice")).to_be_visible()
                assert tools.call("get_task", taskId=ids["Rotate the CI secret"])["status"] == "todo"
        finally:
            browser.close()
    app.db.close()


def _views(browser, base: str, ids: dict[str, str], expect) -> None:
    """Every view, light and dark: a heading, the live stream, axe-core, screenshots; and the
    read-only views with JavaScript off."""
    IMG.mkdir(parents=True, exist_ok=True)
    no_js = browser.new_context(java_script_enabled=False)
    plain = no_js.new_page()
    for view, text in (("team", "fixing the flaky parser test"), ("tasks", "Tag the release"),
                       ("missions", "Release 2.0"), ("memory?q=parser", "network drive"),
                       ("messages?channel=alice", "Parser fix is in review."), ("schedule", "Morning stand-up")):
        plain.goto(f"{base}/{view}")
        expect(plain.locator("#live")).to_contain_text(text)
    plain.goto(f"{base}/tasks")
    plain.check("#f-blocked")
    plain.click("button:has-text('Apply')")  # a GET form: filters work without JavaScript too
    expect(plain.locator("#live")).to_contain_text("Rotate the CI secret")
    expect(plain.locator("#live")).not_to_contain_text("Tag the release")
    no_js.close()
    for scheme in ("light", "dark"):
        ctx = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=scheme,
                                  bypass_csp=True)  # only so that axe's script can be injected
        view_page = ctx.new_page()
        for view in VIEWS:
            view_page.goto(f"{base}/{view}" + ("?q=parser" if view == "memory" else ""))
            expect(view_page.locator("h1")).to_be_visible()
            expect(view_page.locator("#live-state")).to_have_class("live on", timeout=15_000)
            view_page.add_script_tag(path=str(AXE))
            bad = view_page.evaluate(SERIOUS)
            assert bad == [], f"{view} ({scheme}): {bad}"
            if scheme == "light" or view in ("tasks", "messages"):
                suffix = "" if scheme == "light" else "-dark"
                view_page.screenshot(path=str(IMG / f"dashboard-{view}{suffix}.png"))
        view_page.goto(f"{base}/tasks/{ids['Rotate the CI secret']}")
        view_page.add_script_tag(path=str(AXE))
        assert view_page.evaluate(SERIOUS) == [], scheme
        if scheme == "light":
            view_page.screenshot(path=str(IMG / "dashboard-task.png"))
            # keyboard: the skip link is the first stop and lands on <main>
            view_page.keyboard.press("Tab")
            assert view_page.evaluate("document.activeElement.className") == "skip"
            view_page.keyboard.press("Enter")
            assert view_page.evaluate("document.activeElement.id") == "main"
        ctx.close()
