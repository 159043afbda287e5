"""`vantage-peers serve`: uvicorn running the app of asgi.py, plus this process's scheduler.

SIGTERM / SIGINT: uvicorn stops accepting connections, lets in-flight requests finish (up to
`GRACE_SECONDS`), closes the MCP session manager; then the scheduler thread is stopped and the
database closed. Every write is one transaction, so a stop never leaves anything half-written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from .asgi import LOOPBACK, base_url

GRACE_SECONDS = 10
# What the caller mounts beside /mcp: `mount(starlette, app, host=, no_auth=)`. The CLI passes the
# dashboard's (dashboard/mount.py): the dashboard builds on http's client store, so http never imports it.
Mount = Callable[..., Any]


def run_serve(host: str | None = None, port: int | None = None, *, no_auth: bool = False, workers: int = 1,
              mount: Mount | None = None) -> int:
    from ..pipeline.settings import Settings

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
    from .cimd_mode import mode_from_env
    from .logs import log_format
    from .proxies import trusted_from_env

    try:
        log_format(os.environ)
        trusted_from_env(os.environ)
        mode_from_env(os.environ)
    except ValueError as exc:
        print(f"vantage-peers serve: {exc}", file=sys.stderr)
        return 2
    if workers < 1 or workers > 64:
        print(f"vantage-peers serve: --workers must be between 1 and 64, got {workers}", file=sys.stderr)
        return 2
    if workers > 1:
        if not hasattr(os, "fork"):
            print("vantage-peers serve: --workers needs fork (Linux, macOS); serving with one process",
                  file=sys.stderr)
        else:
            return _run_workers(settings, host, port, no_auth, workers, mount)
    return _serve_one(settings, host, port, no_auth, mount=mount)


def _serve_one(settings, host: str, port: int, no_auth: bool, sock: socket.socket | None = None,
               mount: Mount | None = None) -> int:
    """One process: the app, its scheduler and uvicorn (on `sock` when a parent bound it)."""
    import uvicorn

    from ..server import create_app
    from .asgi import build_http_app
    from .logs import configure, log_format
    from .timeouts import guarded_protocol

    fmt = log_format(os.environ)  # VP_LOG_FORMAT=json: one JSON object per line (logs.py, #31)
    configure(fmt)
    app = create_app(settings)
    logging.getLogger("mcp").setLevel(logging.WARNING)  # not one INFO line per stateless request
    starlette = build_http_app(app, host=host, port=port, no_auth=no_auth)
    if mount is not None:  # issue 23: the web dashboard at /dashboard
        mount(starlette, app, host=host, no_auth=no_auth)
    scheduler = None
    if settings.scheduler:
        from .health import WatchedScheduler  # its ticks are watched by /readyz and /metrics (#31)

        scheduler = WatchedScheduler(app)
        scheduler.start()
    _say(fmt, f"vantage-peers serve: MCP at {base_url(settings, host, port)}/mcp, dashboard at /dashboard (bound "
              f"to {host}:{port}, db {app.db.path})")
    # uvicorn drains on SIGTERM/SIGINT, then re-raises the signal to the handler that was there
    # before it: make that a no-op (kept to the end: a second signal during the close below must
    # not kill the process half-way), so the scheduler and the database are closed, exit 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        config = uvicorn.Config(starlette, host=host, port=port, log_level="warning", lifespan="on",
                                log_config=None if fmt == "json" else uvicorn.config.LOGGING_CONFIG,
                                timeout_graceful_shutdown=GRACE_SECONDS, access_log=False,
                                # X-Forwarded-For is read by proxies.py from VP_TRUSTED_PROXIES only (#31):
                                # uvicorn's own handling trusts 127.0.0.1, through which anyone local
                                # could pose as any address
                                proxy_headers=False,
                                # idle / slow-header connections are closed (#19): uvicorn alone never does
                                http=guarded_protocol(settings.http_header_timeout_seconds))
        _server_class()(config).run(sockets=[sock] if sock is not None else None)
    finally:
        if scheduler is not None:
            scheduler.stop()
        app.db.close()
    _say(fmt, "vantage-peers serve: stopped")
    return 0


def _server_class() -> type:
    import uvicorn

    from .push import end_streams

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            end_streams()  # push streams would hold the drain for its whole grace: end them, clients reconnect
            super().handle_exit(sig, frame)

    return Server


def _say(fmt: str, line: str) -> None:
    """A start/stop line: plain on stderr, or a JSON log line under VP_LOG_FORMAT=json."""
    if fmt == "json":
        logging.getLogger("vantage_peers.serve").info(line)
    else:
        print(line, file=sys.stderr, flush=True)


def _listen(host: str, port: int, family: int, *, reuse_port: bool, listen: bool = True) -> socket.socket:
    """A listening TCP socket. Created with proto=IPPROTO_TCP on purpose: asyncio sets TCP_NODELAY
    only on connections of such sockets, and without it every small reply waits ~40 ms for the
    client's delayed ACK (socket.create_server leaves proto 0)."""
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        if listen:
            sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    return sock


def _run_workers(settings, host: str, port: int, no_auth: bool, workers: int, mount: Mount | None = None) -> int:
    """Pre-fork: `workers` processes accepting on one port (each its own SO_REUSEPORT socket).

    A process runs Python one thread at a time, so one serve process tops out near one core; each
    worker is a full server (its own connections, scheduler and sessions — state lives in the file,
    and the transport is stateless), exactly like several `serve` processes on one file. The parent
    opens no database: it only forwards SIGTERM/SIGINT and waits.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    reuse_port = hasattr(socket, "SO_REUSEPORT")
    # With SO_REUSEPORT each worker has its own listening socket and the kernel spreads new
    # connections across them; one shared socket would let one worker take every keep-alive client.
    try:
        shared = None if reuse_port else _listen(host, port, family, reuse_port=False)
        if shared is not None:
            shared.set_inheritable(True)
        else:  # fail here, once, if the port is taken: a probe that binds but never listens, so it is
            # never handed a connection; it holds the port until the workers have bound theirs
            probe = _listen(host, port, family, reuse_port=True, listen=False)
    except OSError as exc:
        print(f"vantage-peers serve: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    children: list[int] = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                if shared is None:
                    probe.close()  # the parent's, inherited by fork
                sock = shared or _listen(host, port, family, reuse_port=True)
                code = _serve_one(settings, host, port, no_auth, sock, mount)
            finally:
                os._exit(code)
        children.append(pid)
    (shared or probe).close()

    def forward(_sig: int, _frame: object) -> None:
        # SIGTERM to each worker: uvicorn drains once (a forwarded SIGINT would count as a second
        # Ctrl-C for workers that already got one from the terminal and force-quit them).
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    print(f"vantage-peers serve: {workers} worker processes on {host}:{port}", file=sys.stderr, flush=True)
    failed = 0
    for pid in children:
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        failed += os.waitstatus_to_exitcode(status) != 0
    return 1 if failed else 0
