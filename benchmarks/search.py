"""Memory write and search latency at scale, with a deterministic local 1536-dim embedder.

    uv run python benchmarks/search.py                    # 10k in one namespace, then 100k over 10
    uv run python benchmarks/search.py --small 2000 --large 0 --queries 30   # a quick run
    uv run python benchmarks/search.py --small 10000 --large 0 --dims 384 --reindex 0 --questions

Scenarios:
  single  — `--small` memories in one namespace; queries on that namespace.
  spread  — `--large` memories over `--namespaces` namespaces; queries on one namespace.
Reported: store_memory p50 (store layer = one transaction with its FTS row and embedding job, and
through the MCP tool over the in-memory client), text_search / recall / hybrid_search p50 and p95
(query embedding included: the local embedder stands in for the network), embedding throughput,
vec0 and FTS storage, and what int8 quantization would change (size, KNN time, overlap with float).
This is not a test: nothing asserts on time. Numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path

import apsw
import sqlite_vec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vantage_peers.core.ids import now_ms  # noqa: E402
from vantage_peers.db import Database, migrate  # noqa: E402
from vantage_peers.domains.memory import (  # noqa: E402
    indexer,
    store,
    vectors,  # noqa: E402
)
from vantage_peers.domains.memory import search as msearch  # noqa: E402
from vantage_peers.search import ann  # noqa: E402

TYPES = ["fact", "decision", "note", "procedure", "architecture", "feedback"]
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "zen", "pa", "do", "gu", "bex", "qui", "fa", "yo"]


class LocalEmbedder:
    """Deterministic bag-of-words embedder: normalized sum of fixed random word vectors (C-speed sums
    through sqlite-vec's vec_add in a private in-memory connection)."""

    def __init__(self, dims: int = 1536, seed: int = 7) -> None:
        self.model = f"bench-local-{dims}"
        self.dimensions = dims
        self._seed = seed
        self._words: dict[str, bytes] = {}
        self._conn = apsw.Connection(":memory:")
        self._conn.enable_load_extension(True)
        self._conn.load_extension(sqlite_vec.loadable_path())

    def _word(self, word: str) -> bytes:
        blob = self._words.get(word)
        if blob is None:
            rng = random.Random(f"{self._seed}:{word}")
            blob = array("f", array("b", rng.randbytes(self.dimensions))).tobytes()
            self._words[word] = blob
        return blob

    def vector_blob(self, text: str) -> bytes:
        words = text.lower().split()[:64] or ["<empty>"]
        acc = self._word(words[0])
        for word in words[1:]:
            acc = self._conn.execute("SELECT vec_add(?, ?)", (acc, self._word(word))).fetchone()[0]
        return self._conn.execute("SELECT vec_normalize(?)", (acc,)).fetchone()[0]

    def embed(self, texts: Sequence[str], *, timeout: float = 30.0) -> list[list[float]]:
        return [array("f", self.vector_blob(t)).tolist() for t in texts]


class Corpus:
    """Synthetic text with a Zipf-like word distribution, so queries hit common and rare words."""

    def __init__(self, vocab: int = 4000, seed: int = 11) -> None:
        rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < vocab:
            words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
        self.words = sorted(words)
        rng.shuffle(self.words)
        self.weights = [1.0 / (rank + 1) ** 1.07 for rank in range(vocab)]
        self.rng = rng

    def text(self, low: int, high: int) -> str:
        return " ".join(self.rng.choices(self.words, self.weights, k=self.rng.randint(low, high)))


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def report(label: str, samples: list[float]) -> None:
    print(f"  {label:<34} p50 {pct(samples, 0.5):8.2f} ms   p95 {pct(samples, 0.95):8.2f} ms   (n={len(samples)})")


def bulk_load(db: Database, corpus: Corpus, namespaces: list[str], total: int, chunk: int = 2000) -> None:
    done = 0
    while done < total:
        n = min(chunk, total - done)

        def run(c, n=n, done=done) -> None:
            for i in range(n):
                store.store_memory(c, namespace=namespaces[(done + i) % len(namespaces)], type=TYPES[(done + i) % 6],
                                   content=corpus.text(12, 40), created_by="bench")

        db.write(run)
        done += n


def store_through_tool(path: Path, samples: int, corpus: Corpus, namespace: str) -> list[float]:
    """store_memory through the MCP layer (in-memory client, same process)."""
    from anyio.from_thread import start_blocking_portal
    from mcp import Client

    from vantage_peers.pipeline.settings import Settings
    from vantage_peers.server import create_app

    settings = Settings.from_env({}, dotenv=False).model_copy(update={"db_path": path, "scheduler": False})
    app = create_app(settings)
    out: list[float] = []
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(app.mcp)) as client:
        for _ in range(samples):
            args = {"namespace": namespace, "type": "note", "content": corpus.text(12, 40), "createdBy": "bench"}
            start = time.perf_counter()
            portal.call(client.call_tool, "store_memory", args)
            out.append(time.perf_counter() - start)
    app.db.close()
    return out


def storage(db: Database) -> dict[str, int]:
    rows = db.read(lambda c: c.query("SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name"))
    sizes = {"vec0": 0, "fts": 0, "memories": 0, "total": 0}
    for r in rows:
        sizes["total"] += r["bytes"]
        if r["name"].startswith(vectors.TABLE):
            sizes["vec0"] += r["bytes"]
        elif r["name"].startswith("memories_fts"):
            sizes["fts"] += r["bytes"]
        elif r["name"].startswith("memories"):
            sizes["memories"] += r["bytes"]
    return sizes


def int8_study(db: Database, namespace: str, queries: list[bytes], k: int = 30) -> None:
    """Build an int8 copy of one namespace's vectors and compare size, KNN time and top-k overlap."""
    dims = db.read(vectors.recorded).dimensions

    def build(c) -> None:
        c.execute("DROP TABLE IF EXISTS bench_int8")
        c.execute(f"CREATE VIRTUAL TABLE bench_int8 USING vec0 (embedding int8[{dims}] distance_metric=cosine, "
                  f"chunk_size={vectors.CHUNK_SIZE})")
        c.execute("INSERT INTO bench_int8 (rowid, embedding) SELECT rowid, vec_quantize_int8(embedding, 'unit') "
                  f"FROM {vectors.TABLE} WHERE namespace = ?", (namespace,))

    db.write(build)
    size8 = db.read(lambda c: c.scalar("SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'bench_int8%'"))
    n = db.read(lambda c: c.scalar(f"SELECT count(*) FROM {vectors.TABLE} WHERE namespace = ?", (namespace,)))
    conn = db.conn
    float_t, int8_t, overlap = [], [], []
    for q in queries:
        start = time.perf_counter()
        exact = [r[0] for r in conn.raw.execute(
            f"SELECT rowid FROM {vectors.TABLE} WHERE embedding MATCH ? AND k = ? AND namespace = ?", (q, k, namespace))]
        float_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        approx = [r[0] for r in conn.raw.execute(
            "SELECT rowid FROM bench_int8 WHERE embedding MATCH vec_quantize_int8(?, 'unit') AND k = ?", (q, k))]
        int8_t.append(time.perf_counter() - start)
        overlap.append(len(set(exact) & set(approx)) / max(1, len(exact)))
    print(f"  int8 quantization ({n} vectors of one namespace, k={k}):")
    print(f"    storage float32 ≈ {n * dims * 4 / 1e6:.1f} MB raw -> int8 {size8 / 1e6:.1f} MB on disk (÷4 raw)")
    print(f"    KNN p50 float32 {pct(float_t, 0.5):.2f} ms -> int8 {pct(int8_t, 0.5):.2f} ms; "
          f"top-{k} overlap with float32: {statistics.mean(overlap) * 100:.1f}%")
    db.write(lambda c: c.execute("DROP TABLE bench_int8"))


class FastEndpoint:
    """An OpenAI-compatible `/v1/embeddings` server on 127.0.0.1 answering from precomputed bodies, so
    the client side (request, JSON, decoding, storing) is what gets measured."""

    def __init__(self, dims: int) -> None:
        import base64
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import numpy as np

        rng = np.random.default_rng(3)
        pool = rng.standard_normal((64, dims)).astype("<f4")
        pool /= np.linalg.norm(pool, axis=1, keepdims=True)
        b64 = [base64.b64encode(v.tobytes()).decode() for v in pool]
        floats = [v.tolist() for v in pool]
        bodies: dict[tuple[int, str], bytes] = {}

        def body(n: int, fmt: str) -> bytes:
            if (n, fmt) not in bodies:
                data = [{"object": "embedding", "index": i, "embedding": (b64 if fmt == "base64" else floats)[i % 64]}
                        for i in range(n)]
                bodies[(n, fmt)] = json.dumps({"object": "list", "data": data, "model": "fast",
                                               "usage": {"prompt_tokens": n, "total_tokens": n}}).encode()
            return bodies[(n, fmt)]

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                out = body(len(req["input"]), req.get("encoding_format") or "float")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def embedding_io(args: argparse.Namespace, workdir: Path) -> None:
    """One 64-input batch through the openai client's parsed floats (before) vs our raw base64 read
    (after), then `vantage-peers reindex` throughput against the fast loopback endpoint."""
    import io

    import openai

    from vantage_peers.domains.memory import maintenance
    from vantage_peers.embedding.embeddings import OpenAIEmbedder
    from vantage_peers.pipeline.settings import Settings

    print(f"\n== embedding I/O: fast loopback endpoint, {args.dims} dims ==")
    fake = FastEndpoint(args.dims)
    try:
        client = openai.OpenAI(api_key="k", base_url=fake.url, max_retries=0)
        texts = [f"text {i}" for i in range(64)]
        before = timed(lambda: [list(d.embedding) for d in client.embeddings.create(
            model="fast", input=texts, encoding_format="float").data], 20)
        ours = OpenAIEmbedder(model="fast", api_key="k", base_url=fake.url, dimensions=None)
        after = timed(lambda: ours.embed(texts), 20)
        report("64 x embed, client floats (before)", before)
        report("64 x embed, raw base64 (after)", after)
        settings = Settings.from_env({"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": fake.url,
                                      "VP_EMBEDDING_MODEL": "fast"}, dotenv=False).model_copy(
            update={"db_path": workdir / "reindex.db", "scheduler": False})
        db = Database(settings.db_path)
        migrate(db)
        bulk_load(db, Corpus(), ["project/reindex"], args.reindex)
        start = time.perf_counter()
        code = maintenance.reindex(settings, db, err=io.StringIO())
        took = time.perf_counter() - start
        n = db.read(vectors.count)
        print(f"  reindex: {n} vectors in {took:.1f} s = {n / took:,.0f} vectors/s (exit {code})")
        db.close()
    finally:
        fake.stop()


def exact_vs_approx(db: Database, embedder: LocalEmbedder, queries: list[str], scope: vectors.Scope) -> None:
    """recall@10 and KNN time of the approximate path against exact search (k=10 and k=100, as recall asks)."""
    now = now_ms()
    for label, sc in (("namespace", scope), ("all namespaces", None)):
        for k in (10, 100):
            overlap, t_exact, t_approx, used = [], [], [], False
            for q in queries[:50]:
                vec = embedder.embed([q])[0]
                args = {"k": k, "scope": sc, "types": None, "include_superseded": False, "now": now}
                start = time.perf_counter()
                exact = db.read(lambda c, a=args, v=vec: vectors.knn(c, v, approximate=False, **a))
                t_exact.append(time.perf_counter() - start)
                start = time.perf_counter()
                approx = db.read(lambda c, a=args, v=vec: vectors.knn(c, v, approximate=True, **a))
                t_approx.append(time.perf_counter() - start)
                used = used or db.read(lambda c, v=vec, s=sc, k=k: ann.candidates(
                    c, vectors.TABLE, v, k=k, scope=s)) is not None
                top = {s for s, _ in exact[:10]}
                overlap.append(len(top & {s for s, _ in approx[:10]}) / max(1, len(top)))
            how = "approximate" if used else f"exact (scope < {ann.APPROX_MIN_FLOATS:,} floats)"
            print(f"  KNN k={k:<3} {label:<15} exact p50 {pct(t_exact, 0.5):7.2f} ms -> {how} p50 "
                  f"{pct(t_approx, 0.5):7.2f} ms; recall@10 vs exact {statistics.mean(overlap):.3f}")


def scenario(name: str, total: int, n_namespaces: int, args: argparse.Namespace, workdir: Path) -> None:
    print(f"\n== {name}: {total} memories over {n_namespaces} namespace(s), {args.dims} dims ==")
    path = workdir / f"{name}.db"
    db = Database(path)
    migrate(db)
    corpus = Corpus()
    namespaces = [f"project/bench-{i}" for i in range(n_namespaces)]
    target = namespaces[0]

    # store_memory p50 while the table is still small, then again once full (below).
    samples = []
    for _ in range(args.store_samples):
        text = corpus.text(12, 40)
        start = time.perf_counter()
        db.write(lambda c, t=text: store.store_memory(c, namespace=target, type="note", content=t, created_by="b"))
        samples.append(time.perf_counter() - start)
    report("store_memory (store layer, empty)", samples)

    start = time.perf_counter()
    bulk_load(db, corpus, namespaces, total - args.store_samples)
    print(f"  bulk load: {total} rows in {time.perf_counter() - start:.1f} s")

    embedder = LocalEmbedder(args.dims)
    start = time.perf_counter()
    done = 0
    while True:
        result = indexer.embed_pending(db, embedder, owner="bench", batch=256, budget_s=3600)
        done += result["embedded"]
        if result["embedded"] == 0:
            break
    took = time.perf_counter() - start
    print(f"  embedding worker: {done} vectors in {took:.1f} s ({done / max(took, 1e-9):.0f}/s, local embedder)")

    samples = []
    for _ in range(args.store_samples):
        text = corpus.text(12, 40)
        start = time.perf_counter()
        db.write(lambda c, t=text: store.store_memory(c, namespace=target, type="note", content=t, created_by="b"))
        samples.append(time.perf_counter() - start)
    report(f"store_memory (store layer, {total} rows)", samples)
    report("store_memory (MCP tool)", store_through_tool(path, args.store_samples, corpus, target))

    queries = [corpus.text(2, 6) for _ in range(args.queries)]
    if args.questions:  # the date and asking signals read the head's rows only for a question
        queries = [f"when did {q}?" for q in queries]
    scope = store.scope_of(target)
    now = now_ms()
    it = iter(range(10**9))

    def run_text() -> None:
        q = queries[next(it) % len(queries)]
        db.read(lambda c: msearch.text_search(c, query=q, scope=scope, types=None, include_superseded=False,
                                              limit=10, now=now))

    def run_hybrid(types: list[str] | None) -> Callable[[], None]:
        def go() -> None:
            q = queries[next(it) % len(queries)]
            vec = embedder.embed([q])[0]
            db.read(lambda c: msearch.hybrid(c, query=q, vector=vec, reason=None, scope=scope, types=types,
                                             include_superseded=False, limit=10, now=now))
        return go

    def run_all() -> None:
        q = queries[next(it) % len(queries)]
        vec = embedder.embed([q])[0]
        db.read(lambda c: msearch.hybrid(c, query=q, vector=vec, reason=None, scope=None, types=None,
                                         include_superseded=False, limit=10, now=now))

    # "before": exact vec0 KNN, no mmap (the previous defaults); "after": mmap + the approximate
    # first pass wherever a scope holds at least ann.APPROX_MIN_FLOATS floats.
    threshold = ann.APPROX_MIN_FLOATS
    for phase in ("before", "after"):
        ann.APPROX_MIN_FLOATS = 1 << 62 if phase == "before" else threshold
        db.conn.execute(f"PRAGMA mmap_size={0 if phase == 'before' else 1 << 30}")
        print(f"  -- {phase}: {'exact KNN, mmap off' if phase == 'before' else 'mmap on, approximate first pass'}")
        for label, fn, runs in (
                ("text_search", run_text, args.queries),
                ("recall (type filter, limit 10)", run_hybrid(["fact", "decision"]), args.queries),
                ("hybrid_search (limit 10)", run_hybrid(None), args.queries),
                ("hybrid_search (all namespaces)", run_all, max(5, args.queries // 4))):
            if label.endswith("(all namespaces)") and n_namespaces == 1:
                continue
            fn()  # warm the page cache (and the sign-code cache)
            report(f"{label} [{'*' if label.endswith('(all namespaces)') else target}]", timed(fn, runs))
    ann.APPROX_MIN_FLOATS = threshold
    exact_vs_approx(db, embedder, queries, scope)
    report("query embedding alone (local)", timed(lambda: embedder.embed([queries[0]]), args.queries))

    sizes = storage(db)
    print(f"  storage: file {path.stat().st_size / 1e6:.1f} MB; vec0 {sizes['vec0'] / 1e6:.1f} MB "
          f"({sizes['vec0'] / max(done, 1):.0f} B/vector); FTS {sizes['fts'] / 1e6:.1f} MB; "
          f"memories {sizes['memories'] / 1e6:.1f} MB")
    int8_study(db, target, [embedder.vector_blob(q) for q in queries[:30]])
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=10_000, help="memories in the single-namespace scenario (0=skip)")
    parser.add_argument("--large", type=int, default=100_000, help="memories in the spread scenario (0=skip)")
    parser.add_argument("--namespaces", type=int, default=10, help="namespaces in the spread scenario")
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--queries", type=int, default=100, help="queries per measurement")
    parser.add_argument("--store-samples", type=int, default=200, help="store_memory calls measured")
    parser.add_argument("--reindex", type=int, default=5000, help="memories re-embedded by the I/O test (0=skip)")
    parser.add_argument("--questions", action="store_true",
                        help="queries are questions ('when did … ?'): the date and asking signals run")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the DB files (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        if args.reindex:
            embedding_io(args, Path(tmp))
        if args.small:
            scenario("single", args.small, 1, args, Path(tmp))
        if args.large:
            scenario("spread", args.large, args.namespaces, args, Path(tmp))


if __name__ == "__main__":
    main()
