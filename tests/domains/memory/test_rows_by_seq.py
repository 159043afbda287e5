"""store.rows_by_seq: the rows of a list of seqs, filtered, read by their keys — never by walking a
namespace's index (SQLite has no table statistics and would otherwise pick
`memories_latest_by_namespace` and test every row of a big namespace against the list)."""

from __future__ import annotations

import pytest

from vantage_peers.core.ids import now_ms
from vantage_peers.domains.memory import store
from vantage_peers.domains.memory.search import _filters

pytestmark = pytest.mark.backends


def _fill(db, n: int) -> list[int]:
    def fill(c) -> list[int]:
        for i in range(n):
            store.store_memory(c, namespace="big/ns", type="fact", content=f"memory {i}", created_by="t")
        store.store_memory(c, namespace="other/ns", type="fact", content="elsewhere", created_by="t")
        return [int(r[0]) for r in c.rows("SELECT seq FROM memories ORDER BY seq")]

    return db.write(fill)


def test_rows_by_seq_returns_exactly_the_listed_rows_that_pass_the_filters(db):
    seqs = _fill(db, 1_000)
    where, params = _filters(store.scope_of("big/ns"), None, False, now_ms())
    wanted = seqs[::7] + [seqs[-1]]  # the last one is in another namespace: filtered out
    rows = db.read(lambda c: store.rows_by_seq(c, wanted, where, params))
    assert sorted(r["seq"] for r in rows) == sorted(wanted[:-1])
    assert all(r["namespace"] == "big/ns" for r in rows)
    narrow = db.read(lambda c: store.rows_by_seq(c, wanted, where, params, columns="m.seq"))
    assert sorted(r["seq"] for r in narrow) == sorted(wanted[:-1]) and set(narrow[0]) == {"seq"}


@pytest.mark.sqlite_only  # PostgreSQL plans from its statistics
def test_rows_by_seq_reads_by_key_not_by_the_namespace_index(db, backend):
    seqs = _fill(db, 300)
    where, params = _filters(store.scope_of("big/ns"), None, False, now_ms())
    seen: list[tuple[str, object]] = []

    def run(c) -> list[str]:
        c.raw.exec_trace = lambda _cur, sql, bindings: seen.append((sql, bindings)) or True
        try:
            store.rows_by_seq(c, seqs[:30], where, params)
        finally:
            c.raw.exec_trace = None
        sql, bindings = seen[0]
        return [row[3] for row in c.rows("EXPLAIN QUERY PLAN " + sql, bindings)]

    plan = db.read(run)
    assert any("INTEGER PRIMARY KEY" in step for step in plan), plan
    assert not any("by_namespace" in step for step in plan), plan


def test_a_key_list_is_one_array_parameter_on_postgresql_with_the_rows_of_the_in_list(db, backend):
    """db.dialect.among: `seq IN (?, …)` on SQLite, `seq = ANY(?::bigint[])` on PostgreSQL (one value to
    bind, one statement text whatever the list's length) — the same rows as the IN list, absent and
    repeated keys included."""
    from vantage_peers.db.dialect import among

    seqs = _fill(db, 50)
    wanted = [*seqs[::3], seqs[4], 10**9, seqs[-1]]  # a repeat, a key no row has, another namespace
    clause, params = among(backend, "seq", wanted)
    assert (clause, len(params)) == (("seq = ANY(?::bigint[])", 1) if backend == "postgres"
                                     else (f"seq IN ({','.join('?' * len(wanted))})", len(wanted)))
    marks = ",".join("?" for _ in wanted)
    listed, keyed = db.read(lambda c: (c.rows(f"SELECT seq, namespace FROM memories WHERE seq IN ({marks}) ORDER BY seq",
                                              wanted),
                                       c.rows(f"SELECT seq, namespace FROM memories WHERE {clause} ORDER BY seq", params)))
    assert keyed == listed and len(keyed) == len(set(wanted)) - 1
