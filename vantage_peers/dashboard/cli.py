"""`vantage-peers dashboard`: the dashboard on 127.0.0.1 over the configured database file.

Loopback only, with no sign-in: every local process could already open the file. To reach it from
another machine, run `vantage-peers serve` (it mounts the same app at /dashboard, behind sign-in).
"""

from __future__ import annotations

import getpass
import socket
import sys
import webbrowser

HOST = "127.0.0.1"


def default_name() -> str:
    try:
        return getpass.getuser() or "operator"
    except Exception:  # noqa: BLE001 - no login name (containers): a neutral one
        return "operator"


def run_dashboard(port: int = 8765, *, open_browser: bool = False, name: str | None = None) -> int:
    import uvicorn

    from ..db import open_database
    from ..pipeline.settings import Settings
    from . import build_dashboard
    from .actions import check_name

    if not 1 <= port <= 65535:
        print(f"vantage-peers dashboard: --port must be between 1 and 65535, got {port}", file=sys.stderr)
        return 2
    try:  # one line instead of uvicorn's traceback-ish exit when the port is taken
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # as uvicorn binds: a previous run's connections in TIME_WAIT do not hold the port
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((HOST, port))
    except OSError as exc:
        print(f"vantage-peers dashboard: cannot listen on {HOST}:{port}: {exc.strerror or exc}; "
              "pick another --port", file=sys.stderr)
        return 2
    settings = Settings.from_env()
    who = check_name(name or default_name())
    db = open_database(settings)
    app = build_dashboard(db, settings, login_required=False, loopback=True, local_name=who)
    url = f"http://{HOST}:{port}/team"
    print(f"vantage-peers dashboard: {url} (db {settings.db_path}; you act as human:{who})",
          file=sys.stderr, flush=True)
    if open_browser:
        webbrowser.open(url)
    try:
        uvicorn.run(app, host=HOST, port=port, log_level="warning", access_log=False,
                    timeout_graceful_shutdown=2)
    finally:
        db.close()
    return 0
