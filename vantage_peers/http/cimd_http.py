"""/oauth/authorize in front of the SDK's handler: a URL client_id is resolved first, so a refused
metadata document answers with its reason (`CIMD_REFUSED: …`) instead of "client not found"."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .cimd import CimdRefused, is_cimd_client_id

Handler = Callable[[Request], Awaitable[Response]]


def cimd_authorize(provider: Any, handler: Handler) -> Handler:
    async def handle(request: Request) -> Response:
        client_id = request.query_params.get("client_id") if request.method == "GET" else None
        if client_id and is_cimd_client_id(client_id):
            try:
                await provider.resolve_cimd(client_id)
            except CimdRefused as exc:
                return JSONResponse({"error": "invalid_client", "error_description": str(exc)}, status_code=400,
                                    headers={"Cache-Control": "no-store"})
        return await handler(request)

    return handle
