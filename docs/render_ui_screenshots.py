"""Render every `ui://vp/v1/<primitive>` with sample data and screenshot it in headless Chromium.

    uv run python docs/render_ui_screenshots.py [--chromium PATH] [--out docs/img]

Sample rows are written through the real tools into a throw-away database, each primitive is read
through MCP `resources/read` (exactly what a client receives), wrapped in a minimal page and
captured by Debian's `chromium` package (`apt-get install chromium`). Needs no network.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

SHOTS = {  # file stem -> URI read
    "tasks-table": "ui://vp/v1/tasks-table?assignedTo=sigma&limit=10",
    "tasks-table-fr": "ui://vp/v1/tasks-table?assignedTo=sigma&limit=10&lang=fr",
    "messages-feed": "ui://vp/v1/messages-feed?channel=fleet&limit=20",
    "diary-entry": "ui://vp/v1/diary-entry?orchestrator=sigma&limit=2",
    "mission-timeline": "ui://vp/v1/mission-timeline?pilot=tau&limit=5",
    "briefing-note": "ui://vp/v1/briefing-note?topic=deployment&limit=3",
    "memory-quote": "ui://vp/v1/memory-quote?namespace=sigma&limit=5",
    "error": "ui://vp/v1/diary-entry?date=yesterday",
}
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--force-device-scale-factor=1"]


def seed(tools) -> None:
    done = tools.call("create_task", title="Ship v2.4.0", assignedTo="sigma", priority="low", createdBy="pi")
    tools.call("start_task", taskId=done, callerOrchestrator="sigma")
    tools.call("complete_task", taskId=done, callerOrchestrator="sigma", completionNote="released")
    for title, status, priority in (("Fix auth bug", "in_progress", "high"), ("Write release notes", "todo", "medium"),
                                    ("Review PR #42", "review", "high"), ("Migrate CI runners", "blocked", "urgent")):
        tools.call("create_task", title=title, assignedTo="sigma", priority=priority, createdBy="pi", status=status)
    for sender, text in (("pi", "Deploy window opens at 14:00 UTC."), ("sigma", "Auth fix is in review."),
                         ("tau", "CI runners migrated; <script> tags stay text: <b>not bold</b>.")):
        tools.call("send_message", channel="fleet", content=text, **{"from": sender})
    tools.call("write_diary", date="2026-06-26", orchestrator="sigma", content="Shipped the ui:// resources.",
               highlights=["six primitives live", "markers behind VP_EMIT_UI_MARKERS"])
    tools.call("write_diary", date="2026-06-27", orchestrator="sigma", content="Backup/restore and OKF bundles.",
               highlights=["merge is idempotent"], blockers=["waiting on the NFS test box"])
    for name, status, progress in (("Paradigm B", "execute", 70), ("OKF bundles", "validate", 95),
                                   ("Recurring tasks", "plan", None)):
        extra = {"progress": progress} if progress is not None else {}
        tools.call("create_mission", name=name, project="vantage-peers", status=status, priority="high",
                   pilot="tau", agents=["tau", "sigma"], createdBy="pi", **extra)
    tools.call("create_briefing_note", title="Release 2.4.0 go/no-go", topic="deployment",
               participants=["pi", "sigma", "tau"], content="Go. Roll out to the fleet after the smoke tests.",
               createdBy="pi")
    tools.call("create_briefing_note", title="Rollback plan", topic="deployment", participants=["pi"],
               content="Restore last night's backup with `vantage-peers restore`.", createdBy="pi")
    for kind, text in (("feedback", "Keep tool results short; agents read every byte."),
                       ("reference", "The bundle format is documented in docs/bundles.md."),
                       ("decision", "Markers are appended as a second text block.")):
        tools.call("store_memory", namespace="sigma", type=kind, content=text, createdBy="sigma")


def page(fragment: str) -> str:
    return ("<!doctype html><html><head><meta charset='utf-8'><title>vp</title>"
            "<style>body{margin:0;padding:16px;background:#f6f8fa}</style></head>"
            f"<body>{fragment}</body></html>")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = parser.parse_args()
    if not args.chromium:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 1
    from conftest import make_settings, open_tools

    from vantage_peers.server import create_app

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(make_settings(Path(tmp) / "vp.db"))
        try:
            with open_tools(app) as tools:
                seed(tools)
                for stem, uri in SHOTS.items():
                    html = tools.portal.call(tools.client.read_resource, uri).contents[0].text
                    source = Path(tmp) / f"{stem}.html"
                    source.write_text(page(html), encoding="utf-8")
                    target = out / f"{stem}.png"
                    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp)  # a fresh profile per shot
                    subprocess.run([args.chromium, *FLAGS, f"--user-data-dir={profile}", "--window-size=800,520",
                                    f"--screenshot={target}", source.as_uri()],
                                   check=True, capture_output=True, timeout=120)
                    print(f"{uri} -> {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
        finally:
            app.db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
