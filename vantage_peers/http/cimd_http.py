"""/oauth/authorize in front of the SDK's handler: a URL client_id is resolved first, so a refused
metadata document answers with its reason (`CIMD_REFUSED: …`) instead of "client not found" — as an
HTML page that says what to do when a browser asks (cimd_page.py).

A document that has to be fetched (not in the cache) spends a token of the CIMD buckets first — per
client address and for all addresses together, like DCR registration (issue #31): an anonymous
caller cannot make the server fetch arbitrary URLs at will.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from . import cimd_page
from .cimd import CimdRefused, is_cimd_client_id
from .limits import client_ip, refusal
from .shared_limits import Bucket, LimitStore

Handler = Callable[[Request], Awaitable[Response]]


class CimdFetchLimit:
    def __init__(self, store: LimitStore, buckets: list[Bucket], refused: Callable[[], None] | None = None) -> None:
        self.store = store
        self.buckets = buckets
        self.refused = refused

    async def admit(self, request: Request) -> Response | None:
        """None when a fetch may go on; else the 429 (or 503) to answer."""
        answer = await refusal(self.store, client_ip(request.scope), self.buckets, refused=self.refused)
        if answer is None:
            return None
        status, body, headers = answer
        return JSONResponse(body, status_code=status, headers={"Cache-Control": "no-store",
                                                              **{k.decode(): v.decode() for k, v in headers}})


def cimd_authorize(provider: Any, handler: Handler, fetches: CimdFetchLimit | None = None) -> Handler:
    async def handle(request: Request) -> Response:
        client_id = request.query_params.get("client_id") if request.method == "GET" else None
        if client_id and is_cimd_client_id(client_id):
            if fetches is not None and provider.policy.fetches and not provider.cimd.cached(client_id):
                refused = await fetches.admit(request)
                if refused is not None:
                    return refused
            try:
                await provider.resolve_cimd(client_id)
            except CimdRefused as exc:  # a person in a browser gets a page that says what to do (#31)
                return cimd_page.refusal(request, client_id, exc, provider.base_url)
        return await handler(request)

    return handle
