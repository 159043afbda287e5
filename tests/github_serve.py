"""Test helper process: serve `app.routes` over HTTP on 127.0.0.1 with the scheduler running.

Stands in for `vantage-peers serve` (issue 11) in the multi-process GitHub test until that is merged.
Usage: python github_serve.py <port-file>; settings come from the environment (VP_DB_PATH …).
"""

from __future__ import annotations

import socket
import sys

import uvicorn
from starlette.applications import Starlette

from vantage_peers.scheduler import Scheduler
from vantage_peers.server import create_app
from vantage_peers.settings import Settings


def main(port_file: str) -> None:
    app = create_app(Settings.from_env())
    scheduler = Scheduler(app)
    scheduler.start()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    with open(port_file + ".tmp", "w") as fh:
        fh.write(str(sock.getsockname()[1]))
    import os

    os.replace(port_file + ".tmp", port_file)
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=list(app.routes)), log_level="warning", lifespan="off"))
    try:
        server.run(sockets=[sock])
    finally:
        scheduler.stop()
        app.db.close()


if __name__ == "__main__":
    main(sys.argv[1])
