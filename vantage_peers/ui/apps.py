"""The six renderers as MCP Apps (extension `io.modelcontextprotocol/ui`, SEP-1865).

For hosts that render MCP Apps (Claude, ChatGPT, VS Code, Goose):
- six app resources `ui://vp/v1/app/<primitive>` served as `text/html;profile=mcp-app`: a whole
  HTML document whose small script speaks the host bridge (postMessage JSON-RPC: `ui/initialize`,
  `ui/notifications/initialized`, then `tool-input` / `tool-result`, `size-changed`, teardown);
- `_meta.ui.resourceUri` on the six emitting tools in `tools/list` (no tool decorator changes);
- the emitting tools' results carry the server-rendered fragment of exactly the rows they return
  in `result._meta["vantage-peers/ui"]` (the renderers of render.py: escaped, script-free), which
  the view shows. The text content is untouched.
Both only for a client that negotiated the extension (`capabilities.extensions` with the
`text/html;profile=mcp-app` MIME type): every other client gets the listing and results it always
got, byte for byte. Over stateless HTTP a handshake-era client's capabilities are not known on
each POST: the listing then carries the links and the results stay plain.
  A host that drops result `_meta` gets the view to read the templated `ui://vp/v1/<primitive>`
  resource through the bridge instead (same filters as the tool call).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp.server.apps import APP_MIME_TYPE, Apps, client_supports_apps
from mcp.types import CallToolResult, ListToolsResult, Tool

from .. import __version__
from ..core import sdk
from .emit import EMITTERS, payload_for
from .i18n import LANGS
from .render import RENDERERS
from .resources import PRIMITIVES

log = logging.getLogger(__name__)

RESULT_META_KEY = "vantage-peers/ui"
MAX_RESULT_HTML = 512_000  # past this the view reads the resource instead (keeps results bounded)


def app_uri(primitive: str) -> str:
    return f"ui://vp/v1/app/{primitive}"


def tool_ui_meta(primitive: str) -> dict[str, Any]:
    return {"ui": {"resourceUri": app_uri(primitive)}}


# The view's script. Placeholders: __KIND__ (JSON string), __PARAMS__ (JSON list), __VERSION__.
_BRIDGE = r"""
(() => {
  "use strict";
  const KIND = __KIND__, PARAMS = __PARAMS__, VERSION = __VERSION__;
  const root = document.getElementById("vp-app");
  const pending = new Map();
  let nextId = 1, hostCaps = {}, toolArgs = {};
  const send = (msg) => window.parent.postMessage(Object.assign({jsonrpc: "2.0"}, msg), "*");
  const notify = (method, params) => send({method, params: params || {}});
  const request = (method, params) => new Promise((resolve, reject) => {
    const id = nextId++;
    pending.set(id, {resolve, reject});
    send({id, method, params: params || {}});
  });
  const resized = () => notify("ui/notifications/size-changed", {
    width: Math.ceil(document.documentElement.scrollWidth),
    height: Math.ceil(document.documentElement.scrollHeight)});
  const showHtml = (html) => { root.innerHTML = html; resized(); };  // server-rendered, escaped, no scripts
  const showText = (text) => { root.textContent = text; resized(); };
  const fromResource = async () => {
    const query = PARAMS.filter((k) => toolArgs[k] !== undefined && toolArgs[k] !== null)
      .map((k) => encodeURIComponent(k) + "=" + encodeURIComponent(String(toolArgs[k]))).join("&");
    const read = await request("resources/read", {uri: "ui://vp/v1/" + KIND + (query ? "?" + query : "")});
    const item = read && read.contents && read.contents[0];
    if (item && typeof item.text === "string") showHtml(item.text);
  };
  const onResult = async (result) => {
    const meta = result && result._meta && result._meta[__META_KEY__];
    if (meta && typeof meta.html === "string") return showHtml(meta.html);
    if (result && result.isError) {
      const first = (result.content || []).find((c) => c && c.type === "text");
      return showText(first ? first.text : "error");
    }
    if (hostCaps.serverResources) {
      try { return await fromResource(); } catch (err) { /* fall through to the text */ }
    }
    const first = result && (result.content || []).find((c) => c && c.type === "text");
    showText(first ? first.text : "");
  };
  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return;
    const msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0") return;
    if (msg.method === undefined && pending.has(msg.id)) {
      const waiter = pending.get(msg.id);
      pending.delete(msg.id);
      return msg.error ? waiter.reject(msg.error) : waiter.resolve(msg.result);
    }
    const params = msg.params || {};
    if (msg.method === "ui/notifications/tool-input") toolArgs = params.arguments || {};
    else if (msg.method === "ui/notifications/tool-result") onResult(params);
    else if (msg.method === "ui/notifications/tool-cancelled") showText(params.reason || "cancelled");
    else if (msg.method === "ui/notifications/host-context-changed" && params.theme)
      document.documentElement.dataset.theme = params.theme;
    else if ((msg.method === "ui/resource-teardown" || msg.method === "ping") && msg.id !== undefined)
      send({id: msg.id, result: {}});
  });
  request("ui/initialize", {
    appInfo: {name: "vantage-peers " + KIND, version: VERSION},
    appCapabilities: {availableDisplayModes: ["inline"]},
    protocolVersion: "2026-01-26",
  }).then((init) => {
    hostCaps = (init && init.hostCapabilities) || {};
    const ctx = (init && init.hostContext) || {};
    if (ctx.theme) document.documentElement.dataset.theme = ctx.theme;
    notify("ui/notifications/initialized");
    resized();
  }, () => showText("This view needs a host that supports MCP Apps."));
})();
"""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>VantagePeers {kind}</title>
<style>
html,body{{margin:0;padding:0;background:transparent}}
body{{padding:8px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;overflow-wrap:anywhere}}
#vp-app-wait{{color:#57606a}}
html[data-theme=dark] body{{color:#e6edf3}}
</style>
</head>
<body>
<div id="vp-app" data-kind="{kind}"><p id="vp-app-wait" role="status">Loading {kind}…</p></div>
<script>{script}</script>
</body>
</html>
"""


def app_html(primitive: str) -> str:
    """The whole view document for one primitive (static: the data arrives through the bridge)."""
    spec = next(s for s in PRIMITIVES if s.name == primitive)
    script = (_BRIDGE.replace("__KIND__", json.dumps(primitive))
              .replace("__PARAMS__", json.dumps([*spec.params, "limit", "lang"]))
              .replace("__VERSION__", json.dumps(__version__))
              .replace("__META_KEY__", json.dumps(RESULT_META_KEY)))
    return _PAGE.format(kind=primitive, script=script)


def with_fragment(tool: str, result: CallToolResult) -> CallToolResult:
    """The result plus, in `_meta`, the rendered fragment of exactly the rows it returned."""
    kind, _singular = EMITTERS[tool]
    if result.is_error:
        return result
    payload = payload_for(tool, result.structured_content)
    if payload is None:
        return result
    items = payload["items"] if "items" in payload else [payload["item"]]
    try:
        html = RENDERERS[kind](items, "en")
    except Exception:  # noqa: BLE001 - a view is optional: never fail the call because of it
        log.exception("MCP App fragment for %s failed", tool)
        return result
    if len(html) > MAX_RESULT_HTML:
        return result
    return result.model_copy(update={"meta": {**(result.meta or {}), RESULT_META_KEY: {"kind": kind, "html": html}}})


def with_ui_meta(tools: list[Tool]) -> list[Tool]:
    """The listing with `_meta.ui.resourceUri` on the emitting tools."""
    return [t.model_copy(update={"meta": {**(t.meta or {}), **tool_ui_meta(EMITTERS[t.name][0])}})
            if t.name in EMITTERS else t for t in tools]


def apps_support(ctx: Any) -> bool | None:
    """True/False from the client's capabilities; None when they are unknown — a stateless HTTP
    POST of a handshake-era client (its initialize went in another request)."""
    session = getattr(ctx, "session", None)
    if session is None or session.client_capabilities is None:
        return None
    return client_supports_apps(ctx)


class VantageApps(Apps):
    """The SDK's Apps extension (resources + capability) plus: only for a client that negotiated
    Apps, the fragment in emitting tools' results. Clients without Apps get byte-identical results."""

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if params.name in EMITTERS and isinstance(result, CallToolResult) and apps_support(ctx) is True:
            return with_fragment(params.name, result)
        return result


def register_apps(app: Any, mcp: Any) -> None:
    """On the built MCPServer: the app resources, the advertised capability, the `tools/call`
    interceptor, and `_meta.ui` in `tools/list` for clients that negotiated Apps."""
    apps = VantageApps()
    for spec in PRIMITIVES:
        apps.add_html_resource(app_uri(spec.name), app_html(spec.name), name=f"{spec.name}-app",
                               title=f"VantagePeers {spec.name} (MCP App)",
                               description=f"MCP App view of {spec.name}: {spec.description}",
                               prefers_border=True)
    sdk.apply_extension(mcp, apps)  # the server is built before the UI registers

    # Servers SHOULD announce UI-bound tools only to hosts that render them (SEP-1865): the plain
    # listing stays as it is (and as small) for every other client.
    async def list_tools(plain: Any, ctx: Any, params: Any) -> Any:
        result = await plain(ctx, params)
        # unknown capabilities: announce the link (a few dozen bytes per emitting tool) — the view
        # then reads the templated resource through the bridge, as no fragment rides in the result
        if isinstance(result, ListToolsResult) and apps_support(ctx) is not False:
            return result.model_copy(update={"tools": with_ui_meta(result.tools)})
        return result

    sdk.wrap_list_tools(mcp, list_tools)


def register(app: Any) -> None:
    app.on_server(lambda mcp: register_apps(app, mcp))


__all__ = ["APP_MIME_TYPE", "LANGS", "app_html", "app_uri", "register", "RESULT_META_KEY"]
