"""Worst-case keyword search: one ~1 MB document of repeated common words, searched through the tools.

FTS5's snippet() cost grows with the square of the matches in a returned document (a 1 MB
document took ~100 s); snippets are now computed in Python over a bounded window
(vantage_peers/search/snippets.py). Prints the median of several runs for text_search, recall and
search_messages_by_keyword at limit 1 and 200, plus 5,500 matching messages at limit 200.
`--fts5-snippet-kb N` also times FTS5's own snippet() on an N KB document, for comparison.

Usage: uv run python benchmarks/search_worst.py [--runs 5] [--fts5-snippet-kb 0]
Target: under 100 ms per search with the 1 MB document.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import make_settings, open_tools  # noqa: E402

from vantage_peers.server import create_app  # noqa: E402

DOC = "the agent sent the task to the team and the team ran the test " * 15_800  # ~1 MB


def timed(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fts5-snippet-kb", type=int, default=0)
    args = parser.parse_args()
    print(f"document: {len(DOC.encode()):,} bytes, {len(DOC.split()):,} words")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(make_settings(Path(tmp) / "s.db"))
        with open_tools(app) as tools:
            tools.call("store_memory", namespace="bench", type="note", content=DOC, createdBy="alice")
            tools.call("send_message", **{"from": "alice", "channel": "bob", "content": DOC})
            for tool, extra in (("text_search", {"namespace": "bench"}), ("recall", {"namespace": "bench"}),
                                ("search_messages_by_keyword", {})):
                for limit in (1, 200):
                    ms = timed(lambda t=tool, e=extra, n=limit: tools.call(t, query="team test", limit=n, **e),
                               args.runs)
                    worst = max(worst, ms)
                    print(f"  {tool:28} limit {limit:>3}: {ms:7.1f} ms (median of {args.runs})")
            app.db.write(lambda c: c.executemany(
                "INSERT INTO messages (id, sender, channel, content, createdAt) VALUES (?, 'a', 'b', ?, ?)",
                [(f"msg_b{i:06d}", "the team ran the test again " * 40, i) for i in range(5_500)]))
            ms = timed(lambda: tools.call("search_messages_by_keyword", query="team test", limit=200), args.runs)
            print(f"  5,500 matching messages + the 1 MB one, search_messages_by_keyword limit 200: {ms:.1f} ms")
        if args.fts5_snippet_kb:
            doc = DOC[: args.fts5_snippet_kb * 1024]
            conn = app.db.conn
            conn.execute("INSERT INTO messages (id, sender, channel, content, createdAt) VALUES ('msg_cmp', 'a', "
                         "'c', ?, 0)", (doc,))
            start = time.perf_counter()
            conn.query("SELECT snippet(messages_fts, 0, '[', ']', '…', 12) FROM messages_fts "
                       "WHERE messages_fts MATCH '\"team\" \"test\"' AND rowid = "
                       "(SELECT seq FROM messages WHERE id = 'msg_cmp')")
            print(f"  FTS5 snippet() on a {args.fts5_snippet_kb} KB document, for comparison: "
                  f"{(time.perf_counter() - start) * 1000:.0f} ms")
        app.db.close()
    print(f"worst 1 MB-document search: {worst:.1f} ms (target < 100 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
