"""The real MCP Inspector CLI (Node 22) over stdio and over HTTP with a bearer: tools, resources,
resource templates, prompts, a call of each kind, and the MCP Apps probe of the emitting tools."""

from __future__ import annotations

import json
from pathlib import Path

import install
import pytest
from client_env import run
from support.http_helpers import MASTER, script, serving

APP_MIME = "text/html;profile=mcp-app"
EMITTING = {"list_tasks": "tasks-table", "list_messages": "messages-feed", "get_diary": "diary-entry",
            "list_missions": "mission-timeline", "get_briefing_note": "briefing-note", "recall": "memory-quote"}


class Inspector:
    def __init__(self, env: dict[str, str], cwd: Path, target: list[str]) -> None:
        self.env, self.cwd, self.target = env, cwd, target

    def raw(self, method: str, *extra: str):
        # --connect-timeout: the server's start on a loaded machine can take longer than the default 15 s
        argv = [str(install.binary("inspector")), "--cli", *self.target, "--connect-timeout", "120000",
                "--method", method, *extra]
        done = run(argv, self.env, self.cwd)
        assert done.returncode == 0, (method, extra, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    def __call__(self, method: str, *extra: str):
        return json.loads(self.raw(method, *extra))


def exercise(inspector: Inspector, stateless: bool) -> None:
    tools = inspector("tools/list")["tools"]
    names = {t["name"] for t in tools}
    assert len(tools) >= 100 and {"whoami", "create_task", "list_tasks", "recall"} <= names

    resources = inspector("resources/list")["resources"]
    assert len(resources) == 12
    apps = sorted(r["uri"] for r in resources if r.get("mimeType") == APP_MIME)
    assert apps == sorted(f"ui://vp/v1/app/{kind}" for kind in EMITTING.values())
    templates = inspector("resources/templates/list")["resourceTemplates"]
    ui = [t for t in templates if t["uriTemplate"].startswith("ui://")]
    assert len(ui) == 6 and all("{?" in t["uriTemplate"] for t in ui)
    # the inbox and task-queue resources (issue 21), subscribable
    assert sorted(t["uriTemplate"] for t in templates if t["uriTemplate"].startswith("vp://")) == [
        "vp://inbox/{orchestrator}", "vp://tasks/{orchestrator}"]
    prompts = inspector("prompts/list")["prompts"]
    assert {p["name"] for p in prompts} >= {"daily-start", "check-messages", "recall", "write-diary"}

    # a call of each kind: a tool, a resource (fragment and app view), a template read, a prompt
    made = inspector("tools/call", "--tool-name", "create_task", "--tool-arg", "title=Inspector <task>",
                     "assignedTo=sigma", "priority=high", "createdBy=pi")
    assert not made.get("isError"), made
    listed = inspector("tools/call", "--tool-name", "list_tasks", "--tool-arg", "assignedTo=sigma")
    assert "Inspector <task>" in listed["content"][0]["text"]
    assert "vantage-peers/ui" not in listed.get("_meta", {})  # no Apps negotiated: the plain result
    page = inspector("resources/read", "--uri", "ui://vp/v1/tasks-table?assignedTo=sigma")["contents"][0]
    assert page["mimeType"] == "text/html" and "Inspector &lt;task&gt;" in page["text"]
    view = inspector("resources/read", "--uri", "ui://vp/v1/app/tasks-table")["contents"][0]
    assert view["mimeType"] == APP_MIME and "ui/initialize" in view["text"]
    prompt = inspector("prompts/get", "--prompt-name", "recall", "--prompt-args", "query=release plan")
    assert "release plan" in json.dumps(prompt["messages"])

    # MCP Apps, as a host that advertises the extension sees them
    probes = [json.loads(line) for line in inspector.raw("tools/list", "--app-info", "--advertise-apps").splitlines()
              if line.startswith("{")]
    with_app = {p["toolName"]: p for p in probes if p.get("hasApp")}
    assert {name: p["resourceUri"] for name, p in with_app.items()} == {
        tool: f"ui://vp/v1/app/{kind}" for tool, kind in EMITTING.items()}
    assert all(p["resourceMimeType"] == APP_MIME for p in with_app.values())
    rendered = inspector("tools/call", "--tool-name", "list_tasks", "--tool-arg", "assignedTo=sigma",
                         "--advertise-apps")
    assert rendered["content"] == listed["content"]  # the text a model reads is unchanged
    if stateless:  # capabilities unknown per POST: the view reads the resource through the bridge
        assert "vantage-peers/ui" not in rendered.get("_meta", {})
    else:
        assert "Inspector &lt;task&gt;" in rendered["_meta"]["vantage-peers/ui"]["html"]
        plain = [json.loads(line) for line in inspector.raw("tools/list", "--app-info").splitlines()
                 if line.startswith("{")]
        assert not any(p.get("hasApp") for p in plain)  # a client without Apps gets no links


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_inspector_drives_every_kind(transport, sealed_env, tmp_path):
    env = {**sealed_env, "VP_ORCHESTRATOR": "sigma"}
    if transport == "stdio":
        exercise(Inspector(env, tmp_path, [script()]), stateless=False)
        return
    with serving(tmp_path / "served.db") as http:
        exercise(Inspector(env, tmp_path, [http.url, "--transport", "http",
                                           "--header", f"Authorization: Bearer {MASTER}"]), stateless=True)
        refused = run([str(install.binary("inspector")), "--cli", http.url, "--transport", "http",
                       "--header", "Authorization: Bearer " + "0" * 64, "--method", "tools/list"], env, tmp_path)
        assert refused.returncode != 0  # the test can fail: a bad bearer gets nothing
