"""pgvector's HNSW against an exact scan: recall@10 and KNN p50, pgvector's defaults and the shipped settings, one run.

    uv run python benchmarks/pg_hnsw.py                  # 100,000 synthetic 384-d vectors (recall_backends.py --big's)
    uv run python benchmarks/pg_hnsw.py --vectors 20000 --database-url postgresql://...

The vectors are recall_backends.py's: benchmarks/search.py's Zipf corpus through its bag-of-words
embedder (short queries against long texts: a hard case for a graph index). The table is filled by
COPY, then per index build — pgvector's defaults (m 16, ef_construction 64, `hnsw.ef_search`
max(40, k), what shipped before) and db/pgschema_virtual.py's HNSW_WITH with search/pg_vectors.py's
EF_SEARCH — each query asks k = 100 nearest (what `recall` asks) and its 10 first are compared with
an exact scan's. Build time, recall@10 and KNN p50 are printed with the load average.
Not a test: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from retrieval import scratch_postgres  # noqa: E402
from search import Corpus, LocalEmbedder  # noqa: E402

from vantage_peers.db.pgschema_virtual import HNSW_WITH  # noqa: E402
from vantage_peers.search.pg_vectors import EF_SEARCH  # noqa: E402

K = 100


def literal(blob: bytes) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in array("f", blob)) + "]"


def measure(conn: object, queries: list[str], exact: list[set[int]], ef: int) -> tuple[float, float]:
    hits, lat = 0, []
    for vec, truth in zip(queries, exact, strict=True):
        with conn.transaction():  # type: ignore[attr-defined]
            conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")  # type: ignore[attr-defined]
            start = time.perf_counter()
            rows = conn.execute("SELECT seq FROM bench_vec ORDER BY embedding <=> %s::vector LIMIT %s",  # type: ignore[attr-defined]
                                [vec, K]).fetchall()
            lat.append((time.perf_counter() - start) * 1000)
        hits += len({r[0] for r in rows[:10]} & truth)
    return hits / (10 * len(queries)), statistics.median(lat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--database-url", default=None, help="a scratch PostgreSQL database (emptied)")
    args = parser.parse_args()
    import psycopg

    corpus, embedder = Corpus(seed=11), LocalEmbedder(dims=384)
    with psycopg.connect(scratch_postgres(args.database_url, "bench_hnsw"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE TABLE bench_vec (seq BIGINT PRIMARY KEY, embedding vector(384) NOT NULL)")
        with conn.cursor().copy("COPY bench_vec (seq, embedding) FROM STDIN") as copy:
            for seq in range(1, args.vectors + 1):
                copy.write_row((seq, literal(embedder.vector_blob(corpus.text(12, 40)))))
        conn.execute("VACUUM ANALYZE bench_vec")
        queries = [literal(embedder.vector_blob(corpus.text(2, 5))) for _ in range(args.queries)]
        exact = []
        with conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")
            for vec in queries:
                exact.append({r[0] for r in conn.execute(
                    "SELECT seq FROM bench_vec ORDER BY embedding <=> %s::vector LIMIT 10", [vec])})
        conn.execute("SET maintenance_work_mem = '512MB'")
        for label, options, ef in (("pgvector defaults", "", max(40, K)), ("shipped", HNSW_WITH, max(EF_SEARCH, K))):
            conn.execute("DROP INDEX IF EXISTS bench_vec_hnsw")
            start = time.perf_counter()
            conn.execute(f"CREATE INDEX bench_vec_hnsw ON bench_vec USING hnsw (embedding vector_cosine_ops) {options}")
            built = time.perf_counter() - start
            recall, p50 = measure(conn, queries, exact, ef)
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"{label:<18} {options or 'm 16, ef_construction 64':<36} ef_search {ef:<4} built in {built:5.0f} s  "
                  f"recall@10 {recall:.3f}  KNN p50 {p50:.1f} ms  (load {load})", flush=True)


if __name__ == "__main__":
    main()
