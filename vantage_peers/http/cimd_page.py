"""The page a person sees when `/oauth/authorize` refuses a metadata-document (CIMD) client, instead
of a raw `400 CIMD_REFUSED` JSON body (issue #31): why, and what to do — the operator's setting for
a server without outbound access, or a bearer header. Programs that do not ask for HTML keep the JSON.
"""

from __future__ import annotations

import html

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from .cimd import CimdRefused, CimdUnreachable
from .consent import HEADERS

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign-in refused — vantage-peers</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}}
.box{{border:1px solid #ccc;border-radius:8px;padding:1.5rem;overflow-wrap:anywhere}} h1{{margin-top:0}}
code{{background:#f3f3f3;padding:0 .3rem}} pre{{background:#f3f3f3;padding:.6rem;border-radius:6px;
white-space:pre-wrap;overflow-wrap:anywhere}} .why{{border-left:4px solid #bf8700;background:#fff8c5;
padding:.4rem .8rem}}</style></head>
<body><div class="box"><h1>This server cannot sign in your client</h1>
<p>Your client identified itself by a metadata document (<code>{client}</code>), and this server
could not use it:</p>
<p class="why">{reason}</p>
{cause}
<h2>What to do</h2>
<ol>
<li><strong>Operator of this server:</strong> {operator}</li>
<li><strong>Or use a bearer header</strong>, with no browser sign-in: the operator creates a client
for you on the server machine,
<pre>vantage-peers token create --name you --profile client-generic --grant client_credentials</pre>
your client exchanges its id and secret at <code>{base}/oauth/token</code>
(<code>grant_type=client_credentials</code>) and sends the access token as a header, e.g.
<pre>claude mcp add --transport http vantage-peers {base}/mcp --header "Authorization: Bearer &lt;token&gt;"</pre></li>
</ol></div></body></html>
"""

NO_EGRESS = ("<p>The document's host could not be reached from this server: it probably has no "
             "access to the internet.</p>")
SET_OFF = ("start <code>vantage-peers serve</code> with <code>VP_CIMD=off</code>: clients then register "
           "themselves with Dynamic Client Registration, which needs no outbound connection. Then sign in "
           "again (e.g. <code>claude mcp login vantage-peers</code>, or <code>/mcp</code> in Claude Code).")
CHECK_DOC = ("the document is the client's own; if the reason above is about this server (an address it "
             "refuses, a setting), see the CIMD section of docs/http.md, or set <code>VP_CIMD=off</code> "
             "so that clients register with Dynamic Client Registration instead.")


def wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def refusal(request: Request, client_id: str, exc: CimdRefused, base: str) -> Response:
    """400: an HTML page for a browser, the OAuth JSON error for a program."""
    if not wants_html(request):
        return JSONResponse({"error": "invalid_client", "error_description": str(exc)}, status_code=400,
                            headers={"Cache-Control": "no-store"})
    off = "VP_CIMD=off" in str(exc)
    operator = (f"CIMD is off here (<code>VP_CIMD=off</code>); the client should have registered with "
                f"Dynamic Client Registration at <code>{html.escape(base)}/oauth/register</code>. Sign in "
                "again so that it reads the server's metadata afresh.") if off else SET_OFF if isinstance(
                    exc, CimdUnreachable) else CHECK_DOC
    page = PAGE.format(client=html.escape(client_id), reason=html.escape(str(exc)),
                       cause=NO_EGRESS if isinstance(exc, CimdUnreachable) else "", operator=operator,
                       base=html.escape(base))
    return HTMLResponse(page, status_code=400, headers=HEADERS)
