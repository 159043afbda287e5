"""MCP Apps (SEP-1865): the six views as `text/html;profile=mcp-app`, `_meta.ui.resourceUri` on the
emitting tools and the rendered rows in result `_meta` — for a client that negotiated the extension
only; every other client gets byte-identical listings and results. The view's host bridge is run in
a real headless Chromium acting as the host."""

from __future__ import annotations

import html as htmllib
import json
import shutil
import subprocess
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client
from mcp.client.extension import ClientExtension

from vantage_peers.server import INSTRUCTIONS
from vantage_peers.ui.apps import RESULT_META_KEY, app_html, app_uri
from vantage_peers.ui.emit import EMITTERS

APP_MIME = "text/html;profile=mcp-app"
SIX = ("tasks-table", "messages-feed", "diary-entry", "mission-timeline", "briefing-note", "memory-quote")


class AppsHost(ClientExtension):
    """What an Apps host (Claude, VS Code, …) advertises at initialize."""

    identifier = "io.modelcontextprotocol/ui"

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [APP_MIME]}


def session(app, apps: bool):
    import contextlib

    @contextlib.contextmanager
    def cm():
        client = Client(app.mcp, extensions=[AppsHost()] if apps else None)
        with start_blocking_portal() as portal, portal.wrap_async_context_manager(client) as c:
            yield portal, c

    return cm()


def seed(tools) -> None:
    tools.call("create_task", title='Fix <b>auth</b> "bug"', assignedTo="sigma", priority="high", createdBy="pi")
    tools.call("create_task", title="Second", assignedTo="sigma", priority="low", createdBy="pi")


def test_six_app_resources_and_capability(app):
    with session(app, apps=False) as (portal, c):
        listed = portal.call(c.list_resources).resources
        apps = {str(r.uri): r for r in listed if r.mime_type == APP_MIME}
        assert sorted(apps) == sorted(app_uri(p) for p in SIX)
        for primitive in SIX:
            read = portal.call(c.read_resource, app_uri(primitive)).contents
            assert len(read) == 1 and read[0].mime_type == APP_MIME
            page = read[0].text
            assert page.startswith("<!doctype html>") and "ui/initialize" in page
            assert "ui/notifications/initialized" in page and "ui/notifications/tool-result" in page
            assert f'data-kind="{primitive}"' in page
            # self-contained: no external script, stylesheet or image
            assert "src=" not in page and "href=" not in page and "http" not in page
    caps = app.mcp._lowlevel_server.extensions
    assert "io.modelcontextprotocol/ui" in caps


def test_listing_and_results_unchanged_without_apps_and_linked_with_apps(app, tools):
    seed(tools)
    with session(app, apps=False) as (portal, c):
        plain_tools = {t.name: t for t in portal.call(c.list_tools).tools}
        plain_result = portal.call(c.call_tool, "list_tasks", {"assignedTo": "sigma"})
    with session(app, apps=True) as (portal, c):
        app_tools = {t.name: t for t in portal.call(c.list_tools).tools}
        app_result = portal.call(c.call_tool, "list_tasks", {"assignedTo": "sigma"})
        recall = portal.call(c.call_tool, "recall", {"query": "nothing stored"})
        failing = portal.call(c.call_tool, "get_diary", {"date": "not-a-date"})
    # without Apps: no ui meta at all, no fragment
    assert all(not (t.meta or {}).get("ui") for t in plain_tools.values())
    assert not (plain_result.meta or {}).get(RESULT_META_KEY)
    # with Apps: exactly the six emitting tools link their view; the rest is the same listing
    linked = {n: t.meta["ui"]["resourceUri"] for n, t in app_tools.items() if (t.meta or {}).get("ui")}
    assert linked == {tool: app_uri(kind) for tool, (kind, _) in EMITTERS.items()}
    assert set(app_tools) == set(plain_tools)
    for name, tool in plain_tools.items():
        if name not in EMITTERS:
            assert app_tools[name] == tool
    # the text a model reads is identical; the fragment rides in _meta
    assert [b.text for b in app_result.content] == [b.text for b in plain_result.content]
    assert app_result.structured_content == plain_result.structured_content
    fragment = app_result.meta[RESULT_META_KEY]
    assert fragment["kind"] == "tasks-table" and "2 tasks" in fragment["html"]
    assert "Fix &lt;b&gt;auth&lt;/b&gt; &quot;bug&quot;" in fragment["html"] and "<b>" not in fragment["html"]
    assert recall.meta[RESULT_META_KEY]["kind"] == "memory-quote"
    assert failing.is_error and not (failing.meta or {}).get(RESULT_META_KEY)


def test_instructions_fit_two_kilobytes():
    assert len(INSTRUCTIONS.encode("utf-8")) <= 2048


HOST = """<!doctype html><html><body><pre id="log"></pre><div id="shown"></div>
<iframe id="view" sandbox="allow-scripts allow-same-origin" srcdoc="{srcdoc}"></iframe>
<script>
const view = document.getElementById("view"), log = [];
const RESULT = {result};
window.addEventListener("message", (e) => {{
  const m = e.data; log.push(m.method || ("response " + m.id));
  const reply = (result) => view.contentWindow.postMessage({{jsonrpc: "2.0", id: m.id, result}}, "*");
  if (m.method === "ui/initialize") reply({{protocolVersion: "2026-01-26", hostInfo: {{name: "test-host", version: "1"}},
      hostCapabilities: {{}}, hostContext: {{theme: "light", displayMode: "inline"}}}});
  else if (m.method === "ui/notifications/initialized") {{
    view.contentWindow.postMessage({{jsonrpc: "2.0", method: "ui/notifications/tool-input",
      params: {{arguments: {{assignedTo: "sigma"}}}}}}, "*");
    view.contentWindow.postMessage({{jsonrpc: "2.0", method: "ui/notifications/tool-result", params: RESULT}}, "*");
  }} else if (m.method === "ui/notifications/size-changed" && log.includes("ui/notifications/initialized")) {{
    document.getElementById("shown").innerHTML = view.contentDocument.getElementById("vp-app").innerHTML;
    document.getElementById("log").textContent = JSON.stringify(log);
  }}
}});
</script></body></html>"""


def test_view_speaks_the_host_bridge_in_chromium(app, tools, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    seed(tools)
    with session(app, apps=True) as (portal, c):
        result = portal.call(c.call_tool, "list_tasks", {"assignedTo": "sigma"})
    wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    page = tmp_path / "host.html"
    page.write_text(HOST.format(srcdoc=htmllib.escape(app_html("tasks-table"), quote=True),
                                result=json.dumps(wire)), encoding="utf-8")
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    dom = done.stdout
    assert "ui/initialize" in dom and "ui/notifications/initialized" in dom, done.stderr[-2000:]
    shown = dom.split('<div id="shown">', 1)[1].split('<iframe id="view"', 1)[0]  # what the view rendered
    assert "vp-tasks-table" in shown and "2 tasks" in shown
    assert "Fix &lt;b&gt;auth&lt;/b&gt;" in shown and "<b>auth" not in shown
