"""`vantage-peers serve`: uvicorn running the app of asgi.py, plus this process's scheduler.

SIGTERM / SIGINT: uvicorn stops accepting connections, lets in-flight requests finish (up to
`GRACE_SECONDS`), closes the MCP session manager; then the scheduler thread is stopped and the
database closed. Every write is one transaction, so a stop never leaves anything half-written.
"""

from __future__ import annotations

import logging
import signal
import sys

from .asgi import LOOPBACK, base_url

GRACE_SECONDS = 10


def run_serve(host: str | None = None, port: int | None = None, *, no_auth: bool = False) -> int:
    import uvicorn

    from ..server import create_app
    from ..settings import Settings
    from .asgi import build_http_app

    settings = Settings.from_env()
    host = host or settings.host
    port = settings.port if port is None else port
    if no_auth:
        if host not in LOOPBACK:
            print(f"vantage-peers serve: --no-auth is allowed only on a loopback host (127.0.0.1, localhost, "
                  f"::1), not {host}", file=sys.stderr)
            return 2
        print("vantage-peers serve: WARNING: --no-auth — every local process can call every tool with no "
              "token, as on stdio. Never expose this port.", file=sys.stderr)
    elif not settings.bearer_secret_master:
        print("vantage-peers serve: BEARER_SECRET_MASTER is not set. Generate one with `openssl rand -hex 32` "
              "and export it (or pass --no-auth on a loopback host for local testing).", file=sys.stderr)
        return 2
    app = create_app(settings)
    logging.getLogger("mcp").setLevel(logging.WARNING)  # not one INFO line per stateless request
    starlette = build_http_app(app, host=host, port=port, no_auth=no_auth)
    scheduler = None
    if settings.scheduler:
        from ..scheduler import Scheduler

        scheduler = Scheduler(app)
        scheduler.start()
    print(f"vantage-peers serve: MCP at {base_url(settings, host, port)}/mcp (bound to {host}:{port}, "
          f"db {settings.db_path})", file=sys.stderr, flush=True)
    # uvicorn drains on SIGTERM/SIGINT, then re-raises the signal to the handler that was there
    # before it: make that a no-op (kept to the end: a second signal during the close below must
    # not kill the process half-way), so the scheduler and the database are closed, exit 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        config = uvicorn.Config(starlette, host=host, port=port, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=GRACE_SECONDS, access_log=False)
        uvicorn.Server(config).run()
    finally:
        if scheduler is not None:
            scheduler.stop()
        app.db.close()
    print("vantage-peers serve: stopped", file=sys.stderr, flush=True)
    return 0
