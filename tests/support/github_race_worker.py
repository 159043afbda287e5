"""Test worker process: run the error monitor and the outbox sender a few times on the shared file."""

from __future__ import annotations

import sys
import time

from vantage_peers.domains.github import monitors
from vantage_peers.domains.github.sender import Sender
from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import create_app

if __name__ == "__main__":
    app = create_app(Settings.from_env())
    start_at = float(sys.argv[1])
    time.sleep(max(0.0, start_at - time.time()))  # every worker starts together
    sender = Sender(app)
    for _ in range(4):
        monitors.run_error_monitor(app)
        sender.run()
    app.db.close()
