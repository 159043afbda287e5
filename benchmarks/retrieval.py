"""Retrieval quality on real test collections with relevance judgments (shared/ir/, BEIR layout).

    uv run python benchmarks/retrieval.py                        # cranfield and cisi
    uv run python benchmarks/retrieval.py --collections cisi --cache /tmp/vp-ir-cache

Each collection is loaded into a temporary database through the store layer (one memory per
document: title, newline, text), embedded by the configured local provider through the embedding
worker (`indexer.embed_pending`, as the scheduler does), then every judged query runs through the
MCP tools over the in-memory client with `limit=100, fields="lite"`:
  text_search (BM25), vector only (search_episodes_by_semantic's ranking: hybrid with no keyword
  list), and recall (the shipped fusion).
It prints nDCG@10 (graded gains, log2 discount) and recall@100 per ranker, plus, from the same
two candidate lists (100 each), equal-weight RRF k=60 (the former fusion) and the convex fusion at
other vector weights, to show the chosen weight is not tuned to one collection.
`--cache DIR` keeps the document vectors between runs (keyed by model and text hash).
Not a test: nothing asserts. Figures depend on the model only, not on the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vantage_peers.domains.memory import indexer, store  # noqa: E402
from vantage_peers.domains.memory import search as msearch  # noqa: E402
from vantage_peers.ids import now_ms  # noqa: E402
from vantage_peers.search import fusion  # noqa: E402
from vantage_peers.search.embeddings import embedder_for  # noqa: E402

IR = ROOT.parent.parent / "shared" / "ir"
DEFAULT_IR = IR if IR.is_dir() else Path("/work/shared/ir")


def load(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, int]]]:
    docs = [json.loads(line) for line in (path / "corpus.jsonl").open(encoding="utf-8")]
    queries = [json.loads(line) for line in (path / "queries.jsonl").open(encoding="utf-8")]
    qrels: dict[str, dict[str, int]] = {}
    with (path / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, cid, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, {})[cid] = int(score)
    return docs, [q for q in queries if q["_id"] in qrels], qrels


def ndcg(ranked: Sequence[str], rel: dict[str, int], k: int = 10) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rel.values(), reverse=True)[:k]))
    return dcg / ideal if ideal else 0.0


def recall_at(ranked: Sequence[str], rel: dict[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(rel)) / len(rel)


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
            new = {keys[i]: v for i, v in zip(missing, fresh, strict=True)}
            self.known.update(new)
            if self.path:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    for key, vec in new.items():
                        fh.write(json.dumps([key, vec]) + "\n")
        return [self.known[k] for k in keys]


def run(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, tuple[float, float]]:
    from anyio.from_thread import start_blocking_portal
    from mcp import Client

    from vantage_peers.server import create_app
    from vantage_peers.settings import Settings

    docs, queries, qrels = load(args.ir / name)
    settings = Settings.from_env({"VP_EMBEDDINGS": "local", "VP_SCHEDULER": "off"}, dotenv=False).model_copy(
        update={"db_path": workdir / f"{name}.db", "scheduler": False})
    app = create_app(settings)
    db, ns = app.db, f"ir/{name}"
    seq_to_doc: dict[str, str] = {}

    def put(c) -> None:
        for d in docs:
            text = (d.get("title", "") + "\n" + d["text"]).strip()
            mid = store.store_memory(c, namespace=ns, type="reference", content=text, created_by="bench")["memoryId"]
            seq_to_doc[mid] = d["_id"]

    db.write(put)
    embedder = CachingEmbedder(embedder_for(settings), args.cache)
    started = time.perf_counter()
    while indexer.embed_pending(db, embedder, owner="bench", budget_s=3600)["embedded"]:
        pass
    print(f"\n== {name}: {len(docs)} documents, {len(queries)} judged queries; "
          f"embedded by {embedder.model} in {time.perf_counter() - started:.1f} s ==")

    rankings: dict[str, list[list[str]]] = {"text_search": [], "vector only": [], "recall": []}
    sweep: dict[str, list[list[str]]] = {}
    weights = (0.3, 0.4, 0.5, 0.6, 0.7)
    scope, now = store.scope_of(ns), now_ms()
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(app.mcp)) as client:
        def tool(tool_name: str, **kw: Any) -> list[str]:
            res = portal.call(client.call_tool, tool_name, {"namespace": ns, "limit": 100, "fields": "lite", **kw})
            data = res.structured_content
            assert not res.is_error and data is not None and not data.get("truncated"), res
            return [seq_to_doc[h["_id"]] for h in data["items"]]

        for q in queries:
            rankings["text_search"].append(tool("text_search", query=q["text"]))
            rankings["recall"].append(tool("recall", query=q["text"]))
            vec = embedder_for(settings).embed([q["text"]])[0]
            # Vector only: the shipped KNN, 100 deep (what the fusion sees).
            semantic = db.read(lambda c, vec=vec, q=q: msearch.hybrid(
                c, query=q["text"], vector=vec, reason=None, scope=scope, types=None, include_superseded=False,
                limit=100, now=now, use_keyword=False, fields="lite"))
            rankings["vector only"].append([seq_to_doc[h["_id"]] for h in semantic["items"]])
            # The two candidate lists recall fuses, to compare fusions on identical input.
            kw = db.read(lambda c, q=q: msearch.keyword_hits(c, query=q["text"], scope=scope, types=None,
                                                             include_superseded=False, now=now, limit=100,
                                                             mode="or"))
            vh = db.read(lambda c, vec=vec: msearch.vector_hits(c, vec, scope=scope, types=None,
                                                                include_superseded=False, now=now, k=100))
            ids = {r["seq"]: r["id"] for r in kw}
            ids.update(db.read(lambda c, vh=vh: {r["seq"]: r["id"] for r in c.query(
                f"SELECT seq, id FROM memories WHERE seq IN ({','.join('?' for _ in vh)})", [s for s, _ in vh])}))
            kwl = [(r["seq"], -r["rank"]) for r in kw]
            vl = [(s, 1.0 - d) for s, d in vh]
            rrf = fusion.rrf({n: [k for k, _ in lst] for n, lst in (("keyword", kwl), ("vector", vl)) if lst})
            sweep.setdefault("RRF k=60 (former)", []).append([seq_to_doc[ids[f.key]] for f in rrf])
            for w in weights:
                fused = fusion.convex({"keyword": kwl, "vector": vl}, weights={"keyword": 1 - w, "vector": w})
                sweep.setdefault(f"convex z-score w={w}", []).append([seq_to_doc[ids[f.key]] for f in fused])
    app.db.close()

    def score(lists: list[list[str]]) -> tuple[float, float]:
        n = sum(ndcg(r, qrels[q["_id"]]) for r, q in zip(lists, queries, strict=True)) / len(queries)
        r = sum(recall_at(r, qrels[q["_id"]]) for r, q in zip(lists, queries, strict=True)) / len(queries)
        return n, r

    out = {}
    print(f"  {'ranker':<28} {'nDCG@10':>8} {'recall@100':>11}")
    for label, lists in [*rankings.items(), *sweep.items()]:
        out[label] = score(lists)
        print(f"  {label:<28} {out[label][0]:8.3f} {out[label][1]:11.3f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ir", type=Path, default=DEFAULT_IR, help="folder holding the collections")
    parser.add_argument("--collections", nargs="+", default=["cranfield", "cisi"])
    parser.add_argument("--cache", type=Path, default=None, help="keep document vectors here between runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.collections:
            run(name, args, Path(tmp))


if __name__ == "__main__":
    main()
