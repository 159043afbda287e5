"""Issue #19 case 6: stdio back-pressure on the real process. A client that writes 1,000 requests
without reading a reply: the server stops reading once a bounded number of replies is unsent (the
client's own writes block), its memory stays flat, and every request is answered exactly once."""

from __future__ import annotations

import threading
import time

import pytest
from support.faults_helpers import StdioProc

from vantage_peers.transport import MAX_UNANSWERED

pytestmark = pytest.mark.slow  # soak: hundreds of unanswered requests over stdio

N = 250
PAD = "x" * 2048  # per request: N requests overfill the pipe's 64 KiB, so back-pressure must reach the writer


def test_unread_replies_stop_the_reader_and_memory_stays_flat(tmp_path):
    srv = StdioProc(tmp_path / "vp.db")
    try:
        base = srv.rss_kib()
        written = [0]

        def writer():
            for i in range(N):
                srv.send({"jsonrpc": "2.0", "id": 10_000 + i, "method": "tools/list",
                          "params": {"_meta": {"pad": PAD}}})
                written[0] += 1

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        peak = base
        for _ in range(20):  # give the server every chance to read ahead (it must not)
            time.sleep(0.25)
            peak = max(peak, srv.rss_kib())
        # Back-pressure reached the client: it could not write all its requests.
        assert thread.is_alive() and written[0] < N, written[0]
        # Memory: the old transport grew by ~210 MiB for 1,000 (every reply held in memory): ~50 MiB for 250.
        assert (peak - base) / 1024 < 40, f"RSS grew from {base // 1024} to {peak // 1024} MiB"
        seen = []
        while len(seen) < N:
            msg = srv.read()
            if isinstance(msg.get("id"), int) and msg["id"] >= 10_000:
                assert msg["result"]["tools"]
                seen.append(msg["id"])
        thread.join(30)
        assert sorted(seen) == list(range(10_000, 10_000 + N))  # each answered exactly once
        # Still serving normally afterwards.
        assert srv.request("ping", {})["result"] == {}
    finally:
        srv.close()


def test_cancelled_requests_free_their_slot(tmp_path):
    """A request the client cancels gets no reply; its slot must not stay taken (else the server
    would stop reading for good after MAX_UNANSWERED cancellations)."""
    srv = StdioProc(tmp_path / "vp.db")
    try:
        for i in range(MAX_UNANSWERED * 3):
            rid = 50_000 + i
            srv.send({"jsonrpc": "2.0", "id": rid, "method": "tools/list", "params": {}})
            srv.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
        assert srv.request("ping", {})["result"] == {}
    finally:
        srv.close()
