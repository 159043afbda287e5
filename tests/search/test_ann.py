"""The approximate first pass (search/ann.py): sign-bit candidates rescored exactly must agree with
the exact KNN, honour every filter, follow writes from another connection, and reset on reindex."""

from __future__ import annotations

import random

import pytest

from vantage_peers.db import open_database
from vantage_peers.domains.memory import store, vectors
from vantage_peers.search import ann

pytestmark = pytest.mark.backends  # PostgreSQL keeps its sign codes and int8 copies in a bits table too

DIMS = 256


_CENTERS = [[random.Random(f"c{j}").gauss(0, 1) for _ in range(DIMS)] for j in range(40)]


def _vec(rng: random.Random) -> list[float]:
    """Clustered like real embeddings: one of 40 topics plus noise."""
    center = _CENTERS[rng.randrange(len(_CENTERS))]
    v = [c + rng.gauss(0, 1.2) for c in center]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


@pytest.fixture(params=["int8", "sign bits only"])
def filled(db, monkeypatch, request):
    """400 memories over the approximate threshold; with the int8 pass (a pool of 60 ranked by the
    int8 copies, 10 rescored exactly) or without it (Q8_MAX_BYTES 0: 60 rescored exactly)."""
    monkeypatch.setattr(ann, "APPROX_MIN_FLOATS", 100 * DIMS)
    monkeypatch.setattr(ann, "MIN_CANDIDATES", 60)
    monkeypatch.setattr(ann, "Q8_OVERSAMPLE", 6)
    monkeypatch.setattr(ann, "Q8_MIN_POOL", 60)
    if request.param != "int8":
        monkeypatch.setattr(ann, "Q8_MAX_BYTES", 0)
    rng = random.Random(5)
    made: dict[int, list[float]] = {}

    def fill(c) -> None:
        vectors.ensure(c, "m", DIMS)
        rows = []
        for i in range(400):
            ns = f"project/p{i % 2}"
            mid = store.store_memory(c, namespace=ns, type="fact" if i % 3 else "note", content=f"m{i}",
                                     created_by="t")["memoryId"]
            seq = c.scalar("SELECT seq FROM memories WHERE id = ?", (mid,))
            made[seq] = _vec(rng)
            rows.append((seq, ns, "fact" if i % 3 else "note", 1, None, made[seq]))
        vectors.upsert(c, rows)

    db.write(fill)
    return db, made, rng


def _knn(db, vec, *, approximate, **kw):
    args = {"k": 10, "scope": None, "types": None, "include_superseded": False, "now": 0, **kw}
    return db.read(lambda c: vectors.knn(c, vec, approximate=approximate, **args))


def test_approximate_matches_exact_with_exact_distances(filled):
    db, made, rng = filled
    hits_total = found = 0
    for _ in range(20):
        q = _vec(rng)
        assert db.read(lambda c, q=q: ann.candidates(c, vectors.TABLE, q, k=10, scope=None))  # the approximate path
        exact = _knn(db, q, approximate=False)
        approx = _knn(db, q, approximate=True)
        assert len(approx) == 10 and approx == sorted(approx, key=lambda h: h[1])
        exact_d = dict(exact)
        for seq, dist in approx:  # every distance returned is the exact one
            if seq in exact_d:
                assert dist == pytest.approx(exact_d[seq], abs=1e-6)
        hits_total += 10
        found += len({s for s, _ in approx} & set(exact_d))
    assert found / hits_total >= 0.8  # recall@10 against exact search on clustered 256-d vectors, a pool of 60 of 400
    seq, vec = next(iter(made.items()))
    assert _knn(db, vec, approximate=True)[0][0] == seq  # a stored vector finds itself first


def test_filters_apply_in_the_approximate_path(filled):
    db, made, rng = filled
    scope = vectors.Scope("exact", "project/p1")
    q = _vec(rng)
    approx = _knn(db, q, approximate=True, scope=scope, types=["fact"], k=30)
    nss = dict(db.read(lambda c: [(r["seq"], (r["namespace"], r["type"])) for r in c.query(
        "SELECT seq, namespace, type FROM memories")]))
    assert approx and all(nss[s] == ("project/p1", "fact") for s, _ in approx)
    prefix = _knn(db, q, approximate=True, scope=vectors.Scope("prefix", "project/"), k=5)
    assert len(prefix) == 5
    # Too few candidates survive the filter: the exact KNN answers, never a short list.
    none_left = _knn(db, q, approximate=True, scope=scope, types=["note"], k=60)
    assert len(none_left) == 60 and none_left == _knn(db, q, approximate=False, scope=scope, types=["note"], k=60)
    # Archived memories never come back.
    top = approx[0][0]
    db.write(lambda c: c.execute("UPDATE memories SET isLatest = 0 WHERE seq = ?", (top,)))
    assert top not in {s for s, _ in _knn(db, q, approximate=True, scope=scope, types=["fact"], k=30)}


def test_the_cache_follows_writes_from_another_connection_and_resets_on_reindex(filled, settings):
    db, made, rng = filled
    q = _vec(rng)
    assert _knn(db, q, approximate=True)[0][0] != 0  # warm this process's cache
    other = open_database(settings)
    try:
        def add(c) -> int:
            mid = store.store_memory(c, namespace="project/p0", type="fact", content="new", created_by="t")["memoryId"]
            seq = c.scalar("SELECT seq FROM memories WHERE id = ?", (mid,))
            vectors.upsert(c, [(seq, "project/p0", "fact", 1, None, q)])
            return seq

        new = other.write(add)
    finally:
        other.close()
    assert _knn(db, q, approximate=True)[0] == (new, pytest.approx(0.0, abs=1e-6))
    db.write(lambda c: vectors.drop(c))
    assert not db.read(lambda c: ann.exists(c, vectors.TABLE))
    db.write(lambda c: vectors.ensure(c, "m2", DIMS))
    assert db.read(lambda c: ann.candidates(c, vectors.TABLE, q, k=10, scope=None)) is None  # empty again


def test_a_vector_rewritten_by_another_connection_is_ranked_by_its_new_value(filled, settings):
    """The int8 copies follow re-embedded rows: a stale copy would keep the row out of the exact set."""
    db, made, rng = filled
    q = _vec(rng)
    far = max(made, key=lambda seq: dict(_knn(db, q, approximate=False, k=400)).get(seq, -1.0))
    assert _knn(db, q, approximate=True)[0][0] != far  # warm this process's cache (and far is far)
    ns, kind = db.read(lambda c: tuple(c.rows("SELECT namespace, type FROM memories WHERE seq = ?", (far,))[0]))
    other = open_database(settings)
    try:
        other.write(lambda c: vectors.upsert(c, [(far, ns, kind, 1, None, q)]))
    finally:
        other.close()
    assert _knn(db, q, approximate=True)[0] == (far, pytest.approx(0.0, abs=1e-6))


def test_superseded_candidates_are_skipped_without_a_short_list(filled):
    """Most of the best candidates archived: the pool is rescored batch after batch, still k exact hits."""
    db, made, rng = filled
    q = _vec(rng)
    best = [seq for seq, _ in _knn(db, q, approximate=False, k=40)]
    db.write(lambda c: c.executemany("UPDATE memories SET isLatest = 0 WHERE seq = ?", [(s,) for s in best[:30]]))
    db.write(lambda c: vectors.upsert(c, [(s, *c.rows("SELECT namespace, type FROM memories WHERE seq = ?", (s,))[0],
                                           0, None, made[s]) for s in best[:30]]))
    approx = _knn(db, q, approximate=True)
    assert len(approx) == 10 and not {s for s, _ in approx} & set(best[:30])
    exact = {s for s, _ in _knn(db, q, approximate=False)}
    assert len({s for s, _ in approx} & exact) >= 7


@pytest.mark.sqlite_only
def test_a_bits_table_older_than_the_int8_copies_takes_them_from_the_vectors(filled, monkeypatch):
    """Files embedded before the q8 column: the cache makes its int8 copies from vec0's floats, and
    new writes go on without the column (until `vantage-peers reindex` recreates the table)."""
    db, made, rng = filled
    if ann.Q8_MAX_BYTES == 0:
        pytest.skip("the int8 pass is off in this variant")
    db.write(lambda c: c.execute(f"ALTER TABLE {ann.bits_table(vectors.TABLE)} DROP COLUMN q8"))
    monkeypatch.setattr(ann, "_caches", {})
    monkeypatch.setattr(ann, "Q8_SCAN_ROWS", 100)  # the first load scans, later ones look rows up
    q = _vec(rng)
    approx = _knn(db, q, approximate=True)
    cache = next(iter(ann._caches.values()))
    assert cache.q8 is not None and len(cache.q8) == len(made) and cache.q8_norm.min() > 100
    exact = {s for s, _ in _knn(db, q, approximate=False)}
    assert len({s for s, _ in approx} & exact) >= 8
    seq = next(iter(made))
    ns, kind = db.read(lambda c: tuple(c.rows("SELECT namespace, type FROM memories WHERE seq = ?", (seq,))[0]))
    db.write(lambda c: vectors.upsert(c, [(seq, ns, kind, 1, None, q)]))
    assert _knn(db, q, approximate=True)[0] == (seq, pytest.approx(0.0, abs=1e-6))


@pytest.mark.sqlite_only
def test_codes_are_the_same_from_a_list_or_a_numpy_row(backend):
    import numpy as np

    for dims in (384, 385, 7):
        row = np.random.default_rng(dims).standard_normal(dims).astype(np.float32)
        assert ann.signs(row) == ann.signs([float(x) for x in row])
        assert ann.int8(row) == ann.int8([float(x) for x in row])
        q = np.frombuffer(ann.int8(row), dtype=np.int8).astype(np.float32)
        assert float(np.dot(q, row) / (np.linalg.norm(q) * np.linalg.norm(row))) > 0.9995  # the copy keeps the direction
    assert ann.int8([0.0, 0.0]) == b"\x00\x00"  # a zero vector: no division by zero


def test_a_scope_holding_every_cached_row_needs_no_mask_and_ranks_as_the_masked_scope(filled, monkeypatch):
    """A namespace (or prefix) holding every cached code is no mask (None: nothing to put out of reach);
    the candidates are the ones a mask of all rows gives."""
    import numpy as np

    db, made, rng = filled
    prefix, one = store.scope_of("project/*"), store.scope_of("project/p0")
    db.read(lambda c: ann.candidates(c, vectors.TABLE, _vec(rng), k=10, scope=prefix))
    cache = db.read(ann._cache_for)
    assert cache.scope_mask(prefix) is None and cache.scope_mask(one) is not None
    vec = _vec(rng)
    plain = db.read(lambda c: ann.candidates(c, vectors.TABLE, vec, k=10, scope=prefix))
    monkeypatch.setattr(ann._Cache, "_scope_mask", lambda self, scope: np.ones(len(self.seqs), dtype=bool))
    cache.mask_key = None
    masked = db.read(lambda c: ann.candidates(c, vectors.TABLE, vec, k=10, scope=prefix))
    assert list(plain) == list(masked) and plain.rescore == masked.rescore


@pytest.mark.sqlite_only  # the cache's arithmetic alone: no database
def test_hamming_by_column_counts_the_differing_bits_of_every_code(backend):
    """Codes kept by column (8-byte words, or bytes when the width is not a multiple of 8) give each
    row's popcount of XOR, as a row-by-row count does, after rows were appended and overwritten."""
    import numpy as np

    rng = np.random.default_rng(3)
    for width in (48, 5, 192, 8):
        word = np.uint64 if width % 8 == 0 else np.uint8
        cache = ann._Cache()
        rows = rng.integers(0, 256, size=(300, width), dtype=np.uint8)
        cache.width, cache.columns = width, np.zeros((width // np.dtype(word).itemsize, 0), dtype=word)
        for part in (rows[:100], rows[100:]):  # appended as refresh appends
            cache.columns = np.concatenate([cache.columns, part.view(word).T], axis=1)
        rows[7] = rng.integers(0, 256, size=width, dtype=np.uint8)  # overwritten as refresh overwrites
        cache.columns[:, 7] = rows[7:8].view(word)[0]
        for _ in range(3):
            query = rng.integers(0, 256, size=width, dtype=np.uint8)
            expected = np.unpackbits(rows ^ query, axis=1).sum(axis=1)
            assert cache.hamming(query).tolist() == expected.tolist()


@pytest.mark.sqlite_only  # the cache's arithmetic alone: no database
def test_the_smallest_distances_by_counting_are_a_sorts_first_take_ties_by_lowest_index(backend):
    """`_smallest` takes exactly `take` rows: every distance below the cut, then the lowest indices at it
    (out-of-scope rows carry dims + 1), as a stable sort's first `take` would."""
    import numpy as np

    rng = np.random.default_rng(5)
    for n, dims, take in ((1000, 64, 1), (1000, 64, 37), (5000, 384, 1200), (300, 8, 299)):
        dist = rng.binomial(dims, 0.5, n).astype(np.int32)
        dist[rng.random(n) < 0.2] = dims + 1
        got = ann._smallest(dist, take)
        expected = np.argsort(dist, kind="stable")[:take]
        assert len(got) == take and sorted(got.tolist()) == sorted(expected.tolist())


def test_a_postgresql_knn_reads_the_tables_and_the_codes_generation_in_one_statement(filled, monkeypatch):
    """pg_vectors.table_exists reads `meta`'s generation and epoch with the tables' existence; the
    cache's refresh takes them from there. A write between two reads is still seen by the second."""
    db, made, rng = filled
    if db.backend != "postgres":
        pytest.skip("SQLite reads its schema in-process: no round trip to save")
    from vantage_peers.db.postgres import PgConnection

    seen: list[str] = []
    for name in ("query", "rows", "scalar", "one"):
        real = getattr(PgConnection, name)
        monkeypatch.setattr(PgConnection, name, lambda self, sql, *a, _real=real, **k: (seen.append(sql), _real(
            self, sql, *a, **k))[1])
    q = _vec(rng)
    first = _knn(db, q, approximate=True)
    assert not [s for s in seen if s.lstrip().startswith("SELECT key, value FROM meta")]
    assert len([s for s in seen if "to_regclass" in s]) == 1 and "FROM meta" in next(s for s in seen if "to_regclass" in s)
    assert first == _knn(db, q, approximate=True)
    # A new vector nearest to the query, written by another transaction: the next read's refresh loads it.
    def add(c) -> int:
        mid = store.store_memory(c, namespace="project/p0", type="fact", content="near", created_by="t")["memoryId"]
        seq = c.scalar("SELECT seq FROM memories WHERE id = ?", (mid,))
        vectors.upsert(c, [(seq, "project/p0", "fact", 1, None, list(q))])
        return seq
    seq = db.write(add)
    assert _knn(db, q, approximate=True)[0][0] == seq
