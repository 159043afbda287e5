"""The consent page of /oauth/authorize: the client's name and scope, the access it will get (or
the operator command that grants some, with its client id), Approve or Deny.

CSRF: each GET mints a value, sets it as a `SameSite=Strict; HttpOnly` cookie, puts it in a hidden
field and stores its hash on the pending request. A POST decides only when cookie, field and hash
agree, and the request id (an unguessable 64-hex value) is still pending; the decision is a
conditional UPDATE, so it happens once. The page refuses to be framed (clickjacking).
"""

from __future__ import annotations

import html
import json
from typing import Any

import anyio.to_thread
from mcp.server.auth.provider import construct_redirect_uri
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ..core.ids import now_ms
from . import profiles, store
from .consent_text import access_html
from .limits import redirect_uri_problem
from .tokens import digest, new_secret, same

COOKIE = "vp_consent"
HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
           "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                                      "frame-ancestors 'none'"}

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorize {client} — vantage-peers</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#222}}
.box{{border:1px solid #ccc;border-radius:8px;padding:1.5rem;overflow-wrap:anywhere}}
h1{{margin-top:0}} h2{{font-size:1rem;margin:0 0 .4rem}}
button{{font-size:1rem;padding:.5rem 1.2rem;margin:.25rem .5rem .25rem 0;border-radius:6px;border:1px solid #888;
cursor:pointer}} .ok{{background:#1f6feb;color:#fff}}
code{{background:#f3f3f3;padding:0 .3rem;overflow-wrap:anywhere}}
pre{{background:#f3f3f3;padding:.6rem;border-radius:6px;white-space:pre-wrap;overflow-wrap:anywhere}} .access{{border-left:4px solid #1f6feb;padding:.2rem .8rem;margin:1rem 0}}
.access.none{{border-color:#bf8700;background:#fff8c5}} ul{{padding-left:1.2rem}}</style></head>
<body><div class="box"><h1>Authorize access</h1>
<p><strong>{client}</strong> asks to use this vantage-peers server with scope <code>{scope}</code>.</p>
<p>After you decide, your browser goes back to <code>{redirect}</code>.</p>
{access}
<form method="post" action="/oauth/consent">
<input type="hidden" name="request" value="{request}"><input type="hidden" name="csrf" value="{csrf}">
<button class="ok" type="submit" name="action" value="approve">Approve</button>
<button type="submit" name="action" value="deny">Deny</button></form></div></body></html>
"""


def _error(status: int, message: str) -> Response:
    return HTMLResponse(f"<!doctype html><title>vantage-peers</title><p>{html.escape(message)}</p>",
                        status_code=status, headers=HEADERS)


class ConsentPage:
    def __init__(self, provider: Any, *, secure_cookie: bool) -> None:
        self.provider = provider
        self.db = provider.db
        self.secure = secure_cookie

    async def handle(self, request: Request) -> Response:
        if request.method == "GET":
            return await self.show(request)
        return await self.decide(request)

    async def show(self, request: Request) -> Response:
        rid = request.query_params.get("request", "")
        csrf = new_secret()

        def load(conn: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            row = store.get_request(conn, digest(rid), now=now_ms())
            if row is None:
                return None
            conn.execute("UPDATE oauth_authorization_requests SET csrfHash = ? WHERE requestHash = ?",
                         (digest(csrf), row["requestHash"]))
            client = conn.one("SELECT name, scopeProfile FROM oauth_clients WHERE clientId = ?", (row["clientId"],))
            client = dict(client or {})
            # the access this client will get, in words (issue 24: say when it is none, and the fix)
            client["profile"] = profiles.get(conn, client["scopeProfile"]) if client.get("scopeProfile") else None
            return row, client

        found = await anyio.to_thread.run_sync(self.db.write, load) if rid else None
        if found is None:
            return _error(400, "This authorization request is unknown, already decided or expired. "
                               "Start again from your MCP client.")
        row, client = found
        params = json.loads(row["params"])
        page = PAGE.format(client=html.escape(client.get("name") or row["clientId"]),
                           scope=html.escape(" ".join(params.get("scopes") or []) or "mcp:full"),
                           redirect=html.escape(params["redirect_uri"]),
                           access=access_html(row["clientId"], client.get("scopeProfile") or "",
                                              client.get("profile")),
                           request=html.escape(rid), csrf=csrf)
        response = HTMLResponse(page, headers=HEADERS)
        response.set_cookie(COOKIE, csrf, max_age=600, path="/oauth/consent", httponly=True, samesite="strict",
                            secure=self.secure)
        return response

    async def decide(self, request: Request) -> Response:
        form = await request.form()
        rid, csrf, action = (str(form.get(k) or "") for k in ("request", "csrf", "action"))
        cookie = request.cookies.get(COOKIE, "")
        if not rid or not csrf or not cookie or not same(cookie, csrf):
            return _error(403, "The consent form was not submitted from this server's page (CSRF check failed).")
        if action not in ("approve", "deny"):
            return _error(400, "Choose Approve or Deny.")

        def run(conn: Any) -> str | None:
            row = store.get_request(conn, digest(rid), now=now_ms())
            if row is None or not row["csrfHash"] or not same(row["csrfHash"], digest(csrf)):
                return None
            if not store.decide_request(conn, row["requestHash"], now=now_ms()):
                return None
            if action == "approve":
                return self.provider.approve_sync(conn, row)
            params = json.loads(row["params"])
            return construct_redirect_uri(params["redirect_uri"], error="access_denied",
                                          error_description="the user denied the request", state=params.get("state"))

        target = await anyio.to_thread.run_sync(self.db.write, run)
        if target is None:
            return _error(403, "This authorization request is unknown, already decided, expired, or the form "
                               "is stale (CSRF check failed).")
        if redirect_uri_problem(target):  # #19: a client stored before the redirect URI rule (http/limits.py)
            return _error(400, "This client's redirect URI is not allowed (https://, http:// on loopback, or a "
                               "private-use scheme); the client must register again.")
        response = RedirectResponse(target, status_code=302, headers={"Cache-Control": "no-store"})
        response.delete_cookie(COOKIE, path="/oauth/consent")
        return response
