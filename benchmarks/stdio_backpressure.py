"""stdio back-pressure (#19): RSS of a real `vantage-peers` stdio process while a client writes
1,000 `tools/list` requests without reading any reply, then reads them all.

Usage: uv run python benchmarks/stdio_backpressure.py [--requests 1000]
Prints the process's RSS before, at its peak while unread, and after; no targets are asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.faults_helpers import StdioProc  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    n = parser.parse_args().requests
    with tempfile.TemporaryDirectory() as tmp:
        srv = StdioProc(Path(tmp) / "vp.db")
        base = srv.rss_kib()

        def writer() -> None:
            for i in range(n):
                srv.send({"jsonrpc": "2.0", "id": 10_000 + i, "method": "tools/list", "params": {}})

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        peak = base
        for _ in range(20):
            time.sleep(0.25)
            peak = max(peak, srv.rss_kib())
        reading = time.perf_counter()
        got = 0
        while got < n:
            msg = srv.read()
            got += isinstance(msg.get("id"), int) and msg["id"] >= 10_000
        read_s = time.perf_counter() - reading
        after = srv.rss_kib()
        srv.close()
    print(f"{n} unread tools/list: RSS {base / 1024:.1f} MiB before, peak {peak / 1024:.1f} MiB while unread "
          f"(+{(peak - base) / 1024:.1f}), {after / 1024:.1f} MiB after reading all; "
          f"then {n} replies read in {read_s:.1f} s ({n / read_s:.0f}/s)")


if __name__ == "__main__":
    main()
