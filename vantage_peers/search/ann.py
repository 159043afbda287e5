"""Approximate first pass for large memory-vector scopes: sign bits in numpy, exact float rescoring.

sqlite-vec 0.1.9's KNN is a brute-force scan compiled without SIMD: 100k × 1536 floats cost
≈0.2–0.3 s a query. For scopes of at least APPROX_MIN_FLOATS floats (vectors × dimensions: ≈5,200 vectors at
1536 dims, ≈21,000 at 384) a query instead
1. ranks the scope by Hamming distance between sign bits (1 bit per dimension: 192 bytes for 1536
   dims), held in a per-process numpy cache — `np.bitwise_count` over 100k codes takes a few ms;
2. (with a type filter: takes FILTER_OVERSAMPLE × more and drops those expired, archived or of
   another type, per one indexed query on `memories`) rescores the best
   max(OVERSAMPLE × k, MIN_CANDIDATES) with the exact
   cosine distance of their float vectors (vec0 point lookups, with the same metadata filters as
   the KNN), and returns the k nearest of those. So the distances returned are exact; only a vector whose sign
   pattern is far from the query's can be missed (benchmarks/search.py reports recall@10 against
   exact search).
If the rescored candidates leave fewer than k hits (most were archived or filtered by type), the
exact KNN answers instead.

Between the two, while the scope's vectors fit Q8_MAX_BYTES, a second in-memory pass: each vector
is also cached as int8 (scaled so its largest component is ±127), a wider Hamming pool (Q8_OVERSAMPLE × k) is ranked
by the int8 cosine, and only its best Q8_EXACT × k get the exact vec0 lookup — 100 point lookups
instead of 600 at k = 100, a tighter ranking for less. The int8 copies are read from the
vec0 table itself (its rows written since the cache last looked; a scan when there are many), so
the file format does not change.

Storage: `memories_vec_bits(seq, gen, part, bits)` beside the vec0 table, written by
`vectors.replace` in the same transaction as the float vector. `meta` holds a generation counter
(bumped on every write) and an epoch (new whenever the tables are created), so each process's cache
loads only rows written since it last looked, and starts over after `reindex`. Files whose vec0
table predates the bits table use exact search until `vantage-peers reindex`. PostgreSQL has no bits
table: pgvector's HNSW index is its approximate search (search/pg_vectors.py).
"""

from __future__ import annotations

import threading
import uuid
from array import array
from collections.abc import Sequence
from typing import Any

from . import backend

# Smaller scopes use the exact vec0 KNN: it scans ≈8M floats in ≈10 ms on an idle core, and sign
# bits lose more of the ranking at low dimension (a 384-d model only switches at ≈21k vectors).
APPROX_MIN_FLOATS = 8_000_000
OVERSAMPLE = 4
MIN_CANDIDATES = 200
FILTER_OVERSAMPLE = 4  # sign-code candidates per rescored one, before the live/type/latest filter


# Fewer sign bits separate neighbours less: below LOW_DIMS dimensions the rescored set is LOW_DIMS_OVERSAMPLE × k
# (100k synthetic 384-d vectors, recall_backends.py --big, k = 100: recall@10 0.935 at 4×, 0.953 at 6×).
LOW_DIMS = 1024
LOW_DIMS_OVERSAMPLE = 6


# The int8 pass: Hamming pool of Q8_OVERSAMPLE × k (at least Q8_MIN_POOL), of which Q8_EXACT × k get
# the exact lookup; only while the cached int8 copies stay under Q8_MAX_BYTES (100k × 384 dims: 38 MB).
Q8_OVERSAMPLE = 12
Q8_MIN_POOL = 400
Q8_EXACT = 1  # 2 bought nothing at 100k: same recall@10, KNN ≈1 ms slower (docs/benchmarks.md "Tenth pass")
Q8_MAX_BYTES = 64 << 20
Q8_SCAN_ROWS = 2_000  # more new rows than this: one scan of the vec0 table, not point lookups
META_GEN = "embedding.bits.gen"
META_EPOCH = "embedding.bits.epoch"
META_KEYS = (META_GEN, META_EPOCH)
BITS_SUFFIX = "_bits"


def rescored(k: int, dims: int | None = None) -> int:
    """How many candidates get their exact distance computed for a k-nearest query (no int8 pass)."""
    over = LOW_DIMS_OVERSAMPLE if dims is not None and dims < LOW_DIMS else OVERSAMPLE
    return max(k * over, MIN_CANDIDATES)


class Pool(list):  # type: ignore[type-arg]
    """Candidate seqs, best first; `rescore` says how many of them (after any filter) to rescore exactly."""

    def __init__(self, seqs: Sequence[int], rescore: int) -> None:
        super().__init__(seqs)
        self.rescore = rescore


def bits_table(name: str) -> str:
    return name + BITS_SUFFIX


def create(conn: Any, name: str) -> None:
    """The bits table for vector table `name` (empty, like the table it shadows)."""
    table = bits_table(name)
    conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({backend.of(conn).bits_columns})")
    conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_by_gen ON {table} (gen)")
    conn.executemany(_SET_META, [(META_GEN, "0"), (META_EPOCH, uuid.uuid4().hex)])


_SET_META = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"


def drop(conn: Any, name: str) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {bits_table(name)}")
    conn.execute("DELETE FROM meta WHERE key IN (?, ?)", META_KEYS)


def exists(conn: Any, name: str) -> bool:
    return backend.of(conn).table_exists(conn, bits_table(name))


def has_q8(conn: Any, name: str) -> bool:
    """Does the bits table carry the int8 copies (older SQLite ones do not: the floats are read instead)?"""
    return backend.of(conn).has_column(conn, bits_table(name), "q8")


def signs(vector: Any) -> bytes:
    """One bit per dimension (x > 0), most significant first, zero-padded: `np.packbits(v > 0)`, in plain
    Python so that a server whose model lives in the shared host (#20) never imports numpy (≈17 MB)."""
    if getattr(vector, "dtype", None) is not None:  # a numpy row: numpy is loaded already
        import numpy as np

        return np.packbits(np.asarray(vector) > 0).tobytes()
    bits = 0
    for x in vector:
        bits = (bits << 1) | (1 if x > 0 else 0)
    pad = -len(vector) % 8
    return (bits << pad).to_bytes((len(vector) + pad) // 8, "big")


def int8(vector: Any) -> bytes:
    """The int8 copy: the vector scaled so that its largest component is ±127, rounded (a cosine does
    not see the scale; the full range keeps the most precision) — with numpy when the vector is
    already a numpy row (the local model's output), else in plain Python (like `signs`)."""
    if getattr(vector, "dtype", None) is not None:
        import numpy as np

        row = np.asarray(vector, dtype=np.float32)
        top = float(np.abs(row).max()) if row.size else 0.0
        return np.clip(np.rint(row * (127.0 / top if top > 0 else 0.0)), -127, 127).astype(np.int8).tobytes()
    values = [float(x) for x in vector]
    top = max((abs(x) for x in values), default=0.0)
    scale = 127.0 / top if top > 0 else 0.0
    return array("b", [max(-127, min(127, round(x * scale))) for x in values]).tobytes()


def write(conn: Any, name: str, rows: Sequence[tuple[int, str | None, Any]]) -> None:
    """(seq, partition value, float vector) rows, in the caller's transaction."""
    if not rows or not exists(conn, name):
        return
    gen = int(conn.scalar("SELECT coalesce(max(CAST(value AS BIGINT)), 0) + 1 FROM meta WHERE key = ?", (META_GEN,)))
    conn.execute(_SET_META, (META_GEN, str(gen)))
    table = bits_table(name)
    if has_q8(conn, name):
        conn.executemany(f"INSERT INTO {table} (seq, gen, part, bits, q8) VALUES (?, ?, ?, ?, ?) ON CONFLICT (seq) "
                         "DO UPDATE SET gen = excluded.gen, part = excluded.part, bits = excluded.bits, q8 = excluded.q8",
                         [(seq, gen, part, signs(vec), int8(vec)) for seq, part, vec in rows])
    else:
        conn.executemany(f"INSERT OR REPLACE INTO {table} (seq, gen, part, bits) VALUES (?, ?, ?, ?)",
                         [(seq, gen, part, signs(vec)) for seq, part, vec in rows])


class _Cache:
    """One database's sign codes: `seqs[i]`, `parts[i]` (index into `names`), the codes of `width` bytes
    each, kept by column (`columns[j][i]`: word j of row i's code, 8 bytes a word when the width allows it,
    else 1), and `q8[i]` (int8 copies) while they fit Q8_MAX_BYTES.

    By column because a query's Hamming distances are then one pass per word over contiguous memory:
    100k codes of 384 bits 1.33 → 0.51 ms, of 1536 bits 6.5 → 1.9 ms, against XOR and popcount over
    rows of a few words (numpy walks short rows slowly, and the row-major temporaries were 8× larger)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        import numpy as np

        self.epoch: str | None = None
        self.gen = -1
        self.index: dict[int, int] = {}
        self.names: list[str | None] = []
        self.name_ids: dict[str | None, int] = {}
        self.seqs = np.zeros(0, dtype=np.int64)
        self.parts = np.zeros(0, dtype=np.int32)
        self.width = 0  # bytes per code
        self.columns = np.zeros((0, 0), dtype=np.uint8)  # (words per code, rows)
        self.q8: Any = None  # int8 copies (`int8`), row i for seqs[i]; None when over Q8_MAX_BYTES
        self.q8_norm: Any = None  # their norms (float32), for the cosine of the int8 copies
        self.mask_key: tuple[Any, ...] | None = None
        self._xor: Any = None  # hamming's buffers, kept between queries (one column's XOR and popcounts,
        self._dist: Any = None  # the running sum, the distances)
        self._counts: Any = None
        self._acc: Any = None
        self.mask: Any = None

    def refresh(self, conn: Any, name: str) -> None:
        import numpy as np

        state = getattr(conn, "_vp_ann_meta", None)  # read with the tables' existence (pg_vectors)
        if state is None:
            state = {r["key"]: r["value"] for r in conn.query(
                "SELECT key, value FROM meta WHERE key IN (?, ?)", META_KEYS)}
        epoch, gen = state.get(META_EPOCH), int(state.get(META_GEN, 0))
        if epoch != self.epoch or gen < self.gen:
            self._reset()  # tables re-created (reindex): start over
            self.epoch = epoch
        if gen == self.gen:
            return
        q8 = "q8" if has_q8(conn, name) else "NULL"
        rows = conn.rows(f"SELECT seq, part, bits, {q8} FROM {bits_table(name)} WHERE gen > ?", (self.gen,))
        self.gen = gen
        if not rows:
            return
        width = len(bytes(rows[0][2]))
        word = np.uint64 if width % 8 == 0 else np.uint8
        if self.width != width:
            self.width, self.columns = width, np.zeros((width // np.dtype(word).itemsize, 0), dtype=word)
        codes = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.uint8).reshape(len(rows), width).view(word)
        parts = np.array([self.name_ids.setdefault(r[1], len(self.name_ids)) for r in rows], dtype=np.int32)
        for part, pid in self.name_ids.items():
            if pid >= len(self.names):
                self.names.append(part)
        fresh = []
        for i, (seq, _part, _bits, _q8) in enumerate(rows):
            at = self.index.get(seq)
            if at is None:
                fresh.append(i)
            else:  # a re-embedded row: overwrite in place
                self.columns[:, at] = codes[i]
                self.parts[at] = parts[i]
        if fresh:
            start = len(self.seqs)
            self.seqs = np.concatenate([self.seqs, np.array([rows[i][0] for i in fresh], dtype=np.int64)])
            self.parts = np.concatenate([self.parts, parts[fresh]])
            self.columns = np.concatenate([self.columns, codes[fresh].T], axis=1)
            for offset, i in enumerate(fresh):
                self.index[rows[i][0]] = start + offset
        self._refresh_q8(conn, name, {int(r[0]): r[3] for r in rows}, width * 8)

    def _refresh_q8(self, conn: Any, name: str, written: dict[int, Any], dims: int) -> None:
        """Bring the int8 copies up to `self.seqs`: `written` maps the rows just (re)written to their
        stored copy, or None when the bits table has none (made before them: read from the vec0 table)."""
        import numpy as np

        if len(self.seqs) * dims > Q8_MAX_BYTES:
            self.q8 = self.q8_norm = None  # too large to hold: the exact lookups rescore the Hamming pool
            return
        if self.q8 is None or self.q8.shape[1] != dims:
            if len(written) < len(self.seqs):  # the copies were dropped (over the bound) or never made
                self.gen, self.epoch = -1, None  # reload every row on the next query
                return
            self.q8 = np.zeros((0, dims), dtype=np.int8)
            self.q8_norm = np.zeros(0, dtype=np.float32)
        grow = len(self.seqs) - len(self.q8)
        if grow > 0:
            self.q8 = np.concatenate([self.q8, np.zeros((grow, dims), dtype=np.int8)])
            self.q8_norm = np.concatenate([self.q8_norm, np.zeros(grow, dtype=np.float32)])
        stored = [(seq, bytes(blob)) for seq, blob in written.items() if blob is not None]
        missing = [seq for seq, blob in written.items() if blob is None]
        if stored:
            at = np.array([self.index[seq] for seq, _ in stored])
            self.q8[at] = np.frombuffer(b"".join(b for _, b in stored), dtype=np.int8).reshape(len(stored), dims)
            self.q8_norm[at] = np.linalg.norm(self.q8[at].astype(np.float32), axis=1)
        if missing:
            self._q8_from_vectors(conn, name, missing, dims)

    def _q8_from_vectors(self, conn: Any, name: str, seqs: list[int], dims: int) -> None:
        """int8 copies made from the vec0 table's floats (SQLite bits tables older than the q8 column)."""
        import numpy as np

        wanted = set(seqs)
        if len(seqs) > Q8_SCAN_ROWS:
            found = [(seq, blob) for seq, blob in conn.raw.execute(f"SELECT rowid, embedding FROM {name}")
                     if seq in wanted]
        else:
            sql = f"SELECT rowid, embedding FROM {name} WHERE rowid = ?"
            found = [row for seq in seqs for row in conn.raw.execute(sql, (seq,))]
        found = [(int(seq), blob) for seq, blob in found if int(seq) in self.index and len(blob) == dims * 4]
        if not found:
            return
        at = np.array([self.index[seq] for seq, _ in found])
        vecs = np.frombuffer(b"".join(b for _, b in found), dtype=np.float32).reshape(len(found), dims)
        top = np.abs(vecs).max(axis=1, keepdims=True)  # as `int8`: the largest component becomes ±127
        q8 = np.clip(np.rint(vecs * (127.0 / np.where(top > 0, top, 1.0))), -127, 127).astype(np.int8)
        self.q8[at] = q8
        self.q8_norm[at] = np.linalg.norm(q8.astype(np.float32), axis=1)

    def hamming(self, query: Any) -> Any:
        """Hamming distance (int32) of every cached code to `query` (uint8 bytes): per word column, XOR
        then popcount, summed into buffers kept between queries (fresh temporaries cost more in page
        faults than the arithmetic)."""
        import numpy as np

        cols = self.columns
        key = query.view(cols.dtype)
        n = cols.shape[1]
        if self._dist is None or len(self._dist) != n or self._xor.dtype != cols.dtype:
            self._xor = np.empty(n, dtype=cols.dtype)
            self._counts = np.empty(n, dtype=np.uint8)  # a popcount is at most 64
            most = cols.dtype.itemsize * 8 * len(cols)
            self._acc = np.empty(n, dtype=np.uint16 if most <= np.iinfo(np.uint16).max else np.int32)
            self._dist = np.empty(n, dtype=np.int32)
        self._acc[...] = 0
        for j in range(len(cols)):
            np.bitwise_xor(cols[j], key[j], out=self._xor)
            np.bitwise_count(self._xor, out=self._counts)
            np.add(self._acc, self._counts, out=self._acc, dtype=self._acc.dtype)
        self._dist[...] = self._acc
        return self._dist

    def scope_mask(self, scope: Any) -> Any:
        """Rows of `scope` (None: all of them), remembered until the cache or the scope changes."""
        key = (self.epoch, self.gen, len(self.seqs), None if scope is None else (scope.kind, scope.value))
        if key != self.mask_key:
            self.mask, self.mask_key = self._scope_mask(scope), key
        return self.mask

    def _scope_mask(self, scope: Any) -> Any:
        import numpy as np

        if scope is None or scope.kind == "all":
            return None
        if scope.kind == "exact":
            wanted = [pid for part, pid in self.name_ids.items() if part == scope.value]
        else:
            low, high = scope.bounds()
            wanted = [pid for part, pid in self.name_ids.items() if part is not None and low <= part < high]
        mask = np.isin(self.parts, np.array(wanted, dtype=np.int32))
        return None if mask.all() else mask  # every row in scope (one namespace holds them all): nothing to mask


_caches: dict[str, _Cache] = {}
_caches_lock = threading.Lock()


def _key(conn: Any) -> str:
    """One cache per database: the SQLite file, or the PostgreSQL URL."""
    url = getattr(getattr(conn, "db", None), "url", None)
    return str(url) if url else conn.raw.filename


def _cache_for(conn: Any) -> _Cache:
    key = _key(conn)
    with _caches_lock:
        if key not in _caches:
            _caches[key] = _Cache()
        return _caches[key]


def _smallest(dist: Any, take: int) -> Any:
    """Indices of the `take` smallest distances, ties at the cut by lowest index. Hamming distances are
    small integers: a `bincount` finds the cut (100k codes: 0.16 ms; `argpartition` took 0.96 ms)."""
    import numpy as np

    cut = int(np.searchsorted(np.cumsum(np.bincount(dist)), take))  # least d with `take` rows at or below d
    below = np.flatnonzero(dist < cut)
    return np.concatenate([below, np.flatnonzero(dist == cut)[: take - len(below)]])


def candidates(conn: Any, name: str, vector: Any, *, k: int, scope: Any, factor: int = 1) -> Pool | None:
    """The best candidates in `scope`, nearest first: `factor ×` the int8 pass's pool ranked by the int8
    cosine, or without it `factor × rescored(k, dims)` by Hamming distance; `Pool.rescore` says how many
    get the exact distance. None when the scope is small (or the bits table is missing): the caller
    then runs the exact KNN."""
    if not exists(conn, name):
        return None
    with _caches_lock:
        known = _key(conn) in _caches
    if not known and conn.scalar(f"SELECT count(*) FROM {bits_table(name)}") * len(vector) < APPROX_MIN_FLOATS:
        return None  # a small file, never cached: exact KNN without importing numpy (#20, ≈17 MB per server)
    import numpy as np

    cache = _cache_for(conn)
    with cache.lock:
        cache.refresh(conn, name)
        dims = cache.width * 8
        if len(cache.seqs) * dims < APPROX_MIN_FLOATS:
            return None
        mask = cache.scope_mask(scope)
        in_scope = len(cache.seqs) if mask is None else int(np.count_nonzero(mask))
        if in_scope * dims < APPROX_MIN_FLOATS:
            return None
        query = np.frombuffer(signs(vector), dtype=np.uint8)
        if cache.width != len(query):
            return None
        dist = cache.hamming(query)
        if mask is not None:  # rows out of scope: a distance past any real one (cheaper than copying codes out)
            np.putmask(dist, ~mask, dims + 1)
        q8 = cache.q8 is not None and len(cache.q8) == len(cache.seqs)
        exact = max(k * Q8_EXACT, 1) if q8 else rescored(k, dims)
        pool = max(k * Q8_OVERSAMPLE, Q8_MIN_POOL) if q8 else rescored(k, dims)
        take = min(in_scope, pool * factor)
        best = _smallest(dist, take) if take < len(dist) else np.flatnonzero(dist <= dims)
        if q8:  # rank the pool by the cosine of the int8 copies (query as float: no second rounding)
            vec = np.asarray(vector, dtype=np.float32)
            norms = cache.q8_norm[best] * float(np.sqrt(np.dot(vec, vec)))
            # einsum, not `@`: a matrix product goes to the threaded BLAS, whose spinning workers cost
            # 20× the arithmetic's CPU on a 1,200 × 384 product.
            sims = np.einsum("ij,j->i", cache.q8[best].astype(np.float32), vec) / np.where(norms > 0, norms, 1.0)
            best = best[np.argsort(-sims, kind="stable")]
        else:
            best = best[np.argsort(dist[best], kind="stable")]
        return Pool(cache.seqs[best].tolist(), exact)
